package proxy

import (
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
)

// plannerNames are the names of every seeded partition of demo_db0.t0, out
// of order and with one twice, as a planner might send them.
func plannerNames() []string {
	names := []string{partName(7), partName(7)}
	for i := 19; i >= 0; i-- {
		names = append(names, partName(i))
	}
	return names
}

// memoRounds makes enough identical by-names reads for the request to be
// answered from its memo's flat copy (a miss, a memoised hit, a hit that
// joins the copy, a hit from it), each compared with the metastore's
// reply, and reports whether a flat copy is held then (the store's
// reservation): the seam that shows the fast path ran.
func memoRounds(t *testing.T, c, direct *hmsclient.Client, st *cache.Store, args []byte, when string) bool {
	t.Helper()
	return memoRoundsOf(t, c, direct, st, "get_partitions_by_names", args, when)
}

func memoRoundsOf(t *testing.T, c, direct *hmsclient.Client, st *cache.Store, method string, args []byte, when string) bool {
	t.Helper()
	for i := 0; i < 4; i++ {
		if !sameButSeqID(call(t, c, method, args), call(t, direct, method, args)) {
			t.Fatalf("%s, read %d: the proxy's reply differs from the metastore's", when, i)
		}
		st.Wait()
	}
	return st.Reserved() > 0
}

// TestBatchMemoFollowsWrites (#24): a by-names read answered from its
// memo (the entries it found last, and their bytes joined ready to
// write) follows every write that changes one of its partitions, made
// through this proxy or applied from a peer over the bus: the next read
// equals the metastore's reply, and the joined copy's budget is given
// back when it is dropped.
func TestBatchMemoFollowsWrites(t *testing.T) {
	alter := func(hr string) []byte {
		return hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Partition{DB: "demo_db0", Table: "t0",
			Values: []string{"2024-01-01", hr}, SD: hmsreq.TextSD("file:/tmp/x"), Params: map[string]string{"altered": hr}}.Field(3))
	}
	args := byNamesReq("get_partitions_by_names", plannerNames()...)
	for _, path := range []string{"proxy", "bus"} {
		t.Run(path, func(t *testing.T) {
			caching := newCaching(t, nil)
			b := newSideBySide(t, caching)
			srv, c, direct, st := b.srv, b.c, b.direct, caching.Store
			for i, hr := range []string{"3", "4", "3"} {
				if !memoRounds(t, c, direct, st, args, "before write "+hr) {
					t.Fatalf("round %d: no joined copy was made: the memo's fast path did not run", i)
				}
				hits := st.Stats(hms.KindPartitions).Hits.Load()
				if path == "proxy" {
					call(t, c, "alter_partition", alter(hr))
				} else {
					call(t, direct, "alter_partition", alter(hr))
					srv.ApplyRemote([]cache.Entity{{Level: cache.LevelPartitions, Cat: "hive", DB: "demo_db0", Table: "t0"}})
				}
				if !sameButSeqID(call(t, c, "get_partitions_by_names", args), call(t, direct, "get_partitions_by_names", args)) {
					t.Fatalf("after write %s: the proxy's reply differs from the metastore's", hr)
				}
				if n := st.Reserved(); n != 0 {
					t.Fatalf("after write %s: %d bytes still reserved for a joined copy that was dropped", hr, n)
				}
				if st.Stats(hms.KindPartitions).Hits.Load()-hits >= 20 {
					t.Fatalf("after write %s: the read after it was all hits", hr)
				}
			}
		})
	}
}

// TestBatchMemoFollowsRefresh (#24): a partition changed behind the
// proxy's back is served from the memo until its entry is due for a
// refresh, and once refreshed, the memo serves the new bytes: the
// replaced entry ended what the memo vouched for.
func TestBatchMemoFollowsRefresh(t *testing.T) {
	clock := newClock()
	caching := newCaching(t, clock)
	b := newSideBySide(t, caching)
	srv, c, direct, st := b.srv, b.c, b.direct, caching.Store
	args := byNamesReq("get_partitions_by_names", plannerNames()...)
	if !memoRounds(t, c, direct, st, args, "first") {
		t.Fatal("no joined copy was made: the memo's fast path did not run")
	}
	before := call(t, c, "get_partitions_by_names", args)
	call(t, direct, "alter_partition", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Partition{DB: "demo_db0", Table: "t0",
		Values: []string{"2024-01-01", "5"}, SD: hmsreq.TextSD("file:/tmp/y"), Params: map[string]string{"behind": "yes"}}.Field(3)))
	if !sameButSeqID(call(t, c, "get_partitions_by_names", args), before) {
		t.Fatal("a write behind the proxy's back showed before any refresh: the test does not test the memo")
	}
	clock.Advance(st.Policy(hms.KindPartitions).RefreshAfter + time.Second)
	call(t, c, "get_partitions_by_names", args) // served, and the due entries refreshed
	if n := refreshesSettled(t, srv); n != 1 {
		t.Fatalf("%d refresh jobs; want 1", n)
	}
	st.Wait()
	if !memoRounds(t, c, direct, st, args, "after the refresh") {
		t.Fatal("no joined copy after the refresh")
	}
}

// TestListBytes: the memo key is the name list as sent only when the
// resolved names lie in the request back to back; anything else has no
// memo.
func TestListBytes(t *testing.T) {
	body := byNamesReq("get_partitions_by_names", "a=1", "a=2", "a=3")
	var r hms.Resolved
	meth := hms.Lookup([]byte("get_partitions_by_names"))
	if err := meth.Resolve(&r, body); err != nil {
		t.Fatal(err)
	}
	list := listBytes(body, r.List)
	if want := "\x00\x00\x00\x03a=1\x00\x00\x00\x03a=2\x00\x00\x00\x03a=3"; string(list) != want {
		t.Fatalf("got %q; want %q", list, want)
	}
	if listBytes(body, [][]byte{r.List[0], r.List[2]}) != nil {
		t.Fatal("names that are not back to back gave a list")
	}
	if listBytes(body, [][]byte{[]byte("a=1")}) != nil {
		t.Fatal("a name from elsewhere gave a list")
	}
}

// TestBatchMemoIgnoresOtherTables (#24): what a memo's joined copy is
// vouched for by is its own table's: writes to another table, and
// another table's entries leaving the store, leave it served (its
// budget stays reserved); its own table's write ends it.
func TestBatchMemoIgnoresOtherTables(t *testing.T) {
	caching := newCaching(t, nil)
	b := newSideBySide(t, caching)
	srv, c, direct, st := b.srv, b.c, b.direct, caching.Store
	args := byNamesReq("get_partitions_by_names", plannerNames()...)
	other := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t1"), hmsreq.Strings(3, partName(0), partName(1)))
	call(t, c, "get_partitions_by_names", other) // the other table's entries
	st.Wait()
	if !memoRounds(t, c, direct, st, args, "first") {
		t.Fatal("no joined copy was made: the memo's fast path did not run")
	}
	for _, churn := range []struct {
		name string
		do   func()
	}{
		{"another table's partitions invalidated", func() {
			srv.ApplyRemote([]cache.Entity{{Level: cache.LevelPartitions, Cat: "hive", DB: "demo_db0", Table: "t1"}})
			call(t, c, "get_partitions_by_names", other) // reloaded: its old entries replaced
			st.Wait()
		}},
	} {
		churn.do()
		reserved := st.Reserved()
		for i := 0; i < 2*memoLookup; i++ {
			if !sameButSeqID(call(t, c, "get_partitions_by_names", args), call(t, direct, "get_partitions_by_names", args)) {
				t.Fatalf("after %s: the proxy's reply differs from the metastore's", churn.name)
			}
			if st.Reserved() != reserved || reserved == 0 {
				t.Fatalf("after %s, read %d: reserved %d, then %d: the joined copy was dropped", churn.name, i, reserved, st.Reserved())
			}
		}
	}
	if srv.cache.batchRepeats.Load() == 0 {
		t.Fatal("no read was answered as a repeat of the last (repeatedBatch)")
	}
	srv.ApplyRemote([]cache.Entity{{Level: cache.LevelPartitions, Cat: "hive", DB: "demo_db0", Table: "t0"}})
	if !sameButSeqID(call(t, c, "get_partitions_by_names", args), call(t, direct, "get_partitions_by_names", args)) {
		t.Fatal("after its own table's write: the proxy's reply differs from the metastore's")
	}
	if n := st.Reserved(); n != 0 {
		t.Fatalf("after its own table's write: %d bytes still reserved", n)
	}
}

// TestBatchRepeatFollowsScope (#24): a by-names request repeated on a
// connection is answered from the memo's copy only under the scope it
// was answered in: once the session's overrides change what the
// metastore answers (setMetaConf), the same request is loaded for the
// new scope.
func TestBatchRepeatFollowsScope(t *testing.T) {
	caching := newCaching(t, nil)
	b := newSideBySide(t, caching)
	srv, c, direct, st := b.srv, b.c, b.direct, caching.Store
	args := byNamesReq("get_partitions_by_names", plannerNames()...)
	if !memoRounds(t, c, direct, st, args, "first") {
		t.Fatal("no joined copy was made: the memo's fast path did not run")
	}
	repeats := srv.cache.batchRepeats.Load()
	call(t, c, "get_partitions_by_names", args)
	if srv.cache.batchRepeats.Load() == repeats {
		t.Fatal("the repeated request was not answered by repeatedBatch")
	}
	call(t, c, "setMetaConf", hmsclient.Args("hive.metastore.try.direct.sql", "false"))
	loads := b.demo.CallCount("get_partitions_by_names")
	if !sameButSeqID(call(t, c, "get_partitions_by_names", args), call(t, direct, "get_partitions_by_names", args)) {
		t.Fatal("after setMetaConf: the proxy's reply differs from the metastore's")
	}
	if n := b.demo.CallCount("get_partitions_by_names") - loads; n != 2 {
		t.Fatalf("after setMetaConf: %d by-names loads (the proxy's and the direct one); want 2: the scope's own", n)
	}
}

// TestBatchMemoRequestForm (#24): the request form's reply (the list in
// a result struct) goes out from a memo's joined copy as the metastore
// sends it.
func TestBatchMemoRequestForm(t *testing.T) {
	caching := newCaching(t, nil)
	b := newSideBySide(t, caching)
	c, direct := b.c, b.direct
	args := byNamesReq("get_partitions_by_names_req", plannerNames()...)
	if !memoRoundsOf(t, c, direct, caching.Store, "get_partitions_by_names_req", args, "request form") {
		t.Fatal("no joined copy was made: the memo's fast path did not run")
	}
	for i := 0; i < memoLookup; i++ {
		if !sameButSeqID(call(t, c, "get_partitions_by_names_req", args), call(t, direct, "get_partitions_by_names_req", args)) {
			t.Fatalf("read %d from the joined copy differs from the metastore's", i)
		}
	}
}

// TestBatchRepeatComparesRequest (#24): only the very request last
// answered from a memo's copy is answered as its repeat: another one of
// the same length, the same table and flags, names other partitions.
func TestBatchRepeatComparesRequest(t *testing.T) {
	caching := newCaching(t, nil)
	b := newSideBySide(t, caching)
	c, direct, st := b.c, b.direct, caching.Store
	var first, other []string
	for i := 10; i < 20; i++ {
		first = append(first, partName(i))
	}
	other = append(other, first...)
	other[9] = "ds=2024-01-01/hr=99" // no such partition, as long as the one it replaces
	a, o := byNamesReq("get_partitions_by_names", first...), byNamesReq("get_partitions_by_names", other...)
	if len(a) != len(o) {
		t.Fatalf("requests of %d and %d bytes; the test wants them alike", len(a), len(o))
	}
	if !memoRounds(t, c, direct, st, a, "first") {
		t.Fatal("no joined copy was made: the memo's fast path did not run")
	}
	if !sameButSeqID(call(t, c, "get_partitions_by_names", o), call(t, direct, "get_partitions_by_names", o)) {
		t.Fatal("another request of the same length: the proxy's reply differs from the metastore's")
	}
}
