package proxy

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

type rewriteSink struct {
	to upstream.ReplySink
	rw func([]byte) []byte
}

func (s rewriteSink) Reply(m wire.Message) error {
	if m.Type != wire.Reply {
		return s.to.Reply(m)
	}
	out := append(append([]byte(nil), m.Header()...), s.rw(m.Body())...)
	mm, err := wire.Parse(out, wire.Limits{})
	if err != nil {
		return err
	}
	return s.to.Reply(mm)
}

func startTablesProxy(t *testing.T, caching *Caching, addr string) (string, *batchCallsForwarder) {
	f := &batchCallsForwarder{of: hms.BatchTables}
	return startProxyOver(t, caching, addr, func(up Forwarder) Forwarder { f.up = up; return f }), f
}

func tableObjectsReq(method, db string, names ...string) []byte {
	if method == "get_table_objects_by_name_req" {
		return hmsreq.Req(hmsreq.Str(1, db), hmsreq.Strings(2, names...))
	}
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Strings(2, names...))
}

// TestTableObjectsPerTable: a table-objects call naming one table is
// served from that table's entry whatever the case and repetition of the
// name; misses fetch only that table; a write to one table leaves the
// other tables' entries cached; calls naming several tables keep whole
// replies (the metastore's order is its database's). Every reply equals
// the metastore's.
func TestTableObjectsPerTable(t *testing.T) {
	for _, method := range []string{"get_table_objects_by_name", "get_table_objects_by_name_req"} {
		t.Run(method, func(t *testing.T) {
			_, addr := startDemo(t, wire.Buffered)
			caching := newCaching(t, nil)
			paddr, rec := startTablesProxy(t, caching, addr)
			direct := dial(t, addr, wire.Buffered)
			c := dial(t, paddr, wire.Buffered)
			// check compares one call with the metastore's answer and
			// with the upstream calls it should have made.
			check := func(step string, upstreamCalls [][]string, db string, names ...string) {
				t.Helper()
				args := tableObjectsReq(method, db, names...)
				got := call(t, c, method, args)
				caching.Store.Wait()
				if calls := rec.take(); !slices.EqualFunc(calls, upstreamCalls, slices.Equal) {
					t.Fatalf("%s: upstream calls %q; want %q", step, calls, upstreamCalls)
				}
				if want := call(t, direct, method, args); !sameButSeqID(got, want) {
					t.Fatalf("%s: reply differs from the metastore's\n got %x\nwant %x", step, got, want)
				}
			}
			none := [][]string{}
			check("t0 miss", [][]string{{"t0"}}, "demo_db0", "t0")
			check("t0 hit", none, "demo_db0", "t0")
			check("t0 hit, case and duplicates", none, "demo_db0", "T0", "t0", "T0")
			check("t1 miss", [][]string{{"T1"}}, "demo_db0", "T1")
			check("t1 hit", none, "demo_db0", "t1")
			check("t2 miss", [][]string{{"t2"}}, "demo_db0", "t2")
			// Several tables: the whole reply, cached whole.
			check("several, miss", [][]string{{"t1", "t0", "nope"}}, "demo_db0", "t1", "t0", "nope")
			check("several, hit", none, "demo_db0", "t1", "t0", "nope")
			// Missing tables and databases are asked every time.
			check("missing table", [][]string{{"nope"}}, "demo_db0", "nope")
			check("missing table again", [][]string{{"nope"}}, "demo_db0", "nope")
			check("missing db", [][]string{{"t0"}}, "nope_db", "t0")
			check("missing db again", [][]string{{"t0"}}, "nope_db", "t0")
			// An entry of another database is not this one's.
			check("t0 of db1", [][]string{{"t0"}}, "demo_db1", "t0")

			// alter_table of t1: its entry goes, t0's and t2's stay.
			call(t, c, "alter_table", alterTableArgs("demo_db0", "t1", testTable("demo_db0", "t1", map[string]string{"v": "2"})))
			check("t1 after alter", [][]string{{"t1"}}, "demo_db0", "t1")
			check("t1 cached again", none, "demo_db0", "t1")
			check("t0 still cached", none, "demo_db0", "t0")
			check("t2 still cached", none, "demo_db0", "T2")
			check("several after alter", [][]string{{"t1", "t0", "nope"}}, "demo_db0", "t1", "t0", "nope")
		})
	}
}

// TestTableObjectsUnsplittable: a one-table reply this code cannot take
// apart (a result field it does not know, a table it cannot name) reaches
// the client as the metastore sent it and is never cached per table.
func TestTableObjectsUnsplittable(t *testing.T) {
	cases := map[string]func([]byte) []byte{
		// GetTablesResult with a field after the list.
		"extra result field": func(b []byte) []byte {
			e := wire.Encoder{B: append([]byte(nil), b[:len(b)-2]...)}
			e.I32Field(2, 7)
			e.Stop()
			e.Stop()
			return e.B
		},
		// The table's name field renamed away (a projection, say).
		"unnamed table": func(b []byte) []byte {
			out := append([]byte(nil), b...)
			// field 0 struct, field 1 list, list header, then the Table's
			// first field header: string 1 -> string 99.
			for i := 0; i+2 < len(out); i++ {
				if out[i] == wire.TString && out[i+1] == 0 && out[i+2] == 1 {
					out[i+2] = 99
					break
				}
			}
			return out
		},
	}
	for name, rw := range cases {
		t.Run(name, func(t *testing.T) {
			_, addr := startDemo(t, wire.Buffered)
			caching := newCaching(t, nil)
			paddr, rec := startTablesProxy(t, caching, addr)
			rec.rewrite = rw
			c := dial(t, paddr, wire.Buffered)
			args := tableObjectsReq("get_table_objects_by_name_req", "demo_db0", "t0")
			first := call(t, c, "get_table_objects_by_name_req", args)
			caching.Store.Wait()
			second := call(t, c, "get_table_objects_by_name_req", args)
			if calls := rec.take(); len(calls) != 2 {
				t.Fatalf("upstream calls %q; want both calls forwarded (nothing cached)", calls)
			}
			if !sameButSeqID(first, second) {
				t.Fatal("two forwarded replies differ")
			}
			m, err := wire.Parse(first, wire.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if body := m.Body(); string(body) != string(rw(mustBody(t, call(t, dial(t, addr, wire.Buffered), "get_table_objects_by_name_req", args)))) {
				t.Fatalf("client did not get the metastore's reply as sent\n got %x", body)
			}
		})
	}
}

func mustBody(t *testing.T, reply []byte) []byte {
	t.Helper()
	m, err := wire.Parse(reply, wire.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return m.Body()
}

// TestTableObjectsRefresh: a per-table entry past its refresh age is
// served at once and reloaded with one upstream call.
func TestTableObjectsRefresh(t *testing.T) {
	args := tableObjectsReq("get_table_objects_by_name", "demo_db0", "t0")
	got := refreshOfDueHits(t, hms.BatchTables, hms.KindTable, "get_table_objects_by_name", args)
	if len(got) != 1 || !slices.Equal(got[0], []string{"t0"}) {
		t.Fatalf("refresh made calls %q; want one call for t0", got)
	}
}

// TestTableObjectsMissesCoalesce: identical one-table table-objects reads
// that miss together share one load (issue 10, item 8), and a read after
// a write to the table does not join a load from before it.
func TestTableObjectsMissesCoalesce(t *testing.T) {
	for _, method := range []string{"get_table_objects_by_name", "get_table_objects_by_name_req"} {
		t.Run(method, func(t *testing.T) {
			_, addr := startDemo(t, wire.Buffered)
			caching := newCaching(t, nil)
			gate := newGate(method)
			rec := &batchCallsForwarder{of: hms.BatchTables, up: gate}
			paddr, joined := startJoinWatchingProxy(t, caching, addr, func(up Forwarder) Forwarder { gate.up = up; return rec })
			direct := dial(t, addr, wire.Buffered)
			args := tableObjectsReq(method, "demo_db0", "t1")
			want := call(t, direct, method, args)

			first := callAsync(t, paddr, method, args)
			loadFirst := gate.held(t, "the first read's load")
			var rest []<-chan []byte
			for i := 0; i < 3; i++ {
				rest = append(rest, callAsync(t, paddr, method, args))
			}
			for i := 0; i < 3; i++ {
				select {
				case <-joined:
				case <-gate.arrived:
					t.Fatalf("read %d went upstream while an identical load was in flight", i+2)
				case <-time.After(10 * time.Second):
					t.Fatal("reads neither joined nor went upstream")
				}
			}
			close(loadFirst)
			for i, ch := range append(rest, first) {
				if got := proxytest.Recv(t, ch, fmt.Sprintf("read %d's reply", i)); !sameButSeqID(got, want) {
					t.Fatalf("read %d: reply differs from the metastore's", i)
				}
			}
			if calls := rec.take(); len(calls) != 1 {
				t.Fatalf("%d upstream calls for 4 identical reads; want 1: %q", len(calls), calls)
			}

			// Generations: a read after a write never joins the load
			// before it.
			call(t, dial(t, paddr, wire.Buffered), "alter_table", alterTableArgs("demo_db0", "t1",
				testTable("demo_db0", "t1", map[string]string{"v": "1"})))
			before := callAsync(t, paddr, method, args)
			loadBefore := gate.held(t, "the load of the read before the write")
			call(t, dial(t, paddr, wire.Buffered), "alter_table", alterTableArgs("demo_db0", "t1",
				testTable("demo_db0", "t1", map[string]string{"v": "2"})))
			after := callAsync(t, paddr, method, args)
			var loadAfter chan struct{}
			select {
			case loadAfter = <-gate.arrived:
			case <-joined:
				t.Fatal("a read after a write joined a load from before it")
			case <-time.After(10 * time.Second):
				t.Fatal("the read after the write neither joined nor went upstream")
			}
			close(loadBefore)
			close(loadAfter)
			proxytest.Recv(t, before, "the reply to the read before the write")
			if got, want := proxytest.Recv(t, after, "the reply to the read after the write"), call(t, direct, method, args); !sameButSeqID(got, want) {
				t.Fatal("the read after the write differs from the metastore's answer")
			}
		})
	}
}
