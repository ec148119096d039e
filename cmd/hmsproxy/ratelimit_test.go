package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/ratelimit"
)

// TestRateLimitConfig: no limit, no limiter; a user's entry overrides
// only the classes it names; Redis sharing needs Redis.
func TestRateLimitConfig(t *testing.T) {
	t.Setenv("HMSPROXY_CONFIG", "")
	c, err := load([]string{"-demo"})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := newLimiter(c.RateLimit, nil, nil); err != nil || l != nil {
		t.Fatalf("defaults: limiter %v, %v; want none", l, err)
	}
	p := filepath.Join(t.TempDir(), "c.yaml")
	yaml := "ratelimit:\n  read: {rate: 1, burst: 1}\n  write: {rate: 1, burst: 1}\n  users:\n    etl:\n      read: {rate: 0}\n"
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err = load([]string{"-demo", "-config", p}); err != nil {
		t.Fatal(err)
	}
	l, err := newLimiter(c.RateLimit, nil, nil)
	if err != nil || l == nil {
		t.Fatalf("limiter %v, %v", l, err)
	}
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if err := l.Allow(ctx, "etl", ratelimit.ClassRead); err != nil {
			t.Fatalf("etl read %d refused: its entry lifts the read limit", i)
		}
	}
	l.Allow(ctx, "etl", ratelimit.ClassWrite)
	if err := l.Allow(ctx, "etl", ratelimit.ClassWrite); !errors.Is(err, ratelimit.ErrLimited) {
		t.Fatalf("etl's second write: %v; want the default write limit", err)
	}
	c.RateLimit.Redis = true
	if _, err := newLimiter(c.RateLimit, nil, nil); err == nil {
		t.Fatal("ratelimit.redis without redis.url was accepted")
	}
}
