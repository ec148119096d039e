package proxy

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// flushLoopers are the connections of the client that loops cache-wide
// writes in BenchmarkFlushIsolation (and BenchmarkFaultIsolation).
const flushLoopers = 4

// loopFlushes runs flushLoopers connections from the loopback address
// 127.0.0.2 (a client of its own, with its own flush budget) that call,
// back to back until the benchmark ends, a method the proxy does not
// know and fb303 flushCache in turn: each may change anything, so each
// must leave nothing cached from before it. It returns the number of
// calls answered so far.
func loopFlushes(b *testing.B, addr string) *atomic.Int64 {
	var calls atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for range flushLoopers {
		c := clientFrom(b, "127.0.0.2", addr, wire.Buffered)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				method := "made_up_write"
				if i%2 == 1 {
					method = "flushCache"
				}
				if _, err := c.Call(ctx, method, hmsreq.Args()); err != nil {
					return
				}
				calls.Add(1)
			}
		}()
	}
	return &calls
}

// BenchmarkFlushIsolation: a well-behaved client's cached-read p50 on a
// proxy whose other client loops unknown methods and flushCache, against
// the same client on a quiet proxy, and on a proxy with no flush budget
// (every such call empties the cache, as before issue 22), calls
// alternated in one run (goal: within 2x of quiet). Each proxy has a
// demo metastore of its own that takes 5 ms per get_table, as a real
// one does, so a read that the loop turned into a miss shows.
func BenchmarkFlushIsolation(b *testing.B) {
	type env struct {
		name string
		srv  *Server
		c    *hmsclient.Client
		lat  []time.Duration
	}
	start := func(name string, budget FlushBudget, loop bool) *env {
		d, addr := proxytest.Demo(b, proxytest.DemoOptions{Seed: [3]int{2, 2, 10}})
		d.SetDelay("get_table", 5*time.Millisecond)
		caching := newCaching(b, nil)
		caching.Flushes = budget
		s, paddr := serve(b, Config{Cache: caching}, proxytest.Group(b, upstream.Config{}, addr))
		e := &env{name: name, srv: s, c: dial(b, paddr, wire.Buffered)}
		if loop {
			loopFlushes(b, paddr)
		}
		return e
	}
	envs := []*env{
		start("quiet", FlushBudget{}, false),
		start("flush-loop", FlushBudget{}, true),
		start("unbudgeted-flush-loop", FlushBudget{Interval: -1}, true),
	}
	args := hmsclient.Args("demo_db0", "t0")
	for _, e := range envs { // fill the caches
		if _, err := e.c.Call(context.Background(), "get_table", args); err != nil {
			b.Fatal(err)
		}
		e.srv.cache.Store.Wait()
	}
	n := min(b.N, 3000)
	b.ResetTimer()
	for i := 0; i < n; i++ {
		for k := range envs {
			e := envs[(i+k)%len(envs)]
			t0 := time.Now()
			if _, err := e.c.Call(context.Background(), "get_table", args); err != nil {
				b.Fatal(err)
			}
			e.lat = append(e.lat, time.Since(t0))
		}
	}
	b.StopTimer()
	q50 := pct(envs[0].lat, 50)
	for _, e := range envs {
		p50 := pct(e.lat, 50)
		b.ReportMetric(us(p50), e.name+"-p50-µs")
		b.ReportMetric(us(pct(e.lat, 99)), e.name+"-p99-µs")
		if e != envs[0] {
			b.ReportMetric(float64(p50)/float64(max(q50, 1)), e.name+"/quiet")
		}
		if g := e.srv.cache.flushes; g != nil && e != envs[0] {
			st := g.Stats()
			b.ReportMetric(float64(st.Immediate+st.Rounds), e.name+"-flushes")
			b.ReportMetric(float64(st.Coalesced), e.name+"-coalesced-calls")
		}
	}
}
