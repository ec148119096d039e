package coherence

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
)

// BenchmarkPublish measures the bus alone: what one Publish costs in CPU
// (this process; redis-server is another) with concurrent writers.
func BenchmarkPublish(b *testing.B) {
	for _, peers := range []int{0, 1} {
		b.Run(fmt.Sprintf("peers=%d", peers), func(b *testing.B) {
			r := redistest.Start(b)
			cfg := Config{Client: r.Client(), Group: "pb"}
			w := &node{}
			bus, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			w.bus = bus
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { bus.Run(ctx, w) })
			for range peers {
				p := &node{}
				pb, err := New(Config{Client: r.Client(), Group: "pb"})
				if err != nil {
					b.Fatal(err)
				}
				p.bus = pb
				wg.Go(func() { pb.Run(ctx, p) })
			}
			defer func() { cancel(); wg.Wait() }()
			wait.Eventually(b, 10*time.Second, func() bool { return bus.Synced() && len(bus.Peers()) == peers }, "no sync")
			const workers = 32
			batches := bus.Stats().Batches.Load()
			c0 := cpuNow()
			b.ResetTimer()
			var pw sync.WaitGroup
			for g := range workers {
				pw.Go(func() {
					e := []cache.Entity{{Level: cache.LevelTable, Cat: "hive", DB: "demo_db0", Table: "w" + strconv.Itoa(g)}}
					for i := g; i < b.N; i += workers {
						if err := bus.Publish(context.Background(), e); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			pw.Wait()
			b.StopTimer()
			b.ReportMetric(float64((cpuNow()-c0).Microseconds())/float64(b.N), "cpu-µs/publish")
			b.ReportMetric(float64(b.N)/float64(bus.Stats().Batches.Load()-batches), "publishes/append")
		})
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
