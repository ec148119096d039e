package proxy

import (
	"fmt"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/upstream"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// prunedDemo is the demo metastore of the pruning benchmarks, with one
// table of size partitions (24 hours a day), and dayArgs the arguments
// of a planner's filter over day i of it (days wrap around).
func prunedDemo(b *testing.B, size int) (addr string, dayArgs func(i int) []byte) {
	d := demohms.New(demohms.Config{})
	d.Seed(1, 1, size)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go d.Serve(ln)
	b.Cleanup(func() { d.Close() })
	days := size / 24
	return ln.Addr().String(), func(i int) []byte {
		day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i%days)
		return filterArgs("get_partitions_by_filter", fmt.Sprintf("ds = '%s' and (hr) in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)", day.Format("2006-01-02")), -1)
	}
}

// countLocal fails b unless every one of its b.N calls was pruned
// locally: srv's count after the run, less local0 taken before it.
func countLocal(b *testing.B, srv *Server, local0 uint64) {
	if n := srv.PruneStats().Local.Load() - local0; n != uint64(b.N) {
		b.Fatalf("%d of %d calls answered locally", n, b.N)
	}
}

// BenchmarkPrunedFilter: get_partitions_by_filter answered by local
// pruning, side by side with a loopback echo server returning the same
// reply bytes (issue 24's goal: at most 1.5x at p50), for tables of 1,000
// and 10,000 partitions, both read by a raw client (framed, no decoding).
// Every call names another day, so no reply is ever cached whole: each
// one is evaluated over the table's cached name list and assembled from
// per-partition entries.
func BenchmarkPrunedFilter(b *testing.B) {
	for _, size := range []int{1000, 10000} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			addr, argsOf := prunedDemo(b, size)
			days := size / 24
			caching := newCaching(b, nil)
			srv, paddr := startProxy(b, proxyOpts{cache: caching, clientTransport: wire.Framed}, addr)
			direct, proxied := dial(b, addr, wire.Buffered), dialRaw(b, paddr)
			callRaw(b, proxied, "get_partitions_by_filter", filterArgs("get_partitions_by_filter", "hr != -1", -1)) // warm
			caching.Store.Wait()
			for i := 0; i < 3; i++ {
				if !sameButSeqID(callRaw(b, proxied, "get_partitions_by_filter", argsOf(i)), call(b, direct, "get_partitions_by_filter", argsOf(i))) {
					b.Fatal("pruned reply differs from the metastore's")
				}
			}
			m, _ := wire.Parse(call(b, direct, "get_partitions_by_filter", argsOf(0)), wire.Limits{})
			echo := dialRaw(b, rawEcho(b, m.Body()))
			// The arguments of every call, made before the clock starts.
			args := make([][]byte, min(b.N, days))
			for i := range args {
				args[i] = argsOf(i)
			}
			local0 := srv.PruneStats().Local.Load()
			b.ResetTimer()
			lp, le := timeRaw(b, b.N, proxied, echo, "get_partitions_by_filter", func(i int) []byte { return args[i%len(args)] })
			b.StopTimer()
			countLocal(b, srv, local0)
			b.ReportMetric(float64(len(m.Buf)), "reply-bytes")
			reportPair(b, "pruned", "echo", lp, le)
		})
	}
}

// BenchmarkPruneHitPath: one locally pruned get_partitions_by_filter
// handled in-process, from the parsed request to the reply written to
// io.Discard: what BenchmarkPrunedFilter's proxy side costs beyond the
// echo's, without the sockets and the scheduling that make its ratio
// move with the machine's load. Each call names another day of a table
// of 1,000 or 10,000 partitions, as there.
func BenchmarkPruneHitPath(b *testing.B) {
	for _, size := range []int{1000, 10000} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			addr, argsOf := prunedDemo(b, size)
			caching := newCaching(b, nil)
			s, _ := startProxy(b, proxyOpts{cache: caching}, addr)
			c := &clientConn{s: s, w: wire.NewWriter(io.Discard, wire.Buffered), sess: upstream.NoSession}
			msgs := make([]wire.Message, size/24)
			for i := range msgs {
				msgs[i] = callMsg(b, "get_partitions_by_filter", argsOf(i))
			}
			meth := hms.Lookup([]byte("get_partitions_by_filter"))
			warm := callMsg(b, "get_partitions_by_filter", filterArgs("get_partitions_by_filter", "hr != -1", -1))
			if err := c.handle(meth, warm); err != nil {
				b.Fatal(err)
			}
			caching.Store.Wait()
			for _, m := range msgs { // every partition and plan in place
				if err := c.handle(meth, m); err != nil {
					b.Fatal(err)
				}
			}
			local0, memo0 := s.PruneStats().Local.Load(), s.cache.postHits.Load()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := c.handle(meth, msgs[i%len(msgs)]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			countLocal(b, s, local0)
			b.ReportMetric(float64(s.cache.postHits.Load()-memo0)/float64(b.N), "memo-hits/op")
		})
	}
}
