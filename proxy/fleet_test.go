package proxy

import (
	"context"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// fleetLoad is what one run of fleetReadYourWrites saw.
type fleetLoad struct {
	writes, reads int64
	// stale counts reads older than a write answered before they began;
	// staleBeyond those older than one answered a heartbeat timeout
	// before they began.
	stale, staleBeyond int64
	hits               uint64
}

// fleetReadYourWrites writes one table's parameter through the first
// writers nodes in turn while readers read it through random nodes, and
// checks every read against the writes answered before it began. A node
// that writes drops its own entry; one that does not keeps what it
// cached until the bus tells it. mid, if set, runs once when half the
// writes are done, while the reads go on; it makes further writes with
// write (each one of the total), and the writer resumes when it returns.
func fleetReadYourWrites(t *testing.T, nodes []*clusterNode, writers int, table string, writes int, timeout time.Duration, mid func(write func())) fleetLoad {
	t.Helper()
	setup := dial(t, nodes[0].addr, wire.Buffered)
	call(t, setup, "create_table", tableArgs("demo_db0", table))
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, table))
	type done struct {
		v  int64
		at time.Time
	}
	var mu sync.Mutex // guards history
	var history []done
	floorAt := func(t0 time.Time) int64 {
		mu.Lock()
		defer mu.Unlock()
		i := sort.Search(len(history), func(i int) bool { return !history[i].at.Before(t0) })
		if i == 0 {
			return 0
		}
		return history[i-1].v
	}
	var res fleetLoad
	var reads, stale, beyond, written atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // the writes bound the run; this only ends a stuck one
	defer cancel()
	// Each call has a bound of its own: a stuck one fails the test long
	// before the package's timeout would.
	callWithin := func(c *hmsclient.Client, method string, args []byte) (wire.Message, error) {
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		defer ccancel()
		return c.Call(cctx, method, args)
	}
	writing := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(writing)
		cs := make([]*hmsclient.Client, writers)
		for i, nd := range nodes[:writers] {
			cs[i] = dial(t, nd.addr, wire.Buffered)
		}
		v := int64(0)
		write := func() {
			if v == int64(writes) {
				return
			}
			v++
			if _, err := callWithin(cs[v%int64(len(cs))], "alter_table", alterV(table, v)); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			history = append(history, done{v, time.Now()})
			mu.Unlock()
			written.Add(1)
		}
		for v < int64(writes) && ctx.Err() == nil {
			if v == int64(writes/2) && mid != nil {
				mid(write)
			}
			write()
		}
	})
	for rd := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(rd), 7))
			cs := make([]*hmsclient.Client, len(nodes))
			for i, nd := range nodes {
				cs[i] = dial(t, nd.addr, wire.Buffered)
			}
			for {
				select {
				case <-writing:
					return
				default:
				}
				start := time.Now()
				floor, floorOld := floorAt(start), floorAt(start.Add(-timeout))
				m, err := callWithin(cs[rng.IntN(len(cs))], "get_table", get)
				if err != nil {
					t.Error(err)
					return
				}
				got := versionOf(t, m.Buf)
				if got < floor {
					stale.Add(1)
				}
				if got < floorOld {
					beyond.Add(1)
				}
				reads.Add(1)
				time.Sleep(200 * time.Microsecond) // paced: the nodes' timers must run on a small machine
			}
		})
	}
	wg.Wait()
	res.writes, res.reads, res.stale, res.staleBeyond = written.Load(), reads.Load(), stale.Load(), beyond.Load()
	for _, nd := range nodes {
		res.hits += nd.st.Stats(hms.KindTable).Hits.Load()
	}
	return res
}

// checkFleetLoad fails the test on a stale read or a run that did not
// exercise the cache.
func checkFleetLoad(t *testing.T, res fleetLoad, writes int) {
	t.Helper()
	if res.writes != int64(writes) {
		t.Fatalf("%d of %d writes done", res.writes, writes)
	}
	if res.stale != 0 || res.staleBeyond != 0 {
		t.Fatalf("%d reads older than a write answered before they began, %d older than one answered a heartbeat timeout before", res.stale, res.staleBeyond)
	}
	if res.hits == 0 {
		t.Fatal("no cache hits: the run did not exercise the cache")
	}
}

// TestFleetSentinelFailover (issue 15, acceptance): three nodes on a
// Sentinel-managed Redis (three sentinels, a primary, a replica) under a
// write and read load; the primary is killed half-way. No read is stale,
// and the time until every node serves its cache again is reported.
func TestFleetSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five Redis processes")
	}
	s := redistest.StartSentinel(t, time.Second, nil)
	_, metastore := startDemo(t, wire.Buffered)
	const heartbeat, timeout = 100 * time.Millisecond, 300 * time.Millisecond
	// Hits each node serves after the failover before writes resume.
	const recoveredHits = 50
	nodes := startCluster(t, nil, 3, metastore, clusterOpts{heartbeat: heartbeat, timeout: timeout,
		client: func() redis.UniversalClient { return s.Client() }})
	var killed, promoted, recovered time.Time
	var lost []uint64
	var outageWrites int
	res := fleetReadYourWrites(t, nodes, 2, "sentinel", 3000, timeout, func(write func()) {
		for _, nd := range nodes {
			lost = append(lost, nd.bus.Stats().Loss("reconnect")+nd.bus.Stats().Loss("gap")+nd.bus.Stats().Loss("redis-restart"))
		}
		killed = time.Now()
		s.Primary.Stop()
		// Writes while the primary is down, which no node can publish;
		// then none until the fleet is back, and a pause: a node that
		// did not drop what it cached before would serve it now.
		for time.Since(killed) < time.Second {
			write()
			outageWrites++
		}
		promoted = killed.Add(s.WaitFailover(killed, 30*time.Second))
		eventually(t, "every node in sync after the failover", func() bool {
			for _, nd := range nodes {
				if !nd.bus.Synced() {
					return false
				}
			}
			return true
		})
		recovered = time.Now()
		// No write until every node served hits again: one that did not
		// drop what it cached before the failover would serve it stale.
		served := make([]uint64, len(nodes))
		for i, nd := range nodes {
			served[i] = nd.st.Stats(hms.KindTable).Hits.Load()
		}
		eventually(t, "cache hits on every node after the failover", func() bool {
			for i, nd := range nodes {
				if nd.st.Stats(hms.KindTable).Hits.Load() < served[i]+recoveredHits {
					return false
				}
			}
			return true
		})
	})
	t.Logf("%d writes, %d reads, %d cache hits, %d stale; primary killed at write 1500, %d writes in the next second: sentinels promoted the replica after %v, every node served its cache again after %v",
		res.writes, res.reads, res.hits, res.stale, outageWrites, promoted.Sub(killed).Round(time.Millisecond), recovered.Sub(killed).Round(time.Millisecond))
	for i, nd := range nodes {
		st := nd.bus.Stats()
		t.Logf("node %d flushes: reconnect %d, gap %d, redis-restart %d", i,
			st.Loss("reconnect"), st.Loss("gap"), st.Loss("redis-restart"))
	}
	checkFleetLoad(t, res, 3000)
	for i, nd := range nodes {
		st := nd.bus.Stats()
		if st.Loss("reconnect")+st.Loss("gap")+st.Loss("redis-restart") == lost[i] {
			t.Fatalf("node %d did not flush over the failover", i)
		}
	}
	if addr := s.PrimaryAddr(); addr != s.Replica.Addr {
		t.Fatalf("the primary is %s, not the promoted replica", addr)
	}
}

// TestFleetRedisCluster (issue 15, acceptance): the three-node
// read-your-writes run on a Redis Cluster of three primaries.
func TestFleetRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartCluster(t, 3)
	_, metastore := startDemo(t, wire.Buffered)
	const timeout = 300 * time.Millisecond
	nodes := startCluster(t, nil, 3, metastore, clusterOpts{timeout: timeout,
		client: func() redis.UniversalClient { return cl.Client() }})
	res := fleetReadYourWrites(t, nodes, 2, "rcluster", 2000, timeout, nil)
	t.Logf("%d writes, %d reads, %d cache hits, %d stale", res.writes, res.reads, res.hits, res.stale)
	checkFleetLoad(t, res, 2000)
	checkAcks(t, nodes, 2000)
}

// TestFleetMixedFormats (issue 15, acceptance): a node writing the
// previous release's bus format shares the bus with two writing the
// current one, under the read-your-writes load: no stale read, and no
// node refuses another's entries.
func TestFleetMixedFormats(t *testing.T) {
	r := redistest.Start(t)
	_, metastore := startDemo(t, wire.Buffered)
	const timeout = 300 * time.Millisecond
	nodes := startCluster(t, r, 3, metastore, clusterOpts{timeout: timeout,
		formats: []int{coherence.FormatVersion - 1, coherence.FormatVersion, coherence.FormatVersion}})
	res := fleetReadYourWrites(t, nodes, 2, "mixed", 1500, timeout, nil)
	t.Logf("%d writes, %d reads, %d cache hits, %d stale", res.writes, res.reads, res.hits, res.stale)
	checkFleetLoad(t, res, 1500)
	for i, nd := range nodes {
		st := nd.bus.Stats()
		if n := st.Loss("unreadable") + st.Loss("undecodable"); n != 0 {
			t.Fatalf("node %d refused %d entries", i, n)
		}
	}
	checkAcks(t, nodes, 1500)
}

// checkAcks fails the test when the peers' acknowledgements did not
// flow: more than 1% of the writes answered at the heartbeat timeout
// (a few may be, on a loaded machine).
func checkAcks(t *testing.T, nodes []*clusterNode, writes int) {
	t.Helper()
	var n uint64
	for _, nd := range nodes {
		n += nd.bus.Stats().AckTimeouts.Load()
	}
	if n > uint64(writes/100) {
		t.Fatalf("%d of %d writes answered without every peer's acknowledgement", n, writes)
	}
}
