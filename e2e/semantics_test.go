package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
)

// The findings of issue 20, each against the real metastores: what a
// client gets through the proxy must be what the metastore answers the
// same session at that moment. Every check compares a reply through a
// caching proxy with the metastore's own (seqid aside); each was a
// difference before the fix it names.

// semBed is one version's database for these tests.
type semBed struct {
	ms     *metastore
	db     string
	loc    string
	direct *hmsclient.Client
	legacy bool // the metastore has the legacy get_table (not 4.0)
}

func newSemBed(t *testing.T, v, db string) *semBed {
	ms := start(t, v)
	b := &semBed{ms: ms, db: db, loc: "file:" + ms.work + "/sem-wh/" + db + ".db", direct: dial(t, ms.addr), legacy: v != "4.0"}
	freshDatabase(t, b.direct, func(method string, args []byte) { b.ok(t, method, args) }, db, "issue 20", b.loc)
	return b
}

func (b *semBed) ok(t *testing.T, method string, args []byte) {
	t.Helper()
	if o := outcome(t, call(t, b.direct, method, args)); o != "ok" {
		t.Fatalf("%s: %s", method, o)
	}
}

// table creates a table partitioned by keys (name:type) with partitions
// of the given values (one value per key, comma-separated).
func (b *semBed) table(t *testing.T, name string, params map[string]string, keys []string, parts ...string) {
	t.Helper()
	tbl := corpusTable(b.db, name, b.loc+"/"+name, false)
	for _, k := range keys {
		n, typ, _ := strings.Cut(k, ":")
		tbl.PartKeys = append(tbl.PartKeys, hmsreq.Column{Name: n, Type: typ})
	}
	for k, v := range params {
		tbl.Params[k] = v
	}
	b.ok(t, "create_table", hmsreq.Args(tbl.Field(1)))
	for _, p := range parts {
		vals := strings.Split(p, ",")
		b.ok(t, "add_partition", hmsreq.Args(hmsreq.Partition{DB: b.db, Table: name, Values: vals, CreateTime: fixedTime,
			SD: textSD(b.loc + "/" + name + "/" + strings.Join(vals, "_"))}.Field(1)))
	}
}

// getTable is the args and method of a table read the version has.
func (b *semBed) getTable(db, tbl string) (string, []byte) {
	if b.legacy {
		return "get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl))
	}
	return "get_table_req", hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, tbl))
}

// same fails t unless the proxy's reply to method equals the metastore's
// on clients in the same session state.
func same(t *testing.T, what string, proxied, direct *hmsclient.Client, method string, args []byte) {
	t.Helper()
	got, want := call(t, proxied, method, args), call(t, direct, method, args)
	if !sameButSeqID(got, want) {
		t.Errorf("%s: %s through the proxy is %s (%d bytes); the metastore answers %s (%d bytes)",
			what, method, outcome(t, got), len(got), outcome(t, want), len(want))
	}
}

func TestSemanticsReal(t *testing.T) {
	eachVersion(t, func(t *testing.T, v string) {
		b := newSemBed(t, v, "sem_"+strings.ReplaceAll(v, ".", ""))
		t.Run("names are trimmed", func(t *testing.T) { semNames(t, b) })
		t.Run("session overrides", func(t *testing.T) { semOverrides(t, b, v) })
		t.Run("by-names stored form", func(t *testing.T) { semByNames(t, b) })
		t.Run("filter quirks", func(t *testing.T) { semFilters(t, b, v) })
		t.Run("unlogged writes bounded", func(t *testing.T) { semUnlogged(t, b) })
	})
}

// semNames: the metastore reads "t1 " as t1 (trim, then lower-case);
// the proxy invalidated "t1 " as another entity.
func semNames(t *testing.T, b *semBed) {
	b.table(t, "t1", nil, nil)
	b.table(t, "t2", nil, nil)
	n := startProxy(t, b.ms, nodeOpts{})
	c := dial(t, n.addr)
	// An alter of t1 through the proxy; the blank form was cached first.
	m, args := b.getTable(b.db, "t1 ")
	same(t, "before the alter", c, b.direct, m, args)
	alt := corpusTable(b.db, "t1", b.loc+"/t1", false, "v", "2")
	if o := outcome(t, call(t, c, "alter_table", hmsreq.Args(hmsreq.Str(1, b.db), hmsreq.Str(2, "t1"), alt.Field(3)))); o != "ok" {
		t.Fatalf("alter_table: %s", o)
	}
	same(t, `get of "t1 " after an alter of t1`, c, b.direct, m, args)
	// A create of n1 after "n1 " was answered not found.
	m, args = b.getTable(b.db, "n1 ")
	same(t, "before the create", c, b.direct, m, args)
	if o := outcome(t, call(t, c, "create_table", hmsreq.Args(corpusTable(b.db, "n1", b.loc+"/n1", false).Field(1)))); o != "ok" {
		t.Fatalf("create_table: %s", o)
	}
	same(t, `get of "n1 " after a create of n1`, c, b.direct, m, args)
	// A drop of "T2 " after t2 was cached.
	m, args = b.getTable(b.db, "t2")
	same(t, "before the drop", c, b.direct, m, args)
	if o := outcome(t, call(t, c, "drop_table", hmsreq.Args(hmsreq.Str(1, b.db), hmsreq.Str(2, "T2 "), hmsreq.Bool(3, true)))); o != "ok" {
		t.Fatalf("drop_table: %s", o)
	}
	same(t, `get of t2 after a drop of "T2 "`, c, b.direct, m, args)
	// Case and blanks in the database name, on a not-found answer: the
	// metastore quotes the name as sent.
	for _, db := range []string{strings.ToUpper(b.db), " " + b.db} {
		m, args = b.getTable(db, "missing")
		same(t, "not found, "+db, c, b.direct, m, args)
	}
	m, args = b.getTable(b.db, "missing")
	same(t, "not found, as stored", c, b.direct, m, args)
}

// semOverrides: setMetaConf changes answers; entries were shared across
// sessions with different overrides.
func semOverrides(t *testing.T, b *semBed, v string) {
	b.table(t, "ov", nil, []string{"n:int"}, "5", "7")
	n := startProxy(t, b.ms, nodeOpts{})
	conf := func(kv ...string) (p, d *hmsclient.Client) {
		p, d = dial(t, n.addr), dial(t, b.ms.addr)
		for i := 0; i+1 < len(kv); i += 2 {
			for _, c := range []*hmsclient.Client{p, d} {
				if o := outcome(t, call(t, c, "setMetaConf", hmsreq.Args(hmsreq.Str(1, kv[i]), hmsreq.Str(2, kv[i+1])))); o != "ok" {
					t.Fatalf("setMetaConf(%s): %s", kv[i], o)
				}
			}
		}
		return p, d
	}
	// Direct SQL off: filters on keys that are not strings are refused.
	filter := hmsreq.Args(hmsreq.Str(1, b.db), hmsreq.Str(2, "ov"), hmsreq.Str(3, "n = 5"), hmsreq.I16(4, -1))
	dp, dd := conf()
	same(t, "a default session's filter", dp, dd, "get_partitions_by_filter", filter)
	same(t, "a default session's filter again", dp, dd, "get_partitions_by_filter", filter)
	op, od := conf("hive.metastore.try.direct.sql", "false")
	same(t, "a filter with direct SQL off", op, od, "get_partitions_by_filter", filter)
	same(t, "a default session's filter after that", dp, dd, "get_partitions_by_filter", filter)
	if v != "3.1" {
		return
	}
	// 3.1 refuses insert-only tables to clients that do not declare the
	// capability, unless the session turns the check off.
	b.table(t, "io", map[string]string{"transactional": "true", "transactional_properties": "insert_only"}, nil)
	cp, cd := conf("metastore.client.capability.check", "false")
	m, args := b.getTable(b.db, "io")
	same(t, "an insert-only table with capability checks off", cp, cd, m, args)
	same(t, "an insert-only table for a default session", dp, dd, m, args)
}

// semByNames: a returned partition answers only the stored form of its
// name ("ds=a%3Ab"), never another name with its values.
func semByNames(t *testing.T, b *semBed) {
	b.table(t, "bn", nil, []string{"ds:string"}, "a:b", "e")
	n := startProxy(t, b.ms, nodeOpts{})
	c := dial(t, n.addr)
	byNames := func(names ...string) []byte {
		return hmsreq.Args(hmsreq.Str(1, b.db), hmsreq.Str(2, "bn"), hmsreq.Strings(3, names...))
	}
	for _, names := range [][]string{
		{"ds=a%3Ab", "ds=a:b"}, {"ds=a:b"}, {"ds=a%3Ab"},
		{"ds=e", "dt=e"}, {"dt=e"}, {"ds=e"}, {"DS=e"},
	} {
		same(t, fmt.Sprintf("by names %q", names), c, b.direct, "get_partitions_by_names", byNames(names...))
	}
}

// semFilters: filters the metastore refuses, or evaluates with a quirk
// of its version, are the metastore's to answer.
func semFilters(t *testing.T, b *semBed, v string) {
	b.table(t, "fv", nil, []string{"v:varchar(10)"}, "a", "b")
	b.table(t, "fu", nil, []string{"_k:string"}, "a", "b")
	b.table(t, "fm", nil, []string{"a:string", "b:string"}, "x_y,1", "xzy,1", "q,1")
	b.table(t, "fi", nil, []string{"hr:int"}, "07", "7", "10")
	n := startProxy(t, b.ms, nodeOpts{})
	c := dial(t, n.addr)
	filter := func(tbl, f string) []byte {
		return hmsreq.Args(hmsreq.Str(1, b.db), hmsreq.Str(2, tbl), hmsreq.Str(3, f), hmsreq.I16(4, -1))
	}
	for _, f := range [][2]string{
		{"fv", "v = 'a'"},          // 2.3, 3.1: refused (varchar)
		{"fu", "_k = 'a'"},         // 2.3, 3.1: refused (grammar)
		{"fm", "a <> 'x_y'"},       // 4.0: '_' a LIKE wildcard
		{"fm", "a not in ('x_y')"}, // the same
		{"fi", "hr = 7"},           // 4.0: PART_NAME = 'hr=7' misses hr=07
		{"fi", "hr in (7, 10)"},
	} {
		for i := range 2 { // cached or pruned the second time
			same(t, fmt.Sprintf("%s %q (%d)", f[0], f[1], i), c, b.direct, "get_partitions_by_filter", filter(f[0], f[1]))
		}
	}
}

// semUnlogged: a write the notification log does not record, made
// straight to the metastore, shows through the proxy within
// cache.ttl_without_eventlog: every version's log misses alter_function.
func semUnlogged(t *testing.T, b *semBed) {
	fn := func(id int16, class string) hmsreq.Field {
		return hmsreq.Struct(id, hmsreq.Str(1, "f_unlogged"), hmsreq.Str(2, b.db), hmsreq.Str(3, class),
			hmsreq.Str(4, "e2e"), hmsreq.I32(5, 1), hmsreq.I32(6, fixedTime), hmsreq.I32(7, 1), hmsreq.StructList(8))
	}
	b.ok(t, "create_function", hmsreq.Args(fn(1, "com.example.Old")))
	const bound = 3 * time.Second
	n := startProxy(t, b.ms, nodeOpts{ttlUnlogged: bound})
	c := dial(t, n.addr)
	get := hmsreq.Args(hmsreq.Str(1, b.db), hmsreq.Str(2, "f_unlogged"))
	call(t, c, "get_function", get) // cached
	b.ok(t, "alter_function", hmsreq.Args(hmsreq.Str(1, b.db), hmsreq.Str(2, "f_unlogged"), fn(3, "com.example.New")))
	start := time.Now()
	if !wait.Poll(bound+2*time.Second, 100*time.Millisecond, func() bool {
		return sameButSeqID(call(t, c, "get_function", get), call(t, b.direct, "get_function", get))
	}) {
		t.Fatalf("alter_function straight to the metastore unseen through the proxy after %v; want within cache.ttl_without_eventlog (%v)", time.Since(start), bound)
	}
	t.Logf("an unlogged alter_function showed through the proxy after %v (bound %v)", time.Since(start).Round(time.Millisecond), bound)
}

// TestPartitionLimitReal: hive.metastore.limit.partition.request makes
// the metastore refuse requests for more partitions (filters on every
// version, comparing max_parts itself on 2.x and 3.x; by-names on 4.0),
// and the proxy answered them from its cache. Run on 2.3 and 4.0, whose
// rules differ (3.1's are 2.3's), each on the restricted metastore,
// started with the limit.
func TestPartitionLimitReal(t *testing.T) {
	for _, v := range versions(t) {
		if v == "3.1" {
			continue
		}
		t.Run(v, func(t *testing.T) {
			ms := startRestricted(t, v)
			b := &semBed{ms: ms, db: "lim", loc: "file:" + ms.work + "/lim-wh/lim.db", direct: dial(t, ms.addr), legacy: v != "4.0"}
			call(t, b.direct, "drop_database", hmsreq.Args(hmsreq.Str(1, b.db), hmsreq.Bool(2, true), hmsreq.Bool(3, true)))
			b.ok(t, "create_database", hmsreq.Args(hmsreq.Database{Name: b.db, Location: b.loc}.Field(1)))
			b.table(t, "l", nil, []string{"ds:string"}, "a", "b", "c", "d")
			n := startProxy(t, ms, nodeOpts{})
			c := dial(t, n.addr)
			// Everything the proxy needs to answer these itself is cached
			// first: the table, its names and its partitions.
			m, args := b.getTable(b.db, "l")
			call(t, c, m, args)
			call(t, c, "get_partition_names", hmsreq.Args(hmsreq.Str(1, b.db), hmsreq.Str(2, "l"), hmsreq.I16(3, -1)))
			byNames := func(names ...string) []byte {
				return hmsreq.Args(hmsreq.Str(1, b.db), hmsreq.Str(2, "l"), hmsreq.Strings(3, names...))
			}
			call(t, c, "get_partitions_by_names", byNames("ds=a", "ds=b"))
			call(t, c, "get_partitions_by_names", byNames("ds=c", "ds=d"))
			filter := func(f string, max int16) []byte {
				return hmsreq.Args(hmsreq.Str(1, b.db), hmsreq.Str(2, "l"), hmsreq.Str(3, f), hmsreq.I16(4, max))
			}
			v4 := v == "4.0"
			for _, tc := range []struct {
				what, method string
				args         []byte
				refused      bool // by the metastore: the test's premise
			}{
				{"by names of 3", "get_partitions_by_names", byNames("ds=a", "ds=b", "ds=c"), v4},
				{"by names of 2", "get_partitions_by_names", byNames("ds=a", "ds=b"), false},
				{"a filter of 3", "get_partitions_by_filter", filter("ds <> 'a'", -1), true},
				{"a filter of 1", "get_partitions_by_filter", filter("ds = 'a'", -1), false},
				{"a filter of 1, max 3", "get_partitions_by_filter", filter("ds = 'a'", 3), !v4},
				{"a filter of 3, max 2", "get_partitions_by_filter", filter("ds <> 'a'", 2), false},
			} {
				if o := outcome(t, call(t, b.direct, tc.method, tc.args)); (o != "ok") != tc.refused {
					t.Fatalf("%s: the metastore answers %s; the test expects refused=%v (is the limit set?)", tc.what, o, tc.refused)
				}
				for i := range 2 { // the second time from the cache, where it may
					same(t, fmt.Sprintf("%s (%d)", tc.what, i), c, b.direct, tc.method, tc.args)
				}
			}
		})
	}
}
