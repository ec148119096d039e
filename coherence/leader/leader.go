// Package leader elects one proxy node per upstream metastore to run
// cluster-singleton work, with a Redis lease fenced by a token.
//
// The lease is one Redis key whose value is "node|token". A node acquires
// it with SET NX PX, the token taken from an INCR'd counter in the same
// Lua script, so every term has a new, larger token (within one Redis
// lifetime; see SetIfLeader for why a restart does not break fencing).
// The leader renews with PEXPIRE and releases with DEL, each only if the
// value is still its own. A node that cannot confirm its lease steps down
// before the lease can have expired on the server.
//
// Hand-over leaves no renew-period gap. A node whose term ends campaigns
// again at once. A node that finds the lease taken sleeps until the
// lease's own expiry (its PTTL, read in the same script), not a fixed
// period, and is woken earlier by either of the two ways a lease can
// vanish before it expires: a release, which publishes on Key+":released",
// and a Redis restart, which the node notices when its subscription to
// that channel reconnects. The channel is a plain PUBLISH from the release
// script rather than a keyspace notification, so it needs no
// notify-keyspace-events setting (which managed Redis services often
// refuse), and expiry needs no notification at all since the PTTL is
// known. A leader is woken by a reconnect too, and checks its lease at
// once instead of at its next renewal.
package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config configures an Elector. Client and Key are required.
type Config struct {
	Client redis.UniversalClient
	// Key is the lease key, e.g. "hmsproxy:leader:<upstream>". The token
	// counter lives at Key+":token".
	Key string
	// NodeID names this process in the lease value. Default: random per
	// process. It must not contain '|'.
	NodeID string
	// TTL is the lease time: how long a crashed leader blocks the others.
	// Default 10s.
	TTL time.Duration
	// Renew is how often the leader renews; also how long a node waits
	// before trying again after Redis failed to answer. Default TTL/3.
	Renew time.Duration
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
}

// ErrConfig reports an unusable Config.
var ErrConfig = errors.New("leader: bad config")

// ErrNotLeader is returned by SetIfLeader when the lease does not hold the
// given token (any more).
var ErrNotLeader = errors.New("leader: not the leader")

// acquire sets the lease if nobody holds it; it returns {the new token,
// 0}, or {0, the lease's remaining milliseconds} when it is taken.
var acquireScript = redis.NewScript(`
local left = redis.call('PTTL', KEYS[1])
if left ~= -2 then return {0, left} end
local t = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. t, 'NX', 'PX', ARGV[2])
return {t, 0}`)

var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)

// release deletes the lease and tells the waiting nodes on
// KEYS[1]..':released'.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[1] .. ':released', ARGV[1])
  return 1
end
return 0`)

var setIfScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[2], ARGV[2])
  return 1
end
return 0`)

// Stats are an Elector's counters.
type Stats struct {
	Elected    uint64 // terms won
	Lost       uint64 // terms ended other than by Run's ctx (renew failed, lease gone)
	RedisError uint64 // failed acquire/renew/release calls
	// Wakeups counts early wake-ups: a release announced, or the watch
	// subscription reconnected (Redis may have lost the lease).
	Wakeups uint64
}

// Elector campaigns for one lease.
type Elector struct {
	cfg Config
	log *slog.Logger

	// mu guards token and validUntil: the current term, if any.
	mu         sync.Mutex
	token      int64     // 0: not leader
	validUntil time.Time // local time before which the lease surely holds

	elected, lost, redisErr, wakeups atomic.Uint64

	// noRelease makes Run keep the lease when its ctx ends, as a crashed
	// process would (a test seam).
	noRelease bool
	// waits counts the campaign's waits after a try that did not win, and
	// renewals the renewals of a term: test seams, showing that a
	// follower tried and now waits, and how many renewals a span held.
	waits, renewals atomic.Uint64
}

// New validates cfg and fills in defaults.
func New(cfg Config) (*Elector, error) {
	if cfg.Client == nil || cfg.Key == "" {
		return nil, fmt.Errorf("%w: client and key are required", ErrConfig)
	}
	if cfg.NodeID == "" {
		var b [8]byte
		rand.Read(b[:])
		cfg.NodeID = hex.EncodeToString(b[:])
	}
	for _, r := range cfg.NodeID {
		if r == '|' {
			return nil, fmt.Errorf("%w: node id %q contains '|'", ErrConfig, cfg.NodeID)
		}
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.Renew <= 0 {
		cfg.Renew = cfg.TTL / 3
	}
	if cfg.Renew >= cfg.TTL {
		return nil, fmt.Errorf("%w: renew %v must be shorter than ttl %v", ErrConfig, cfg.Renew, cfg.TTL)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Elector{cfg: cfg, log: cfg.Logger.With("lease", cfg.Key, "node", cfg.NodeID)}, nil
}

// NodeID is this node's name in the lease.
func (e *Elector) NodeID() string { return e.cfg.NodeID }

// IsLeader reports whether this node holds the lease, and its token. It
// turns false as soon as the node can no longer be sure of the lease,
// before another node can acquire it (clock rates permitting).
func (e *Elector) IsLeader() (bool, int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.token == 0 || !time.Now().Before(e.validUntil) {
		return false, 0
	}
	return true, e.token
}

// Stats returns the counters.
func (e *Elector) Stats() Stats {
	return Stats{Elected: e.elected.Load(), Lost: e.lost.Load(), RedisError: e.redisErr.Load(), Wakeups: e.wakeups.Load()}
}

func (e *Elector) value(token int64) string {
	return e.cfg.NodeID + "|" + strconv.FormatInt(token, 10)
}

// SetIfLeader writes value at key only if the lease still holds token
// (and this node's id), atomically; otherwise it returns ErrNotLeader. A
// deposed leader that still runs cannot overwrite its successor's writes.
// The value check includes the node id, so tokens restarting at 1 after
// Redis loses its data (no persistence) cannot confuse two nodes.
func (e *Elector) SetIfLeader(ctx context.Context, token int64, key, value string) error {
	n, err := setIfScript.Run(ctx, e.cfg.Client, []string{e.cfg.Key, key}, e.value(token), value).Int()
	if err != nil {
		return fmt.Errorf("leader: set %s: %w", key, err)
	}
	if n != 1 {
		return ErrNotLeader
	}
	return nil
}

// Run campaigns until ctx is done. Each time the node wins, onElected runs
// with a ctx that is cancelled when the term ends: renew failed, lease
// lost or stolen, or ctx done. Run waits for onElected to return before
// campaigning again, and returns after it has, releasing the lease when
// ctx ends.
func (e *Elector) Run(ctx context.Context, onElected func(ctx context.Context, token int64)) {
	wake := make(chan struct{}, 1)
	ps := e.cfg.Client.Subscribe(ctx, e.releasedChannel())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.watch(ctx, ps, wake)
	}()
	defer func() {
		ps.Close() // ends watch's blocking receive
		wg.Wait()
	}()
	for ctx.Err() == nil {
		token, left, err := e.tryAcquire(ctx)
		if token != 0 {
			e.term(ctx, token, onElected, wake)
			continue // the term ended: campaign again at once
		}
		wait := e.cfg.Renew
		if err == nil {
			// Held by another node: try again the moment it expires,
			// unless a release or a Redis restart comes first.
			wait = left + time.Millisecond
		}
		e.waits.Add(1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-wake:
		}
		t.Stop()
	}
}

func (e *Elector) releasedChannel() string { return e.cfg.Key + ":released" }

// watch signals wake on each release announced on the lease's channel and
// on each subscription that follows a lost connection: Redis may have
// restarted without the lease, or come up for the first time. It returns
// when ctx is done and ps is closed.
func (e *Elector) watch(ctx context.Context, ps *redis.PubSub, wake chan<- struct{}) {
	signal := func() {
		e.wakeups.Add(1)
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	lost := false // since the last subscription
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		// A bounded wait with a ping on timeout finds a connection that
		// died silently; the PTTL wait of the campaign is the fallback.
		msg, err := ps.ReceiveTimeout(ctx, e.cfg.TTL)
		if err != nil {
			var ne interface{ Timeout() bool }
			if errors.As(err, &ne) && ne.Timeout() {
				ps.Ping(ctx)
				continue
			}
			// Refused while Redis is down: retry soon, so that a
			// restarted Redis is noticed well within a second.
			lost = true
			backoff = min(max(2*backoff, 10*time.Millisecond), 100*time.Millisecond, e.cfg.Renew)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		backoff = 0
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && lost {
				e.log.Info("leader: reconnected to Redis; checking the lease now")
				lost = false
				signal()
			}
		case *redis.Message:
			signal()
		}
	}
}

// tryAcquire returns the new token, or 0 and how long the lease still
// holds when another node has it.
func (e *Elector) tryAcquire(ctx context.Context) (int64, time.Duration, error) {
	cctx, cancel := context.WithTimeout(ctx, e.cfg.Renew)
	defer cancel()
	sent := time.Now()
	res, err := acquireScript.Run(cctx, e.cfg.Client, []string{e.cfg.Key, e.cfg.Key + ":token"},
		e.cfg.NodeID, e.cfg.TTL.Milliseconds()).Int64Slice()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("leader: acquire answered %v", res)
	}
	if err != nil {
		if ctx.Err() == nil {
			e.redisErr.Add(1)
			e.log.Debug("leader: acquire failed", "err", err)
		}
		return 0, 0, err
	}
	if res[0] == 0 {
		left := time.Duration(res[1]) * time.Millisecond
		if left < 0 || left > e.cfg.TTL {
			left = e.cfg.TTL // no expiry: a foreign key; keep trying
		}
		return 0, left, nil
	}
	e.setTerm(res[0], sent)
	return res[0], 0, nil
}

// setTerm records a confirmed lease: sent is when the command that set
// or renewed it was sent, so the lease holds until at least sent+TTL on
// the server; a tenth of the TTL is kept as margin for clock rates.
func (e *Elector) setTerm(token int64, sent time.Time) {
	e.mu.Lock()
	e.token = token
	e.validUntil = sent.Add(e.cfg.TTL - e.cfg.TTL/10)
	e.mu.Unlock()
}

func (e *Elector) clearTerm() {
	e.mu.Lock()
	e.token, e.validUntil = 0, time.Time{}
	e.mu.Unlock()
}

// term runs one leadership term.
func (e *Elector) term(ctx context.Context, token int64, onElected func(context.Context, int64), wake <-chan struct{}) {
	e.elected.Add(1)
	e.log.Info("leader: elected", "token", token)
	tctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		onElected(tctx, token)
	}()
	reason := e.hold(tctx, token, done, wake)
	// Step down locally first: IsLeader turns false before the workers
	// are told, and well before the lease could pass to another node.
	e.clearTerm()
	cancel()
	<-done
	if ctx.Err() != nil {
		reason = "stopped"
		if !e.noRelease {
			rctx, rcancel := context.WithTimeout(context.Background(), e.cfg.Renew)
			if err := releaseScript.Run(rctx, e.cfg.Client, []string{e.cfg.Key}, e.value(token)).Err(); err != nil {
				e.redisErr.Add(1)
				e.log.Warn("leader: release failed; the lease expires by itself", "err", err)
			}
			rcancel()
		}
	} else {
		e.lost.Add(1)
	}
	e.log.Info("leader: term ended", "token", token, "reason", reason)
}

// hold renews the lease until the term ends and says why it ended. A wake
// (Redis reconnected) renews at once: a restarted Redis has no lease, and
// the sooner the term ends the sooner it is won again.
func (e *Elector) hold(ctx context.Context, token int64, done <-chan struct{}, wake <-chan struct{}) string {
	tick := time.NewTicker(e.cfg.Renew)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return "stopped"
		case <-done:
			// onElected returned on its own; keep the lease (the work
			// is done for this term) until it is lost or Run stops.
			done = nil
			continue
		case <-tick.C:
		case <-wake:
		}
		e.mu.Lock()
		until := e.validUntil
		e.mu.Unlock()
		rctx, cancel := context.WithDeadline(ctx, until)
		sent := time.Now()
		n, err := renewScript.Run(rctx, e.cfg.Client, []string{e.cfg.Key}, e.value(token), e.cfg.TTL.Milliseconds()).Int()
		cancel()
		switch {
		case ctx.Err() != nil:
			return "stopped"
		case err == nil && n == 1:
			e.setTerm(token, sent)
			e.renewals.Add(1)
		case err == nil:
			return "lease lost"
		default:
			e.redisErr.Add(1)
			if !time.Now().Before(until) {
				e.log.Warn("leader: cannot renew the lease in time", "err", err)
				return "renew failed"
			}
			e.log.Debug("leader: renew failed; retrying", "err", err)
		}
	}
}

// Solo is the leadership of a node that runs without Redis: it is the
// only node, so it always leads, with token 1.
type Solo struct{}

// IsLeader reports true, 1.
func (Solo) IsLeader() (bool, int64) { return true, 1 }

// Run calls onElected(ctx, 1) and returns when it has returned and ctx is
// done.
func (Solo) Run(ctx context.Context, onElected func(ctx context.Context, token int64)) {
	onElected(ctx, 1)
	<-ctx.Done()
}
