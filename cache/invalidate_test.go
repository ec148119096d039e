package cache

import (
	"fmt"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"slices"
	"strings"
	"testing"
)

func newTestStore(t testing.TB, cfg Config) *Store {
	t.Helper()
	if cfg.Kinds == ([NumKinds]KindConfig{}) {
		cfg.Kinds = DefaultKinds()
	}
	if cfg.GenerationBits == 0 {
		cfg.GenerationBits = 22 // few enough counter collisions to keep "fresh" checks exact
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// snapOf records the dependencies of a read as the proxy does.
func snapOf(t *testing.T, s *Store, r req) Snapshot {
	t.Helper()
	m := method(t, r.meth)
	n := readNames(t, m, r.args)
	deps, ok := s.ReadDeps(nil, r.sc, m, &n)
	if !ok {
		t.Fatalf("ReadDeps(%s): not cacheable", r.meth)
	}
	snap, ok := s.Gens().Take(deps)
	if !ok {
		t.Fatalf("Take(%s): %d deps", r.meth, len(deps))
	}
	return snap
}

func TestApplyInvalidates(t *testing.T) {
	scB := Scope{Upstream: "b"}
	reads := map[string]req{
		"table db0.t1":       getTable("db0", "t1"),
		"table req db0.t1":   getTableReq("DB0", "T1", "", ""),
		"table db0.t2":       getTable("db0", "t2"),
		"table db1.t1":       getTable("db1", "t1"),
		"partition db0.t1":   getPartition("db0", "t1", "1"),
		"partition db0.t2":   getPartition("db0", "t2", "1"),
		"part names db0.t1":  {"get_partition_names", hmsreq.Args(hmsreq.Str(1, "db0"), hmsreq.Str(2, "t1")), scA},
		"by names db0.t1":    byNamesReq("db0", "t1", "p=1"),
		"database db0":       {"get_database", hmsreq.Args(hmsreq.Str(1, "db0")), scA},
		"database db1":       {"get_database", hmsreq.Args(hmsreq.Str(1, "db1")), scA},
		"tables db0":         {"get_all_tables", hmsreq.Args(hmsreq.Str(1, "db0")), scA},
		"tables db1":         {"get_all_tables", hmsreq.Args(hmsreq.Str(1, "db1")), scA},
		"databases":          {"get_all_databases", hmsreq.Args(), scA},
		"all functions":      {"get_all_functions", hmsreq.Args(), scA},
		"function db0.f":     {"get_function", hmsreq.Args(hmsreq.Str(1, "db0"), hmsreq.Str(2, "f")), scA},
		"function db1.f":     {"get_function", hmsreq.Args(hmsreq.Str(1, "db1"), hmsreq.Str(2, "f")), scA},
		"spark table db0.t1": getTable("@spark#db0", "t1"),
		"other upstream":     getTable("db0", "t1").in(scB),
		"other upstream db0": req{"get_database", hmsreq.Args(hmsreq.Str(1, "db0")), scB},
	}
	tests := []struct {
		name  string
		ent   Entity
		stale []string // every other read stays current
	}{
		{"table", Entity{Level: LevelTable, Cat: "hive", DB: "db0", Table: "t1"},
			[]string{"table db0.t1", "table req db0.t1", "partition db0.t1", "part names db0.t1", "by names db0.t1", "tables db0",
				"existing partition db0.t1", "existing by names db0.t1"}},
		{"partitions", Entity{Level: LevelPartitions, Cat: "hive", DB: "db0", Table: "t1"},
			[]string{"partition db0.t1", "part names db0.t1", "by names db0.t1", "existing partition db0.t1", "existing by names db0.t1"}},
		// An add changes the partition set: lists and whatever was read
		// under the full snapshot (a not-found answer, a load in flight)
		// go; the entries of existing partitions stay.
		{"partitions added", Entity{Level: LevelPartitions, Cat: "hive", DB: "db0", Table: "t1", Added: true},
			[]string{"partition db0.t1", "part names db0.t1", "by names db0.t1"}},
		{"database", Entity{Level: LevelDatabase, Cat: "hive", DB: "db0"},
			[]string{"table db0.t1", "table req db0.t1", "table db0.t2", "partition db0.t1", "partition db0.t2", "part names db0.t1",
				"by names db0.t1", "database db0", "tables db0", "databases", "all functions", "function db0.f", "function db1.f",
				"existing partition db0.t1", "existing by names db0.t1"}},
		{"function", Entity{Level: LevelFunction, Cat: "hive", DB: "db0"},
			// Function reads also depend on the catalog-wide function
			// counter, so db1.f goes too (extra misses, never stale).
			[]string{"all functions", "function db0.f", "function db1.f"}},
		{"spark table", Entity{Level: LevelTable, Cat: "spark", DB: "db0", Table: "t1"},
			[]string{"spark table db0.t1"}},
		{"all", Entity{Level: LevelAll},
			[]string{"table db0.t1", "table req db0.t1", "table db0.t2", "table db1.t1", "partition db0.t1", "partition db0.t2",
				"part names db0.t1", "by names db0.t1", "database db0", "database db1", "tables db0", "tables db1", "databases",
				"all functions", "function db0.f", "function db1.f", "spark table db0.t1",
				"existing partition db0.t1", "existing by names db0.t1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t, Config{})
			snaps := map[string]Snapshot{}
			for name, r := range reads {
				snaps[name] = snapOf(t, s, r)
			}
			// The entries of partitions the metastore returned.
			for _, name := range []string{"partition db0.t1", "by names db0.t1"} {
				snaps["existing "+name] = snaps[name].Existing()
			}
			s.Apply("a", []Entity{tc.ent})
			for name := range snaps {
				snap := snaps[name]
				got := s.Gens().Current(&snap)
				want := !slices.Contains(tc.stale, name)
				if got != want {
					t.Errorf("after %s write, %s current: got %v; want %v", tc.name, name, got, want)
				}
			}
		})
	}
}

func many(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint("t", i)
	}
	return out
}

func TestReadDepsBounded(t *testing.T) {
	s := newTestStore(t, Config{})
	m := method(t, "get_table_objects_by_name")
	tests := []struct {
		tables []string
		ok     bool
	}{{[]string{"a"}, true}, {[]string{"a", "b", "c"}, true}, {many(maxDeps - 3), true}, {many(maxDeps - 2), false}, {many(100), false}}
	for _, tc := range tests {
		n := readNames(t, m, objectsByName("db0", tc.tables...).args)
		deps, ok := s.ReadDeps(nil, scA, m, &n)
		if ok != tc.ok {
			t.Errorf("ReadDeps(%d tables) ok = %v; want %v", len(tc.tables), ok, tc.ok)
		}
		if _, took := s.Gens().Take(deps); ok && !took {
			t.Errorf("ReadDeps(%d tables) gave %d deps; Take refused them", len(tc.tables), len(deps))
		}
	}
	// A table read without a database is not cacheable.
	gt := method(t, "get_table")
	n := readNames(t, gt, hmsreq.Args(hmsreq.Str(2, "t1")))
	if _, ok := s.ReadDeps(nil, scA, gt, &n); ok {
		t.Errorf("ReadDeps(get_table without db) ok = true; want false")
	}
}

func TestWriteEntities(t *testing.T) {
	part := func(vals string, db, tbl string) []hmsreq.Field {
		return []hmsreq.Field{hmsreq.Strings(1, vals), hmsreq.Str(2, db), hmsreq.Str(3, tbl)}
	}
	tests := []struct {
		name string
		meth string
		args []byte
		want []Entity
	}{
		{"create_table", "create_table", hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, "Orders"), hmsreq.Str(2, "DB0"))),
			[]Entity{{Level: LevelTable, Cat: "hive", DB: "db0", Table: "orders"}}},
		{"create_table catalog", "create_table", hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, "t1"), hmsreq.Str(2, "db0"), hmsreq.Str(17, "Spark"))),
			[]Entity{{Level: LevelTable, Cat: "spark", DB: "db0", Table: "t1"}}},
		{"create_table no table name", "create_table", hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(2, "db0"))),
			[]Entity{{Level: LevelDatabase, Cat: "hive", DB: "db0", Table: ""}}},
		{"create_table no names", "create_table", hmsreq.Args(hmsreq.Struct(1)),
			[]Entity{{Level: LevelAll}}},
		{"drop_table", "drop_table", hmsreq.Args(hmsreq.Str(1, "db0"), hmsreq.Str(2, "T1")),
			[]Entity{{Level: LevelTable, Cat: "hive", DB: "db0", Table: "t1"}}},
		// Issue 20: the metastore trims names too; "t2 " is t2.
		{"drop_table blanks", "drop_table", hmsreq.Args(hmsreq.Str(1, " DB0\t"), hmsreq.Str(2, "t2 ")),
			[]Entity{{Level: LevelTable, Cat: "hive", DB: "db0", Table: "t2"}}},
		{"drop_table kelvin", "drop_table", hmsreq.Args(hmsreq.Str(1, "db0"), hmsreq.Str(2, "\u212aey")),
			[]Entity{{Level: LevelTable, Cat: "hive", DB: "db0", Table: "key"}}},
		{"drop_table @cat#db blanks", "drop_table", hmsreq.Args(hmsreq.Str(1, "@Spark #db0 "), hmsreq.Str(2, "t1")),
			[]Entity{{Level: LevelTable, Cat: "spark", DB: "db0", Table: "t1"}}},
		{"drop_table @cat#db", "drop_table", hmsreq.Args(hmsreq.Str(1, "@spark#db0"), hmsreq.Str(2, "t1")),
			[]Entity{{Level: LevelTable, Cat: "spark", DB: "db0", Table: "t1"}}},
		{"drop_table no table", "drop_table", hmsreq.Args(hmsreq.Str(1, "db0")),
			[]Entity{{Level: LevelDatabase, Cat: "hive", DB: "db0", Table: ""}}},
		{"drop_table garbage", "drop_table", []byte{0x0b, 0, 1, 0xff},
			[]Entity{{Level: LevelAll}}},
		{"alter_table rename across databases", "alter_table",
			hmsreq.Args(hmsreq.Str(1, "db0"), hmsreq.Str(2, "Old"), hmsreq.Struct(3, hmsreq.Str(1, "New"), hmsreq.Str(2, "DB1"))),
			[]Entity{{Level: LevelTable, Cat: "hive", DB: "db0", Table: "old"}, {Level: LevelTable, Cat: "hive", DB: "db1", Table: "new"}}},
		{"alter_table in place", "alter_table",
			hmsreq.Args(hmsreq.Str(1, "@spark#db0"), hmsreq.Str(2, "t1"), hmsreq.Struct(3, hmsreq.Str(1, "t1"), hmsreq.Str(2, "db0"))),
			[]Entity{{Level: LevelTable, Cat: "spark", DB: "db0", Table: "t1"}, {Level: LevelTable, Cat: "spark", DB: "db0", Table: "t1"}}},
		{"add_partitions", "add_partitions",
			hmsreq.Args(hmsreq.StructList(1, part("1", "DB0", "t1"), part("2", "db0", "T1"))),
			[]Entity{{Level: LevelPartitions, Cat: "hive", DB: "db0", Table: "t1", Added: true}}},
		// A list naming several databases (the metastore refuses it, but
		// the write may have begun): each database whole, not db1's
		// table as db0's; past maxMixedDatabases, everything.
		{"add_partitions of two databases", "add_partitions",
			hmsreq.Args(hmsreq.StructList(1, part("1", "db0", "t1"), part("2", "db1", "t1"))),
			[]Entity{{Level: LevelDatabase, Cat: "hive", DB: "db0"}, {Level: LevelDatabase, Cat: "hive", DB: "db1"}}},
		// One element names its catalog and the other does not: the
		// metastore may put the second in its default catalog or in the
		// first's, so both are invalidated, not only the named one.
		{"add_partitions, one element without its catalog", "add_partitions",
			hmsreq.Args(hmsreq.StructList(1, append(part("1", "db0", "t1"), hmsreq.Str(9, "spark")), part("2", "db0", "t1"))),
			[]Entity{{Level: LevelDatabase, Cat: "hive", DB: "db0"}, {Level: LevelDatabase, Cat: "spark", DB: "db0"}}},
		{"add_partitions, the first element without its catalog", "add_partitions",
			hmsreq.Args(hmsreq.StructList(1, part("1", "db0", "t1"), append(part("2", "db0", "t1"), hmsreq.Str(9, "Spark")))),
			[]Entity{{Level: LevelDatabase, Cat: "hive", DB: "db0"}, {Level: LevelDatabase, Cat: "spark", DB: "db0"}}},
		{"add_partitions, every element in one catalog", "add_partitions",
			hmsreq.Args(hmsreq.StructList(1, append(part("1", "db0", "t1"), hmsreq.Str(9, "spark")), append(part("2", "db0", "t1"), hmsreq.Str(9, "SPARK")))),
			[]Entity{{Level: LevelPartitions, Cat: "spark", DB: "db0", Table: "t1", Added: true}}},
		{"add_partitions of a hundred databases", "add_partitions",
			hmsreq.Args(hmsreq.StructList(1, func() [][]hmsreq.Field {
				var ps [][]hmsreq.Field
				for i := range 100 {
					ps = append(ps, part("1", fmt.Sprintf("db%d", i), "t1"))
				}
				return ps
			}()...)),
			[]Entity{{Level: LevelAll}}},
		{"append_partition", "append_partition", hmsreq.Args(hmsreq.Str(1, "db0"), hmsreq.Str(2, "t1"), hmsreq.Strings(3, "1")),
			[]Entity{{Level: LevelPartitions, Cat: "hive", DB: "db0", Table: "t1", Added: true}}},
		{"drop_partition", "drop_partition", hmsreq.Args(hmsreq.Str(1, "db0"), hmsreq.Str(2, "t1"), hmsreq.Strings(3, "1")),
			[]Entity{{Level: LevelPartitions, Cat: "hive", DB: "db0", Table: "t1"}}},
		{"alter_partitions", "alter_partitions",
			hmsreq.Args(hmsreq.Str(1, "db0"), hmsreq.Str(2, "t1"), hmsreq.StructList(3, part("1", "db0", "t1"))),
			[]Entity{{Level: LevelPartitions, Cat: "hive", DB: "db0", Table: "t1"}}},
		{"add_partitions empty", "add_partitions", hmsreq.Args(hmsreq.StructList(1)),
			[]Entity{{Level: LevelAll}}},
		{"drop_database", "drop_database", hmsreq.Args(hmsreq.Str(1, "DB0")),
			[]Entity{{Level: LevelDatabase, Cat: "hive", DB: "db0", Table: ""}}},
		{"drop_database @cat#db", "drop_database", hmsreq.Args(hmsreq.Str(1, "@spark#db0")),
			[]Entity{{Level: LevelDatabase, Cat: "spark", DB: "db0", Table: ""}}},
		{"drop_database no args", "drop_database", hmsreq.Args(),
			[]Entity{{Level: LevelAll}}},
		{"create_function", "create_function", hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, "f"), hmsreq.Str(2, "DB0"))),
			[]Entity{{Level: LevelFunction, Cat: "hive", DB: "db0", Table: ""}}},
		{"create_function no db", "create_function", hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, "f"))),
			[]Entity{{Level: LevelAll}}},
		// Issue 22: the metastore adds each constraint to the table it
		// names; a list left out or empty names nothing, and flushes
		// nothing (it once flushed everything).
		{"create_table_with_constraints no constraints", "create_table_with_constraints",
			hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, "t1"), hmsreq.Str(2, "db0")), hmsreq.StructList(2), hmsreq.StructList(3)),
			[]Entity{{Level: LevelTable, Cat: "hive", DB: "db0", Table: "t1"}}},
		{"create_table_with_constraints, a key of another table", "create_table_with_constraints",
			hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, "t1"), hmsreq.Str(2, "db0")),
				hmsreq.StructList(2, []hmsreq.Field{hmsreq.Str(1, "db1"), hmsreq.Str(2, "other"), hmsreq.Str(3, "id")})),
			[]Entity{{Level: LevelTable, Cat: "hive", DB: "db0", Table: "t1"}, {Level: LevelTable, Cat: "hive", DB: "db1", Table: "other"}}},
		{"create_table_req, a check of another table", "create_table_req",
			hmsreq.Args(hmsreq.Struct(1, hmsreq.Struct(1, hmsreq.Str(1, "t1"), hmsreq.Str(2, "db0")),
				hmsreq.StructList(8, []hmsreq.Field{hmsreq.Str(2, "db1"), hmsreq.Str(3, "other"), hmsreq.Str(4, "id")}))),
			[]Entity{{Level: LevelTable, Cat: "hive", DB: "db0", Table: "t1"}, {Level: LevelTable, Cat: "hive", DB: "db1", Table: "other"}}},
		{"create_table_with_constraints, keys of tables in two databases", "create_table_with_constraints",
			hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, "t1"), hmsreq.Str(2, "db0")),
				hmsreq.StructList(2, []hmsreq.Field{hmsreq.Str(1, "db1"), hmsreq.Str(2, "other"), hmsreq.Str(3, "id")},
					[]hmsreq.Field{hmsreq.Str(1, "db2"), hmsreq.Str(2, "third"), hmsreq.Str(3, "id")})),
			[]Entity{{Level: LevelTable, Cat: "hive", DB: "db0", Table: "t1"},
				{Level: LevelDatabase, Cat: "hive", DB: "db1"}, {Level: LevelDatabase, Cat: "hive", DB: "db2"}}},
		{"create_table_with_constraints, keys of two tables of one database", "create_table_with_constraints",
			hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, "t1"), hmsreq.Str(2, "db0")),
				hmsreq.StructList(2, []hmsreq.Field{hmsreq.Str(1, "db1"), hmsreq.Str(2, "other"), hmsreq.Str(3, "id")},
					[]hmsreq.Field{hmsreq.Str(1, "DB1 "), hmsreq.Str(2, "third"), hmsreq.Str(3, "id")})),
			[]Entity{{Level: LevelTable, Cat: "hive", DB: "db0", Table: "t1"}, {Level: LevelTable, Cat: "hive", DB: "db1", Table: "other"},
				{Level: LevelTable, Cat: "hive", DB: "db1", Table: "third"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := WriteEntities(nil, method(t, tc.meth), tc.args, "hive")
			got = dedup(got)
			if !slices.Equal(got, dedup(tc.want)) {
				t.Errorf("got %v; want %v", got, tc.want)
			}
		})
	}
}

// dedup drops repeated entities, keeping the first of each.
func dedup(es []Entity) []Entity {
	var out []Entity
	for _, e := range es {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// TestWriteInvalidatesReadAnySpelling: a write of one spelling of a name
// reaches the reads of every other spelling the metastore reads as the
// same name (issue 20: an alter of t1 left get_table("t1 ") served).
func TestWriteInvalidatesReadAnySpelling(t *testing.T) {
	s := newTestStore(t, Config{})
	reads := []req{getTable("db0", "t1 "), getTable(" DB0", "T1"), getTable("db0\n", "\tt1"), getTableReq("Db0 ", "t1\x01", "HIVE ", "")}
	other := getTable("db0", "t1\u00a0") // a no-break space is kept: another name
	snaps := make([]Snapshot, len(reads))
	for i, r := range reads {
		snaps[i] = snapOf(t, s, r)
	}
	snapOther := snapOf(t, s, other)
	s.Apply("a", WriteEntities(nil, method(t, "alter_table"), hmsreq.Args(hmsreq.Str(1, "db0"), hmsreq.Str(2, "t1"), hmsreq.Struct(3, hmsreq.Str(1, "t1"), hmsreq.Str(2, "db0"))), "hive"))
	for i, r := range reads {
		if s.Gens().Current(&snaps[i]) {
			t.Errorf("%s %q after an alter of db0.t1: current; want stale", r.meth, r.args)
		}
	}
	if !s.Gens().Current(&snapOther) {
		t.Errorf("get_table of t1 and a no-break space after an alter of db0.t1: stale; want current")
	}
}

// TestWriteInvalidatesRead ties WriteEntities, Apply and ReadDeps together.
func TestWriteInvalidatesRead(t *testing.T) {
	s := newTestStore(t, Config{})
	read := getTableReq("db1", "new", "", "")
	other := getTable("db1", "other")
	snap, snapOther := snapOf(t, s, read), snapOf(t, s, other)
	ents := WriteEntities(nil, method(t, "alter_table"), hmsreq.Args(hmsreq.Str(1, "db0"), hmsreq.Str(2, "old"), hmsreq.Struct(3, hmsreq.Str(1, "NEW"), hmsreq.Str(2, "db1"))), "hive")
	s.Apply("a", ents)
	if s.Gens().Current(&snap) {
		t.Errorf("get_table_req(db1.new) after rename into it: current; want stale")
	}
	if !s.Gens().Current(&snapOther) {
		t.Errorf("get_table(db1.other) after rename of db0.old: stale; want current")
	}
}

func TestTxnTracker(t *testing.T) {
	alloc := func(db, tbl string, txns ...int64) []byte {
		return hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.I64s(3, txns...)))
	}
	commit := func(txn int64) []byte { return hmsreq.Args(hmsreq.Struct(1, hmsreq.I64(1, txn))) }
	db0t := Entity{Level: LevelTable, Cat: "hive", DB: "db0", Table: "t"}

	tr := NewTxnTracker(10)
	if got := tr.Observe("allocate_table_write_ids", alloc("DB0", "T", 7), "hive"); got != nil {
		t.Errorf("allocate: got %v; want nil", got)
	}
	tr.Observe("allocate_table_write_ids", alloc("db0", "t", 7), "hive") // again: remembered once
	tr.Observe("allocate_table_write_ids", alloc("@spark#db1", "u", 7, 8), "hive")
	if got, want := tr.Observe("commit_txn", commit(7), "hive"), []Entity{db0t, {Level: LevelTable, Cat: "spark", DB: "db1", Table: "u"}}; !slices.Equal(got, want) {
		t.Errorf("commit_txn(7): got %v; want %v", got, want)
	}
	if got := tr.Observe("commit_txn", commit(7), "hive"); got != nil {
		t.Errorf("commit_txn(7) twice: got %v; want nil", got)
	}
	if got, want := tr.Observe("abort_txn", commit(8), "hive"), []Entity{{Level: LevelTable, Cat: "spark", DB: "db1", Table: "u"}}; !slices.Equal(got, want) {
		t.Errorf("abort_txn(8): got %v; want %v", got, want)
	}
	if got := tr.Observe("commit_txn", commit(99), "hive"); got != nil {
		t.Errorf("commit_txn(unknown): got %v; want nil", got)
	}
	for _, garbage := range [][]byte{nil, {0xff}, {0x0c, 0, 1, 0x0a, 0, 1, 0}} {
		tr.Observe("allocate_table_write_ids", garbage, "hive")
		if got := tr.Observe("commit_txn", garbage, "hive"); got != nil {
			t.Errorf("commit_txn(%x): got %v; want nil", garbage, got)
		}
	}
}

func TestTxnTrackerBounded(t *testing.T) {
	for _, bound := range []int{0, 1, 3, 100} {
		tr := NewTxnTracker(bound)
		for i := int64(0); i < 1000; i++ {
			tr.Observe("allocate_table_write_ids", hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, "db0"), hmsreq.Str(2, "t"), hmsreq.I64s(3, i))), "hive")
			if i%3 == 0 {
				tr.Observe("commit_txn", hmsreq.Args(hmsreq.Struct(1, hmsreq.I64(1, i))), "hive")
			}
		}
		limit := max(1, bound)
		if len(tr.txns) > limit || len(tr.order) > limit {
			t.Errorf("max %d: %d txns, %d in order; want <= %d", bound, len(tr.txns), len(tr.order), limit)
		}
		// The newest transaction is always remembered.
		tr.Observe("allocate_table_write_ids", hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, "db0"), hmsreq.Str(2, "t"), hmsreq.I64s(3, 5000))), "hive")
		if got := tr.Observe("commit_txn", hmsreq.Args(hmsreq.Struct(1, hmsreq.I64(1, 5000))), "hive"); len(got) != 1 {
			t.Errorf("max %d: commit_txn(5000) = %v; want db0.t", bound, got)
		}
	}
}

// TestDepNamesAllocate: a read names its counters on the stack; names
// too long for it (a 300-byte table name, which the proxy caches as any
// other) take one allocation per ReadDeps or Apply, not one per counter
// that names the table. Found in review of the prune speed-up.
func TestDepNamesAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	s := newTestStore(t, Config{})
	m := method(t, "get_partitions_by_names")
	for _, tc := range []struct {
		name  string
		table string
		want  float64
	}{
		{"short", "t0", 0},
		{"long", strings.Repeat("t", 300), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := Names{Cat: "hive", DB: "db", Tables: []string{tc.table}, HasDB: true}
			deps := make([]Dep, 0, maxDeps)
			if got := testing.AllocsPerRun(100, func() { deps, _ = s.ReadDeps(deps, scA, m, &n) }); got > tc.want {
				t.Errorf("ReadDeps: got %v allocations; want at most %v", got, tc.want)
			}
			ents := []Entity{{Level: LevelTable, Cat: "hive", DB: "db", Table: tc.table},
				{Level: LevelPartitions, Cat: "hive", DB: "db", Table: tc.table}}
			if got := testing.AllocsPerRun(100, func() { s.Apply("a", ents) }); got > tc.want {
				t.Errorf("Apply: got %v allocations; want at most %v", got, tc.want)
			}
		})
	}
}
