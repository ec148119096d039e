package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
)

// provenMethods are the reads TestProven shows byte-equal through a
// caching proxy, and served from its cache, on every test-bed metastore
// that has them; thrift/hms caches them because of it. A method a
// version lacks must be unknown (UNKNOWN_METHOD) on both sides there.
//
// get_tables_ext (4.0) is not here: without a limit it answers an empty
// list, and with one it lists the tables in an order that changes from
// call to call (events,keyed then keyed,events), so no cached reply can be
// shown equal to the server's next one.
var provenMethods = []string{
	"get_catalog", "get_catalogs", "get_metastore_db_uuid",
	"get_table_names_by_filter",
	"get_fields_req", "get_schema_req", "get_fields_with_environment_context", "get_schema_with_environment_context",
	"get_primary_keys", "get_unique_constraints", "get_not_null_constraints", "get_default_constraints", "get_check_constraints",
	"get_partition_req", "get_partitions_req", "get_partitions_pspec",
	"get_partition_names_req", "get_partition_names_ps_req", "get_partition_values",
	"get_partitions_by_filter_req", "get_part_specs_by_filter",
}

// provenSteps exercises provenMethods on database db under warehouse wh:
// a partitioned table events (ds) and an unpartitioned table keyed with
// one constraint of each kind (3.0+ kinds ignored by 2.3).
func provenSteps(db, wh string) []step {
	dbLoc := "file:" + wh + "/" + db + ".db"
	evLoc, keyedLoc := dbLoc+"/events", dbLoc+"/keyed"
	r := func(m string, a []byte, contains ...string) step {
		st := step{method: m, args: a, read: true}
		if len(contains) > 0 {
			st.contains = contains[0]
		}
		return st
	}
	w := func(m string, a []byte) step { return step{method: m, args: a} }
	S, I16, I32, I64, B := hmsreq.Str, hmsreq.I16, hmsreq.I32, hmsreq.I64, hmsreq.Bool
	const cat = "hive"
	tbl := func(t string) []hmsreq.Field { return []hmsreq.Field{S(1, cat), S(2, db), S(3, t)} } // cat 1, db 2, tbl 3
	with := func(base []hmsreq.Field, more ...hmsreq.Field) []hmsreq.Field {
		return append(append([]hmsreq.Field(nil), base...), more...)
	}
	filter := "ds >= '2024-01-02'"
	envCtx := hmsreq.Struct(3, hmsreq.Map(1, kv("origin", "e2e")))
	dsKey := hmsreq.StructList(3, []hmsreq.Field{S(1, "ds"), S(2, "string"), S(3, "")})
	// Constraint names are global in some versions: they carry db, which
	// the mirrored comparison maps like every other occurrence of it.
	pk := []hmsreq.Field{S(1, db), S(2, "keyed"), S(3, "id"), I32(4, 1), S(5, db+"_pk"), B(6, false), B(7, false), B(8, true), S(9, cat)}
	cstr := func(col string, extra ...hmsreq.Field) []hmsreq.Field {
		return append([]hmsreq.Field{S(1, cat), S(2, db), S(3, "keyed"), S(4, col)}, extra...)
	}
	uk := cstr("name", I32(5, 1), S(6, db+"_uk"), B(7, false), B(8, false), B(9, false))
	nn := cstr("name", S(5, db+"_nn"), B(6, true), B(7, false), B(8, false))
	dc := cstr("name", S(5, "'none'"), S(6, db+"_dc"), B(7, true), B(8, false), B(9, false))
	cc := cstr("id", S(5, "id > 0"), S(6, db+"_cc"), B(7, true), B(8, false), B(9, false))

	return []step{
		// Catalogs and the metastore's identity (3.0+).
		r("get_catalogs", hmsreq.Args(), cat),
		r("get_catalog", hmsreq.Req(S(1, cat)), "file:"),
		r("get_catalog", hmsreq.Req(S(1, "no_such_catalog"))),
		r("get_metastore_db_uuid", hmsreq.Args()),

		// Set up.
		w("create_database", hmsreq.Args(hmsreq.Database{Name: db, Description: "proven", Location: dbLoc, Owner: "e2e"}.Field(1))),
		w("create_table", hmsreq.Args(corpusTable(db, "events", evLoc, true).Field(1))),
		w("create_table_with_constraints", hmsreq.Args(corpusTable(db, "keyed", keyedLoc, false).Field(1),
			hmsreq.StructList(2, pk), hmsreq.StructList(3), hmsreq.StructList(4, uk), hmsreq.StructList(5, nn),
			hmsreq.StructList(6, dc), hmsreq.StructList(7, cc))),
		w("add_partitions", hmsreq.Args(hmsreq.Partitions(1, corpusPartition(db, "events", evLoc, "2024-01-01"),
			corpusPartition(db, "events", evLoc, "2024-01-02"), corpusPartition(db, "events", evLoc, "2024-01-03")))),

		// Tables.
		r("get_table_names_by_filter", hmsreq.Args(S(1, db), S(2, `hive_filter_field_owner__ = "e2e"`), I16(3, -1)), "keyed"),
		r("get_table_names_by_filter", hmsreq.Args(S(1, db), S(2, `hive_filter_field_owner__ = "nobody"`), I16(3, -1))),
		r("get_fields_with_environment_context", hmsreq.Args(S(1, db), S(2, "events"), envCtx), "bigint"),
		r("get_schema_with_environment_context", hmsreq.Args(S(1, db), S(2, "events"), envCtx), "ds"),
		r("get_schema_with_environment_context", hmsreq.Args(S(1, db), S(2, "missing"), envCtx)),
		r("get_fields_req", hmsreq.Req(tbl("events")...), "bigint"),
		r("get_schema_req", hmsreq.Req(tbl("events")...), "ds"),
		r("get_schema_req", hmsreq.Req(tbl("keyed")...)),
		r("get_fields_req", hmsreq.Req(tbl("missing")...)),

		// Constraints: keyed has one of each kind, events none.
		r("get_primary_keys", hmsreq.Req(S(1, db), S(2, "keyed"), S(3, cat)), db+"_pk"),
		r("get_primary_keys", hmsreq.Req(S(1, db), S(2, "events"), S(3, cat))),
		r("get_unique_constraints", hmsreq.Req(tbl("keyed")...), db+"_uk"),
		r("get_not_null_constraints", hmsreq.Req(tbl("keyed")...), db+"_nn"),
		r("get_default_constraints", hmsreq.Req(tbl("keyed")...), db+"_dc"),
		r("get_check_constraints", hmsreq.Req(tbl("keyed")...), db+"_cc"),
		r("get_check_constraints", hmsreq.Req(tbl("events")...)),

		// Partitions.
		r("get_partition_req", hmsreq.Req(with(tbl("events"), hmsreq.Strings(4, "2024-01-01"))...), "2024-01-01"),
		r("get_partition_req", hmsreq.Req(with(tbl("events"), hmsreq.Strings(4, "1999-01-01"))...)),
		r("get_partitions_req", hmsreq.Req(with(tbl("events"), I16(4, -1))...), "2024-01-03"),
		r("get_partitions_req", hmsreq.Req(with(tbl("events"), I16(4, 2))...)),
		r("get_partitions_pspec", hmsreq.Args(S(1, db), S(2, "events"), I32(3, -1)), "2024-01-03"),
		// PartitionsByExprRequest with the one-byte 0xff expr, Hive 4's
		// "no filter" marker, since the test bed has no Kryo expressions.
		r("get_partition_names_req", hmsreq.Req(S(1, db), S(2, "events"), S(3, "\xff"), I16(5, -1), S(6, cat)), "ds=2024-01-03"),
		r("get_partition_names_ps_req", hmsreq.Req(with(tbl("events"), hmsreq.Strings(4, "2024-01-02"), I16(5, -1))...), "ds=2024-01-02"),
		{method: "get_partition_names_ps_req", args: hmsreq.Req(with(tbl("events"), I16(5, -1))...), read: true, unordered: true},
		r("get_partition_values", hmsreq.Req(S(1, db), S(2, "events"), dsKey, B(4, true), I64(8, -1), S(9, cat)), "2024-01-01"),
		r("get_partition_values", hmsreq.Req(S(1, db), S(2, "events"), dsKey, B(4, true), S(5, filter), I64(8, -1), S(9, cat)), "2024-01-03"),
		r("get_partitions_by_filter_req", hmsreq.Req(with(tbl("events"), S(4, filter), I16(5, -1))...), "2024-01-03"),
		r("get_partitions_by_filter_req", hmsreq.Req(with(tbl("events"), S(4, "ds >>"), I16(5, -1))...)),
		r("get_part_specs_by_filter", hmsreq.Args(S(1, db), S(2, "events"), S(3, filter), I32(4, -1)), "2024-01-03"),

		// Clean up.
		w("drop_database", hmsreq.Args(S(1, db), B(2, true), B(3, true))),
	}
}

// TestProven replays provenSteps like the corpus (directly, then through
// a caching proxy on mirrored names, reads byte-equal and cache hits), on
// a proxy that also caches KindOther (catalogs), which the defaults leave
// uncached. Each proven method must succeed at least once on every
// version that has it, and be unknown on both sides where it does not.
func TestProven(t *testing.T) {
	eachVersion(t, func(t *testing.T, v string) {
		ms := start(t, v)
		begin := time.Now()
		tag := strings.ReplaceAll(v, ".", "")
		dbDirect, dbProxy := "pdir_"+tag, "pprx_"+tag
		wh := ms.work + "/proven-wh"
		kinds := cache.DefaultKinds()
		kinds[hms.KindOther] = cache.KindConfig{TTL: 10 * time.Minute}
		n := startProxy(t, ms, nodeOpts{kinds: &kinds})
		r := replay(t, ms, n, provenSteps(dbDirect, wh), provenSteps(dbProxy, wh), dbDirect, dbProxy)
		var lines []string
		for _, name := range provenMethods {
			m := hms.Lookup([]byte(name))
			outs := r.outcome[name]
			lines = append(lines, name+"="+outs)
			switch {
			case r.unknown[name]:
				if has(v, m.Since) {
					t.Errorf("HMS %s: %s (since %s) unknown to the metastore", v, name, m.Since)
				}
			case !strings.Contains(outs, "ok"):
				t.Errorf("HMS %s: %s never succeeded: %s", v, name, outs)
			case m.Cacheable && !r.okReads[name]:
				t.Errorf("HMS %s: %s is cacheable but was not checked for cache hits", v, name)
			}
		}
		sort.Strings(lines)
		t.Logf("HMS %s outcomes: %s", v, strings.Join(lines, " "))
		fmt.Printf("e2e: proven HMS %s: %d/%d reads byte-equal, %d cache hits, unknown: %v, %v\n",
			v, r.readsEqual, r.reads, r.hits, keys(r.unknown), time.Since(begin).Round(100*time.Millisecond))
	})
}

// has reports whether test-bed version v ("2.3", "3.1", "4.0") has a
// method added in since. The 2.3 test bed is 2.3.9, so it has "2.3.6".
func has(v, since string) bool {
	if strings.HasPrefix(since, "2.3") {
		return true
	}
	return v >= since
}
