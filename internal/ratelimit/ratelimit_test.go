package ratelimit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/redistest"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// allowN makes n calls and returns how many were allowed, and the last
// refusal.
func allowN(l *Limiter, user string, c Class, n int) (int, error) {
	ok := 0
	var last error
	for i := 0; i < n; i++ {
		if err := l.Allow(context.Background(), user, c); err != nil {
			last = err
		} else {
			ok++
		}
	}
	return ok, last
}

// TestLocalBuckets: a user over the limit is refused with a message that
// says so; other users, other classes and later calls are not affected.
func TestLocalBuckets(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	var d Limits
	d[ClassRead] = Limit{Rate: 10, Burst: 3}
	l, err := New(Config{Default: d, Users: map[string]Limits{"etl": {}}, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	n, last := allowN(l, "bob", ClassRead, 5)
	if n != 3 {
		t.Fatalf("bob: %d of 5 reads allowed at once; want the burst, 3", n)
	}
	var le *LimitedError
	if !errors.Is(last, ErrLimited) || !errors.As(last, &le) || le.User != "bob" ||
		!strings.Contains(last.Error(), "rate limit exceeded") {
		t.Fatalf("refusal %v; want a LimitedError for bob that says so", last)
	}
	if n, _ := allowN(l, "alice", ClassRead, 3); n != 3 {
		t.Fatalf("alice: %d of 3 reads allowed; bob's limit spilled over", n)
	}
	if n, _ := allowN(l, "bob", ClassWrite, 50); n != 50 {
		t.Fatalf("bob: %d of 50 writes allowed; writes have no limit", n)
	}
	if n, _ := allowN(l, "etl", ClassRead, 50); n != 50 {
		t.Fatalf("etl: %d of 50 reads allowed; its own limits say none", n)
	}
	clk.Advance(100 * time.Millisecond) // one token at 10/s
	if n, _ := allowN(l, "bob", ClassRead, 2); n != 1 {
		t.Fatalf("bob: %d reads allowed 100ms later; want 1", n)
	}
	st := l.Stats()
	if got := st.Limited[ClassRead].Load(); got != 3 {
		t.Fatalf("limited reads counted %d; want 3", got)
	}
}

func TestConfigRefused(t *testing.T) {
	var d Limits
	d[ClassWrite] = Limit{Rate: -1}
	if _, err := New(Config{Default: d}); err == nil {
		t.Fatal("a negative rate was accepted")
	}
}

// TestRedisShared: two nodes share one user's bucket through Redis, and
// calls are allowed when Redis is down.
func TestRedisShared(t *testing.T) {
	srv := redistest.Start(t)
	var d Limits
	d[ClassWrite] = Limit{Rate: 0.5, Burst: 2}
	newNode := func() *Limiter {
		rdb := srv.Client()
		t.Cleanup(func() { rdb.Close() })
		l, err := New(Config{Default: d, Redis: rdb})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := newNode(), newNode()
	if n, _ := allowN(a, "bob", ClassWrite, 1); n != 1 {
		t.Fatal("node A refused bob's first write")
	}
	if n, _ := allowN(b, "bob", ClassWrite, 1); n != 1 {
		t.Fatal("node B refused bob's second write (burst 2)")
	}
	if _, err := allowN(a, "bob", ClassWrite, 1); !errors.Is(err, ErrLimited) {
		t.Fatalf("bob's third write on node A: %v; want refused: the bucket is not shared", err)
	}
	if n, _ := allowN(b, "alice", ClassWrite, 2); n != 2 {
		t.Fatal("alice refused: bob's bucket spilled over")
	}
	srv.Stop()
	if n, _ := allowN(a, "bob", ClassWrite, 3); n != 3 {
		t.Fatalf("Redis down: %d of 3 calls allowed; want all (fail open)", n)
	}
	if a.Stats().RedisErrors.Load() != 3 {
		t.Fatalf("redis errors counted %d; want 3", a.Stats().RedisErrors.Load())
	}
}
