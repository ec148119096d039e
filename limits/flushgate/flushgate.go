// Package flushgate bounds how often each client identity may empty a
// whole cache, coalescing the flushes past its budget into rounds.
//
// A call that may have changed anything (a method the proxy does not
// know, fb303 flushCache) must leave nothing stale behind, so it flushes
// everything cached for its metastore group before its reply reaches its
// caller. In a loop, that empties the cache for every other client
// (issue 22: a bystander's cached-read p50 went from 0.1 ms to 20.6 ms).
// A Gate lets each identity flush at once up to a token-bucket budget.
// Past it, its calls wait for the next round: one flush, at most one per
// Interval, that begins after every call in it has arrived, and so
// covers them all. A caller is never answered before a flush that began
// after its call completed, so read-your-writes holds; what the budget
// bounds is how often others lose their entries.
package flushgate

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/limits/bucket"
)

// Config configures a Gate. The zero value of each field selects the
// default in its comment.
type Config struct {
	// Burst is how many flushes one identity may cause at once, each
	// at once. Default 10.
	Burst int
	// Rate is how many flushes a second refill an identity's burst.
	// Default 1.
	Rate float64
	// Interval is the shortest time between two rounds, and so the
	// longest a call past its identity's budget waits for its flush.
	// Default 1s.
	Interval time.Duration
	// MaxIdentities bounds the identities whose budget is tracked. When
	// that many owe tokens, a new identity has no budget: its flushes
	// wait for rounds. Default 10,000.
	MaxIdentities int
	// Now is the clock of the budgets (a seam for tests). Default
	// time.Now.
	Now func() time.Time
}

// Stats are a Gate's counters.
type Stats struct {
	// Immediate counts flushes made at once, within a budget.
	Immediate uint64
	// Coalesced counts calls whose flush waited for a round.
	Coalesced uint64
	// Rounds counts the flushes made for them.
	Rounds uint64
}

// Gate runs one flush function for many identities. It starts no
// goroutine: a round's flush runs on the first caller that joined it.
type Gate struct {
	cfg   Config
	flush func(ctx context.Context)

	mu      sync.Mutex // guards buckets, next, last
	buckets map[string]*bucket.Bucket
	next    *round    // the round callers join now; nil when none
	last    time.Time // when the last round's flush began

	immediate, coalesced, rounds atomic.Uint64
}

// bucket is one identity's budget: tokens as of at.
// round is one coalesced flush: due when it may begin; done closed once
// it has been made.
type round struct {
	due  time.Time
	done chan struct{}
}

// New returns a Gate that flushes with flush. flush must not block for
// long (it invalidates, and tells the other nodes within their own
// bound); it gets a context that is not cancelled by a caller giving up.
func New(cfg Config, flush func(ctx context.Context)) *Gate {
	if cfg.Burst <= 0 {
		cfg.Burst = 10
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 1
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.MaxIdentities <= 0 {
		cfg.MaxIdentities = 10_000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Gate{cfg: cfg, flush: flush, buckets: map[string]*bucket.Bucket{}}
}

// Flush flushes for a call of identity id that has completed, and
// returns once a flush that began after it was called is done: at once
// within id's budget, else in the next round (coalesced). An error
// means ctx ended first; the flush is made all the same.
func (g *Gate) Flush(ctx context.Context, id string) (coalesced bool, err error) {
	g.mu.Lock()
	now := g.cfg.Now()
	if g.take(id, now) {
		g.mu.Unlock()
		g.immediate.Add(1)
		g.flush(context.WithoutCancel(ctx))
		return false, nil
	}
	g.coalesced.Add(1)
	r, lead := g.next, false
	if r == nil {
		due := g.last.Add(g.cfg.Interval)
		if due.Before(now) {
			due = now
		}
		r, lead = &round{due: due, done: make(chan struct{})}, true
		g.next = r
	}
	g.mu.Unlock()
	if !lead {
		select {
		case <-r.done:
			return true, nil
		case <-ctx.Done():
			return true, ctx.Err()
		}
	}
	// The first caller of a round makes its flush when it is due, or at
	// once if its context ends: the others wait on it, not on a clock.
	if wait := r.due.Sub(now); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	g.mu.Lock()
	g.next = nil // callers from now on are after this flush began: the next round
	g.last = g.cfg.Now()
	g.mu.Unlock()
	g.flush(context.WithoutCancel(ctx))
	g.rounds.Add(1)
	close(r.done)
	return true, ctx.Err()
}

// take spends one of id's tokens if it has one. g.mu is held.
func (g *Gate) take(id string, now time.Time) bool {
	b := g.buckets[id]
	if b == nil {
		if len(g.buckets) >= g.cfg.MaxIdentities {
			g.prune(now)
			if len(g.buckets) >= g.cfg.MaxIdentities {
				return false // every tracked identity owes: no budget to give
			}
		}
		b = bucket.Full(float64(g.cfg.Burst), now)
		g.buckets[id] = b
	}
	return b.Take(now, g.cfg.Rate, float64(g.cfg.Burst))
}

// prune forgets the identities whose budget has refilled: a fresh bucket
// is the same. g.mu is held.
func (g *Gate) prune(now time.Time) {
	for id, b := range g.buckets {
		if b.Refilled(now, g.cfg.Rate, float64(g.cfg.Burst)) {
			delete(g.buckets, id)
		}
	}
}

// Stats returns the Gate's counters.
func (g *Gate) Stats() Stats {
	return Stats{Immediate: g.immediate.Load(), Coalesced: g.coalesced.Load(), Rounds: g.rounds.Load()}
}
