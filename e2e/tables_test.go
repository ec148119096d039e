package e2e

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestTableObjectsOrderReal: get_table_objects_by_name (and _req where
// the metastore has it) answered through the proxy per table, from a mix
// of cached and fetched entries, is byte-equal to the metastore's own
// answer: order, duplicates, upper-case and missing names included.
func TestTableObjectsOrderReal(t *testing.T) {
	eachVersion(t, runTableObjectsOrder)
}

// replyTableNames lists the tableName of every Table in a table-objects
// reply, in order.
func replyTableNames(t *testing.T, reply []byte, inStruct bool) []string {
	t.Helper()
	m, err := wire.Parse(reply, wire.Limits{MaxMessage: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	p := hms.Path{0, hms.Each, 1}
	if inStruct {
		p = hms.Path{0, 1, hms.Each, 1}
	}
	var out []string
	hms.Walk(m.Body(), p, func(typ byte, v []byte) bool {
		out = append(out, string(v))
		return true
	})
	return out
}

func runTableObjectsOrder(t *testing.T, v string) {
	ms := start(t, v)
	begin := time.Now()
	db, dbLoc, direct, mustOK := scratchDB(t, ms, v, "tblorder", "table order")
	// Creation order differs from name order; "mid" is dropped and
	// created again so that its row id is the newest.
	created := []string{"zeta", "alpha_9", "m2", "mid", "b", "m10", "alpha_10", "x_1", "c3", "aa", "k", "q_z"}
	for _, name := range created {
		mustOK("create_table", hmsreq.Args(corpusTable(db, name, dbLoc+"/"+name, name[0] < 'n').Field(1)))
	}
	mustOK("drop_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "mid"), hmsreq.Bool(3, true)))
	mustOK("create_table", hmsreq.Args(corpusTable(db, "mid", dbLoc+"/mid", false).Field(1)))

	n := startProxy(t, ms, nodeOpts{})
	c := dial(t, n.addr)
	rng := rand.New(rand.NewSource(7))
	var checks int
	var orders []string
	for _, method := range []string{"get_table_objects_by_name", "get_table_objects_by_name_req"} {
		inStruct := method == "get_table_objects_by_name_req"
		args := func(names []string) []byte {
			if inStruct {
				return hmsreq.Req(hmsreq.Str(1, db), hmsreq.Strings(2, names...))
			}
			return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Strings(2, names...))
		}
		if o := outcome(t, call(t, direct, method, args([]string{"b"}))); o != "ok" {
			t.Logf("HMS %s: %s answers %s; skipped", v, method, o)
			continue
		}
		shuffled := func(names ...string) []string {
			out := append([]string(nil), names...)
			rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
			return out
		}
		sets := [][]string{
			{"q_z", "aa"}, // a few first, so later sets mix hits and misses
			{"m10", "b", "zeta"},
			shuffled(created...),
			shuffled(append(append([]string{}, created...), "b", "zeta", "B", "ZETA", "Alpha_9", "missing", "nope_2")...),
			{"K", "k", "c3", "C3", "missing", "c3"},
			{"MID", "x_1", "M2", "m2"},
			{"missing"},
			{"mid", "alpha_10", "alpha_9", "m2", "m10"},
			{"zeta", "zeta", "zeta"},
			// One distinct table: served from its own entry.
			{"b"}, {"B", "b"}, {"C3"}, {"c3", "c3"}, {"MID"}, {"k"}, {"Zeta"},
		}
		for round := 0; round < 2; round++ {
			for si, set := range sets {
				a := args(set)
				want := call(t, direct, method, a)
				got := call(t, c, method, a)
				if round == 0 {
					orders = append(orders, fmt.Sprintf("%s %q -> %q", method, set, replyTableNames(t, want, inStruct)))
				}
				if !sameButSeqID(got, want) {
					t.Errorf("%s round %d set %d %q: reply through the proxy differs from the metastore's\n got %q\nwant %q\n got %x\nwant %x",
						method, round, si, set, replyTableNames(t, got, inStruct), replyTableNames(t, want, inStruct), got, want)
				}
				checks++
				n.store.Wait()
			}
		}
		// One table altered: its entry goes, the others stay.
		// Through the proxy: a write that bypasses it is seen only through
		// the event-log poller, not running here.
		if o := outcome(t, call(t, c, "alter_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "c3"), corpusTable(db, "c3", dbLoc+"/c3", true, "altered", method).Field(3)))); o != "ok" {
			t.Fatalf("alter_table: %s", o)
		}
		hitsBefore := n.srv.Stats().Method(method, proxy.OutcomeHit)
		all := args(shuffled(created...))
		if got, want := call(t, c, method, all), call(t, direct, method, all); !sameButSeqID(got, want) {
			t.Errorf("%s after alter_table: reply through the proxy differs from the metastore's\n got %q\nwant %q",
				method, replyTableNames(t, got, inStruct), replyTableNames(t, want, inStruct))
		}
		checks++
		for _, set := range [][]string{{"c3"}, {"C3", "c3"}, {"b"}, {"k", "K"}} {
			a := args(set)
			if got, want := call(t, c, method, a), call(t, direct, method, a); !sameButSeqID(got, want) {
				t.Errorf("%s %q after alter_table: reply through the proxy differs from the metastore's\n got %x\nwant %x", method, set, got, want)
			}
			checks++
		}
		// c3's entry went with the write; b's and k's stayed.
		counted(t, c)
		if h := n.srv.Stats().Method(method, proxy.OutcomeHit) - hitsBefore; h != 3 {
			t.Errorf("%s after alter_table of c3: %d hits; want 3 (c3 fetched once, then c3, b, k from their entries)", method, h)
		}
		if h := n.srv.Stats().Method(method, proxy.OutcomeHit); h == 0 {
			t.Errorf("%s: no call was served wholly from the cache", method)
		}
	}
	for _, o := range orders {
		t.Logf("HMS %s: %s", v, o)
	}
	fmt.Printf("e2e: table objects order HMS %s: %d replies compared, %v\n", v, checks, time.Since(begin).Round(100*time.Millisecond))
}
