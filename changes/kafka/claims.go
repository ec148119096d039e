package kafka

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Claims record which notification-log events a node has published
// already, as the writes that will cause them: a node claims the events
// its write will log before it publishes the write; the leader takes the
// claims of each event it reads, and publishes only the events nobody
// claimed. A claim is a count per key (see feed.Change.ClaimKeys) that
// expires after a TTL, so a claim whose event never came (a write the
// log did not record) cannot hide a later change for long.
type Claims interface {
	// Claim adds one claim to each key.
	Claim(ctx context.Context, keys []string) error
	// Take reports whether every key has a claim and, if so, takes one
	// from each, atomically. An event claimed only in part is published:
	// a duplicate is better than a loss.
	Take(ctx context.Context, keys []string) (bool, error)
}

// RedisClaims keeps claims in Redis, shared by every node of a group:
// one key per claim key under Prefix, a counter with a TTL.
type RedisClaims struct {
	Client redis.UniversalClient
	// Prefix begins every key, hash-tagged on a Redis Cluster so the
	// keys of one event are in one slot ("hmsproxy:{group}:feed:claim:").
	Prefix string
	// TTL is how long a claim waits for its event. Default 10m.
	TTL time.Duration
}

func (r *RedisClaims) ttl() time.Duration {
	if r.TTL <= 0 {
		return 10 * time.Minute
	}
	return r.TTL
}

func (r *RedisClaims) keys(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = r.Prefix + k
	}
	return out
}

func (r *RedisClaims) Claim(ctx context.Context, keys []string) error {
	_, err := r.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range r.keys(keys) {
			p.Incr(ctx, k)
			p.PExpire(ctx, k, r.ttl())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("kafka: claim: %w", err)
	}
	return nil
}

// takeScript takes one claim from every key, or none when one is missing.
var takeScript = redis.NewScript(`
for i, k in ipairs(KEYS) do
  if tonumber(redis.call('GET', k) or '0') < 1 then return 0 end
end
for i, k in ipairs(KEYS) do
  if redis.call('DECR', k) < 1 then redis.call('DEL', k) end
end
return 1`)

func (r *RedisClaims) Take(ctx context.Context, keys []string) (bool, error) {
	if len(keys) == 0 {
		return false, nil
	}
	n, err := takeScript.Run(ctx, r.Client, r.keys(keys)).Int()
	if err != nil {
		return false, fmt.Errorf("kafka: take claims: %w", err)
	}
	return n == 1, nil
}

// MemClaims keeps claims in memory, for a node without Redis (which is
// its own leader).
type MemClaims struct {
	// TTL is how long a claim waits for its event. Default 10m.
	TTL time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time

	mu    sync.Mutex // guards m and swept
	m     map[string]*memClaim
	swept time.Time
}

type memClaim struct {
	n       int
	expires time.Time
}

func (m *MemClaims) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *MemClaims) Claim(_ context.Context, keys []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string]*memClaim{}
	}
	ttl := m.TTL
	if ttl <= 0 {
		ttl = 10 * time.Minute
	}
	now := m.now()
	if now.Sub(m.swept) > ttl/10 {
		// Expired claims go, a tenth of a TTL apart: the map holds at
		// most the claims of 1.1 TTLs, and one write in many pays for a sweep.
		m.swept = now
		for k, c := range m.m {
			if now.After(c.expires) {
				delete(m.m, k)
			}
		}
	}
	for _, k := range keys {
		c := m.m[k]
		if c == nil {
			c = &memClaim{}
			m.m[k] = c
		}
		c.n++
		c.expires = now.Add(ttl)
	}
	return nil
}

func (m *MemClaims) Take(_ context.Context, keys []string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if len(keys) == 0 {
		return false, nil
	}
	for _, k := range keys {
		if c := m.m[k]; c == nil || c.n < 1 || now.After(c.expires) {
			return false, nil
		}
	}
	for _, k := range keys {
		c := m.m[k]
		if c.n--; c.n < 1 {
			delete(m.m, k)
		}
	}
	return true, nil
}
