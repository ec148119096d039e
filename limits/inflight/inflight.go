// Package inflight bounds the bytes that calls in flight hold across every
// connection of a process: requests being read and replies being held.
//
// One Budget is shared by the client side and the upstream side, so that
// many large requests and many large replies together cannot grow memory
// past what the operator configured. Claims wait (back-pressure) rather
// than fail while the bytes would fit once others are released; only a
// single claim larger than the whole budget fails at once.
//
// Readers claim the bytes of a message as they arrive, never what it
// announces (issue 22: three connections that only announced 100 MiB
// strings held the whole budget). Two readers that each hold part of a
// large message could then wait for each other's bytes for ever; a
// reserve kept out of the shared part of the budget prevents that: when
// the oldest waiting claim cannot go on, its reader becomes the finisher
// and may take the reserve until its message is read (Grow, Finished).
// One reader at a time finishes, so a message up to the reserve always
// can.
package inflight

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrTooLarge is returned for a claim that can never fit the budget.
var ErrTooLarge = errors.New("inflight: claim larger than the whole budget")

// Budget is a byte budget shared by all connections. The zero value and a
// nil *Budget are unlimited.
type Budget struct {
	max     int64
	reserve int64 // the part of max only the finisher may claim

	mu sync.Mutex // guards used, queue, finisher, finWait
	// used is the bytes claimed, as inUse; kept under mu so that a check
	// and a claim are one step.
	used int64
	// queue are the claims waiting, oldest first; the head blocks the
	// others, so a large claim is not starved by small ones.
	queue []*waiter
	// finisher is the claimant that may claim the reserve, nil when none;
	// finWait is its claim waiting for room (others' bytes to go), which
	// goes before the queue.
	finisher *Claimant
	finWait  *waiter

	inUse atomic.Int64 // used, readable without mu; the only count when unlimited
	// waits counts claims that had to wait: the back-pressure an operator
	// sees as a metric.
	waits atomic.Uint64
}

// Claimant is one reader's standing with a Budget across the claims of a
// message: whether it is the finisher. Its zero value is ready; a reader
// keeps one for its life and calls Finished after each message.
type Claimant struct {
	// finishing mirrors Budget.finisher == this claimant (set under the
	// budget's mu), so that Finished costs no lock for the others.
	finishing atomic.Bool
}

type waiter struct {
	n     int64
	cl    *Claimant // nil for a claim that is not a reader's
	ready chan struct{}
}

// New returns a budget of max bytes with no reserve; max <= 0 is
// unlimited. Readers' claims may then wait on each other until their
// contexts end.
func New(max int64) *Budget {
	if max <= 0 {
		return &Budget{}
	}
	return &Budget{max: max}
}

// NewReserving returns a budget of limit bytes that keeps a reserve for a
// reader's claims on one message of up to largest bytes, so that readers
// never wait on each other for good. The reserve is largest, but at most
// 7/8 of limit: the rest is shared by everyone, replies and sessions
// included. limit <= 0 is unlimited.
func NewReserving(limit, largest int64) *Budget {
	b := New(limit)
	if limit > 0 {
		b.reserve = min(max(largest, 0), limit-limit/8)
	}
	return b
}

// Max is the configured budget, 0 when unlimited.
func (b *Budget) Max() int64 {
	if b == nil {
		return 0
	}
	return b.max
}

// Reserve is the part of the budget kept for the finisher.
func (b *Budget) Reserve() int64 {
	if b == nil {
		return 0
	}
	return b.reserve
}

// fits reports whether n more bytes may be claimed for cl now: up to the
// shared part of the budget, or the whole for the finisher. b.mu is held.
func (b *Budget) fits(cl *Claimant, n int64) bool {
	ceiling := b.max - b.reserve
	if cl != nil && cl == b.finisher {
		ceiling = b.max
	}
	return b.used+n <= ceiling
}

func (b *Budget) take(n int64) {
	b.used += n
	b.inUse.Add(n)
}

// Acquire claims n bytes that are not a reader's, waiting until they fit
// or ctx ends.
func (b *Budget) Acquire(ctx context.Context, n int64) error {
	return b.Grow(ctx, nil, n)
}

// TryAcquire claims n bytes that are not a reader's if they fit now,
// with no claim waiting before them.
func (b *Budget) TryAcquire(n int64) bool {
	return b.TryGrow(nil, n)
}

// TryGrow claims n more bytes for cl if they fit now. The finisher's
// claims go before waiting ones; others only when none waits.
func (b *Budget) TryGrow(cl *Claimant, n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	if b.max <= 0 {
		b.inUse.Add(n)
		return true
	}
	if n > b.max {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	first := cl != nil && cl == b.finisher || len(b.queue) == 0 && b.finWait == nil
	if !first || !b.fits(cl, n) {
		return false
	}
	b.take(n)
	return true
}

// Grow claims n more bytes for cl (nil: a claim that is not a reader's),
// waiting until they fit or ctx ends. A wait may make cl the finisher,
// which it stays until Finished.
func (b *Budget) Grow(ctx context.Context, cl *Claimant, n int64) error {
	if b.TryGrow(cl, n) {
		return nil
	}
	if n > b.max || cl == nil && n > b.max-b.reserve {
		// Only a reader may finish on the reserve.
		return fmt.Errorf("%w: %d bytes, budget %d (%d reserved)", ErrTooLarge, n, b.max, b.reserve)
	}
	w := &waiter{n: n, cl: cl, ready: make(chan struct{})}
	b.mu.Lock()
	if cl != nil && cl == b.finisher {
		b.finWait = w
	} else {
		b.queue = append(b.queue, w)
	}
	b.waits.Add(1)
	b.grantLocked() // the queue may have just become this claim alone
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready:
		return nil // granted as the context ended: the claim stands
	default:
	}
	if b.finWait == w {
		b.finWait = nil
	} else if i := slices.Index(b.queue, w); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
	}
	b.grantLocked() // a head that gave up may have blocked others
	return fmt.Errorf("inflight: waiting for %d bytes: %w", n, ctx.Err())
}

// grantLocked hands room to waiting claims: the finisher's first, then
// the queue in order. When the oldest claim cannot go on at the shared
// ceiling and no reader is finishing, its reader becomes the finisher.
// b.mu is held.
func (b *Budget) grantLocked() {
	if w := b.finWait; w != nil {
		if !b.fits(w.cl, w.n) {
			return // nothing more may be claimed before the finisher's
		}
		b.take(w.n)
		b.finWait = nil
		close(w.ready)
	}
	for len(b.queue) > 0 {
		w := b.queue[0]
		if !b.fits(w.cl, w.n) {
			if w.cl == nil || b.finisher != nil || b.reserve == 0 {
				return
			}
			b.finisher = w.cl
			w.cl.finishing.Store(true)
			if !b.fits(w.cl, w.n) {
				b.queue = b.queue[1:]
				b.finWait = w
				return
			}
		}
		b.take(w.n)
		b.queue = b.queue[1:]
		close(w.ready)
	}
}

// Finished tells b that cl's message has been read (or given up): cl is
// no longer the finisher, and the reserve passes to the oldest waiting
// reader when it must. The bytes cl claimed stay claimed until released.
func (b *Budget) Finished(cl *Claimant) {
	if b == nil || b.max <= 0 || !cl.finishing.Load() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// cl's own claims are done (its reader calls this after Grow
	// returned), so finWait is nil.
	cl.finishing.Store(false)
	b.finisher = nil
	b.grantLocked()
}

// Release returns n bytes claimed earlier.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	if b.max <= 0 {
		b.inUse.Add(-n)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.inUse.Add(-n)
	b.grantLocked()
}

// InUse is the bytes claimed now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	return b.inUse.Load()
}

// Waits is how many claims had to wait for others to release.
func (b *Budget) Waits() uint64 {
	if b == nil {
		return 0
	}
	return b.waits.Load()
}
