package ratelimit

import (
	"context"
	"net/netip"
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
)

// BenchmarkAllow: the cost a limit adds to each call, in memory and
// through Redis (a loopback round trip).
func BenchmarkAllow(b *testing.B) {
	var d Limits
	d[ClassRead] = Limit{Rate: 1e12, Burst: 1 << 30} // never refuses: measure the check
	run := func(b *testing.B, l *Limiter, who Caller) {
		ctx := context.Background()
		for b.Loop() {
			if err := l.Allow(ctx, who, ClassRead); err != nil {
				b.Fatal(err)
			}
		}
	}
	bob, addr := Caller{User: "bob"}, CallerAt(netip.MustParseAddr("10.1.2.3"))
	b.Run("memory", func(b *testing.B) {
		l, _ := New(Config{Default: d})
		run(b, l, bob)
	})
	b.Run("memory-address", func(b *testing.B) {
		l, _ := New(Config{Default: d})
		run(b, l, addr)
	})
	b.Run("memory-address-sources", func(b *testing.B) {
		// a handful of prefixes to look the address up in
		var src []SourceLimits
		for i := range 8 {
			src = append(src, SourceLimits{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i + 2), 0, 0}), 16), Limits: d})
		}
		l, _ := New(Config{Default: d, Sources: src})
		run(b, l, addr)
	})
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Start(b)
		rdb := srv.Client()
		defer rdb.Close()
		l, _ := New(Config{Default: d, Redis: rdb})
		run(b, l, bob)
	})
}
