package proxy

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// batchCallsForwarder notes the names of every batch read of one kind
// (partitions by name, or table objects) that reaches the metastore, and
// can rewrite their replies.
type batchCallsForwarder struct {
	of hms.BatchOf
	up Forwarder
	// rewrite, set before the first call, rewrites each reply body;
	// nil: replies as the metastore sent them.
	rewrite func(body []byte) []byte
	mu      sync.Mutex // guards calls
	calls   [][]string
}

func (f *batchCallsForwarder) Do(ctx context.Context, c upstream.Call, sink upstream.ReplySink) error {
	m := hms.Lookup(c.Msg.Name())
	if m == nil || m.Batch == nil || m.Batch.Of != f.of {
		return f.up.Do(ctx, c, sink)
	}
	names := []string{}
	hms.Walk(c.Msg.Body(), append(slices.Clone(m.Batch.Names), hms.Each), func(typ byte, v []byte) bool {
		names = append(names, string(v))
		return true
	})
	f.mu.Lock()
	f.calls = append(f.calls, names)
	rw := f.rewrite
	f.mu.Unlock()
	if rw != nil {
		sink = rewriteSink{sink, rw}
	}
	return f.up.Do(ctx, c, sink)
}

func (f *batchCallsForwarder) take() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

func startRecordingProxy(t *testing.T, caching *Caching, addr string) (string, *batchCallsForwarder) {
	rec := &batchCallsForwarder{of: hms.BatchPartitions}
	return startProxyOver(t, caching, addr, func(up Forwarder) Forwarder { rec.up = up; return rec }), rec
}

// partName is the name of the demo's seeded partition i.
func partName(i int) string {
	day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i/24)
	return fmt.Sprintf("ds=%s/hr=%d", day.Format("2006-01-02"), i%24)
}

func byNamesReq(method string, names ...string) []byte {
	if method == "get_partitions_by_names_req" {
		return hmsreq.Req(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Strings(3, names...))
	}
	return hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Strings(3, names...))
}

// TestBatchPerEntry: by-names calls take hits per partition, fetch only
// the misses in chunks, and answer exactly as the metastore does.
func TestBatchPerEntry(t *testing.T) {
	for _, method := range []string{"get_partitions_by_names", "get_partitions_by_names_req"} {
		t.Run(method, func(t *testing.T) {
			_, addr := startDemo(t, wire.Buffered)
			caching := newCaching(t, nil)
			caching.BatchChunk = 3
			paddr, rec := startRecordingProxy(t, caching, addr)
			direct := dial(t, addr, wire.Buffered)
			c := dial(t, paddr, wire.Buffered)
			check := func(step string, names ...string) {
				t.Helper()
				args := byNamesReq(method, names...)
				if got, want := call(t, c, method, args), call(t, direct, method, args); !sameButSeqID(got, want) {
					t.Fatalf("%s: reply differs from the metastore's\n got %x\nwant %x", step, got, want)
				}
				caching.Store.Wait()
			}
			check("warm two", partName(5), partName(2))
			if got := rec.take(); len(got) != 1 || len(got[0]) != 2 {
				t.Fatalf("first call: upstream calls %v; want one with both names", got)
			}
			// Two cached, five new, one missing, one duplicate, out of order.
			check("mixed", partName(9), partName(2), partName(7), "ds=1999-01-01/hr=0", partName(5), partName(8), partName(6), partName(9), partName(10))
			got := rec.take()
			var asked []string
			for _, call := range got {
				if len(call) > 3 {
					t.Fatalf("chunk of %d names; want at most 3", len(call))
				}
				asked = append(asked, call...)
			}
			slices.Sort(asked)
			want := []string{"ds=1999-01-01/hr=0", partName(10), partName(6), partName(7), partName(8), partName(9)}
			slices.Sort(want)
			if !slices.Equal(asked, want) {
				t.Fatalf("upstream asked for %v; want only the misses %v", asked, want)
			}
			if len(got) != 2 {
				t.Fatalf("%d upstream calls for 6 misses in chunks of 3; want 2", len(got))
			}
			check("all cached", partName(10), partName(2), partName(9))
			if got := rec.take(); len(got) != 0 {
				t.Fatalf("all-cached call went upstream: %v", got)
			}
			// A partition write invalidates the table's entries.
			call(t, c, "drop_partition_by_name", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Str(3, partName(2)), hmsreq.Bool(4, true)))
			check("after drop", partName(10), partName(2), partName(9))
			if got := rec.take(); len(got) != 1 || len(got[0]) != 3 {
				t.Fatalf("after a partition write: upstream calls %v; want one with all three names", got)
			}
		})
	}
}

// refreshOfDueHits reads args of method once through a proxy on a fake
// clock, moves the clock past kind's refresh time and reads it five times
// more. It fails the test unless those hits made one refresh job, and
// returns the names of each batch read of that sort the refresh sent
// upstream.
func refreshOfDueHits(t *testing.T, of hms.BatchOf, kind hms.Kind, method string, args []byte) [][]string {
	t.Helper()
	_, addr := startDemo(t, wire.Buffered)
	clock := newClock()
	caching := newCaching(t, clock)
	rec := &batchCallsForwarder{of: of}
	var srv *Server
	paddr := startProxyOver(t, caching, addr, func(up Forwarder) Forwarder { rec.up = up; return rec }, func(s *Server) { srv = s })
	c := dial(t, paddr, wire.Buffered)
	call(t, c, method, args)
	caching.Store.Wait()
	rec.take()
	clock.Advance(caching.Store.Policy(kind).RefreshAfter + time.Second)
	for i := 0; i < 5; i++ {
		call(t, c, method, args)
	}
	if n := refreshesSettled(t, srv); n != 1 {
		t.Fatalf("%d refresh jobs for 5 hits on a due %s entry; want 1", n, kind)
	}
	return rec.take()
}

// TestBatchRefreshIsBulk: refreshing per-partition entries takes one
// upstream call per request, never one per partition.
func TestBatchRefreshIsBulk(t *testing.T) {
	var names []string
	for i := 0; i < 20; i++ { // every partition of the seeded table
		names = append(names, partName(i))
	}
	args := byNamesReq("get_partitions_by_names", names...)
	got := refreshOfDueHits(t, hms.BatchPartitions, hms.KindPartitions, "get_partitions_by_names", args)
	if len(got) != 1 || len(got[0]) != 20 {
		lens := []int{}
		for _, g := range got {
			lens = append(lens, len(g))
		}
		t.Fatalf("refresh made calls of sizes %v; want one call of 20", lens)
	}
}

// dictForwarder adds a result field the proxy does not know to every
// get_partitions_by_names_req reply, as a 4.0 server that sends a
// dictionary would.
type dictForwarder struct {
	up    Forwarder
	on    *atomic.Bool
	calls *atomic.Int64 // by-names calls made
}

type dictSink struct{ to upstream.ReplySink }

func (s dictSink) Reply(m wire.Message) error {
	body := m.Body()
	if m.Type != wire.Reply || len(body) < 2 {
		return s.to.Reply(m)
	}
	// body ends with the inner STOP and the outer STOP.
	out := append([]byte(nil), m.Header()...)
	out = append(out, body[:len(body)-2]...)
	e := wire.Encoder{B: out}
	e.I32Field(2, 7)
	e.Stop()
	e.Stop()
	mm, err := wire.Parse(e.B, wire.Limits{})
	if err != nil {
		return err
	}
	return s.to.Reply(mm)
}

func (f dictForwarder) Do(ctx context.Context, c upstream.Call, sink upstream.ReplySink) error {
	if string(c.Msg.Name()) == "get_partitions_by_names_req" {
		f.calls.Add(1)
		if f.on.Load() {
			sink = dictSink{sink}
		}
	}
	return f.up.Do(ctx, c, sink)
}

// TestBatchUnknownReplyForwardsWhole: when a chunk's success reply has a
// shape the proxy cannot take apart, the client gets the metastore's
// answer to its whole request, never the chunk's answer alone; and that
// answer is cached whole, so the same request again is a hit (issue 24:
// it was forwarded uncached, a miss on every repeat).
func TestBatchUnknownReplyForwardsWhole(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	g, err := upstream.New(upstream.Config{URIs: []string{"thrift://" + addr}, HealthInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	caching := newCaching(t, nil)
	on := new(atomic.Bool)
	calls := new(atomic.Int64)
	s, err := New(Config{Cache: caching, Logger: testLogger(t)}, dictForwarder{g, on, calls})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go s.Serve(ln)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	c := dial(t, ln.Addr().String(), wire.Buffered)
	call(t, c, "get_partitions_by_names_req", byNamesReq("get_partitions_by_names_req", partName(1)))
	caching.Store.Wait()
	on.Store(true) // partition 1 is cached; partition 2 comes in a reply of unknown shape
	got := call(t, c, "get_partitions_by_names_req", byNamesReq("get_partitions_by_names_req", partName(1), partName(2)))
	for _, want := range []string{"2024-01-01\x00\x00\x00\x011", "2024-01-01\x00\x00\x00\x012"} {
		if !strings.Contains(string(got), want) {
			t.Fatalf("reply lacks partition %q: only part of the request was answered", want)
		}
	}
	caching.Store.Wait()
	hits, made := s.Stats().Method("get_partitions_by_names_req", OutcomeHit), calls.Load()
	if again := call(t, c, "get_partitions_by_names_req", byNamesReq("get_partitions_by_names_req", partName(1), partName(2))); !sameButSeqID(again, got) {
		t.Fatalf("the same request again:\n got %x\nwant %x", again, got)
	}
	call(t, c, "get_all_databases", hmsreq.Args()) // counted once the next call is read
	if s.Stats().Method("get_partitions_by_names_req", OutcomeHit) != hits+1 || calls.Load() != made {
		t.Fatalf("the same request again: hits +%d, metastore calls +%d; want a hit and no call",
			s.Stats().Method("get_partitions_by_names_req", OutcomeHit)-hits, calls.Load()-made)
	}
}

// callAsync makes one call on a connection of its own from another
// goroutine; the reply (nil after an error, reported) comes on the
// channel.
func callAsync(t *testing.T, addr, method string, args []byte) <-chan []byte {
	t.Helper()
	c := dial(t, addr, wire.Buffered)
	ctx := ctxT(t)
	out := make(chan []byte, 1)
	go func() {
		m, err := c.Call(ctx, method, args)
		if err != nil {
			t.Errorf("%s: %v", method, err)
			out <- nil
			return
		}
		out <- append([]byte(nil), m.Buf...)
	}()
	return out
}

// startGatedBatchProxy runs a caching proxy whose by-names calls are
// recorded, then held at a gate until released; joined receives the
// number of entries each batch waits for instead of loading them.
func startGatedBatchProxy(t *testing.T, caching *Caching, addr string) (paddr string, rec *batchCallsForwarder, gate *gatedForwarder, joined chan int) {
	t.Helper()
	gate = newGate("get_partitions_by_names")
	rec = &batchCallsForwarder{of: hms.BatchPartitions, up: gate}
	paddr, joined = startJoinWatchingProxy(t, caching, addr, func(up Forwarder) Forwarder { gate.up = up; return rec })
	return paddr, rec, gate, joined
}

// startJoinWatchingProxy is startProxyOver with the server's joinHook
// sending on joined.
func startJoinWatchingProxy(t *testing.T, caching *Caching, addr string, wrap func(Forwarder) Forwarder) (string, chan int) {
	t.Helper()
	joined := make(chan int, 16)
	paddr := startProxyOver(t, caching, addr, wrap, func(s *Server) { s.cache.joinHook = func(n int) { joined <- n } })
	return paddr, joined
}

// TestBatchMissesCoalesce: concurrent by-names batches that miss the same
// partitions share one load per partition (issue 10, item 8): each
// partition is asked of the metastore once, a batch whose misses are all
// being loaded by another asks nothing, and every client gets the
// metastore's own answer.
func TestBatchMissesCoalesce(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	caching := newCaching(t, nil)
	paddr, rec, gate, joined := startGatedBatchProxy(t, caching, addr)
	direct := dial(t, addr, wire.Buffered)

	shared := make([]string, 10)
	for i := range shared {
		shared[i] = partName(i)
	}
	reqs := [][]string{
		append(slices.Clone(shared), partName(10)), // A: loads first, held at the gate
		append(slices.Clone(shared), partName(11)), // B, C: share A's, load their own
		append(slices.Clone(shared), partName(12)),
		slices.Clone(shared), // D: everything it misses is being loaded
	}
	replies := make([]<-chan []byte, len(reqs))
	send := func(i int) {
		replies[i] = callAsync(t, paddr, "get_partitions_by_names", byNamesReq("get_partitions_by_names", reqs[i]...))
	}
	send(0)
	held := []chan struct{}{gate.held(t, "batch A's load")}
	for i := 1; i < len(reqs); i++ {
		send(i)
	}
	// Each later batch either joins A's loads or goes upstream on its own.
	joins := 0
	timeout := time.After(10 * time.Second)
	for !(joins == 3 && len(held) == 3) && len(held) < 4 {
		select {
		case release := <-gate.arrived:
			held = append(held, release)
		case <-joined:
			joins++
		case <-timeout:
			t.Fatalf("batches stuck: %d upstream calls held, %d joined", len(held), joins)
		}
	}
	for _, release := range held {
		close(release)
	}
	for i := range reqs {
		want := call(t, direct, "get_partitions_by_names", byNamesReq("get_partitions_by_names", reqs[i]...))
		if got := proxytest.Recv(t, replies[i], fmt.Sprintf("batch %d's reply", i)); !sameButSeqID(got, want) {
			t.Errorf("batch %d: reply differs from the metastore's", i)
		}
	}
	asked := map[string]int{}
	calls := rec.take()
	for _, call := range calls {
		for _, name := range call {
			asked[name]++
		}
	}
	for name, n := range asked {
		if n != 1 {
			t.Errorf("partition %s asked of the metastore %d times; want once", name, n)
		}
	}
	if len(calls) != 3 || len(asked) != 13 {
		t.Errorf("%d upstream calls for %d partitions: %v; want 3 calls (A, B, C) for 13", len(calls), len(asked), calls)
	}
}

// TestBatchMissAfterWriteLoadsAgain: a batch that misses after a write's
// invalidation never joins a load that began before it (promise 3), and
// that load's stale partitions are not stored.
func TestBatchMissAfterWriteLoadsAgain(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	caching := newCaching(t, nil)
	paddr, _, gate, joined := startGatedBatchProxy(t, caching, addr)
	names := []string{partName(0), partName(1), partName(2), partName(3)}
	args := byNamesReq("get_partitions_by_names", names...)
	hasPart3 := func(reply []byte) bool {
		return strings.Contains(string(reply), "2024-01-01\x00\x00\x00\x013")
	}

	before := callAsync(t, paddr, "get_partitions_by_names", args)
	loadBefore := gate.held(t, "the load of the batch before the write") // it read all four partitions
	w := dial(t, paddr, wire.Buffered)
	call(t, w, "drop_partition_by_name", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Str(3, partName(3)), hmsreq.Bool(4, true)))

	after := callAsync(t, paddr, "get_partitions_by_names", args)
	var loadAfter chan struct{}
	select {
	case loadAfter = <-gate.arrived: // its own load
	case n := <-joined:
		t.Fatalf("a batch after the write joined %d loads from before it", n)
	case <-time.After(10 * time.Second):
		t.Fatal("the batch after the write neither loaded nor joined")
	}
	close(loadBefore)
	close(loadAfter)
	if !hasPart3(proxytest.Recv(t, before, "the reply to the batch before the write")) {
		t.Fatal("the batch before the write lacks partition 3: the test did not race the write")
	}
	if hasPart3(proxytest.Recv(t, after, "the reply to the batch after the write")) {
		t.Fatal("the batch after the write got the dropped partition")
	}
	caching.Store.Wait()
	go func() { // a third read may load again: let it through
		select {
		case release := <-gate.arrived:
			close(release)
		case <-time.After(5 * time.Second):
		}
	}()
	if hasPart3(call(t, w, "get_partitions_by_names", args)) {
		t.Fatal("the load from before the write was stored (stale fill)")
	}
}

// TestBatchCoalesceConcurrent: many clients asking overlapping by-names
// batches at once, while the cache is dropped now and then, all get the
// metastore's answer, and nothing waits forever.
func TestBatchCoalesceConcurrent(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	caching := newCaching(t, nil)
	caching.BatchChunk = 4
	var srv *Server
	var joins atomic.Int64
	paddr := startProxyOver(t, caching, addr, func(up Forwarder) Forwarder { return up }, func(s *Server) {
		srv = s
		s.cache.joinHook = func(n int) { joins.Add(int64(n)) }
	})
	const clients, rounds = 8, 40
	var wg sync.WaitGroup
	for i := range clients {
		c, direct := dial(t, paddr, wire.Buffered), dial(t, addr, wire.Buffered)
		ctx := ctxT(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				if i == 0 && r%10 == 5 {
					srv.DropAll("test")
				}
				var names []string
				for p := range 20 {
					if (p*7+r*3+i)%3 != 0 {
						names = append(names, partName(p))
					}
				}
				m, err := c.Call(ctx, "get_partitions_by_names", byNamesReq("get_partitions_by_names", names...))
				if err != nil {
					t.Error(err)
					return
				}
				got := append([]byte(nil), m.Buf...)
				want, err := direct.Call(ctx, "get_partitions_by_names", byNamesReq("get_partitions_by_names", names...))
				if err != nil {
					t.Error(err)
					return
				}
				if !sameButSeqID(got, want.Buf) {
					t.Errorf("client %d round %d: reply differs from the metastore's", i, r)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d entries waited for instead of loaded", joins.Load())
}
