package coherence_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/internal/demohms"
	"github.com/hmsproxy/hmsproxy/internal/hmsclient"
	"github.com/hmsproxy/hmsproxy/internal/hmsreq"
	"github.com/hmsproxy/hmsproxy/internal/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/redistest"
	"github.com/hmsproxy/hmsproxy/internal/wire"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// BenchmarkWriteThroughput (issue 10, item 7) drives concurrent
// alter_table calls through one proxy node without Redis and through one
// with the bus, in alternating rounds of the same size against one demo
// metastore, so both see the same machine. It reports writes per second
// of each, their ratio (goal: >= 0.9), the median write latency of each,
// whose difference is what the bus adds, and the CPU time of the whole
// process per write in each kind of round (peers included).
//
// With peers=N the node with the bus has N peers, in this process, whose
// acknowledgements every write waits for: peers=1 is the smallest real
// fleet and the case the goal is read on; peers=0 isolates the publish,
// peers=2 shows what each further peer costs. writers=32 keeps the plain
// node short of its capacity, so its ratio is mostly the added latency;
// writers=128 keeps both nodes busy, so its ratio is one of capacities.
// -bench.writers replaces both with one count.
func BenchmarkWriteThroughput(b *testing.B) {
	writerCounts := []int{32, 128}
	if *benchWriters > 0 {
		writerCounts = []int{*benchWriters}
	}
	for _, peers := range []int{0, 1, 2} {
		for _, workers := range writerCounts {
			b.Run(fmt.Sprintf("peers=%d/writers=%d", peers, workers), func(b *testing.B) {
				writeThroughput(b, peers, workers)
			})
		}
	}
}

var benchWriters = flag.Int("bench.writers", 0, "concurrent writers of BenchmarkWriteThroughput (0: 32 and 128)")

func writeThroughput(b *testing.B, peers, workers int) {
	r := redistest.Start(b)
	metastore := startDemo(b)
	plain := startNode(b, metastore, nil)
	withBus := startNode(b, metastore, r.Client())
	for range peers {
		startNode(b, metastore, r.Client())
	}
	waitPeers(b, withBus.bus, peers)
	plainC, busC := make([]*hmsclient.Client, workers), make([]*hmsclient.Client, workers)
	for i := range workers {
		plainC[i], busC[i] = dial(b, plain.addr), dial(b, withBus.addr)
		call(b, plainC[i], "create_table", hmsreq.Args(table(i, 0).Field(1)))
	}
	var plainTime, busTime, plainCPU, busCPU time.Duration
	var plainLat, busLat []time.Duration
	v := 0
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(b.N-done, 8*workers) // short rounds: both see the same load
		v++
		c0 := cpuNow()
		d, lat := round(b, plainC, n, v)
		plainCPU += cpuNow() - c0
		plainTime, plainLat = plainTime+d, append(plainLat, lat...)
		v++
		c0 = cpuNow()
		d, lat = round(b, busC, n, v)
		busCPU += cpuNow() - c0
		busTime, busLat = busTime+d, append(busLat, lat...)
		done += n
	}
	b.StopTimer()
	slices.Sort(plainLat)
	slices.Sort(busLat)
	pw, bw := float64(b.N)/plainTime.Seconds(), float64(b.N)/busTime.Seconds()
	b.ReportMetric(pw, "writes/s-alone")
	b.ReportMetric(bw, "writes/s-redis")
	b.ReportMetric(bw/pw, "ratio")
	b.ReportMetric(float64(plainLat[len(plainLat)/2].Microseconds()), "p50-µs-alone")
	b.ReportMetric(float64(busLat[len(busLat)/2].Microseconds()), "p50-µs-redis")
	b.ReportMetric(float64(b.N)/float64(withBus.bus.Stats().Batches.Load()), "writes/append")
	b.ReportMetric(float64(plainCPU.Microseconds())/float64(b.N), "cpu-µs/write-alone")
	b.ReportMetric(float64(busCPU.Microseconds())/float64(b.N), "cpu-µs/write-redis")
	b.ReportMetric(0, "ns/op")
	if n := withBus.bus.Stats().AckTimeouts.Load(); n > 0 {
		b.Errorf("%d writes timed out waiting for a peer", n)
	}
}

// round makes n writes through cs, spread over them, and returns the
// wall time and each write's latency.
func round(b *testing.B, cs []*hmsclient.Client, n, v int) (time.Duration, []time.Duration) {
	var wg sync.WaitGroup
	lat := make([]time.Duration, n)
	start := time.Now()
	for w := range cs {
		wg.Go(func() {
			for i := w; i < n; i += len(cs) {
				at := time.Now()
				args := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "w"+strconv.Itoa(w)), table(w, v*100000+i).Field(3))
				if _, err := cs[w].Call(context.Background(), "alter_table", args); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(at)
			}
		})
	}
	wg.Wait()
	return time.Since(start), lat
}

func table(w, v int) hmsreq.Table {
	name := "w" + strconv.Itoa(w)
	return hmsreq.Table{DB: "demo_db0", Name: name, Owner: "bench", CreateTime: 1700000000,
		SD:     hmsreq.TextSD("file:/tmp/wh/demo_db0.db/"+name, hmsreq.Column{Name: "id", Type: "bigint"}),
		Params: map[string]string{"v": strconv.Itoa(v)}}
}

type benchNode struct {
	addr string
	bus  *coherence.Bus // nil without Redis
}

func startDemo(b *testing.B) string {
	_, addr := proxytest.Demo(b, proxytest.DemoOptions{Config: demohms.Config{Transport: wire.Buffered}, Seed: [3]int{1, 1, 1}})
	return addr
}

// startNode runs a caching proxy node, on the bus when rdb is set.
func startNode(b *testing.B, metastore string, rdb *redis.Client) *benchNode {
	g := proxytest.Group(b, upstream.Config{MaxConns: 64}, metastore)
	caching := &proxy.Caching{Store: proxytest.Store(b, cache.Config{MaxBytes: 16 << 20}), Upstream: "bench"}
	n := &benchNode{}
	if rdb != nil {
		var err error
		if n.bus, err = coherence.New(coherence.Config{Client: rdb, Group: "bench"}); err != nil {
			b.Fatal(err)
		}
		caching.Coherence = n.bus
	}
	srv, err := proxy.New(proxy.Config{Cache: caching}, g)
	if err != nil {
		b.Fatal(err)
	}
	n.addr = proxytest.Serve(b, srv)
	if n.bus != nil {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); n.bus.Run(ctx, srv) }()
		b.Cleanup(func() { cancel(); <-done })
	}
	return n
}

func waitPeers(b *testing.B, bus *coherence.Bus, n int) {
	for deadline := time.Now().Add(10 * time.Second); !bus.Synced() || len(bus.Peers()) != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("bus did not sync")
		}
	}
}

func dial(b *testing.B, addr string) *hmsclient.Client {
	return proxytest.Dial(b, addr, wire.Buffered)
}

func call(b *testing.B, c *hmsclient.Client, method string, args []byte) {
	if _, err := c.Call(context.Background(), method, args); err != nil {
		b.Fatal(err)
	}
}

// cpuNow is the CPU time this process has used.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
