package proxy

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/internal/testenv/clocktest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// countingForwarder counts the calls that reach the metastore, by method.
type countingForwarder struct {
	up Forwarder
	mu sync.Mutex // guards n
	n  map[string]int
}

func (f *countingForwarder) Do(ctx context.Context, c upstream.Call, sink upstream.ReplySink) error {
	switch string(c.Msg.Name()) {
	case "get_config_value", "get_catalogs", "getVersion":
		return f.up.Do(ctx, c, sink) // the checks of the metastore's settings
	}
	f.mu.Lock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	f.n[string(c.Msg.Name())]++
	f.mu.Unlock()
	return f.up.Do(ctx, c, sink)
}

// take returns the counts since the last take.
func (f *countingForwarder) take() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.n
	f.n = nil
	return n
}

type pruneCase struct {
	name, method string
	args         []byte
	local        bool // answered from the cache
	// want is the oracle of a local case: which seeded partitions (one
	// day's ds, an integer hr) the answer holds, written in Go, not in
	// the filter package that both the proxy and the demo evaluate with.
	want func(ds string, hr int) bool
	max  int // the case's max parts; -1: all
}

// Predicates of the oracle.
var (
	seedDay = "2024-01-01"
	nextDay = "2024-01-02"
	anyPart = func(string, int) bool { return true }
	hrIn    = func(hrs ...int) func(string, int) bool {
		return func(_ string, hr int) bool {
			for _, h := range hrs {
				if h == hr {
					return true
				}
			}
			return false
		}
	}
	noPart = func(string, int) bool { return false }
)

func filterArgs(method, flt string, max int16) []byte {
	switch method {
	case "get_num_partitions_by_filter":
		return hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Str(3, flt))
	case "get_partitions_by_filter_req":
		return hmsreq.Req(hmsreq.Str(1, "hive"), hmsreq.Str(2, "demo_db0"), hmsreq.Str(3, "t0"), hmsreq.Str(4, flt), hmsreq.I16(5, max))
	}
	return hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Str(3, flt), hmsreq.I16(4, max))
}

func psArgs(method string, max int16, vals ...string) []byte {
	if method == "get_partition_names_ps_req" {
		return hmsreq.Req(hmsreq.Str(1, "hive"), hmsreq.Str(2, "demo_db0"), hmsreq.Str(3, "t0"), hmsreq.Strings(4, vals...), hmsreq.I16(5, max))
	}
	return hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Strings(3, vals...), hmsreq.I16(4, max))
}

func pruneCases() []pruneCase {
	return []pruneCase{
		{"eq", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `ds = '2024-01-01'`, -1), true, func(ds string, _ int) bool { return ds == seedDay }, -1},
		{"int key", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `hr = 3 or hr = 17`, -1), true, hrIn(3, 17), -1},
		{"in and ne", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `(hr) in (1, 2, 5) and ds <> '2024-01-02'`, -1), true, func(ds string, hr int) bool { return hrIn(1, 2, 5)(ds, hr) && ds != nextDay }, -1},
		{"max parts", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `hr != 4`, 3), true, func(_ string, hr int) bool { return hr != 4 }, 3},
		{"max parts zero", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `hr != 4`, 0), true, func(_ string, hr int) bool { return hr != 4 }, 0},
		{"nothing", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `ds = 'none'`, -1), true, noPart, -1},
		{"count", "get_num_partitions_by_filter", filterArgs("get_num_partitions_by_filter", `hr = 2 or hr = 3`, -1), true, hrIn(2, 3), -1},
		// A 4.0 form is answered only once the metastore answered it.
		{"req form unproven", "get_partitions_by_filter_req", filterArgs("get_partitions_by_filter_req", `hr = 9`, -1), false, nil, 0},
		{"req form", "get_partitions_by_filter_req", filterArgs("get_partitions_by_filter_req", `hr = 10`, -1), true, hrIn(10), -1},
		// Without its catalog, 4.0 may fail it ("catName is null").
		{"req form without catalog", "get_partitions_by_filter_req", hmsreq.Req(hmsreq.Str(2, "demo_db0"), hmsreq.Str(3, "t0"), hmsreq.Str(4, `hr = 10`), hmsreq.I16(5, -1)), false, nil, 0},
		{"ps", "get_partitions_ps", psArgs("get_partitions_ps", -1, "2024-01-01", "3"), true, func(ds string, hr int) bool { return ds == seedDay && hr == 3 }, -1},
		{"ps none", "get_partitions_ps", psArgs("get_partitions_ps", -1, "2024-01-01", "30"), true, noPart, -1},
		{"ps names", "get_partition_names_ps", psArgs("get_partition_names_ps", 2, "2024-01-01", "1"), true, func(ds string, hr int) bool { return ds == seedDay && hr == 1 }, 2},
		{"ps names max zero", "get_partition_names_ps", psArgs("get_partition_names_ps", 0, "2024-01-01", "1"), true, func(ds string, hr int) bool { return ds == seedDay && hr == 1 }, 0},
		// A partial spec is listed in the database's order: forwarded.
		{"ps partial", "get_partitions_ps", psArgs("get_partitions_ps", -1, "2024-01-01"), false, nil, 0},
		{"ps any value", "get_partitions_ps", psArgs("get_partitions_ps", -1, "", "7"), false, nil, 0},
		// The demo metastore, like 2.3 and 3.1, does not know this one:
		// its UNKNOWN_METHOD answer is what the client must get.
		{"ps names req unknown", "get_partition_names_ps_req", psArgs("get_partition_names_ps_req", -1, "2024-01-01", "1"), false, nil, 0},
		// Integral ranges compare numbers, as direct SQL does.
		{"range", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `hr >= 8 and ds = '2024-01-02'`, -1), true, func(ds string, hr int) bool { return hr >= 8 && ds == nextDay }, -1},
		{"range none", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `hr > 20`, -1), true, func(_ string, hr int) bool { return hr > 20 }, -1},
		{"reversed range", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `17 < hr`, 3), true, func(_ string, hr int) bool { return hr > 17 }, 3},
		{"between", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `hr between 9 and 11`, -1), true, func(_ string, hr int) bool { return 9 <= hr && hr <= 11 }, -1},
		{"between empty", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `hr between 11 and 9`, -1), true, noPart, -1},
		{"not between", "get_num_partitions_by_filter", filterArgs("get_num_partitions_by_filter", `hr not between 2 and 17`, -1), true, func(_ string, hr int) bool { return hr < 2 || hr > 17 }, -1},
		{"range beyond int", "get_num_partitions_by_filter", filterArgs("get_num_partitions_by_filter", `hr < 3000000000 and hr > -3000000000`, -1), true, anyPart, -1},
		// Not evaluated here: forwarded, the metastore's answer (or error).
		{"string range", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `ds > '2024-01-01'`, 4), false, nil, 0},
		{"string between", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `ds between '2024-01-01' and '2024-01-01'`, 4), false, nil, 0},
		{"literal beyond int64", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `hr < 9223372036854775808`, -1), false, nil, 0},
		{"not a key", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `region = 'x'`, -1), false, nil, 0},
		{"bad filter", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `ds = `, -1), false, nil, 0},
		{"too many values", "get_partitions_ps", psArgs("get_partitions_ps", -1, "a", "1", "x"), false, nil, 0},
		{"regex value", "get_partition_names_ps", psArgs("get_partition_names_ps", -1, "2024.01-01", "1"), false, nil, 0},
	}
}

// checkOracle checks a local answer against tc.want, which it applies to
// the table's partitions as the metastore lists them unfiltered: equal
// replies from the proxy and the demo prove nothing when both evaluate
// with the same wrong code (issue 23). A metastore lists partitions in
// the order of their names, and max parts keeps the first ones.
func checkOracle(t *testing.T, direct *hmsclient.Client, tc pruneCase, reply []byte) {
	t.Helper()
	listed, _ := answerOf(t, call(t, direct, "get_partition_names", partNamesArgs("demo_db0", "t0", -1)))
	if len(listed) == 0 {
		t.Fatal("oracle: the metastore lists no partitions of demo_db0.t0")
	}
	sort.Strings(listed)
	var want []string
	for _, name := range listed {
		var ds string
		var hr int
		if _, err := fmt.Sscanf(strings.Replace(name, "/", " ", 1), "ds=%s hr=%d", &ds, &hr); err != nil {
			t.Fatalf("oracle: partition name %q: %v", name, err)
		}
		if tc.want(ds, hr) {
			want = append(want, name)
		}
	}
	if tc.max >= 0 && len(want) > tc.max {
		want = want[:tc.max]
	}
	names, count := answerOf(t, reply)
	if tc.method == "get_num_partitions_by_filter" {
		if count != len(want) {
			t.Fatalf("oracle: got a count of %d; want %d (%q)", count, len(want), want)
		}
		return
	}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("oracle: got partitions %q; want %q", names, want)
	}
}

// answerOf reads the success of a reply: partition names from a list of
// names, of partitions (as "ds=…/hr=…") or of a response struct holding
// one; or a count.
func answerOf(t *testing.T, reply []byte) (names []string, count int) {
	t.Helper()
	m, err := wire.Parse(reply, wire.Limits{})
	if err != nil || m.Type != wire.Reply {
		t.Fatalf("oracle: not a reply: %v", err)
	}
	d := wire.NewDecoder(m.Body())
	var list func(typ byte) bool
	list = func(typ byte) bool {
		switch typ {
		case wire.TI32:
			count = int(d.I32())
		case wire.TStruct: // a response: its list of partitions
			d.Fields(func(id int16, typ byte) bool { return id == 1 && typ == wire.TList && list(typ) })
		case wire.TList:
			elem, n := d.ListBegin()
			for range n {
				switch elem {
				case wire.TString:
					names = append(names, d.String())
				case wire.TStruct:
					var vals []string
					d.Fields(func(id int16, typ byte) bool {
						if id != 1 || typ != wire.TList {
							return false
						}
						_, n := d.ListBegin()
						for range n {
							vals = append(vals, d.String())
						}
						return true
					})
					if len(vals) != 2 {
						t.Fatalf("oracle: partition values %q; want ds and hr", vals)
					}
					names = append(names, "ds="+vals[0]+"/hr="+vals[1])
				default:
					d.Skip(elem)
				}
			}
		default:
			return false
		}
		return true
	}
	found := false
	d.Fields(func(id int16, typ byte) bool {
		if id != 0 {
			return false
		}
		found = true
		return list(typ)
	})
	if !found || d.Err() != nil {
		t.Fatalf("oracle: reply without success: %v", d.Err())
	}
	return names, count
}

// pruneBed is a caching proxy over the demo metastore whose upstream
// calls are counted, with a client of each.
type pruneBed struct {
	caching   *Caching
	f         *countingForwarder
	srv       *Server
	addr      string            // the metastore's
	direct, c *hmsclient.Client // to the metastore, to the proxy
}

func newPruneBed(t *testing.T, clock *clocktest.Clock) *pruneBed {
	t.Helper()
	b := &pruneBed{caching: newCaching(t, clock), f: &countingForwarder{}}
	_, b.addr = startDemo(t, wire.Buffered)
	paddr := startProxyOver(t, b.caching, b.addr, func(up Forwarder) Forwarder { b.f.up = up; return b.f }, func(s *Server) { b.srv = s })
	b.direct, b.c = dial(t, b.addr, wire.Buffered), dial(t, paddr, wire.Buffered)
	return b
}

// TestPruneLocal: filters and partial specs the proxy evaluates exactly
// are answered from the cached table, name list and partitions, byte-equal
// to the metastore's answer, and with a warm cache a filter never seen
// before costs no upstream call; anything else reaches the metastore.
func TestPruneLocal(t *testing.T) {
	b := newPruneBed(t, nil)
	caching, f, srv, direct, c := b.caching, b.f, b.srv, b.direct, b.c
	// Warm: the table, its names and every partition.
	call(t, c, "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `hr != -1`, -1))
	caching.Store.Wait()
	f.take()
	st := srv.PruneStats()
	for _, tc := range pruneCases() {
		t.Run(tc.name, func(t *testing.T) {
			local := st.Local.Load()
			got := sameReply(t, "", c, direct, tc.method, tc.args)
			n := f.take()
			if tc.local {
				answeredLocally(t, "", n, st, local)
				checkOracle(t, direct, tc, got)
			} else if n[tc.method] != 1 || st.Local.Load() != local {
				t.Fatalf("upstream calls %v, local answers +%d; want the request forwarded", n, st.Local.Load()-local)
			}
		})
	}
}

// sameReply calls method with args through the proxy (c) and on the
// metastore (direct), fails the test, its message after prefix, unless
// the replies are equal but for their seqid, and returns the proxy's.
func sameReply(t *testing.T, prefix string, c, direct *hmsclient.Client, method string, args []byte) []byte {
	t.Helper()
	got, want := call(t, c, method, args), call(t, direct, method, args)
	if !sameButSeqID(got, want) {
		t.Fatalf("%sreply differs from the metastore's\n got %x\nwant %x", prefix, got, want)
	}
	return got
}

// answeredLocally fails the test, its message after prefix, unless the
// proxy forwarded nothing (n, the calls it forwarded) and counted one
// more local answer than local.
func answeredLocally(t *testing.T, prefix string, n map[string]int, st *PruneStats, local uint64) {
	t.Helper()
	if len(n) != 0 || st.Local.Load() != local+1 {
		t.Fatalf("%supstream calls %v, local answers +%d; want none and +1", prefix, n, st.Local.Load()-local)
	}
}

// TestPruneFetchesMissingInBulk: a cold prune loads the table and the
// name list once each and the matching partitions in one by-names call;
// a prune with PruneOff caches the reply whole.
func TestPruneFetchesMissingInBulk(t *testing.T) {
	b := newPruneBed(t, nil)
	caching, f, direct, c := b.caching, b.f, b.direct, b.c
	args := filterArgs("get_partitions_by_filter", `hr = 3 or hr = 5`, -1)
	if got, want := call(t, c, "get_partitions_by_filter", args), call(t, direct, "get_partitions_by_filter", args); !sameButSeqID(got, want) {
		t.Fatalf("cold prune differs\n got %x\nwant %x", got, want)
	}
	want := map[string]int{"get_table": 1, "get_partition_names": 1, "get_partitions_by_names": 1}
	if n := f.take(); len(n) != len(want) || n["get_table"] != 1 || n["get_partition_names"] != 1 || n["get_partitions_by_names"] != 1 {
		t.Fatalf("cold prune: upstream calls %v; want %v", n, want)
	}
	caching.Store.Wait()
	// The fetched partitions share their table's storage-descriptor
	// segments, and a warm prune writes them as pieces, byte-equal.
	if n, _ := caching.Store.Segments(); n == 0 {
		t.Fatal("the prune's fill made no shared segments")
	}
	if got, want := call(t, c, "get_partitions_by_filter", args), call(t, direct, "get_partitions_by_filter", args); !sameButSeqID(got, want) {
		t.Fatalf("warm prune differs\n got %x\nwant %x", got, want)
	}
	if n := f.take(); len(n) != 0 {
		t.Fatalf("warm prune: upstream calls %v; want none", n)
	}
	// A different filter over partly cached partitions fetches only the
	// new ones.
	args = filterArgs("get_partitions_by_filter", `hr = 5 or hr = 6`, -1)
	if got, want := call(t, c, "get_partitions_by_filter", args), call(t, direct, "get_partitions_by_filter", args); !sameButSeqID(got, want) {
		t.Fatalf("partly warm prune differs\n got %x\nwant %x", got, want)
	}
	if n := f.take(); len(n) != 1 || n["get_partitions_by_names"] != 1 {
		t.Fatalf("partly warm prune: upstream calls %v; want one by-names call", n)
	}

	off := newCaching(t, nil)
	off.PruneOff = true
	g := &countingForwarder{}
	oaddr := startProxyOver(t, off, b.addr, func(up Forwarder) Forwarder { g.up = up; return g })
	o := dial(t, oaddr, wire.Buffered)
	call(t, o, "get_partitions_by_filter", args)
	off.Store.Wait()
	call(t, o, "get_partitions_by_filter", args)
	if n := g.take(); len(n) != 1 || n["get_partitions_by_filter"] != 1 {
		t.Fatalf("PruneOff: upstream calls %v; want the filter once, cached whole", n)
	}
}

// TestPruneRacingInvalidation: a prune during which the table's
// partitions were invalidated never combines the name list from before
// with partitions from after (or the reverse): it is forwarded, and the
// client sees the metastore's current answer.
func TestPruneRacingInvalidation(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	caching := newCaching(t, nil)
	var srv *Server
	var armed atomic.Bool
	var hook func()
	paddr := startProxyOver(t, caching, addr, func(up Forwarder) Forwarder { return up }, func(s *Server) {
		srv = s
		s.cache.pruneHook = func() {
			if armed.CompareAndSwap(true, false) {
				hook()
			}
		}
	})
	direct := dial(t, addr, wire.Buffered)
	c := dial(t, paddr, wire.Buffered)
	args := filterArgs("get_partitions_by_filter", `hr = 2 or hr = 3`, -1)
	// Another table pruned first on the connection: what a prune of t0
	// depends on is t0's, not what the connection kept of t1 (prunedLast).
	call(t, c, "get_partitions_by_filter", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t1"), hmsreq.Str(3, `hr = 2`), hmsreq.I16(4, -1)))
	call(t, c, "get_partitions_by_filter", args)
	caching.Store.Wait()
	// Between the lookups and the reply, a partition the name list holds
	// is dropped behind the proxy's back and the table invalidated, as
	// the event-log poller or a peer would.
	var once sync.Once
	hook = func() {
		once.Do(func() {
			if o := call(t, direct, "drop_partition_by_name", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Str(3, partName(2)), hmsreq.Bool(4, true))); len(o) == 0 {
				t.Error("drop_partition_by_name: no reply")
			}
			srv.Flush(context.Background(), []cache.Entity{{Level: cache.LevelPartitions, Cat: "hive", DB: "demo_db0", Table: "t0"}})
		})
	}
	armed.Store(true)
	raced, racedByStep := srv.PruneStats().Raced.Load(), srv.PruneStats().Count(PruneForwardRaced)
	got, want := call(t, c, "get_partitions_by_filter", args), call(t, direct, "get_partitions_by_filter", args)
	if !sameButSeqID(got, want) {
		t.Fatalf("a prune across an invalidation answered from before it\n got %x\nwant %x", got, want)
	}
	if srv.PruneStats().Raced.Load() != raced+1 {
		t.Fatalf("raced prunes: got +%d; want +1", srv.PruneStats().Raced.Load()-raced)
	}
	if n := srv.PruneStats().Count(PruneForwardRaced); n != racedByStep+1 {
		t.Fatalf("prunes counted as %s: got +%d; want +1", PruneForwardRaced, n-racedByStep)
	}
}

// noLegacyGetTable answers get_table with UNKNOWN_METHOD, as the 4.0
// metastore of the test bed does.
type noLegacyGetTable struct{ up Forwarder }

func (f noLegacyGetTable) Do(ctx context.Context, c upstream.Call, sink upstream.ReplySink) error {
	if string(c.Msg.Name()) == "get_table" {
		m, err := wire.Parse(wire.AppendApplicationException(nil, "get_table", c.Msg.SeqID, wire.ExUnknownMethod, "Invalid method name: 'get_table'"), wire.Limits{})
		if err != nil {
			return err
		}
		return sink.Reply(m)
	}
	return f.up.Do(ctx, c, sink)
}

// TestPruneWithoutLegacyGetTable: against a metastore without the legacy
// get_table, prunes read the table with get_table_req, and after the
// first one never ask for get_table again.
func TestPruneWithoutLegacyGetTable(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	caching := newCaching(t, nil)
	f := &countingForwarder{}
	var srv *Server
	paddr := startProxyOver(t, caching, addr, func(up Forwarder) Forwarder { f.up = noLegacyGetTable{up}; return f }, func(s *Server) { srv = s })
	direct := dial(t, addr, wire.Buffered)
	c := dial(t, paddr, wire.Buffered)
	for i, flt := range []string{`hr = 1`, `hr = 2`, `hr = 3`} {
		args := filterArgs("get_partitions_by_filter", flt, -1)
		if got, want := call(t, c, "get_partitions_by_filter", args), call(t, direct, "get_partitions_by_filter", args); !sameButSeqID(got, want) {
			t.Fatalf("%s: reply differs\n got %x\nwant %x", flt, got, want)
		}
		caching.Store.Wait()
		if n := f.take(); i > 0 && (n["get_table"] != 0 || n["get_table_req"] != 0) {
			t.Fatalf("%s: upstream calls %v; want the table from the cache", flt, n)
		}
	}
	if n := srv.PruneStats().Local.Load(); n != 3 {
		t.Fatalf("answered locally: %d of 3", n)
	}
}

// TestNameIndexesBounded: the indexes of name lists, kept outside the
// cache's budget, stay within their table bound and count their names.
func TestNameIndexesBounded(t *testing.T) {
	var x nameIndexes
	for i := 0; i < maxNameIndexes+50; i++ {
		var e wire.Encoder
		e.StringListField(0, []string{fmt.Sprintf("ds=%d/hr=1", i), fmt.Sprintf("ds=%d/hr=2", i)})
		e.Stop()
		if _, ok := x.get(fmt.Sprint("table", i), e.B); !ok {
			t.Fatalf("index %d not built", i)
		}
	}
	if len(x.m) > maxNameIndexes {
		t.Fatalf("got %d indexes; want at most %d", len(x.m), maxNameIndexes)
	}
	if x.names != 2*len(x.m) {
		t.Fatalf("counted %d names for %d indexes of 2; want %d", x.names, len(x.m), 2*len(x.m))
	}
}

// TestPruneRefusesHugeNames: a hostile client's megabyte table names are
// forwarded as they came, never pruned, so its connection keeps no
// made-up reads of them (a prune would first ask for the table: the
// seam that shows it was tried). A schema-sized name is pruned.
func TestPruneRefusesHugeNames(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	caching := newCaching(t, nil)
	f := &countingForwarder{}
	paddr := startProxyOver(t, caching, addr, func(up Forwarder) Forwarder { f.up = up; return f })
	c := dial(t, paddr, wire.Buffered)
	for i := range 4 {
		huge := strings.Repeat("t", 1<<20) + strconv.Itoa(i)
		call(t, c, "get_partitions_by_filter", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, huge), hmsreq.Str(3, `hr = 1`), hmsreq.I16(4, -1)))
	}
	if n := f.take(); len(n) != 1 || n["get_partitions_by_filter"] != 4 {
		t.Fatalf("huge names: upstream calls %v; want the 4 filters forwarded, nothing made up", n)
	}
	name := strings.Repeat("t", maxPruneName)
	call(t, c, "get_partitions_by_filter", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, name), hmsreq.Str(3, `hr = 1`), hmsreq.I16(4, -1)))
	if n := f.take(); n["get_table"] != 1 {
		t.Fatalf("a %d-byte name: upstream calls %v; want the prune to ask for its table", maxPruneName, n)
	}
}

// tableKeysOf builds the keys a prune reads from a table, for tests of
// plans: name and type pairs, in order.
func tableKeysOf(pairs ...string) *tableKeys {
	tk := &tableKeys{typeOf: map[string]string{}}
	for i := 0; i+1 < len(pairs); i += 2 {
		tk.keys = append(tk.keys, hms.PartitionKey{Name: pairs[i], Type: pairs[i+1]})
		tk.lower = append(tk.lower, strings.ToLower(pairs[i]))
		tk.types = append(tk.types, pairs[i+1])
		tk.typeOf[strings.ToLower(pairs[i])] = pairs[i+1]
		tk.sig += strings.ToLower(pairs[i]) + "\x00" + pairs[i+1] + "\x00"
	}
	return tk
}

// TestPrunePlanFollowsKeys: a filter's plan is kept with its parsed text,
// but only for tables whose keys have the names, order and types it was
// made for: the same text over another table is planned again (an int
// key compares numbers, a string key bytes; positions follow the order).
func TestPrunePlanFollowsKeys(t *testing.T) {
	var exprs exprCache
	p := &hms.Prune{ByFilter: true, Filter: `ds = 'a' and hr = 7`}
	intHr := tableKeysOf("ds", "string", "hr", "int")
	strHr := tableKeysOf("ds", "string", "hr", "string")
	swapped := tableKeysOf("hr", "int", "ds", "string")
	for _, step := range []struct {
		name  string
		tk    *tableKeys
		exact bool
		vals  []string
		want  bool
	}{
		{"int key", intHr, true, []string{"a", "7"}, true},
		{"string key: int literal is inexact", strHr, false, nil, false},
		{"int key again", intHr, true, []string{"a", "07"}, true},
		{"keys in another order", swapped, true, []string{"7", "a"}, true},
		{"another order, no match", swapped, true, []string{"a", "7"}, false},
	} {
		pl, exact := prunePlanOf(p, step.tk, &exprs, hms.Version3)
		if exact != step.exact {
			t.Fatalf("%s: exact %v; want %v", step.name, exact, step.exact)
		}
		if !exact {
			continue
		}
		if got, err := pl.match(step.vals); got != step.want {
			t.Fatalf("%s: match(%q) = %v, %v; want %v", step.name, step.vals, got, err, step.want)
		}
	}
}

// TestPruneFollowsWrites: once a table's partitions were pruned (its
// name index built, the entries it served remembered, the filter's plan
// kept), a write that changes them, through this proxy, from a peer over
// the bus or behind the proxy's back through the event log, is seen by
// the next prune: its reply equals the metastore's.
func TestPruneFollowsWrites(t *testing.T) {
	day := filterArgs("get_partitions_by_filter", `ds = '2024-01-01'`, -1)
	alter := func(hr string) []byte {
		return hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Partition{DB: "demo_db0", Table: "t0",
			Values: []string{"2024-01-01", hr}, SD: hmsreq.TextSD("file:/tmp/x"), Params: map[string]string{"altered": hr}}.Field(3))
	}
	drop := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Strings(3, "2024-01-01", "5"), hmsreq.Bool(4, false))
	for _, path := range []string{"proxy", "bus", "event log"} {
		t.Run(path, func(t *testing.T) {
			_, addr := startDemo(t, wire.Buffered)
			caching := newCaching(t, nil)
			var srv *Server
			paddr := startProxyOver(t, caching, addr, func(up Forwarder) Forwarder { return up }, func(s *Server) { srv = s })
			c, direct := dial(t, paddr, wire.Buffered), dial(t, addr, wire.Buffered)
			p, err := eventlog.New(eventlog.Config{Caller: dial(t, addr, wire.Buffered), Cursor: &eventlog.MemCursor{},
				Apply: func(ctx context.Context, ents []cache.Entity) { srv.Flush(ctx, ents) },
				Drop:  srv.DropAll, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Poll(ctxT(t)); err != nil { // the first poll starts at the newest event
				t.Fatal(err)
			}
			write := func(method string, args []byte) {
				switch path {
				case "proxy":
					call(t, c, method, args)
				case "bus":
					call(t, direct, method, args)
					srv.ApplyRemote([]cache.Entity{{Level: cache.LevelPartitions, Cat: "hive", DB: "demo_db0", Table: "t0",
						Added: method == "add_partition"}})
				case "event log":
					call(t, direct, method, args)
					if err := p.Poll(ctxT(t)); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, w := range []struct {
				method string
				args   []byte
			}{
				{"alter_partition", alter("3")},
				{"drop_partition", drop},
				{"add_partition", addArgs("add_partition")},
				{"alter_partition", alter("4")},
			} {
				// The second from the index and the entries it
				// remembers, the fourth from the day's posting memo
				// (prunememo.go): its first use notes the entries, its
				// second joins them.
				memo := srv.cache.postHits.Load()
				for range 4 {
					local := srv.PruneStats().Local.Load()
					if !sameButSeqID(call(t, c, "get_partitions_by_filter", day), call(t, direct, "get_partitions_by_filter", day)) {
						t.Fatalf("before %s: prune differs from the metastore's", w.method)
					}
					if srv.PruneStats().Local.Load() != local+1 {
						t.Fatalf("before %s: the filter was not pruned", w.method)
					}
					caching.Store.Wait()
				}
				if srv.cache.postHits.Load() == memo {
					t.Fatalf("before %s: no prune was answered from the posting memo", w.method)
				}
				if caching.Store.Reserved() == 0 {
					t.Fatalf("before %s: no flat copy reserved for the posting memo", w.method)
				}
				write(w.method, w.args)
				if !sameButSeqID(call(t, c, "get_partitions_by_filter", day), call(t, direct, "get_partitions_by_filter", day)) {
					t.Fatalf("after %s through the %s: prune differs from the metastore's", w.method, path)
				}
				// The write changed the name list: the index it replaced
				// gave back its memos' copies.
				if n := caching.Store.Reserved(); n != 0 {
					t.Fatalf("after %s: %d bytes still reserved for the old index's memos", w.method, n)
				}
			}
		})
	}
}

// TestPruneRemembersOnlyLiveEntries: the entries a name index remembers
// are served only while the store would serve them. An add leaves the
// partitions that exist cached and drops the name list, so the new index
// remembers partitions older than itself; once their TTL is past (and
// not the list's), the next prune fetches them again.
func TestPruneRemembersOnlyLiveEntries(t *testing.T) {
	clock := newClock()
	b := newPruneBed(t, clock)
	caching, f, c, direct := b.caching, b.f, b.c, b.direct
	day := filterArgs("get_partitions_by_filter", `ds = '2024-01-01'`, -1)
	call(t, c, "get_partitions_by_filter", day)
	caching.Store.Wait()
	f.take()
	ttl := caching.Store.Policy(hms.KindPartitions).TTL
	if caching.Store.Policy(hms.KindPartitionNames).TTL != ttl {
		t.Fatal("the test assumes partitions and their names share a TTL")
	}
	clock.Advance(ttl - time.Minute)
	call(t, c, "add_partition", addArgs("add_partition"))
	for range 2 { // a new index, then the entries it remembers
		call(t, c, "get_partitions_by_filter", day)
		caching.Store.Wait()
	}
	if n := f.take(); n["get_partitions_by_names"] != 1 {
		t.Fatalf("after the add: upstream calls %v; want only the added partition fetched", n)
	}
	clock.Advance(time.Minute) // the old partitions' TTL, not the list's
	if !sameButSeqID(call(t, c, "get_partitions_by_filter", day), call(t, direct, "get_partitions_by_filter", day)) {
		t.Fatal("prune differs from the metastore's")
	}
	if n := f.take(); n["get_partitions_by_names"] != 1 || n["get_partition_names"] != 0 {
		t.Fatalf("past the partitions' TTL: upstream calls %v; want the expired partitions fetched, the list kept", n)
	}
}

// keptBufSizes are the bytes of each bounded reuse buffer c keeps
// between calls, by name.
func keptBufSizes(c *clientConn) map[string]int {
	size := func(n int, each uintptr) int { return n * int(each) }
	return map[string]int{
		"psel":    size(cap(c.psel), unsafe.Sizeof(int32(0))),
		"pselj":   size(cap(c.pselj), unsafe.Sizeof(int32(0))),
		"pparts":  size(cap(c.pparts), unsafe.Sizeof(prunePart{})),
		"ppieces": size(cap(c.ppieces), unsafe.Sizeof([]byte(nil))),
		"iov":     size(cap(c.iov), unsafe.Sizeof([]byte(nil))),
		"frame":   cap(c.frame),
		"objs":    size(cap(c.objs), unsafe.Sizeof([]byte(nil))),
		"parts":   size(cap(c.parts), unsafe.Sizeof(namedPart{})),
	}
}

// TestPruneKeepsNoLargeBuffers: a prune of every partition of a large
// table grows the connection's reuse buffers (selection, entries, reply
// pieces) to megabytes; once answered, the connection keeps none larger
// than maxKeptBuf (promise 9). Found in review of the prune speed-up.
func TestPruneKeepsNoLargeBuffers(t *testing.T) {
	const size = 6000 // 18000 reply pieces: 432 KB of iov alone
	d := demohms.New(demohms.Config{})
	d.Seed(1, 1, size)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go d.Serve(ln)
	t.Cleanup(func() { d.Close() })
	caching := newCaching(t, nil)
	kept := make(chan map[string]int, 1)
	srv, paddr := serve(t, Config{Cache: caching}, proxytest.Group(t, upstream.Config{}, ln.Addr().String()), func(s *Server) {
		s.callHook = func(c *clientConn) {
			select {
			case <-kept: // only the last call's
			default:
			}
			kept <- keptBufSizes(c)
		}
	})
	c := dial(t, paddr, wire.Buffered)
	all := filterArgs("get_partitions_by_filter", "hr != -1", -1)
	for range 2 { // load, then prune locally
		call(t, c, "get_partitions_by_filter", all)
		caching.Store.Wait()
	}
	if n := srv.PruneStats().Local.Load(); n != 2 {
		t.Fatalf("got %d prunes answered locally; want 2", n)
	}
	// The hook of a call runs before the connection reads the next one:
	// once this third prune is answered, the channel holds what the
	// connection kept after the second or the third.
	call(t, c, "get_partitions_by_filter", all)
	got := <-kept
	for name, n := range got {
		if n > maxKeptBuf {
			t.Errorf("connection keeps %s of %d bytes after a prune of %d partitions; want at most %d", name, n, size, maxKeptBuf)
		}
	}
}

// TestPruneRangeNonCanonical: a range over an integral key is answered
// locally only while every stored value of the key is a canonical
// integer. Once the table holds hr=07 (which 2.3, 3.1 and JDO compare
// differently), ranges and BETWEEN on hr are forwarded, as = and IN on
// it are, while a filter that leaves hr alone is still answered locally.
func TestPruneRangeNonCanonical(t *testing.T) {
	b := newPruneBed(t, nil)
	caching, f, srv, direct, c := b.caching, b.f, b.srv, b.direct, b.c
	st := srv.PruneStats()

	rng := filterArgs("get_partitions_by_filter", `hr between 6 and 8`, -1)
	call(t, c, "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `hr != -1`, -1))
	caching.Store.Wait()
	f.take()
	local := st.Local.Load()
	sameReply(t, "canonical values: ", c, direct, "get_partitions_by_filter", rng)
	answeredLocally(t, "canonical values: ", f.take(), st, local)

	// hr=07 next to hr=7, added through the proxy (which drops the
	// table's partition set, so the next prune reads the new name list).
	p := addedPartition()
	p.Values[1] = "07"
	p.SD = hmsreq.TextSD("file:/tmp/wh/demo_db0.db/t0/ds=2024-01-01/hr=07", hmsreq.Column{Name: "id", Type: "bigint"})
	count := filterArgs("get_num_partitions_by_filter", `ds = '2024-01-01'`, -1)
	before := call(t, direct, "get_num_partitions_by_filter", count)
	call(t, c, "add_partition", hmsreq.Args(p.Field(1)))
	if after := call(t, direct, "get_num_partitions_by_filter", count); sameButSeqID(before, after) {
		t.Fatalf("add_partition hr=07 added nothing")
	}
	caching.Store.Wait()
	day := filterArgs("get_partitions_by_filter", `ds = '2024-01-01'`, -1)
	call(t, c, "get_partitions_by_filter", day) // loads the name list and partition the add dropped
	caching.Store.Wait()
	for _, tc := range []struct {
		name, method string
		args         []byte
		local        bool
	}{
		{"string key only", "get_partitions_by_filter", day, true},
		{"between", "get_partitions_by_filter", rng, false},
		{"range", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `hr > 6 and ds = '2024-01-01'`, -1), false},
		{"not between", "get_num_partitions_by_filter", filterArgs("get_num_partitions_by_filter", `hr not between 1 and 18`, -1), false},
		{"eq", "get_partitions_by_filter", filterArgs("get_partitions_by_filter", `hr = 7`, -1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.take()
			local, inexact := st.Local.Load(), st.Inexact.Load()
			byResult := [...]uint64{st.Count(PruneLocal), st.Count(PruneInexact)}
			sameReply(t, "", c, direct, tc.method, tc.args)
			want := byResult
			if tc.local {
				want[0]++
			} else {
				want[1]++
			}
			if got := [...]uint64{st.Count(PruneLocal), st.Count(PruneInexact)}; got != want {
				t.Errorf("counted local, inexact: got %v; want %v", got, want)
			}
			n := f.take()
			if tc.local {
				answeredLocally(t, "", n, st, local)
				return
			}
			if n[tc.method] != 1 || st.Local.Load() != local || st.Inexact.Load() != inexact+1 {
				t.Fatalf("upstream calls %v, local answers +%d, inexact +%d; want the request forwarded as inexact",
					n, st.Local.Load()-local, st.Inexact.Load()-inexact)
			}
		})
	}
}

// TestPrunePostingMemoAges: a posting memo's flat copy is written only
// while the store would serve every entry it was joined from. Here the
// name list outlives the partitions it indexes (an add dropped the list,
// not the partitions), so the index and its memo stay while the
// partitions' TTL passes; a partition changed behind the proxy's back
// meanwhile must then come from the metastore, not from the copy.
func TestPrunePostingMemoAges(t *testing.T) {
	clock := newClock()
	b := newPruneBed(t, clock)
	caching, srv, c, direct := b.caching, b.srv, b.c, b.direct
	day := filterArgs("get_partitions_by_filter", `ds = '2024-01-01'`, -1)
	call(t, c, "get_partitions_by_filter", day)
	caching.Store.Wait()
	clock.Advance(time.Minute)
	call(t, c, "add_partition", addArgs("add_partition"))
	memo := srv.cache.postHits.Load()
	for range 5 { // a new index, its entries noted, joined, then the copy
		if !sameButSeqID(call(t, c, "get_partitions_by_filter", day), call(t, direct, "get_partitions_by_filter", day)) {
			t.Fatal("prune differs from the metastore's")
		}
		caching.Store.Wait()
	}
	if srv.cache.postHits.Load() == memo {
		t.Fatal("no prune was answered from the posting memo")
	}
	alter := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Partition{DB: "demo_db0", Table: "t0",
		Values: []string{"2024-01-01", "3"}, SD: hmsreq.TextSD("file:/tmp/x"), Params: map[string]string{"behind": "the proxy"}}.Field(3))
	call(t, direct, "alter_partition", alter)
	ttl := caching.Store.Policy(hms.KindPartitions).TTL
	if caching.Store.Policy(hms.KindPartitionNames).TTL != ttl {
		t.Fatal("the test assumes partitions and their names share a TTL")
	}
	clock.Advance(ttl - time.Minute) // the partitions' TTL, not the list's
	if !sameButSeqID(call(t, c, "get_partitions_by_filter", day), call(t, direct, "get_partitions_by_filter", day)) {
		t.Fatal("past the partitions' TTL: prune differs from the metastore's")
	}
}

// TestPruneSelectionKept: a filter's selection is kept per name index
// and max_parts, so the same filter with another max_parts, or over a
// name list that changed, is evaluated again.
func TestPruneSelectionKept(t *testing.T) {
	b := newPruneBed(t, nil)
	caching, c, direct := b.caching, b.c, b.direct
	const flt = `ds = '2024-01-01' and hr > 2`
	for _, max := range []int16{-1, 2, -1, 5, 5, 2, -1} {
		sameReply(t, fmt.Sprintf("max %d: ", max), c, direct, "get_partitions_by_filter", filterArgs("get_partitions_by_filter", flt, max))
		caching.Store.Wait()
	}
	call(t, c, "add_partition", addArgs("add_partition"))
	for range 3 {
		sameReply(t, "after an add: ", c, direct, "get_partitions_by_filter", filterArgs("get_partitions_by_filter", flt, -1))
		caching.Store.Wait()
	}
}

// TestPruneConnectionFollowsTableAndScope: a connection keeps the reads
// a prune makes up for the table it pruned last (prunedLast), under its
// scope: a prune of another table makes its own, and so does one after
// the scope changed (the metastore gained a filter hook): what the prune
// loads then is keyed by the user, so the user's own read of the table
// finds it.
func TestPruneConnectionFollowsTableAndScope(t *testing.T) {
	demo, addr := proxytest.Demo(t, proxytest.DemoOptions{Seed: [3]int{1, 2, 24}})
	caching := newCaching(t, nil)
	caching.ScopeInterval = 5 * time.Millisecond
	f := &confForwarder{others: true}
	paddr := startProxyOver(t, caching, addr, func(up Forwarder) Forwarder { f.up = up; return f })
	c, direct := userConn(t, paddr, "alice"), dial(t, addr, wire.Buffered)
	of := func(tbl string) []byte {
		return hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, tbl), hmsreq.Str(3, `hr > 3`), hmsreq.I16(4, -1))
	}
	for range 3 {
		for _, tbl := range []string{"t0", "t1"} {
			sameReply(t, tbl+": ", c, direct, "get_partitions_by_filter", of(tbl))
			caching.Store.Wait()
		}
	}
	f.setHook("io.example.SecretHook")
	wait.Until(10*time.Second, func() bool { return caching.Store.Stats(hms.KindTable).Entries.Load() == 0 })
	if e := caching.Store.Stats(hms.KindTable).Entries.Load(); e != 0 {
		t.Fatalf("%d table entries left 10s after the scope changed; want 0 (flushed)", e)
	}
	sameReply(t, "after the scope changed: ", c, direct, "get_partitions_by_filter", of("t1"))
	caching.Store.Wait()
	n := demo.CallCount("get_table")
	call(t, c, "get_table", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t1")))
	if demo.CallCount("get_table") != n {
		t.Fatal("alice's get_table missed the table her prune loaded after the scope changed: it was loaded under another scope")
	}
}
