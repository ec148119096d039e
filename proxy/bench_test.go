package proxy

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// BenchmarkPassthroughAddedLatency measures what the proxy adds to an
// uncached get_table. One driver alternates a direct call and a proxied
// call to the same demo metastore, so both see the same machine load; with
// conns=64 it cycles through 64 client connections (and so 64 upstream
// connections), which is the latency a client sees on a busy proxy that is
// not CPU-bound. BenchmarkPassthroughConcurrent64 is the saturated case.
func BenchmarkPassthroughAddedLatency(b *testing.B) {
	for _, conns := range []int{1, 64} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			_, addr := startDemo(b, wire.Buffered)
			_, paddr := startProxy(b, proxyOpts{up: upstream.Config{MaxConns: conns}}, addr)
			args := hmsclient.Args("demo_db0", "t0")
			clients := make([][2]*hmsclient.Client, conns)
			for i := range clients {
				clients[i] = [2]*hmsclient.Client{dial(b, addr, wire.Buffered), dial(b, paddr, wire.Buffered)}
				for _, c := range clients[i] { // warm both paths
					call(b, c, "get_table", args)
				}
			}
			ctx := context.Background()
			d, p := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				pair := clients[i%conns]
				for k := 0; k < 2; k++ {
					which := (i + k) % 2 // alternate which path goes first
					start := time.Now()
					if _, err := pair[which].Call(ctx, "get_table", args); err != nil {
						b.Fatal(err)
					}
					if which == 0 {
						d = append(d, time.Since(start))
					} else {
						p = append(p, time.Since(start))
					}
				}
			}
			b.StopTimer()
			reportAdded(b, d, p)
		})
	}
}

// BenchmarkPassthroughConcurrent64: 64 clients at once, each alternating
// direct and proxied calls. On a 2-core machine that runs the clients, the
// proxy and the metastore, this measures CPU contention as much as the
// proxy; read it with BenchmarkPassthroughAddedLatency.
func BenchmarkPassthroughConcurrent64(b *testing.B) {
	const conns = 64
	_, addr := startDemo(b, wire.Buffered)
	_, paddr := startProxy(b, proxyOpts{up: upstream.Config{MaxConns: conns}}, addr)
	args := hmsclient.Args("demo_db0", "t0")
	direct := make([][]time.Duration, conns)
	proxied := make([][]time.Duration, conns)
	clients := make([][2]*hmsclient.Client, conns)
	for i := range clients {
		clients[i] = [2]*hmsclient.Client{dial(b, addr, wire.Buffered), dial(b, paddr, wire.Buffered)}
		for _, c := range clients[i] {
			call(b, c, "get_table", args)
		}
	}
	per := b.N/conns + 1
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			d, p := make([]time.Duration, 0, per), make([]time.Duration, 0, per)
			for i := 0; i < per; i++ {
				for k := 0; k < 2; k++ {
					which := (i + k) % 2
					t0 := time.Now()
					if _, err := clients[w][which].Call(ctx, "get_table", args); err != nil {
						b.Error(err)
						return
					}
					if which == 0 {
						d = append(d, time.Since(t0))
					} else {
						p = append(p, time.Since(t0))
					}
				}
			}
			direct[w], proxied[w] = d, p
		}(w)
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(2*per*conns)/time.Since(start).Seconds(), "calls/s")
	reportAdded(b, slices.Concat(direct...), slices.Concat(proxied...))
}

func reportAdded(b *testing.B, d, p []time.Duration) {
	d50, p50 := pct(d, 50), pct(p, 50)
	b.ReportMetric(us(d50), "direct-p50-µs")
	b.ReportMetric(us(p50), "proxy-p50-µs")
	b.ReportMetric(us(p50-d50), "added-p50-µs")
	b.ReportMetric(us(pct(p, 99)-pct(d, 99)), "added-p99-µs")
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[(len(d)-1)*p/100]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
