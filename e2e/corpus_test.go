package e2e

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
)

// step is one call of the corpus.
type step struct {
	method string
	args   []byte
	read   bool // compared byte for byte; else a write, compared by outcome
	// session: connection state (set_ugi, setMetaConf); also sent on the
	// shadow connection that checks proxied reads against the metastore.
	session bool
	// volatile: the reply legitimately differs between the two runs
	// (notification ids and events); the mirrored comparison is by
	// outcome only.
	volatile bool
	// unordered: the metastore may list in a different order from run
	// to run (4.0 get_partition_names_ps without a full spec); the
	// mirrored comparison sorts lists of strings first. The comparison
	// with the metastore's answer at the same moment stays exact.
	unordered bool
	// contains, when set, must occur in a success reply: a check that
	// a comparison is not of two empty answers.
	contains string
}

// corpusSteps is the recorded sequence, on database db under the
// warehouse directory wh. Everything it creates it drops at the end.
func corpusSteps(db, wh string) []step {
	dbLoc := "file:" + wh + "/" + db + ".db"
	evLoc, plainLoc := dbLoc+"/events", dbLoc+"/plain"
	r := func(m string, a []byte) step { return step{method: m, args: a, read: true} }
	w := func(m string, a []byte) step { return step{method: m, args: a} }
	database := func(desc string, params ...string) hmsreq.Field {
		return hmsreq.Database{Name: db, Description: desc, Location: dbLoc, Params: kv(params...), Owner: "e2e"}.Field(1)
	}
	parts := []string{"ds=2024-01-01", "ds=2024-01-02", "ds=2024-01-03", "ds=2024-01-04"}
	statsReq := hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, "id"), hmsreq.Strings(4, parts[1], parts[0], "ds=1999-01-01"))
	return []step{
		r("getName", hmsreq.Args()),
		r("getVersion", hmsreq.Args()),
		r("getStatus", hmsreq.Args()),
		{method: "set_ugi", args: hmsreq.Args(hmsreq.Str(1, "e2e"), hmsreq.Strings(2, "e2e", "staff")), session: true},
		r("getMetaConf", hmsreq.Args(hmsreq.Str(1, "hive.metastore.partition.name.whitelist.pattern"))),
		{method: "setMetaConf", args: hmsreq.Args(hmsreq.Str(1, "hive.metastore.partition.name.whitelist.pattern"), hmsreq.Str(2, ".*")), session: true},
		r("getMetaConf", hmsreq.Args(hmsreq.Str(1, "hive.metastore.partition.name.whitelist.pattern"))),
		r("getMetaConf", hmsreq.Args(hmsreq.Str(1, "no.such.key"))),
		r("get_config_value", hmsreq.Args(hmsreq.Str(1, "hive.metastore.batch.retrieve.max"), hmsreq.Str(2, "300"))),
		r("get_config_value", hmsreq.Args(hmsreq.Str(1, "javax.jdo.option.ConnectionPassword"), hmsreq.Str(2, "x"))),

		// Databases.
		r("get_database", hmsreq.Args(hmsreq.Str(1, db))),
		w("create_database", hmsreq.Args(database("corpus database", "purpose", "e2e"))),
		w("create_database", hmsreq.Args(database("corpus database"))),
		r("get_database", hmsreq.Args(hmsreq.Str(1, db))),
		r("get_database_req", hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, "hive"))),
		r("get_database", hmsreq.Args(hmsreq.Str(1, db+"_missing"))),
		r("get_databases", hmsreq.Args(hmsreq.Str(1, db+"*"))),
		r("get_all_databases", hmsreq.Args()),
		w("alter_database", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Database{Name: db, Description: "altered", Location: dbLoc, Params: kv("purpose", "e2e", "v", "2"), Owner: "e2e"}.Field(2))),
		r("get_database", hmsreq.Args(hmsreq.Str(1, db))),

		// Tables.
		w("create_table", hmsreq.Args(corpusTable(db, "events", evLoc, true).Field(1))),
		w("create_table", hmsreq.Args(corpusTable(db, "plain", plainLoc, false, "comment", "unpartitioned").Field(1))),
		w("create_table", hmsreq.Args(corpusTable(db, "plain", plainLoc, false).Field(1))),
		r("get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"))),
		r("get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "missing"))),
		r("get_table_req", hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, "plain"))),
		r("get_all_tables", hmsreq.Args(hmsreq.Str(1, db))),
		r("get_tables", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "e*"))),
		r("get_tables_by_type", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "*"), hmsreq.Str(3, "MANAGED_TABLE"))),
		r("get_tables_by_type", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "*"), hmsreq.Str(3, "EXTERNAL_TABLE"))),
		r("get_table_meta", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "*"), hmsreq.Strings(3))),
		r("get_table_objects_by_name", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Strings(2, "plain", "missing", "events"))),
		r("get_table_objects_by_name", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Strings(2, "plain", "events"))),
		r("get_table_objects_by_name_req", hmsreq.Req(hmsreq.Str(1, db), hmsreq.Strings(2, "events", "plain"))),
		r("get_fields", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"))),
		r("get_schema", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"))),
		r("get_fields", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "missing"))),

		// Partitions.
		w("add_partition", hmsreq.Args(corpusPartition(db, "events", evLoc, "2024-01-03").Field(1))),
		w("add_partitions", hmsreq.Args(hmsreq.Partitions(1, corpusPartition(db, "events", evLoc, "2024-01-01"), corpusPartition(db, "events", evLoc, "2024-01-02")))),
		w("append_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, "2024-01-04"))),
		w("add_partition", hmsreq.Args(corpusPartition(db, "events", evLoc, "2024-01-03").Field(1))),
		r("get_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, "2024-01-01"))),
		r("get_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, "1999-01-01"))),
		r("get_partition_by_name", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Str(3, parts[1]))),
		r("get_partitions", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.I16(3, -1))),
		r("get_partitions", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.I16(3, 2))),
		r("get_partitions_ps", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, "2024-01-02"), hmsreq.I16(4, -1))),
		r("get_partition_names", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.I16(3, -1))),
		{method: "get_partition_names_ps", args: hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, ""), hmsreq.I16(4, 3)), read: true, unordered: true},
		r("get_partitions_by_names", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, parts[2], parts[0], "ds=1999-01-01", parts[2]))),
		r("get_partitions_by_names", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, parts[0], parts[1], parts[3]))),
		r("get_partitions_by_names_req", hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, parts[3], parts[1]))),
		r("get_partitions_by_filter", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Str(3, "ds >= '2024-01-02'"), hmsreq.I16(4, -1))),
		r("get_partitions_by_filter", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Str(3, "ds >>"), hmsreq.I16(4, -1))),
		r("get_num_partitions_by_filter", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Str(3, "ds < '2024-01-03'"))),
		r("partition_name_to_vals", hmsreq.Args(hmsreq.Str(1, "ds=2024-01-01/hr=7"))),
		r("partition_name_to_spec", hmsreq.Args(hmsreq.Str(1, "ds=2024-01-01/hr=7"))),
		w("alter_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), corpusPartition(db, "events", evLoc, "2024-01-02", "owner", "team-a").Field(3))),
		r("get_partition_by_name", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Str(3, parts[1]))),
		r("get_partitions_by_names", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, parts[0], parts[1], parts[3]))),
		w("rename_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, "2024-01-04"), corpusPartition(db, "events", evLoc, "2024-01-05").Field(4))),
		r("get_partition_names", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.I16(3, -1))),
		w("drop_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, "2024-01-05"), hmsreq.Bool(4, true))),
		w("drop_partition_by_name", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Str(3, parts[2]), hmsreq.Bool(4, true))),
		w("drop_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, "1999-01-01"), hmsreq.Bool(4, true))),
		r("get_partition_names", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.I16(3, -1))),
		r("get_partitions_by_names", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, parts[0], parts[1], parts[3]))),

		// Statistics.
		r("get_table_column_statistics", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "plain"), hmsreq.Str(3, "id"))),
		w("update_table_column_statistics", hmsreq.Args(hmsreq.Struct(1, longStats(db, "plain", "", 1, 100)...))),
		r("get_table_column_statistics", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "plain"), hmsreq.Str(3, "id"))),
		r("get_table_statistics_req", hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, "plain"), hmsreq.Strings(3, "id", "name"))),
		r("get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "plain"))),
		w("update_partition_column_statistics", hmsreq.Args(hmsreq.Struct(1, longStats(db, "events", parts[0], 5, 50)...))),
		w("update_partition_column_statistics", hmsreq.Args(hmsreq.Struct(1, longStats(db, "events", parts[1], 40, 90)...))),
		r("get_partition_column_statistics", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Str(3, parts[0]), hmsreq.Str(4, "id"))),
		r("get_partitions_statistics_req", statsReq),
		r("get_aggr_stats_for", statsReq),
		r("get_partition_by_name", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Str(3, parts[0]))),

		// Table alters and renames.
		w("alter_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "plain"), corpusTable(db, "plain", plainLoc, false, "comment", "altered").Field(3))),
		r("get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "plain"))),
		w("alter_table_with_environment_context", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "plain"), corpusTable(db, "plain2", plainLoc, false).Field(3),
			hmsreq.Struct(4, hmsreq.Map(1, kv("CASCADE", "false"))))),
		r("get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "plain"))),
		r("get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "plain2"))),
		r("get_all_tables", hmsreq.Args(hmsreq.Str(1, db))),
		r("get_table_meta", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "*"), hmsreq.Strings(3))),

		// Functions.
		w("create_function", hmsreq.Args(hmsreq.Struct(1, functionFields(db, "upper2")...))),
		w("create_function", hmsreq.Args(hmsreq.Struct(1, functionFields(db, "upper2")...))),
		r("get_function", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "upper2"))),
		r("get_function", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "nofunc"))),
		r("get_functions", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "*"))),
		r("get_all_functions", hmsreq.Args()),
		w("drop_function", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "upper2"))),
		r("get_function", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "upper2"))),
		r("get_functions", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "*"))),

		// Notification ids, and a method no server knows.
		{method: "get_current_notificationEventId", args: hmsreq.Args(), read: true, volatile: true},
		{method: "get_next_notification", args: hmsreq.Req(hmsreq.I64(1, 0), hmsreq.I32(2, 3)), read: true, volatile: true},
		r("hmsproxy_no_such_method", hmsclient.Args("x")),

		// Clean up.
		w("drop_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "plain2"), hmsreq.Bool(3, true))),
		w("drop_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "plain2"), hmsreq.Bool(3, true))),
		r("get_all_tables", hmsreq.Args(hmsreq.Str(1, db))),
		w("drop_database", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Bool(2, true), hmsreq.Bool(3, true))),
		r("get_database", hmsreq.Args(hmsreq.Str(1, db))),
		w("drop_database", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Bool(2, true), hmsreq.Bool(3, true))),
	}
}

// TestCorpus replays the corpus against each real metastore twice, once
// directly and once through a caching proxy, on mirrored database names,
// and requires the same answers: reads byte-equal (and equal to what the
// metastore itself answers at that moment, twice, the second time from
// the cache), writes with the same outcome.
func TestCorpus(t *testing.T) {
	for _, v := range versions(t) {
		t.Run(v, func(t *testing.T) { runCorpus(t, v) })
	}
}

func runCorpus(t *testing.T, v string) {
	ms := start(t, v)
	begin := time.Now()
	tag := strings.ReplaceAll(v, ".", "")
	dbDirect, dbProxy := "cdir_"+tag, "cprx_"+tag
	wh := ms.work + "/corpus-wh"
	n := startProxy(t, ms, nodeOpts{})
	r := replay(t, ms, n, corpusSteps(dbDirect, wh), corpusSteps(dbProxy, wh), dbDirect, dbProxy)
	t.Logf("HMS %s methods: %s; unknown to it: %v", v, strings.Join(keys(r.methods), " "), keys(r.unknown))
	fmt.Printf("e2e: corpus HMS %s: %d methods, %d/%d reads byte-equal, %d/%d writes same outcome (%d byte-equal masked), %d cache hits, %d methods unknown to this HMS, %v\n",
		v, len(r.methods), r.readsEqual, r.reads, r.writesSame, r.writes, r.writesBytes, r.hits, len(r.unknown), time.Since(begin).Round(100*time.Millisecond))
	if v != "2.3" && len(r.methods) < 40 {
		t.Errorf("HMS %s: %d distinct methods exercised; want at least 40", v, len(r.methods))
	}
}

// replayed is what one replay saw.
type replayed struct {
	methods                                            map[string]bool   // distinct methods the metastore knew
	unknown                                            map[string]bool   // answered UNKNOWN_METHOD on both sides
	okReads                                            map[string]bool   // cacheable reads with a success reply, of a kind n caches
	outcome                                            map[string]string // each read method's outcomes through the proxy, in order
	reads, readsEqual, writes, writesSame, writesBytes int
	hits                                               uint64
}

// replay runs dsteps directly against ms, then psteps (the same sequence
// on mirrored names: dbDirect replaced by dbProxy) through the caching
// proxy n, and requires the same answers: reads byte-equal after masking
// (and equal to what the metastore itself answers at that moment, twice,
// the second time from the cache), writes with the same outcome. Every
// cacheable read that succeeded, of a kind n caches, must have been served
// from the cache at least once.
func replay(t *testing.T, ms *metastore, n *node, dsteps, psteps []step, dbDirect, dbProxy string) replayed {
	t.Helper()
	// 1. Directly.
	direct := dial(t, ms.addr)
	want := make([][]byte, len(dsteps))
	for i, s := range dsteps {
		want[i] = call(t, direct, s.method, s.args)
	}

	// 2. Through a caching proxy, with a shadow connection to the
	// metastore that answers every read again at the same moment.
	c := dial(t, n.addr)
	shadow := dial(t, ms.addr)
	r := replayed{methods: map[string]bool{}, unknown: map[string]bool{}, okReads: map[string]bool{}, outcome: map[string]string{}}
	for i, s := range psteps {
		got := call(t, c, s.method, s.args)
		if s.session {
			call(t, shadow, s.method, s.args)
		}
		wo, go_ := outcome(t, want[i]), outcome(t, got)
		if wo == "app1" && go_ == "app1" {
			r.unknown[s.method] = true
		} else {
			r.methods[s.method] = true
		}
		if !s.read {
			r.writes++
			if wo != go_ {
				t.Errorf("step %d %s: outcome through the proxy %s; directly %s\n got %x\nwant %x", i, s.method, go_, wo, got, want[i])
				continue
			}
			r.writesSame++
			if sameMirrored(want[i], got, dbDirect, dbProxy, false) {
				r.writesBytes++
			} else {
				t.Logf("step %d %s: write reply bytes differ beyond masking (same outcome %s)\n got %x\nwant %x", i, s.method, go_, got, want[i])
			}
			continue
		}
		r.reads++
		if r.outcome[s.method] != "" {
			r.outcome[s.method] += ","
		}
		r.outcome[s.method] += go_
		now := call(t, shadow, s.method, s.args)
		if n.store != nil {
			n.store.Wait()
		}
		again := call(t, c, s.method, s.args)
		bad := false
		if s.contains != "" && go_ == "ok" && !bytes.Contains(got, []byte(s.contains)) {
			t.Errorf("step %d %s: success reply without %q: %x", i, s.method, s.contains, got)
			bad = true
		}
		if s.volatile {
			if wo != go_ {
				t.Errorf("step %d %s: outcome through the proxy %s; directly %s", i, s.method, go_, wo)
				bad = true
			}
		} else if !sameMirrored(want[i], got, dbDirect, dbProxy, s.unordered) {
			t.Errorf("step %d %s: reply through the proxy differs from the direct run's\n got %x\nwant %x\nmasked got  %x\nmasked want %x", i, s.method, got, want[i],
				mask(bodyOnly(got)), mask(bodyOnly(want[i])))
			bad = true
		}
		if !sameButSeqID(got, now) {
			t.Errorf("step %d %s: reply through the proxy differs from the metastore's at the same moment\n got %x\n hms %x", i, s.method, got, now)
			bad = true
		}
		if !sameButSeqID(again, now) {
			t.Errorf("step %d %s: second reply through the proxy (cache) differs from the metastore's\n got %x\n hms %x", i, s.method, again, now)
			bad = true
		}
		if !bad {
			r.readsEqual++
		}
		if m := hms.Lookup([]byte(s.method)); m != nil && m.Class == hms.Read && m.Cacheable && go_ == "ok" &&
			n.store.Policy(m.Kind).TTL > 0 {
			r.okReads[s.method] = true
		}
	}

	// Every cacheable read that succeeded, of a kind the proxy's
	// configuration caches, was served from the cache at least once. The
	// last step's second read may be its method's only hit: counted after
	// its reply, so wait for it.
	counted(t, c)
	stats := n.srv.Stats()
	var noHit []string
	for m := range r.okReads {
		h := stats.Method(m, proxy.OutcomeHit)
		r.hits += h
		if h == 0 {
			noHit = append(noHit, m)
		}
	}
	sort.Strings(noHit)
	if len(noHit) > 0 {
		t.Errorf("cacheable reads never served from the cache: %v", noHit)
	}
	return r
}

func bodyOnly(reply []byte) []byte { _, _, b := bodyOf(reply); return b }

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
