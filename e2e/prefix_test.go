package e2e

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
)

// TestCatalogPrefixReal (issue 10) runs reads and writes whose database
// name is sent as "@hive#db", as 3.x/4.0 Java clients send it, and in the
// plain form, through a caching proxy in front of a real metastore:
//
//   - every reply through the proxy is the metastore's own answer to that
//     request at that moment (read again directly right after, byte-equal
//     but for the seqid). On 2.3, which takes "@hive#db" as a literal,
//     unknown database, a prefixed not-found is thus never served to a
//     plain request, nor the reverse;
//   - on 3.1 and 4.0 a prefixed write reaches the real entity (it
//     succeeds) and invalidates the reads cached in either form: they are
//     served from the cache before it, loaded again after it and then
//     show the change; on 2.3 the prefixed write fails, as the server
//     sees an unknown database, and the reads stay the server's answers.
func TestCatalogPrefixReal(t *testing.T) {
	eachVersion(t, runCatalogPrefix)
}

// pstep is one call of the prefix test.
type pstep struct {
	method string
	args   []byte
	write  bool
	// changed, on a read: on 3.0+ its reply must differ from the one the
	// same read got before the last write (the write reached the entity).
	changed bool
	// after, on a read: it follows a write that must have invalidated it,
	// so the proxy loads it again (a miss) rather than serving its entry.
	after bool
}

func runCatalogPrefix(t *testing.T, v string) {
	ms := start(t, v)
	n := startProxy(t, ms, nodeOpts{})
	direct := dial(t, ms.addr)
	c := dial(t, n.addr)
	three := v != "2.3"
	db := "cpfx_" + strings.ReplaceAll(v, ".", "")
	pdb := "@hive#" + db
	loc := "file://" + ms.work + "/cpfx-wh/" + db + ".db"
	S := hmsreq.Str

	// Set up directly on the metastore.
	clMustOK(t, "create_database", call(t, direct, "create_database",
		hmsreq.Args(hmsreq.Database{Name: db, Description: "prefix", Location: loc, Owner: "e2e"}.Field(1))))
	for _, tbl := range []string{"t1", "tdrop"} {
		clMustOK(t, "create_table "+tbl, call(t, direct, "create_table", hmsreq.Args(clTable(db, tbl, kv("p", "v1")).Field(1))))
	}
	managed := hmsreq.Table{DB: db, Name: "tm", Owner: "e2e", CreateTime: 1700000000, SD: clSD(loc + "/tm")}
	clMustOK(t, "create_table tm", call(t, direct, "create_table", hmsreq.Args(managed.Field(1))))
	clMustOK(t, "append_partition", call(t, direct, "append_partition", hmsreq.Args(S(1, db), S(2, "t1"), hmsreq.Strings(3, "2024-01-01"))))

	// Reads whose entries the writes below must reach, in both forms.
	tables := func(d string) pstep { return pstep{method: "get_all_tables", args: hmsreq.Args(S(1, d))} }
	parts := func(d string) pstep {
		return pstep{method: "get_partition_names", args: hmsreq.Args(S(1, d), S(2, "t1"), hmsreq.I16(3, -1))}
	}
	tableReq := func(tbl string) pstep {
		return pstep{method: "get_table_req", args: hmsreq.Req(S(1, db), S(2, tbl))}
	}
	legacyTable := func(d, tbl string) pstep {
		return pstep{method: "get_table", args: hmsreq.Args(S(1, d), S(2, tbl))}
	}
	byNames := func(d string) pstep {
		return pstep{method: "get_partitions_by_names_req", args: hmsreq.Req(S(1, d), S(2, "t1"), hmsreq.Strings(3, "ds=2024-01-01"))}
	}
	database := func(d string) pstep { return pstep{method: "get_database", args: hmsreq.Args(S(1, d))} }
	changed := func(s pstep) pstep { s.changed = true; return s }
	w := func(method string, args []byte) pstep { return pstep{method: method, args: args, write: true} }
	envCtx := hmsreq.Struct(4, hmsreq.Map(1, kv("origin", "e2e")))

	var steps []pstep
	group := func(write pstep, reads ...pstep) {
		for _, r := range reads {
			r.changed = false
			steps = append(steps, r, r) // the second from the cache
		}
		steps = append(steps, write)
		for i, r := range reads {
			// The first read after the write is loaded again whatever the
			// key design (one entry per form or one for both); the
			// others may then be served from that fresh load.
			r.after = i == 0
			steps = append(steps, r)
		}
	}
	// Not-found and found answers in both forms, in both orders: on 2.3
	// they differ, and neither may be served for the other.
	steps = append(steps,
		database(pdb), database(pdb), database(db), database(db),
		legacyTable(db, "t1"), legacyTable(db, "t1"), legacyTable(pdb, "t1"), legacyTable(pdb, "t1"),
		legacyTable(pdb, "nope"), legacyTable(pdb, "nope"), legacyTable(db, "nope"), legacyTable(db, "nope"),
		// 4.0's request without a catalog field, served per partition.
		byNames(pdb), byNames(pdb), byNames(db), byNames(db),
	)
	group(w("alter_table_with_environment_context", hmsreq.Args(S(1, pdb), S(2, "t1"), clTable(db, "t1", kv("p", "v2")).Field(3), envCtx)),
		changed(tableReq("t1")), changed(legacyTable(pdb, "t1")), changed(legacyTable(db, "t1")))
	group(w("append_partition", hmsreq.Args(S(1, pdb), S(2, "t1"), hmsreq.Strings(3, "2024-01-02"))),
		changed(parts(pdb)), changed(parts(db)))
	group(w("drop_partition", hmsreq.Args(S(1, pdb), S(2, "t1"), hmsreq.Strings(3, "2024-01-02"), hmsreq.Bool(4, false))),
		changed(parts(pdb)), changed(parts(db)))
	// The truncation the issue is about: Hive 4 clients send
	// truncate_table_req with the db as "@hive#db"; 3.1 clients use
	// truncate_table (2.3 has neither: UNKNOWN_METHOD).
	if v == "4.0" {
		group(w("truncate_table_req", hmsreq.Req(S(1, pdb), S(2, "tm"))), tableReq("tm"), legacyTable(db, "tm"))
	} else {
		group(w("truncate_table", hmsreq.Args(S(1, pdb), S(2, "tm"))), tableReq("tm"), legacyTable(db, "tm"))
	}
	group(w("drop_table_with_environment_context", hmsreq.Args(S(1, pdb), S(2, "tdrop"), hmsreq.Bool(3, false), envCtx)),
		changed(tables(pdb)), changed(tables(db)), changed(tableReq("tdrop")))

	hits0 := hitsOf(n.srv.Stats())
	last := map[string][]byte{} // a read's previous reply body, by method and args
	for i, s := range steps {
		misses := n.srv.Stats().Method(s.method, proxy.OutcomeMiss)
		got := call(t, c, s.method, s.args)
		counted(t, c)
		if s.after && n.srv.Stats().Method(s.method, proxy.OutcomeMiss) != misses+1 {
			t.Errorf("step %d %s %x after the write: not loaded again; want its entry invalidated", i, s.method, s.args)
		}
		if s.write {
			o := outcome(t, got)
			switch {
			case three && o != "ok":
				t.Errorf("step %d %s(%s): %s through the proxy; want ok: the server splits the catalog", i, s.method, pdb, o)
			case !three && o == "ok":
				t.Errorf("step %d %s(%s): ok on 2.3; want a failure: the server sees an unknown database", i, s.method, pdb)
			}
			continue
		}
		want := call(t, direct, s.method, s.args)
		if !sameButSeqID(got, want) {
			t.Errorf("step %d %s %x: proxy answered %s, the metastore %s\n proxy  %x\n direct %x",
				i, s.method, s.args, outcome(t, got), outcome(t, want), got, want)
		}
		k := s.method + string(s.args)
		// (Methods a version lacks answer UNKNOWN_METHOD both times.)
		if prev, ok := last[k]; ok && s.changed && three && outcome(t, got) == "ok" && bytes.Equal(prev, bodyOnly(got)) {
			t.Errorf("step %d %s %x: same reply as before the write; want the write's change", i, s.method, s.args)
		}
		last[k] = bodyOnly(got)
	}
	hits := hitsOf(n.srv.Stats()) - hits0
	if hits < 10 {
		t.Errorf("%d cache hits; want the repeated reads served from the cache", hits)
	}
	if !t.Failed() {
		fmt.Printf("e2e: catalog prefix HMS %s: %d steps, %d cache hits, replies equal to the metastore's\n", v, len(steps), hits)
	}
}

func hitsOf(s *proxy.Stats) uint64 {
	var n uint64
	s.EachMethod(func(m string, o proxy.Outcome, c uint64) {
		if o == proxy.OutcomeHit && m != "getVersion" {
			n += c
		}
	})
	return n
}
