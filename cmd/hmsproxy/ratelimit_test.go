package main

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/limits/ratelimit"
)

// TestRateLimitConfig: no limit, no limiter; a user's entry overrides
// only the classes it names; Redis sharing needs Redis.
func TestRateLimitConfig(t *testing.T) {
	t.Setenv("HMSPROXY_CONFIG", "")
	c, err := load([]string{"-demo"})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := newLimiter(c.RateLimit, false, nil, nil); err != nil || l != nil {
		t.Fatalf("defaults: limiter %v, %v; want none", l, err)
	}
	yaml := "ratelimit:\n  read: {rate: 1, burst: 1}\n  write: {rate: 1, burst: 1}\n  users:\n    etl:\n      read: {rate: 0}\n"
	p := writeConfig(t, yaml)
	if c, err = load([]string{"-demo", "-config", p}); err != nil {
		t.Fatal(err)
	}
	l, err := newLimiter(c.RateLimit, true, nil, nil)
	if err != nil || l == nil {
		t.Fatalf("limiter %v, %v", l, err)
	}
	ctx := context.Background()
	etl := ratelimit.Caller{User: "etl"}
	for i := 0; i < 3; i++ {
		if err := l.Allow(ctx, etl, ratelimit.ClassRead); err != nil {
			t.Fatalf("etl read %d refused: its entry lifts the read limit", i)
		}
	}
	l.Allow(ctx, etl, ratelimit.ClassWrite)
	if err := l.Allow(ctx, etl, ratelimit.ClassWrite); !errors.Is(err, ratelimit.ErrLimited) {
		t.Fatalf("etl's second write: %v; want the default write limit", err)
	}
	c.RateLimit.Redis = true
	if _, err := newLimiter(c.RateLimit, true, nil, nil); err == nil {
		t.Fatal("ratelimit.redis without redis.url was accepted")
	}
}

// TestRateLimitSourcesConfig (issue 22): without Kerberos, clients are
// limited by address and ratelimit.sources overrides a prefix's limits;
// ratelimit.users, which would name set_ugi claims, is refused there, as
// sources is with Kerberos, where every client is an identity.
func TestRateLimitSourcesConfig(t *testing.T) {
	yaml := "ratelimit:\n  read: {rate: 0.001, burst: 1}\n  sources:\n    10.1.0.0/16:\n      read: {rate: 0}\n    \"10.2.3.4\":\n      read: {rate: 0.001, burst: 3}\n"
	p := writeConfig(t, yaml)
	c, err := load([]string{"-demo", "-config", p})
	if err != nil {
		t.Fatal(err)
	}
	l, err := newLimiter(c.RateLimit, false, nil, nil)
	if err != nil || l == nil {
		t.Fatalf("limiter %v, %v", l, err)
	}
	for addr, want := range map[string]int{"10.1.9.9": 10, "10.2.3.4": 3, "10.2.3.5": 1, "::ffff:10.1.0.1": 10} {
		n := 0
		for range 10 {
			if l.Allow(context.Background(), ratelimit.CallerAt(netip.MustParseAddr(addr)), ratelimit.ClassRead) == nil {
				n++
			}
		}
		if n != want {
			t.Errorf("%s: %d of 10 reads allowed; want %d", addr, n, want)
		}
	}
	if _, err := newLimiter(c.RateLimit, true, nil, nil); err == nil || !strings.Contains(err.Error(), "ratelimit.users") {
		t.Errorf("sources with kerberos.enabled: %v; want refused", err)
	}
	users := settings.RateLimit{Read: settings.Limit{Rate: 1}, Users: map[string]settings.UserLimit{"etl": {}}}
	if _, err := newLimiter(users, false, nil, nil); err == nil || !strings.Contains(err.Error(), "ratelimit.sources") {
		t.Errorf("users without kerberos.enabled: %v; want refused", err)
	}
	for _, bad := range []string{"10.1.0.0/33", "host.example.com", "::ffff:10.0.0.0/104"} {
		rc := settings.RateLimit{Read: settings.Limit{Rate: 1}, Sources: map[string]settings.UserLimit{bad: {}}}
		if _, err := newLimiter(rc, false, nil, nil); err == nil {
			t.Errorf("source %q accepted", bad)
		}
	}
}
