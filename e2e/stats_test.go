package e2e

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// statsCols are the data columns of the statistics test's table, in
// table order; their names sort otherwise.
var statsCols = []hmsreq.Column{{Name: "zeta", Type: "bigint"}, {Name: "alpha", Type: "string"}, {Name: "mid", Type: "bigint"}, {Name: "beta", Type: "string"}}

// statsObj is the fields of a ColumnStatistics of one column of db.tbl
// (of partition part, or of the table when part is "").
func statsObj(db, tbl, part string, col hmsreq.Column, n int64) []hmsreq.Field {
	desc := []hmsreq.Field{hmsreq.Bool(1, part == ""), hmsreq.Str(2, db), hmsreq.Str(3, tbl)}
	if part != "" {
		desc = append(desc, hmsreq.Str(4, part))
	}
	desc = append(desc, hmsreq.I64(5, fixedTime))
	var data hmsreq.Field
	if col.Type == "bigint" {
		data = hmsreq.Struct(2, hmsreq.I64(1, 0), hmsreq.I64(2, n), hmsreq.I64(3, n%3), hmsreq.I64(4, n))
	} else {
		data = hmsreq.Struct(4, hmsreq.I64(1, n), func(e *wire.Encoder) { e.FieldBegin(wire.TDouble, 2); e.Double(float64(n) / 2) },
			hmsreq.I64(3, n%3), hmsreq.I64(4, n))
	}
	return []hmsreq.Field{hmsreq.Struct(1, desc...), hmsreq.StructList(2, []hmsreq.Field{hmsreq.Str(1, col.Name), hmsreq.Str(2, col.Type), hmsreq.Struct(3, data)})}
}

// TestPartitionStatsReal: get_partitions_statistics_req answered through
// the proxy per partition (from entries of earlier requests, the rest
// fetched) is byte-equal to the metastore's answer to the same request,
// for every shape a planner sends: subsets of partitions and columns in
// any order, repeats, columns in upper case, unknown columns and
// partitions, partitions without statistics, names not in stored form;
// and it stays so after every write that changes statistics, made
// through the proxy. Requests made of partitions seen before are hits.
func TestPartitionStatsReal(t *testing.T) {
	eachVersion(t, runPartitionStats)
}

func runPartitionStats(t *testing.T, v string) {
	ms := start(t, v)
	begin := time.Now()
	db, dbLoc, direct, mustOK := scratchDB(t, ms, v, "pstats", "partition statistics")
	const tbl = "t"
	tblLoc := dbLoc + "/" + tbl
	table := corpusTable(db, tbl, tblLoc, true)
	table.SD = hmsreq.TextSD(tblLoc, statsCols...)
	mustOK("create_table", hmsreq.Args(table.Field(1)))
	var parts []hmsreq.Partition
	var names []string
	for i := 1; i <= 30; i++ {
		ds := fmt.Sprintf("2024-01-%02d", i)
		p := corpusPartition(db, tbl, tblLoc, ds)
		p.SD = hmsreq.TextSD(tblLoc+"/ds="+ds, statsCols...)
		parts = append(parts, p)
		names = append(names, "ds="+ds)
	}
	// A few at a time: 2.3 (DataNucleus on Derby) fails a call adding 30
	// ("Exception thrown flushing changes to datastore").
	for i := 0; i < len(parts); i += 3 {
		mustOK("add_partitions", hmsreq.Args(hmsreq.Partitions(1, parts[i:min(i+3, len(parts))]...)))
	}
	// Statistics written column by column in three orders; every
	// seventh partition lacks "mid", every fifth has none at all.
	rng := rand.New(rand.NewSource(24))
	for i, name := range names {
		if i%5 == 4 {
			continue
		}
		for _, j := range rng.Perm(len(statsCols)) {
			if i%7 == 3 && statsCols[j].Name == "mid" {
				continue
			}
			mustOK("update_partition_column_statistics", hmsreq.Args(hmsreq.Struct(1, statsObj(db, tbl, name, statsCols[j], int64(i*10+j))...)))
		}
	}

	for _, j := range []int{2, 0, 3} {
		mustOK("update_table_column_statistics", hmsreq.Args(hmsreq.Struct(1, statsObj(db, tbl, "", statsCols[j], int64(j))...)))
	}

	n := startProxy(t, ms, nodeOpts{})
	c := dial(t, n.addr)
	const method, tableMethod = "get_partitions_statistics_req", "get_table_statistics_req"
	args := func(cols, parts []string) []byte {
		return hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, cols...), hmsreq.Strings(4, parts...))
	}
	pick := func(k int) []string {
		out := make([]string, 0, k)
		for _, i := range rng.Perm(len(names))[:k] {
			out = append(out, names[i])
		}
		return out
	}
	type req struct{ cols, parts []string }
	reqs := []req{
		{[]string{"zeta", "alpha", "mid", "beta"}, names},
		{[]string{"beta", "alpha"}, pick(7)},
		{[]string{"mid", "zeta"}, pick(12)},
		{[]string{"MID", "zeta", "nope"}, append(pick(9), "ds=1999-12-31", names[2], "DS=2024-01-05")},
		{[]string{"zeta", "zeta"}, pick(20)},
		{[]string{"nope"}, pick(5)},
		{[]string{"alpha", "beta", "mid", "zeta"}, append(pick(4), "ds=2024-01-01", "ds=2024-01-01")},
	}
	checks := 0
	compare := func(what string) {
		t.Helper()
		for i, r := range reqs {
			a := args(r.cols, r.parts)
			got, want := call(t, c, method, a), call(t, direct, method, a)
			if !sameButSeqID(got, want) {
				t.Errorf("%s: request %d (columns %q, %d partitions): the reply through the proxy differs from the metastore's\n got %x\nwant %x",
					what, i, r.cols, len(r.parts), got, want)
			}
			checks++
			ta := hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, r.cols...))
			if got, want := call(t, c, tableMethod, ta), call(t, direct, tableMethod, ta); !sameButSeqID(got, want) {
				t.Errorf("%s: %s of columns %q: the reply through the proxy differs from the metastore's\n got %x\nwant %x",
					what, tableMethod, r.cols, got, want)
			}
			checks++
			n.store.Wait()
		}
	}
	compare("first round")
	compare("second round")
	counted(t, c)
	hits, tableHits := n.srv.Stats().Method(method, proxy.OutcomeHit), n.srv.Stats().Method(tableMethod, proxy.OutcomeHit)
	// Partitions asked for before, for the same set of columns spelt
	// otherwise, in another order and mix: the entries serve them.
	reqs = append(reqs, req{[]string{"mid", "beta", "ALPHA", "zeta", "beta"}, pick(15)},
		req{[]string{"zeta", "MID"}, append(reqs[2].parts[:5:5], reqs[2].parts[7])})
	compare("new mix of cached partitions")
	counted(t, c)
	if got := n.srv.Stats().Method(method, proxy.OutcomeHit) - hits; got < uint64(len(reqs)) {
		t.Errorf("hits in a round of requests whose partitions were all asked for before: %d; want %d", got, len(reqs))
	}
	// Table statistics of the same column sets, spelt otherwise: hits.
	if got := n.srv.Stats().Method(tableMethod, proxy.OutcomeHit) - tableHits; got < uint64(len(reqs)) {
		t.Errorf("%s hits in a round of column sets asked for before: %d; want %d", tableMethod, got, len(reqs))
	}

	// Every write that changes statistics, through the proxy: the next
	// replies are the metastore's new ones.
	through := okCaller(t, c)
	delStats := func(part, col string) []byte {
		f := []hmsreq.Field{hmsreq.Str(1, db), hmsreq.Str(2, tbl)}
		if part != "" {
			f = append(f, hmsreq.Str(3, part), hmsreq.Str(4, col))
		} else {
			f = append(f, hmsreq.Str(3, col))
		}
		if v == "4.0" {
			f = append(f, hmsreq.Str(int16(len(f)+1), "hive"))
		}
		return hmsreq.Args(f...)
	}
	narrowed := corpusPartition(db, tbl, tblLoc, "2024-01-04")
	narrowed.SD = hmsreq.TextSD(tblLoc+"/ds=2024-01-04", statsCols[:2]...)
	writes := []struct {
		method string
		args   []byte
	}{
		{"update_partition_column_statistics", hmsreq.Args(hmsreq.Struct(1, statsObj(db, tbl, names[4], statsCols[0], 999)...))},
		{"delete_partition_column_statistics", delStats(names[0], "beta")},
		{"set_aggr_stats_for", hmsreq.Req(hmsreq.StructList(1,
			statsObj(db, tbl, names[9], statsCols[2], 777), statsObj(db, tbl, names[13], statsCols[2], 778)))},
		{"alter_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), narrowed.Field(3))},
		{"update_table_column_statistics", hmsreq.Args(hmsreq.Struct(1, statsObj(db, tbl, "", statsCols[1], 5)...))},
		{"delete_table_column_statistics", delStats("", "alpha")},
		{"drop_partition_by_name", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Str(3, names[1]), hmsreq.Bool(4, true))},
	}
	for _, w := range writes {
		through(w.method, w.args)
		n.store.Wait()
		compare("after " + w.method)
	}
	fmt.Printf("e2e: partition statistics HMS %s: %d replies compared, %d writes, %v\n", v, checks, len(writes), time.Since(begin).Round(100*time.Millisecond))
}
