package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
)

// TestAddsLeaveExisting (#12) checks, against a real metastore, what the
// proxy's narrowed invalidation of adds relies on: every way of adding
// partitions (add_partition, add_partitions, add_partitions_req with and
// without ifNotExists over an existing partition, append_partition[_by_name],
// and the refused adds of an existing one) leaves the table object and
// every existing partition byte for byte as they were; and through a
// warm proxy the lists, the by-names reads and the new partitions match
// the metastore after each add, while the existing partitions stay hits.
func TestAddsLeaveExisting(t *testing.T) {
	eachVersion(t, runAddsLeaveExisting)
}

func runAddsLeaveExisting(t *testing.T, v string) {
	ms := start(t, v)
	begin := time.Now()
	db, dbLoc, direct, mustOK := scratchDB(t, ms, v, "adds", "adds")
	tblLoc := dbLoc + "/events"
	mustOK("create_table", hmsreq.Args(corpusTable(db, "events", tblLoc, true).Field(1)))
	part := func(ds string) hmsreq.Partition { return corpusPartition(db, "events", tblLoc, ds) }
	mustOK("add_partitions", hmsreq.Args(hmsreq.Partitions(1, part("2024-01-01"), part("2024-01-02"))))

	kinds := cache.DefaultKinds()
	kinds[hms.KindPartition].Negative = true
	n := startProxy(t, ms, nodeOpts{kinds: &kinds})
	c := dial(t, n.addr)
	tbl := hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"))
	existing := []struct {
		method string
		args   []byte
	}{
		{"get_table", tbl},
		{"get_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, "2024-01-01"))},
		{"get_partition_by_name", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Str(3, "ds=2024-01-02"))},
		{"get_partitions_by_names", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, "ds=2024-01-01", "ds=2024-01-02"))},
	}
	before := make([][]byte, len(existing))
	for i, r := range existing {
		before[i] = call(t, direct, r.method, r.args)
	}
	names := hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.I16(3, -1))
	newPart := func(ds string) []byte {
		return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Str(3, "ds="+ds))
	}
	adds := []struct {
		name, method string
		args         []byte
		ds           string // the partition it adds, "" none
	}{
		{"add_partition", "add_partition", hmsreq.Args(part("2024-01-03").Field(1)), "2024-01-03"},
		{"add_partitions", "add_partitions", hmsreq.Args(hmsreq.Partitions(1, part("2024-01-04"), part("2024-01-05"))), "2024-01-05"},
		{"add_partitions_req if not exists", "add_partitions_req",
			hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Partitions(3, part("2024-01-01"), part("2024-01-06")), hmsreq.Bool(4, true), hmsreq.Bool(5, true)), "2024-01-06"},
		{"add_partitions_req existing", "add_partitions_req",
			hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Partitions(3, part("2024-01-02"), part("2024-01-07")), hmsreq.Bool(4, false), hmsreq.Bool(5, false)), ""},
		{"append_partition", "append_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, "2024-01-08")), "2024-01-08"},
		{"append_partition_by_name", "append_partition_by_name", newPart("2024-01-09"), "2024-01-09"},
		{"append_partition existing", "append_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, "2024-01-01")), ""},
	}
	for _, a := range adds {
		// Warm: the existing objects, the names and the partition to come
		// (not found, cached as such).
		for _, r := range existing {
			call(t, c, r.method, r.args)
		}
		call(t, c, "get_partition_names", names)
		if a.ds != "" {
			call(t, c, "get_partition_by_name", newPart(a.ds))
		}
		n.store.Wait()
		hits := n.srv.Stats().Method("get_partition", proxy.OutcomeHit)
		fmt.Printf("e2e: adds HMS %s: %s answered %s\n", v, a.name, outcome(t, call(t, c, a.method, a.args)))
		for i, r := range existing {
			if now := call(t, direct, r.method, r.args); !sameButSeqID(now, before[i]) {
				t.Errorf("%s changed %s of what existed:\nbefore %x\nafter  %x", a.name, r.method, before[i], now)
			}
			if got := call(t, c, r.method, r.args); !sameButSeqID(got, before[i]) {
				t.Errorf("after %s, the proxy's %s differs from the metastore's", a.name, r.method)
			}
		}
		counted(t, c)
		if got := n.srv.Stats().Method("get_partition", proxy.OutcomeHit) - hits; got != 1 {
			t.Errorf("after %s, get_partition of an existing partition: %d hits; want 1 (its entry kept)", a.name, got)
		}
		reads := []struct {
			method string
			args   []byte
		}{{"get_partition_names", names}}
		if a.ds != "" {
			reads = append(reads, struct {
				method string
				args   []byte
			}{"get_partition_by_name", newPart(a.ds)})
		}
		for _, r := range reads {
			if got, want := call(t, c, r.method, r.args), call(t, direct, r.method, r.args); !sameButSeqID(got, want) {
				t.Errorf("after %s, the proxy's %s differs from the metastore's", a.name, r.method)
			}
		}
	}
	fmt.Printf("e2e: adds HMS %s: %d ways of adding checked, %v\n", v, len(adds), time.Since(begin).Round(100*time.Millisecond))
}
