package proxy

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// Adding partitions (#12) drops what an add can change, the table's
// partition set, and keeps the entries of the partitions that exist.
// demo_db0.t0 has ds=2024-01-01 with hr 0..19; the tests add hr=20.

const addedName = "ds=2024-01-01/hr=20"

func addedPartition() hmsreq.Partition {
	return hmsreq.Partition{DB: "demo_db0", Table: "t0", Values: []string{"2024-01-01", "20"}, CreateTime: 1700000000,
		SD: hmsreq.TextSD("file:/tmp/wh/demo_db0.db/t0/"+addedName, hmsreq.Column{Name: "id", Type: "bigint"})}
}

// addWrites are the writes that add hr=20, each as the client sends it.
var addWrites = []struct{ method string }{
	{"add_partition"}, {"add_partitions"}, {"add_partitions_req"}, {"append_partition"}, {"append_partition_by_name"},
}

func addArgs(method string) []byte {
	p := addedPartition()
	switch method {
	case "add_partitions":
		return hmsreq.Args(hmsreq.Partitions(1, p))
	case "add_partitions_req":
		return hmsreq.Req(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Partitions(3, p), hmsreq.Bool(4, false), hmsreq.Bool(5, true))
	case "append_partition":
		return hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Strings(3, p.Values...))
	case "append_partition_by_name":
		return hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Str(3, addedName))
	}
	return hmsreq.Args(p.Field(1))
}

// negativeCaching is a cache that keeps not-found partitions, so that an
// add has a negative entry to drop.
func negativeCaching(t *testing.T) *Caching {
	c := newCaching(t, nil)
	kinds := cache.DefaultKinds()
	kinds[hms.KindPartition].Negative = true
	c.Store = proxytest.Store(t, cache.Config{Kinds: kinds})
	return c
}

// addReads are the reads an add must leave alone (existing) or change.
var (
	existingByNames = hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"),
		hmsreq.Strings(3, "ds=2024-01-01/hr=3", "ds=2024-01-01/hr=11", "ds=2024-01-01/hr=19"))
	existingPart = hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Strings(3, "2024-01-01", "3"))
	addedByName  = hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Str(3, addedName))
	dayFilter    = filterArgs("get_partitions_by_filter", `ds = '2024-01-01'`, -1)
	addedCount   = filterArgs("get_num_partitions_by_filter", `hr = 20 or hr = 3`, -1)
	allNames     = hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.I16(3, -1))
)

// warmForAdd fills the cache through c: the table, its names and every
// partition of the day (a prune), an existing partition, the count, and
// hr=20 as not found. It checks they are all hits afterwards.
// warmAddBed starts the demo and a proxy over it whose caching keeps
// not-found partitions, warms it with warmForAdd, and returns the demo,
// the caching, a client of the proxy and one of the demo itself.
func warmAddBed(t *testing.T) (d *demohms.Server, caching *Caching, c, direct *hmsclient.Client) {
	t.Helper()
	d, addr := startDemo(t, wire.Buffered)
	caching = negativeCaching(t)
	paddr := startProxyOver(t, caching, addr, func(up Forwarder) Forwarder { return up })
	c, direct = dial(t, paddr, wire.Buffered), dial(t, addr, wire.Buffered)
	warmForAdd(t, d, c, caching.Store)
	return d, caching, c, direct
}

func warmForAdd(t *testing.T, d *demohms.Server, c *hmsclient.Client, st *cache.Store) {
	t.Helper()
	reads := []struct {
		method string
		args   []byte
	}{
		{"get_partitions_by_filter", dayFilter},
		{"get_partitions_by_names", existingByNames},
		{"get_partition", existingPart},
		{"get_partition_by_name", addedByName},
		{"get_num_partitions_by_filter", addedCount},
		{"get_partition_names", allNames},
	}
	for _, r := range reads {
		call(t, c, r.method, r.args)
	}
	st.Wait()
	d.ResetCalls()
	for _, r := range reads {
		call(t, c, r.method, r.args)
	}
	if n := metastoreReads(d); n != 0 {
		t.Fatalf("warm cache: %d reads reached the metastore; want 0", n)
	}
}

// metastoreReads counts the partition reads the metastore answered
// since its calls were reset.
func metastoreReads(d *demohms.Server) int {
	n := 0
	for _, c := range d.Calls() {
		if m := hms.Lookup([]byte(c.Method)); m != nil && m.Class == hms.Read && m.Target.Scope == hms.ScopePartition {
			n++
		}
	}
	return n
}

// checkAdded asserts, after hr=20 was added behind or through the proxy
// at c, that (a) the existing partitions are still hits and (b) the
// lists, the prune, the count and the partition once not found show
// the new partition, as the metastore answers directly.
func checkAdded(t *testing.T, d *demohms.Server, c, direct *hmsclient.Client, st *cache.Store) {
	t.Helper()
	d.ResetCalls()
	call(t, c, "get_partitions_by_names", existingByNames)
	call(t, c, "get_partition", existingPart)
	if n := metastoreReads(d); n != 0 {
		t.Errorf("existing partitions after an add: %d reads reached the metastore (%v); want 0, their entries kept", n, d.Calls())
	}
	admitted := st.Stats(hms.KindPartitions).Admitted.Load()
	reads := []struct {
		method string
		args   []byte
	}{
		{"get_partition_names", allNames},
		{"get_partitions_by_filter", dayFilter},
		{"get_num_partitions_by_filter", addedCount},
		{"get_partition_by_name", addedByName},
	}
	got := make([][]byte, len(reads))
	for i, r := range reads {
		got[i] = call(t, c, r.method, r.args)
		if i == 0 {
			// The store admits asynchronously; without this the prune
			// could race the new name list's admission and read it again.
			st.Wait()
		}
	}
	if n := d.CallCount("get_partition_names"); n != 1 {
		t.Errorf("the name list was read %d times after the add; want once (it changed)", n)
	}
	for i, r := range reads {
		if !sameButSeqID(got[i], call(t, direct, r.method, r.args)) {
			t.Errorf("%s after the add: the proxy's reply differs from the metastore's", r.method)
		}
	}
	// The prune fetched the new partition only: the 20 others were hits.
	if n := st.Stats(hms.KindPartitions).Admitted.Load() - admitted; n != 1 {
		t.Errorf("%d partition entries admitted after the add; want 1, the new one", n)
	}
}

// TestAddKeepsPartitions (#12): each add through the proxy keeps the
// entries of the existing partitions and refreshes everything the add
// changed, the not-found answer of the added partition included.
func TestAddKeepsPartitions(t *testing.T) {
	for _, w := range addWrites {
		t.Run(w.method, func(t *testing.T) {
			d, caching, c, direct := warmAddBed(t)
			ok := call(t, c, w.method, addArgs(w.method))
			if m, err := wire.Parse(ok, wire.Limits{}); err != nil || !upstream.Succeeded(m) {
				t.Fatalf("%s failed", w.method)
			}
			checkAdded(t, d, c, direct, caching.Store)
		})
	}
}

// TestPartitionWritesStayWhole: the other partition writes still drop
// the existing partitions' entries (a drop, an alter, a rename change
// them), so a partition read after them reaches the metastore.
func TestPartitionWritesStayWhole(t *testing.T) {
	writes := []struct {
		method string
		args   []byte
	}{
		{"drop_partition", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Strings(3, "2024-01-01", "5"), hmsreq.Bool(4, false))},
		{"alter_partition", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Partition{DB: "demo_db0", Table: "t0",
			Values: []string{"2024-01-01", "3"}, SD: hmsreq.TextSD("file:/tmp/x"), Params: map[string]string{"altered": "yes"}}.Field(3))},
	}
	for _, w := range writes {
		t.Run(w.method, func(t *testing.T) {
			d, _, c, direct := warmAddBed(t)
			call(t, c, w.method, w.args)
			d.ResetCalls()
			got, want := call(t, c, "get_partition", existingPart), call(t, direct, "get_partition", existingPart)
			if d.CallCount("get_partition") != 2 {
				t.Errorf("after %s, get_partition was a hit; want it reloaded", w.method)
			}
			if !sameButSeqID(got, want) {
				t.Errorf("after %s, get_partition differs from the metastore's", w.method)
			}
		})
	}
}

// TestAddFromEventLog: an add made behind the proxy's back, learnt from
// the notification log, narrows as one through the proxy does.
func TestAddFromEventLog(t *testing.T) {
	caching := negativeCaching(t)
	b := newSideBySide(t, caching)
	d, addr, srv, c, direct := b.demo, b.addr, b.srv, b.c, b.direct
	var applied []cache.Entity
	p, err := eventlog.New(eventlog.Config{Caller: dial(t, addr, wire.Buffered), Cursor: &eventlog.MemCursor{},
		Apply: func(ctx context.Context, ents []cache.Entity) {
			applied = append(applied, ents...)
			srv.Flush(ctx, ents)
		},
		Drop: srv.DropAll, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Poll(ctxT(t)); err != nil { // the first poll starts at the newest event
		t.Fatal(err)
	}
	warmForAdd(t, d, c, caching.Store)
	call(t, direct, "add_partition", addArgs("add_partition"))
	if err := p.Poll(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if want := (cache.Entity{Level: cache.LevelPartitions, Cat: "hive", DB: "demo_db0", Table: "t0", Added: true}); len(applied) != 1 || applied[0] != want {
		t.Fatalf("the event log applied %v; want %v", applied, want)
	}
	checkAdded(t, d, c, direct, caching.Store)
}

// TestAddFromPeer: an add through one node reaches another over the bus
// narrowed, and the other keeps its existing partitions; from a node
// writing the previous bus format (no add marker) it arrives as the
// table's whole partitions, which the reader drops, answering right.
func TestAddFromPeer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format int
	}{{"current format", coherence.FormatVersion}, {"previous format", coherence.FormatVersion - 1}} {
		t.Run(tc.name, func(t *testing.T) {
			r := redistest.Start(t)
			d, metastore := startDemo(t, wire.Buffered)
			// Heartbeats are not what this test is about: a node that
			// misses its peer's for the default 300 ms under a loaded run
			// drops what it holds, and the counts below would measure that.
			nodes := startCluster(t, r, 2, metastore, clusterOpts{timeout: 10 * time.Second, formats: []int{tc.format, coherence.FormatVersion}, caching: func(c *Caching) {
				kinds := cache.DefaultKinds()
				kinds[hms.KindPartition].Negative = true
				c.Store = proxytest.Store(t, cache.Config{Kinds: kinds})
			}})
			b, direct := dial(t, nodes[1].addr, wire.Buffered), dial(t, metastore, wire.Buffered)
			warmForAdd(t, d, b, nodes[1].st)
			call(t, dial(t, nodes[0].addr, wire.Buffered), "add_partitions", addArgs("add_partitions"))
			if tc.format == coherence.FormatVersion {
				checkAdded(t, d, b, direct, nodes[1].st)
				return
			}
			d.ResetCalls()
			got, want := call(t, b, "get_partition", existingPart), call(t, direct, "get_partition", existingPart)
			if n := d.CallCount("get_partition"); n != 2 || !sameButSeqID(got, want) {
				t.Errorf("an add in the previous format: existing partition read %d times (want 2: dropped whole), same reply %v", n, sameButSeqID(got, want))
			}
			for _, r := range []struct {
				method string
				args   []byte
			}{{"get_partition_names", allNames}, {"get_partition_by_name", addedByName}, {"get_partitions_by_filter", dayFilter}} {
				if !sameButSeqID(call(t, b, r.method, r.args), call(t, direct, r.method, r.args)) {
					t.Errorf("%s after an add in the previous format differs from the metastore's", r.method)
				}
			}
		})
	}
}

// replyHold holds the reply of the next call of one method between
// the metastore's answer and the proxy's admission: a seam for tests of
// loads that race a write.
type replyHold struct {
	up      Forwarder
	method  atomic.Value // string: the method whose next reply is held; "" none
	reached chan struct{}
	release chan struct{}
}

func newReplyHold() *replyHold {
	h := &replyHold{reached: make(chan struct{}), release: make(chan struct{})}
	h.method.Store("")
	return h
}

func (h *replyHold) Do(ctx context.Context, c upstream.Call, sink upstream.ReplySink) error {
	if m := string(c.Msg.Name()); m != "" && h.method.CompareAndSwap(m, "") {
		return h.up.Do(ctx, c, heldReply{sink, h, ctx})
	}
	return h.up.Do(ctx, c, sink)
}

type heldReply struct {
	upstream.ReplySink
	h   *replyHold
	ctx context.Context // the call's: a shutdown ends the hold
}

func (s heldReply) Reply(m wire.Message) error {
	select {
	case s.h.reached <- struct{}{}:
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
	select {
	case <-s.h.release:
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
	return s.ReplySink.Reply(m)
}

// TestAddRacesLoad (promise 3 for adds): a load that began before an add
// and ends after it lands nothing stale: not the name list without the
// new partition, not its not-found answer; and a by-names read after the
// add does not wait for the absence a load from before it finds.
func TestAddRacesLoad(t *testing.T) {
	loads := []struct {
		method string
		args   []byte
		batch  bool // the read after the add runs while the racing load is held
	}{
		{"get_partition_names", allNames, false},
		{"get_partition_by_name", addedByName, false},
		{"get_partitions_by_names", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Strings(3, "ds=2024-01-01/hr=3", addedName)), true},
	}
	for _, l := range loads {
		t.Run(l.method, func(t *testing.T) {
			d, addr := startDemo(t, wire.Buffered)
			caching := negativeCaching(t)
			h := newReplyHold()
			joined := make(chan int, 16)
			paddr := startProxyOver(t, caching, addr, func(up Forwarder) Forwarder { h.up = up; return h }, func(s *Server) {
				s.cache.joinHook = func(n int) { joined <- n }
			})
			c2, direct := dial(t, paddr, wire.Buffered), dial(t, addr, wire.Buffered)
			h.method.Store(l.method)
			first := callAsync(t, paddr, l.method, l.args)
			proxytest.Recv(t, h.reached, "the racing load's reply") // the metastore answered without hr=20; not admitted yet
			call(t, c2, "add_partition", addArgs("add_partition"))
			if !l.batch {
				// The racing load ends after the add: it must not be admitted.
				close(h.release)
				proxytest.Recv(t, first, "the racing read's reply")
				caching.Store.Wait()
			}
			d.ResetCalls()
			second := callAsync(t, paddr, l.method, l.args)
			var got []byte
			select {
			case got = <-second:
			case n := <-joined:
				t.Errorf("a read after the add waited for %d entries a load from before it is loading", n)
			case <-time.After(proxytest.Timeout):
				t.Fatal("the read after the add neither answered nor joined a load")
			}
			if l.batch {
				close(h.release)
				proxytest.Recv(t, first, "the racing read's reply")
				if got == nil {
					got = proxytest.Recv(t, second, "the read after the add")
				}
			}
			if n := d.CallCount(l.method); n != 1 {
				t.Errorf("%s after the add reached the metastore %d times; want once (what the racing load found is stale)", l.method, n)
			}
			if want := call(t, direct, l.method, l.args); !sameButSeqID(got, want) {
				t.Errorf("%s after the add differs from the metastore's answer", l.method)
			}
		})
	}
}
