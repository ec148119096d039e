package proxy

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// holdForwarder, once armed, holds the next call of one method until
// released: the shadow re-read, since every client read of that method
// is a hit by then.
type holdForwarder struct {
	up      Forwarder
	method  string
	armed   atomic.Bool
	arrived chan struct{}
	release chan struct{}
}

func (h *holdForwarder) Do(ctx context.Context, c upstream.Call, sink upstream.ReplySink) error {
	if string(c.Msg.Name()) != h.method || !h.armed.CompareAndSwap(true, false) {
		return h.up.Do(ctx, c, sink)
	}
	select {
	case h.arrived <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-h.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return h.up.Do(ctx, c, sink)
}

// startShadowProxy runs a caching proxy checking every hit; outcomes
// receives each check's outcome.
func startShadowProxy(t *testing.T, addr string, grace time.Duration, wrap func(Forwarder) Forwarder, parked ...func()) (*Server, string, *Caching, chan ShadowOutcome) {
	t.Helper()
	caching := newCaching(t, nil)
	caching.Shadow = Shadow{Rate: 1, MaxPerSecond: 1000, Grace: grace}
	outcomes := make(chan ShadowOutcome, 16)
	var srv *Server
	paddr := startProxyOver(t, caching, addr, wrap, func(s *Server) {
		srv = s
		s.cache.shadow.checked = func(o ShadowOutcome) { outcomes <- o }
		for _, f := range parked {
			s.cache.shadow.parked = f
		}
	})
	return srv, paddr, caching, outcomes
}

func waitOutcome(t *testing.T, outcomes <-chan ShadowOutcome) ShadowOutcome {
	t.Helper()
	return proxytest.Recv(t, outcomes, "a shadow check")
}

// TestShadowFindsPlantedStaleEntry: a write made directly on the
// metastore, with no event log to report it, leaves a stale entry; the
// shadow check of its next hit finds it, counts it and drops it (issue
// 10, item 10). A hit on a fresh entry counts as matched.
func TestShadowFindsPlantedStaleEntry(t *testing.T) {
	demo, addr := startDemo(t, wire.Buffered)
	srv, paddr, caching, outcomes := startShadowProxy(t, addr, -1, func(up Forwarder) Forwarder { return up })
	c := dial(t, paddr, wire.Buffered)
	direct := dial(t, addr, wire.Buffered)
	call(t, direct, "create_table", tableArgs("demo_db0", "sh"))
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "sh"))
	call(t, c, "get_table", get) // a miss: no check
	caching.Store.Wait()
	call(t, c, "get_table", get)
	if o := waitOutcome(t, outcomes); o != ShadowMatched {
		t.Fatalf("check of a fresh entry: %v; want matched", o)
	}

	call(t, direct, "alter_table", alterTableArgs("demo_db0", "sh", testTable("demo_db0", "sh", map[string]string{"v": "behind"})))
	if got := tableParam(t, call(t, c, "get_table", get), "v"); got != "" {
		t.Fatalf("served v=%q; the planted entry should still be served once", got)
	}
	if o := waitOutcome(t, outcomes); o != ShadowMismatched {
		t.Fatalf("check of the stale entry: %v; want mismatched", o)
	}
	st := srv.ShadowStats()
	if st.Count(hms.KindTable, ShadowMismatched) != 1 || st.Mismatches() != 1 || st.Checks() != 2 {
		t.Fatalf("counts: mismatched %d, checks %d; want 1, 2", st.Count(hms.KindTable, ShadowMismatched), st.Checks())
	}
	loads := demo.CallCount("get_table")
	if got := tableParam(t, call(t, c, "get_table", get), "v"); got != "behind" {
		t.Fatalf("after the mismatch served v=%q; want the metastore's (entry dropped)", got)
	}
	if demo.CallCount("get_table") != loads+1 {
		t.Fatal("the read after the mismatch did not go to the metastore")
	}
}

// TestShadowInvalidationExplains: a difference that an invalidation after
// the hit explains is not a mismatch: an invalidation before the re-read
// (a write through the proxy), or one that arrives within the grace
// period (the event log reporting a direct write).
func TestShadowInvalidationExplains(t *testing.T) {
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "sh"))
	warm := func(t *testing.T, c *hmsclient.Client, caching *Caching) {
		call(t, c, "create_table", tableArgs("demo_db0", "sh"))
		call(t, c, "get_table", get)
		caching.Store.Wait()
	}
	t.Run("write through the proxy before the re-read", func(t *testing.T) {
		_, addr := startDemo(t, wire.Buffered)
		hold := &holdForwarder{method: "get_table", arrived: make(chan struct{}), release: make(chan struct{})}
		srv, paddr, caching, outcomes := startShadowProxy(t, addr, -1, func(up Forwarder) Forwarder { hold.up = up; return hold })
		c := dial(t, paddr, wire.Buffered)
		warm(t, c, caching)
		hold.armed.Store(true)
		call(t, c, "get_table", get) // a hit; its re-read is held
		proxytest.Recv(t, hold.arrived, "the shadow re-read")
		call(t, c, "alter_table", alterTableArgs("demo_db0", "sh", testTable("demo_db0", "sh", map[string]string{"v": "new"})))
		hold.release <- struct{}{}
		if o := waitOutcome(t, outcomes); o != ShadowExplained {
			t.Fatalf("outcome %v; want explained", o)
		}
		if n := srv.ShadowStats().Mismatches(); n != 0 {
			t.Fatalf("%d mismatches counted", n)
		}
	})
	t.Run("event log within the grace period", func(t *testing.T) {
		_, addr := startDemo(t, wire.Buffered)
		parked := make(chan struct{}, 1)
		srv, paddr, caching, outcomes := startShadowProxy(t, addr, 300*time.Millisecond, func(up Forwarder) Forwarder { return up },
			func() { parked <- struct{}{} })
		c := dial(t, paddr, wire.Buffered)
		warm(t, c, caching)
		call(t, dial(t, addr, wire.Buffered), "alter_table", alterTableArgs("demo_db0", "sh", testTable("demo_db0", "sh", map[string]string{"v": "new"})))
		call(t, c, "get_table", get) // a hit on the stale entry
		select {
		case <-parked: // its re-read found the difference, which waits
		case o := <-outcomes:
			t.Fatalf("outcome %v before the grace period", o)
		case <-time.After(10 * time.Second):
			t.Fatal("no difference found within 10s")
		}
		// The event log reports the write within the grace period.
		srv.Flush(context.Background(), []cache.Entity{{Level: cache.LevelTable, Cat: "hive", DB: "demo_db0", Table: "sh"}})
		if o := waitOutcome(t, outcomes); o != ShadowExplained {
			t.Fatalf("outcome %v; want explained", o)
		}
		if n := srv.ShadowStats().Mismatches(); n != 0 {
			t.Fatalf("%d mismatches counted", n)
		}
	})
}

// TestShadowBounded: at most MaxPerSecond hits a second are checked,
// whatever the rate.
func TestShadowBounded(t *testing.T) {
	s := newShadower(Shadow{Rate: 1, MaxPerSecond: 5}, nil, nil)
	admitted := 0
	for i := 0; i < 100; i++ {
		if s.sample() && s.admit(hms.KindTable) {
			admitted++
		}
	}
	// The loop may straddle a second boundary.
	if admitted < 5 || admitted > 10 {
		t.Fatalf("%d of 100 hits admitted in about a second; want 5 (10 across a boundary)", admitted)
	}
	if got := s.stats.Count(hms.KindTable, ShadowSkipped); got != uint64(100-admitted) {
		t.Fatalf("skipped %d; want %d", got, 100-admitted)
	}
	if newShadower(Shadow{Rate: -1}, nil, nil).sample() {
		t.Fatal("a negative rate samples")
	}
	def := newShadower(Shadow{}, nil, nil)
	n := 0
	for i := 0; i < 1_000_000; i++ {
		if def.sample() {
			n++
		}
	}
	if n < 800 || n > 1200 { // 0.1 %: 1000 expected, sd about 32
		t.Fatalf("default rate sampled %d of 1,000,000 hits; want about 1,000", n)
	}
}

// TestShadowBatchEntries: hits on per-partition and per-table entries are
// checked too, with a request for that entry alone; a stale one is found
// and dropped.
func TestShadowBatchEntries(t *testing.T) {
	t.Run("partition", func(t *testing.T) {
		_, addr := startDemo(t, wire.Buffered)
		_, paddr, caching, outcomes := startShadowProxy(t, addr, -1, func(up Forwarder) Forwarder { return up })
		c, direct := dial(t, paddr, wire.Buffered), dial(t, addr, wire.Buffered)
		const m = "get_partitions_by_names_req"
		call(t, c, m, byNamesReq(m, partName(0), partName(1), partName(2)))
		caching.Store.Wait()
		call(t, c, m, byNamesReq(m, partName(1)))
		if o := waitOutcome(t, outcomes); o != ShadowMatched {
			t.Fatalf("check of a fresh partition: %v; want matched", o)
		}
		call(t, direct, "drop_partition_by_name", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Str(3, partName(2)), hmsreq.Bool(4, true)))
		call(t, c, m, byNamesReq(m, partName(2))) // the stale partition, served once
		if o := waitOutcome(t, outcomes); o != ShadowMismatched {
			t.Fatalf("check of a partition dropped behind the proxy: %v; want mismatched", o)
		}
		args := byNamesReq(m, partName(0), partName(2))
		if got, want := call(t, c, m, args), call(t, direct, m, args); !sameButSeqID(got, want) {
			t.Fatal("after the mismatch the proxy still serves the dropped partition")
		}
	})
	t.Run("table", func(t *testing.T) {
		_, addr := startDemo(t, wire.Buffered)
		_, paddr, caching, outcomes := startShadowProxy(t, addr, -1, func(up Forwarder) Forwarder { return up })
		c, direct := dial(t, paddr, wire.Buffered), dial(t, addr, wire.Buffered)
		const m = "get_table_objects_by_name_req"
		call(t, direct, "create_table", tableArgs("demo_db0", "sh"))
		args := tableObjectsReq(m, "demo_db0", "sh")
		call(t, c, m, args)
		caching.Store.Wait()
		call(t, c, m, args)
		if o := waitOutcome(t, outcomes); o != ShadowMatched {
			t.Fatalf("check of a fresh table: %v; want matched", o)
		}
		call(t, direct, "alter_table", alterTableArgs("demo_db0", "sh", testTable("demo_db0", "sh", map[string]string{"v": "behind"})))
		call(t, c, m, args)
		if o := waitOutcome(t, outcomes); o != ShadowMismatched {
			t.Fatalf("check of a table altered behind the proxy: %v; want mismatched", o)
		}
		if got, want := call(t, c, m, args), call(t, direct, m, args); !sameButSeqID(got, want) {
			t.Fatal("after the mismatch the proxy still serves the old table")
		}
	})
}
