package ratelimit

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/clocktest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
)

func user(name string) Caller { return Caller{User: name} }

// allowN makes n calls and returns how many were allowed, and the last
// refusal.
func allowN(l *Limiter, who Caller, c Class, n int) (int, error) {
	ok := 0
	var last error
	for i := 0; i < n; i++ {
		if err := l.Allow(context.Background(), who, c); err != nil {
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
	clk := clocktest.At(time.Unix(1000, 0))
	var d Limits
	d[ClassRead] = Limit{Rate: 10, Burst: 3}
	l, err := New(Config{Default: d, Users: map[string]Limits{"etl": {}}, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	n, last := allowN(l, user("bob"), ClassRead, 5)
	if n != 3 {
		t.Fatalf("bob: %d of 5 reads allowed at once; want the burst, 3", n)
	}
	var le *LimitedError
	if !errors.Is(last, ErrLimited) || !errors.As(last, &le) || le.Caller != user("bob") ||
		!strings.Contains(last.Error(), "rate limit exceeded") {
		t.Fatalf("refusal %v; want a LimitedError for bob that says so", last)
	}
	if n, _ := allowN(l, user("alice"), ClassRead, 3); n != 3 {
		t.Fatalf("alice: %d of 3 reads allowed; bob's limit spilled over", n)
	}
	if n, _ := allowN(l, user("bob"), ClassWrite, 50); n != 50 {
		t.Fatalf("bob: %d of 50 writes allowed; writes have no limit", n)
	}
	if n, _ := allowN(l, user("etl"), ClassRead, 50); n != 50 {
		t.Fatalf("etl: %d of 50 reads allowed; its own limits say none", n)
	}
	clk.Advance(100 * time.Millisecond) // one token at 10/s
	if n, _ := allowN(l, user("bob"), ClassRead, 2); n != 1 {
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
	if n, _ := allowN(a, user("bob"), ClassWrite, 1); n != 1 {
		t.Fatal("node A refused bob's first write")
	}
	if n, _ := allowN(b, user("bob"), ClassWrite, 1); n != 1 {
		t.Fatal("node B refused bob's second write (burst 2)")
	}
	if _, err := allowN(a, user("bob"), ClassWrite, 1); !errors.Is(err, ErrLimited) {
		t.Fatalf("bob's third write on node A: %v; want refused: the bucket is not shared", err)
	}
	if n, _ := allowN(b, user("alice"), ClassWrite, 2); n != 2 {
		t.Fatal("alice refused: bob's bucket spilled over")
	}
	srv.Stop()
	if n, _ := allowN(a, user("bob"), ClassWrite, 3); n != 3 {
		t.Fatalf("Redis down: %d of 3 calls allowed; want all (fail open)", n)
	}
	if a.Stats().RedisErrors.Load() != 3 {
		t.Fatalf("redis errors counted %d; want 3", a.Stats().RedisErrors.Load())
	}
}

func at(addr string) Caller { return CallerAt(netip.MustParseAddr(addr)) }

// TestCallers (issue 22): a caller without an authenticated identity is
// its source address; users and addresses never share a bucket, not even
// a user named like an address; an IPv4 client is one address however
// the socket spells it; Users apply only to authenticated identities and
// Sources only to addresses, the longest prefix first.
func TestCallers(t *testing.T) {
	clk := clocktest.At(time.Unix(1000, 0))
	lim := func(burst int) Limits {
		var ls Limits
		ls[ClassRead] = Limit{Rate: 0.001, Burst: burst}
		return ls
	}
	l, err := New(Config{Default: lim(2), Now: clk.Now,
		Users: map[string]Limits{"etl": lim(5), "10.0.0.1": lim(1)},
		Sources: []SourceLimits{
			{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Limits: lim(3)},
			{Prefix: netip.MustParsePrefix("10.1.0.0/16"), Limits: lim(4)},
			{Prefix: netip.MustParsePrefix("10.2.3.4/32"), Limits: Limits{}}, // none
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who  Caller
		want int
	}{
		{at("192.0.2.1"), 2},        // the default, per address
		{at("::ffff:192.0.2.1"), 0}, // the same address: spent
		{at("192.0.2.2"), 2},        // another address
		{at("10.9.9.9"), 3},         // 10.0.0.0/8
		{at("10.1.2.3"), 4},         // 10.1.0.0/16, the longer prefix
		{at("10.2.3.4"), 50},        // lifted
		{user("10.0.0.1"), 1},       // a user, not the address
		{at("10.0.0.1"), 3},         // the address, not the user
		{user("etl"), 5},            // Users apply to the identity
		{user("bob"), 2},            // the default, per identity
		{at("192.0.2.3"), 2},        // users' buckets are not addresses'
	} {
		if n, _ := allowN(l, tc.who, ClassRead, 50); n != tc.want {
			t.Errorf("%s: %d of 50 reads allowed; want %d", tc.who, n, tc.want)
		}
	}
	var le *LimitedError
	if err := l.Allow(context.Background(), at("192.0.2.1"), ClassRead); !errors.As(err, &le) ||
		!strings.Contains(err.Error(), "rate limit exceeded for client address 192.0.2.1") {
		t.Fatalf("refusal %v; want it to name the address", err)
	}
}

func TestSourcesRefused(t *testing.T) {
	for _, cfg := range []Config{
		{Sources: []SourceLimits{{}}},
		{Sources: []SourceLimits{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Limits: Limits{{Rate: -1}}}}},
		{Users: map[string]Limits{"": {}}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// TestRedisCallers: in Redis too, an address and a user named like it
// have buckets of their own.
func TestRedisCallers(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	var d Limits
	d[ClassRead] = Limit{Rate: 0.001, Burst: 1}
	l, err := New(Config{Default: d, Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []Caller{at("192.0.2.1"), user("192.0.2.1"), at("192.0.2.2")} {
		if n, _ := allowN(l, who, ClassRead, 3); n != 1 {
			t.Errorf("%s: %d of 3 reads allowed; want the burst, 1", who, n)
		}
	}
}
