package proxy

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// echoServer answers every call with one fixed reply body under the
// caller's name and seqid: the floor any proxy hit is measured against.
func echoServer(b testing.TB, body []byte) string {
	ln := proxytest.Listen(b)
	proxytest.Echo(b, ln, body)
	return ln.Addr().String()
}

// timePair alternates calls on two clients and returns their latencies;
// dialRaw is a raw-reading client, closed when the benchmark ends.
var (
	timePair = proxytest.SideBySideCalls
	dialRaw  = proxytest.DialRaw
)

func reportPair(b *testing.B, nameA, nameC string, la, lc []time.Duration) {
	a50, c50 := pct(la, 50), pct(lc, 50)
	b.ReportMetric(us(a50), nameA+"-p50-µs")
	b.ReportMetric(us(pct(la, 99)), nameA+"-p99-µs")
	b.ReportMetric(us(c50), nameC+"-p50-µs")
	b.ReportMetric(us(pct(lc, 99)), nameC+"-p99-µs")
	b.ReportMetric(float64(a50)/float64(c50), nameA+"/"+nameC+"-p50")
}

// rawEcho is echoServer on framed transport, for raw clients: the floor
// of the benchmarks that read replies raw.
func rawEcho(b testing.TB, body []byte) string {
	ln := proxytest.Listen(b)
	proxytest.EchoOn(b, ln, wire.Framed, body)
	return ln.Addr().String()
}

// callRaw makes one call on a raw client and returns a copy of the
// reply message; the benchmark fails on a transport error.
func callRaw(b testing.TB, r *hmsclient.Raw, method string, args []byte) []byte {
	b.Helper()
	msg, _, err := r.Call(context.Background(), method, args)
	if err != nil {
		b.Fatalf("%s: %v", method, err)
	}
	return bytes.Clone(msg)
}

// timeRaw alternates n calls each on two raw clients (which goes first
// alternating too), the arguments of call i given by args, and returns
// their latencies. Neither client decodes a reply: both sides cost the
// client the same, a read of the bytes.
func timeRaw(b *testing.B, n int, a, c *hmsclient.Raw, method string, args func(i int) []byte) (la, lc []time.Duration) {
	ctx := context.Background()
	on := func(cl *hmsclient.Raw) func(int) error {
		return func(i int) error { _, _, err := cl.Call(ctx, method, args(i)); return err }
	}
	la, lc, err := proxytest.SideBySide(n, on(a), on(c))
	if err != nil {
		b.Fatal(err)
	}
	return la, lc
}

// BenchmarkCachedGetTable: a cached get_table through the proxy, side by
// side with a loopback echo server returning the same bytes (goal: at
// most 1.5x at p50) and with the demo metastore directly.
func BenchmarkCachedGetTable(b *testing.B) {
	_, addr := startDemo(b, wire.Buffered)
	caching := newCaching(b, nil)
	_, paddr := startProxy(b, proxyOpts{cache: caching}, addr)
	args := hmsclient.Args("demo_db0", "t0")
	direct := dial(b, addr, wire.Buffered)
	reply := call(b, direct, "get_table", args)
	m, _ := wire.Parse(reply, wire.Limits{})
	echo := dial(b, echoServer(b, m.Body()), wire.Buffered)
	proxied := dial(b, paddr, wire.Buffered)
	call(b, proxied, "get_table", args)
	caching.Store.Wait()

	b.Run("vs-echo", func(b *testing.B) {
		lp, le := timePair(b, b.N, proxied, echo, "get_table", args)
		reportPair(b, "proxy-hit", "echo", lp, le)
	})
	b.Run("vs-direct", func(b *testing.B) {
		ld, lp := timePair(b, b.N, direct, proxied, "get_table", args)
		reportPair(b, "direct", "proxy-hit", ld, lp)
	})
}

// BenchmarkCachedGetTableShadow: the cost of shadow validation at its
// default rate (0.1 % of hits, at most 20 a second), as cached get_table
// latency through two proxies in front of one metastore, one with shadow
// validation off and one with the default, calls alternating in one run.
func BenchmarkCachedGetTableShadow(b *testing.B) {
	_, addr := startDemo(b, wire.Buffered)
	off := newCaching(b, nil) // Rate -1
	on := newCaching(b, nil)
	on.Shadow = Shadow{}
	offSrv, offAddr := startProxy(b, proxyOpts{cache: off}, addr)
	onSrv, onAddr := startProxy(b, proxyOpts{cache: on}, addr)
	if offSrv.ShadowStats() != nil || onSrv.ShadowStats() == nil {
		b.Fatal("shadow validation not configured as meant")
	}
	args := hmsclient.Args("demo_db0", "t0")
	cOff, cOn := dial(b, offAddr, wire.Buffered), dial(b, onAddr, wire.Buffered)
	call(b, cOff, "get_table", args)
	call(b, cOn, "get_table", args)
	off.Store.Wait()
	on.Store.Wait()
	b.ResetTimer()
	lOff, lOn := timePair(b, b.N, cOff, cOn, "get_table", args)
	b.StopTimer()
	reportPair(b, "shadow-off", "shadow-default", lOff, lOn)
	st := onSrv.ShadowStats()
	b.ReportMetric(float64(st.Checks()), "shadow-checks")
	b.ReportMetric(float64(st.Mismatches()), "shadow-mismatches")
}

// BenchmarkCachedByNames1000: get_partitions_by_names of 1,000
// partitions, all cached, side by side with the demo metastore (goal
// >= 20x at p50 against a real metastore).
func BenchmarkCachedByNames1000(b *testing.B) {
	d := demohms.New(demohms.Config{})
	d.Seed(1, 1, 1000)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go d.Serve(ln)
	b.Cleanup(func() { d.Close() })
	addr := ln.Addr().String()
	caching := newCaching(b, nil)
	_, paddr := startProxy(b, proxyOpts{cache: caching}, addr)
	var names []string
	for i := 0; i < 1000; i++ {
		names = append(names, partName(i))
	}
	args := byNamesReq("get_partitions_by_names", names...)
	direct, proxied := dial(b, addr, wire.Buffered), dial(b, paddr, wire.Buffered)
	call(b, proxied, "get_partitions_by_names", args)
	caching.Store.Wait()
	if !sameButSeqID(call(b, proxied, "get_partitions_by_names", args), call(b, direct, "get_partitions_by_names", args)) {
		b.Fatal("cached batch differs from the metastore's reply")
	}
	b.ResetTimer()
	// Each call moves about a megabyte: a few hundred pairs give stable
	// percentiles.
	ld, lp := timePair(b, min(b.N, 300), direct, proxied, "get_partitions_by_names", args)
	reportPair(b, "direct", "proxy-hit", ld, lp)
}

// BenchmarkThroughput64: calls per second over 64 connections, cached
// get_table through the proxy versus a 64-connection echo of the same
// reply bytes (issue 24's goal: at least 0.95x), both read by raw clients
// (framed, no decoding), in 16 alternating rounds of one run so both see
// the same machine (with 4, a burst of other load landing in one round
// moved the ratio from 0.85 to 1.05 between runs).
func BenchmarkThroughput64(b *testing.B) {
	const conns, rounds = 64, 16
	_, addr := startDemo(b, wire.Buffered)
	caching := newCaching(b, nil)
	_, paddr := startProxy(b, proxyOpts{cache: caching, clientTransport: wire.Framed}, addr)
	args := hmsclient.Args("demo_db0", "t0")
	reply := call(b, dial(b, addr, wire.Buffered), "get_table", args)
	m, _ := wire.Parse(reply, wire.Limits{})
	eaddr := rawEcho(b, m.Body())
	clients := func(target string) []*hmsclient.Raw {
		cs := make([]*hmsclient.Raw, conns)
		for i := range cs {
			cs[i] = dialRaw(b, target)
			if got := callRaw(b, cs[i], "get_table", args); !sameButSeqID(got, reply) {
				b.Fatal("a reply differs from the metastore's")
			}
		}
		return cs
	}
	proxied, echo := clients(paddr), clients(eaddr)
	caching.Store.Wait()
	hits := caching.Store.Stats(hms.KindTable).Hits.Load()
	// b.N calls in all, spread over the connections and rounds: so
	// -benchtime sets the run's length (a floor here made it ignore it).
	per := max(b.N/conns/rounds, 1)
	run := func(cs []*hmsclient.Raw) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Go(func() {
				for i := 0; i < per; i++ {
					if _, _, err := c.Call(context.Background(), "get_table", args); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	b.ResetTimer()
	var tp, te time.Duration
	for r := 0; r < rounds; r++ {
		if r%2 == 0 {
			tp += run(proxied)
			te += run(echo)
		} else {
			te += run(echo)
			tp += run(proxied)
		}
	}
	b.StopTimer()
	if n := caching.Store.Stats(hms.KindTable).Hits.Load() - hits; n != uint64(rounds*conns*per) {
		b.Fatalf("%d hits; want %d", n, rounds*conns*per)
	}
	calls := float64(rounds * conns * per)
	b.ReportMetric(calls/tp.Seconds(), "proxy-hit-calls/s")
	b.ReportMetric(calls/te.Seconds(), "echo-calls/s")
	b.ReportMetric(te.Seconds()/tp.Seconds(), "proxy/echo")
	b.ReportMetric(float64(len(reply)), "reply-bytes")
}

// BenchmarkMemoryPerPartition: heap held per cached partition against the
// partition's own reply bytes (goal <= 1.15 x bytes + 100). It is the
// slope between two fills, so the store's fixed costs (its counters, its
// buffers, this process's other garbage) do not count.
func BenchmarkMemoryPerPartition(b *testing.B) {
	const small, n = 2000, 10000
	d := demohms.New(demohms.Config{})
	d.Seed(1, 1, n)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go d.Serve(ln)
	b.Cleanup(func() { d.Close() })
	caching := newCaching(b, nil)
	_, paddr := startProxy(b, proxyOpts{cache: caching}, ln.Addr().String())
	c := dial(b, paddr, wire.Buffered)
	direct := dial(b, ln.Addr().String(), wire.Buffered)
	var names []string
	for i := 0; i < n; i++ {
		names = append(names, partName(i))
	}
	live := func() uint64 { return liveHeap(caching) }
	fill := func(lo, hi int) {
		for ; lo < hi; lo += 500 {
			call(b, c, "get_partitions_by_names", byNamesReq("get_partitions_by_names", names[lo:lo+500]...))
			caching.Store.Wait()
		}
	}
	st := caching.Store.Stats(hms.KindPartitions)
	fill(0, small)
	heapSmall, entriesSmall := live(), st.Entries.Load()
	fill(small, n)
	heapAll, entriesAll := live(), st.Entries.Load()
	if entriesAll < n*9/10 {
		b.Fatalf("only %d of %d partitions admitted (admitted %d rejected %d evicted %d stale %d)", entriesAll, n, st.Admitted.Load(), st.Rejected.Load(), st.Evicted.Load(), st.Stale.Load())
	}
	// What the metastore sends per partition: a reply of 500, less its
	// few bytes of framing, divided by 500.
	m, err := direct.Call(context.Background(), "get_partitions_by_names", byNamesReq("get_partitions_by_names", names[:500]...))
	if err != nil {
		b.Fatal(err)
	}
	partBytes := float64(len(m.Body())-8) / 500
	perPart := float64(int64(heapAll)-int64(heapSmall)) / float64(entriesAll-entriesSmall)
	b.ReportMetric(partBytes, "reply-B/partition")
	b.ReportMetric(perPart, "heap-B/partition")
	b.ReportMetric(float64(st.Bytes.Load())/float64(entriesAll), "entry-B/partition")
	b.ReportMetric((perPart-100)/partBytes, "(heap-100)/reply")
}
