// Package ratelimit bounds the calls each client may make, per method
// class, with token buckets kept in memory or shared by every proxy node
// through Redis. A client is its authenticated identity when it has one,
// else its source address: a name a client merely claims (set_ugi) keys
// no budget, or a new name per connection would be a fresh budget and
// claiming another's name would spend theirs.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/limits/bucket"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

// Class is what a limit applies to.
type Class uint8

const (
	ClassRead  Class = iota // methods that only read (hms.Read)
	ClassWrite              // writes, and methods the proxy does not know
	ClassOther              // the rest: caller-specific lookups, fb303, ...
	NumClasses
)

var classNames = [NumClasses]string{"read", "write", "other"}

func (c Class) String() string {
	if c < NumClasses {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// ClassOf maps a method onto its limit class; meth is nil for methods the
// method table does not know, which may change state.
func ClassOf(meth *hms.Method) Class {
	switch {
	case meth == nil || meth.Class == hms.Write:
		return ClassWrite
	case meth.Class == hms.Read:
		return ClassRead
	}
	return ClassOther
}

// Limit is one token bucket: Rate calls per second on average, Burst at
// once. A Rate of zero is no limit.
type Limit struct {
	Rate  float64
	Burst int // default: Rate rounded up, at least 1
}

// Limits are the buckets of one caller, by class.
type Limits [NumClasses]Limit

// Caller is who a call is charged to.
type Caller struct {
	// User is the identity the client authenticated as (a Kerberos
	// principal's mapped name); "" when it authenticated none, a set_ugi
	// name being only a claim. Keys the buckets when set.
	User string
	// Addr is the client's source address; keys the buckets of a caller
	// without User.
	Addr netip.Addr
}

// CallerAt is the caller without an authenticated identity at the
// source address addr (an IPv4 address in IPv6 form is the IPv4 one).
func CallerAt(addr netip.Addr) Caller { return Caller{Addr: addr.Unmap().WithZone("")} }

func (c Caller) String() string {
	if c.User != "" {
		return fmt.Sprintf("user %q", c.User)
	}
	return "client address " + c.Addr.String()
}

// SourceLimits replaces Default for callers without an authenticated
// identity whose address is in Prefix.
type SourceLimits struct {
	Prefix netip.Prefix
	Limits Limits
}

// Config configures a Limiter. The zero value limits nothing.
type Config struct {
	// Default are every caller's buckets: each authenticated identity's,
	// and each source address's for clients without one.
	Default Limits
	// Users replaces Default for the named authenticated identities.
	Users map[string]Limits
	// Sources replaces Default for callers without an authenticated
	// identity, by source address; the longest prefix holding the
	// address applies. Each address keeps its own buckets.
	Sources []SourceLimits
	// Redis, if set, holds the buckets, so that a user's limit is shared
	// by every node. When Redis fails, calls are allowed (fail open) and
	// counted in Stats.RedisErrors. Nil: each node has its own buckets.
	Redis redis.UniversalClient
	// Prefix of the Redis keys. Default "hmsproxy:ratelimit:".
	Prefix string
	// Logger receives one warning per identity and class per minute while
	// it is limited, and Redis failures. Default: discard.
	Logger *slog.Logger
	// Now is the clock of the in-memory buckets (a seam for tests).
	// Default time.Now.
	Now func() time.Time
}

// Stats are a Limiter's counters.
type Stats struct {
	Allowed     [NumClasses]atomic.Uint64
	Limited     [NumClasses]atomic.Uint64
	RedisErrors atomic.Uint64 // calls allowed because Redis failed
}

// Limiter decides whether a call may go ahead. Safe for concurrent use.
type Limiter struct {
	cfg   Config
	log   *slog.Logger
	stats Stats

	mu      sync.Mutex // guards buckets and warned
	buckets map[bucketKey]*bucket.Bucket
	warned  map[bucketKey]time.Time
}

// bucketKey is a Caller's bucket of one class: its identity, or its
// address when it has none (a user named like an address stays a user).
type bucketKey struct {
	user  string
	addr  netip.Addr
	class Class
}

func keyOf(who Caller, c Class) bucketKey {
	if who.User != "" {
		return bucketKey{user: who.User, class: c}
	}
	return bucketKey{addr: who.Addr, class: c}
}

// New validates cfg.
func New(cfg Config) (*Limiter, error) {
	check := func(who string, ls Limits) error {
		for c, l := range ls {
			if l.Rate < 0 || math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0) || l.Burst < 0 {
				return fmt.Errorf("ratelimit: %s %s: rate %v burst %d: want rate >= 0, burst >= 0", who, Class(c), l.Rate, l.Burst)
			}
		}
		return nil
	}
	if err := check("default", cfg.Default); err != nil {
		return nil, err
	}
	for u, ls := range cfg.Users {
		if u == "" {
			return nil, errors.New("ratelimit: a user's limits need the user's name")
		}
		if err := check(fmt.Sprintf("user %q", u), ls); err != nil {
			return nil, err
		}
	}
	cfg.Sources = append([]SourceLimits(nil), cfg.Sources...)
	for i, s := range cfg.Sources {
		if !s.Prefix.IsValid() {
			return nil, fmt.Errorf("ratelimit: source %d: no address prefix", i)
		}
		cfg.Sources[i].Prefix = s.Prefix.Masked()
		if err := check("source "+s.Prefix.String(), s.Limits); err != nil {
			return nil, err
		}
	}
	// longest prefix first, so that the first that holds an address is
	// the most specific
	sort.SliceStable(cfg.Sources, func(i, j int) bool { return cfg.Sources[i].Prefix.Bits() > cfg.Sources[j].Prefix.Bits() })
	if cfg.Prefix == "" {
		cfg.Prefix = "hmsproxy:ratelimit:"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Limiter{cfg: cfg, log: cfg.Logger, buckets: map[bucketKey]*bucket.Bucket{}, warned: map[bucketKey]time.Time{}}, nil
}

// Stats returns the counters.
func (l *Limiter) Stats() *Stats { return &l.stats }

// ErrLimited is the error of a refused call.
var ErrLimited = errors.New("ratelimit: over the limit")

// LimitedError says which limit refused a call; its message is what the
// client is told.
type LimitedError struct {
	Caller Caller
	Class  Class
	Limit  Limit
}

func (e *LimitedError) Error() string {
	return fmt.Sprintf("hmsproxy: rate limit exceeded for %s: at most %g %s calls per second (burst %d); retry later",
		e.Caller, e.Limit.Rate, e.Class, burst(e.Limit))
}

func (e *LimitedError) Unwrap() error { return ErrLimited }

// Allow takes a token of who's class bucket; it returns a *LimitedError
// (errors.Is ErrLimited) when there is none.
func (l *Limiter) Allow(ctx context.Context, who Caller, c Class) error {
	lim := l.limit(who, c)
	if lim.Rate == 0 {
		l.stats.Allowed[c].Add(1)
		return nil
	}
	k := keyOf(who, c)
	ok := true
	if l.cfg.Redis != nil {
		var err error
		if ok, err = l.allowRedis(ctx, k, lim); err != nil {
			// Fail open: a Redis outage must not become a metastore outage.
			l.stats.RedisErrors.Add(1)
			l.warn(bucketKey{user: "\x00redis", class: c}, "ratelimit: Redis failed; allowing calls", "err", err)
			ok = true
		}
	} else {
		ok = l.allowLocal(k, lim)
	}
	if ok {
		l.stats.Allowed[c].Add(1)
		return nil
	}
	l.stats.Limited[c].Add(1)
	l.warn(k, "ratelimit: caller over the limit", "caller", who.String(), "class", c.String(), "rate", lim.Rate, "burst", burst(lim))
	return &LimitedError{Caller: who, Class: c, Limit: lim}
}

// AllowCall is Allow for the class of meth (nil: a method the method
// table does not know).
func (l *Limiter) AllowCall(ctx context.Context, who Caller, meth *hms.Method) error {
	return l.Allow(ctx, who, ClassOf(meth))
}

func (l *Limiter) limit(who Caller, c Class) Limit {
	if who.User != "" {
		if ls, ok := l.cfg.Users[who.User]; ok {
			return ls[c]
		}
		return l.cfg.Default[c]
	}
	for _, s := range l.cfg.Sources {
		if s.Prefix.Contains(who.Addr) {
			return s.Limits[c]
		}
	}
	return l.cfg.Default[c]
}

func (k bucketKey) caller() Caller { return Caller{User: k.user, Addr: k.addr} }

func burst(lim Limit) int {
	if lim.Burst > 0 {
		return lim.Burst
	}
	return max(1, int(math.Ceil(lim.Rate)))
}

// maxBuckets bounds the in-memory buckets; past it, full ones (idle
// users) are dropped, which loses nothing.
const maxBuckets = 100_000

func (l *Limiter) allowLocal(k bucketKey, lim Limit) bool {
	now := l.cfg.Now()
	b := float64(burst(lim))
	l.mu.Lock()
	defer l.mu.Unlock()
	bk := l.buckets[k]
	if bk == nil {
		if len(l.buckets) >= maxBuckets {
			l.pruneLocked(now)
		}
		bk = bucket.Full(b, now)
		l.buckets[k] = bk
	}
	return bk.Take(now, lim.Rate, b)
}

func (l *Limiter) pruneLocked(now time.Time) {
	for k, bk := range l.buckets {
		lim := l.limit(k.caller(), k.class)
		if lim.Rate == 0 || bk.Refilled(now, lim.Rate, float64(burst(lim))) {
			delete(l.buckets, k)
		}
	}
}

// gcra is the generic cell rate algorithm on the Redis server's clock, so
// that nodes with skewed clocks share one bucket: the key holds the
// theoretical arrival time (µs) of the next call; a call is allowed when
// that is at most (burst-1) intervals ahead of now.
var gcra = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
if tat - now > tolerance then return 0 end
local nxt = tat + interval
redis.call('SET', KEYS[1], string.format('%d', nxt), 'PX', math.ceil((nxt - now) / 1000) + 1)
return 1
`)

func (l *Limiter) allowRedis(ctx context.Context, k bucketKey, lim Limit) (bool, error) {
	interval := 1e6 / lim.Rate // µs per call
	tolerance := interval * float64(burst(lim)-1)
	// A user is length-prefixed (names may hold any byte), and users and
	// addresses have keys of their own.
	key := fmt.Sprintf("%s%s:a:%s", l.cfg.Prefix, k.class, k.addr)
	if k.user != "" {
		key = fmt.Sprintf("%s%s:u:%d:%s", l.cfg.Prefix, k.class, len(k.user), k.user)
	}
	n, err := gcra.Run(ctx, l.cfg.Redis, []string{key},
		int64(math.Ceil(interval)), int64(tolerance)).Int()
	if err != nil {
		return false, fmt.Errorf("ratelimit: redis: %w", err)
	}
	return n == 1, nil
}

// warn logs at most once a minute per key.
func (l *Limiter) warn(k bucketKey, msg string, args ...any) {
	now := time.Now()
	l.mu.Lock()
	last, seen := l.warned[k]
	logIt := !seen || now.Sub(last) >= time.Minute
	if logIt {
		if len(l.warned) >= maxBuckets {
			for wk, at := range l.warned {
				if now.Sub(at) >= time.Minute {
					delete(l.warned, wk)
				}
			}
		}
		l.warned[k] = now
	}
	l.mu.Unlock()
	if logIt {
		l.log.Warn(msg, args...)
	}
}
