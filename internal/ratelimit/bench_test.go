package ratelimit

import (
	"context"
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/redistest"
)

// BenchmarkAllow: the cost a limit adds to each call, in memory and
// through Redis (a loopback round trip).
func BenchmarkAllow(b *testing.B) {
	var d Limits
	d[ClassRead] = Limit{Rate: 1e12, Burst: 1 << 30} // never refuses: measure the check
	run := func(b *testing.B, l *Limiter) {
		ctx := context.Background()
		for b.Loop() {
			if err := l.Allow(ctx, Caller{User: "bob"}, ClassRead); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("memory", func(b *testing.B) {
		l, _ := New(Config{Default: d})
		run(b, l)
	})
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Start(b)
		rdb := srv.Client()
		defer rdb.Close()
		l, _ := New(Config{Default: d, Redis: rdb})
		run(b, l)
	})
}
