package cache

import (
	"bytes"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// req is one read request: a method, its args and the scope it runs in.
type req struct {
	meth string
	args []byte
	sc   Scope
}

func (r req) key(t *testing.T) ([]byte, bool) {
	t.Helper()
	m := method(t, r.meth)
	n := readNames(t, m, r.args)
	return AppendKey(nil, r.sc, m, &n, r.args)
}

var scA = Scope{Upstream: "a"}

func getTable(db, tbl string) req {
	return req{"get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl)), scA}
}

// getTableReq builds get_table_req; cat "" leaves catName unset.
func getTableReq(db, tbl, cat, validWriteIDs string) req {
	fs := []hmsreq.Field{hmsreq.Str(1, db), hmsreq.Str(2, tbl)}
	if cat != "" {
		fs = append(fs, hmsreq.Str(4, cat))
	}
	if validWriteIDs != "" {
		fs = append(fs, hmsreq.Str(6, validWriteIDs))
	}
	return req{"get_table_req", hmsreq.Args(hmsreq.Struct(1, fs...)), scA}
}

func getPartition(db, tbl string, vals ...string) req {
	return req{"get_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, vals...)), scA}
}

func byNamesReq(db, tbl string, names ...string) req {
	return req{"get_partitions_by_names_req", hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, names...))), scA}
}

func objectsByName(db string, tbls ...string) req {
	return req{"get_table_objects_by_name", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Strings(2, tbls...)), scA}
}

func getDatabases(pattern string) req {
	return req{"get_databases", hmsreq.Args(hmsreq.Str(1, pattern)), scA}
}

func (r req) in(sc Scope) req { r.sc = sc; return r }

func TestAppendKeySame(t *testing.T) {
	tests := []struct {
		name string
		a, b req
	}{
		{"user ignored when unset", getTable("db0", "t1").in(Scope{Upstream: "a"}), getTable("db0", "t1").in(Scope{Upstream: "a"})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ka, kb := keys(t, tc.a, tc.b)
			if !bytes.Equal(ka, kb) {
				t.Errorf("got keys %q and %q; want equal", ka, kb)
			}
		})
	}
}

// keys returns the keys of a and b, and fails the test unless both have
// one.
func keys(t *testing.T, a, b req) (ka, kb []byte) {
	t.Helper()
	ka, oka := a.key(t)
	kb, okb := b.key(t)
	if !oka || !okb {
		t.Fatalf("ok = %v, %v; want true, true", oka, okb)
	}
	return ka, kb
}

func TestAppendKeyDifferent(t *testing.T) {
	tests := []struct {
		name string
		a, b req
	}{
		{"table", getTable("db0", "t1"), getTable("db0", "t2")},
		// Hive 4.0 answers a request struct without its catalog field
		// otherwise than one naming the default catalog on some paths
		// ("catName is null"): the twin found it (found_40_936896757_1850).
		{"get_table_req cat unset vs hive", getTableReq("db0", "t1", "", ""), getTableReq("db0", "t1", "hive", "")},
		{"by names req cat unset vs hive", byNamesReq("db0", "t1", "ds=1"), req{"get_partitions_by_names_req", hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, "db0"), hmsreq.Str(2, "t1"), hmsreq.Strings(3, "ds=1"), hmsreq.Str(5, "hive"))), scA}},
		// Names are keyed as sent (issue 20): the metastore finds one
		// object for every spelling, but quotes the spelling in its
		// not-found answers ("hive.DB0.t1 table not found").
		{"db case", getTable("DB0", "t1"), getTable("db0", "t1")},
		{"table case", getTable("db0", "Orders"), getTable("db0", "orders")},
		{"table blank", getTable("db0", "t1 "), getTable("db0", "t1")},
		{"legacy @HIVE#DB0", getTable("@HIVE#DB0", "t1"), getTable("@hive#db0", "t1")},
		{"legacy partition @hive#", getPartition("@hive#db0", "t1", "2024"), getPartition("@HIVE#db0", "T1", "2024")},
		{"get_table_req cat HIVE", getTableReq("db0", "t1", "HIVE", ""), getTableReq("db0", "t1", "hive", "")},
		{"get_table_req names case", getTableReq("DB0", "T1", "", "x"), getTableReq("db0", "t1", "hive", "x")},
		{"by_names_req @hive#", byNamesReq("@hive#DB0", "t1", "p=1"), byNamesReq("@hive#db0", "t1", "p=1")},
		{"objects_by_name case", objectsByName("DB0", "A", "b"), objectsByName("db0", "a", "B")},
		{"session overrides", getTable("db0", "t1").in(Scope{Upstream: "a", Conf: "x"}), getTable("db0", "t1").in(Scope{Upstream: "a"})},
		{"database", getTable("db0", "t1"), getTable("db1", "t1")},
		{"catalog", getTable("@spark#db0", "t1"), getTable("db0", "t1")},
		// Issue 10: HMS 2.3 takes "@hive#db0" as a literal, unknown
		// database, 3.0+ as db0: a reply is shared only between requests
		// every metastore answers alike.
		{"prefixed vs plain db", getTable("@hive#db0", "t1"), getTable("db0", "t1")},
		{"prefixed vs plain partition", getPartition("@hive#db0", "t1", "2024"), getPartition("db0", "t1", "2024")},
		{"prefixed vs plain by_names_req", byNamesReq("@hive#db0", "t1", "p=1"), byNamesReq("db0", "t1", "p=1")},
		{"prefixed vs plain pattern", getDatabases("@hive#*"), getDatabases("*")},
		// A database pattern is a regex to HMS: \W is not \w (found by
		// FuzzKeyCollision).
		{"pattern escape case", getDatabases("\\W*"), getDatabases("\\w*")},
		{"null db vs absent", getDatabases("@hive#"), req{"get_databases", hmsreq.Args(), scA}},
		{"empty db vs plain empty", getTable("@hive#!", "t1"), getTable("", "t1")},
		{"catalog req", getTableReq("db0", "t1", "spark", ""), getTableReq("db0", "t1", "", "")},
		{"method", getTable("db0", "t1"), req{"get_fields", hmsreq.Args(hmsreq.Str(1, "db0"), hmsreq.Str(2, "t1")), scA}},
		{"partition values case", getPartition("db0", "t1", "A"), getPartition("db0", "t1", "a")},
		{"partition values", getPartition("db0", "t1", "1"), getPartition("db0", "t1", "2")},
		{"partition names case", byNamesReq("db0", "t1", "p=A"), byNamesReq("db0", "t1", "p=a")},
		{"validWriteIdList", getTableReq("db0", "t1", "", "db0.t1:5:"), getTableReq("db0", "t1", "", "db0.t1:6:")},
		{"validWriteIdList unset", getTableReq("db0", "t1", "", "db0.t1:5:"), getTableReq("db0", "t1", "", "")},
		{"upstream", getTable("db0", "t1").in(Scope{Upstream: "a"}), getTable("db0", "t1").in(Scope{Upstream: "b"})},
		{"user", getTable("db0", "t1").in(Scope{Upstream: "a", User: "alice"}), getTable("db0", "t1").in(Scope{Upstream: "a", User: "bob"})},
		{"user vs shared", getTable("db0", "t1").in(Scope{Upstream: "a", User: "alice"}), getTable("db0", "t1").in(Scope{Upstream: "a"})},
		{"null vs empty db", getDatabases("@hive#"), getDatabases("@hive#!")},
		{"null db vs empty get_table", getTable("@hive#", "t1"), getTable("@hive#!", "t1")},
		{"table list order", objectsByName("db0", "a", "b"), objectsByName("db0", "b", "a")},
		// Names may hold any byte: a NUL must not move a boundary.
		{"nul in db vs no table", req{"get_table", hmsreq.Args(hmsreq.Str(1, "db0\x00t1")), scA}, getTable("db0", "t1")},
		{"nul in table list", objectsByName("db0", "a\x00b"), objectsByName("db0", "a", "b")},
		{"nul across db and table", objectsByName("a\x00b", "c"), objectsByName("a", "b", "c")},
		{"nul in user", getTable("db0", "t1").in(Scope{Upstream: "a", User: "x\x00get_table"}), getTable("db0", "t1").in(Scope{Upstream: "a", User: "x"})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ka, kb := keys(t, tc.a, tc.b)
			if bytes.Equal(ka, kb) {
				t.Errorf("got equal keys %q; want different", ka)
			}
		})
	}
}

// TestAppendKeyWrongType: a name field of the wrong wire type is ignored
// by the server, so it must not key as the name it seems to hold.
func TestAppendKeyWrongType(t *testing.T) {
	tests := []struct {
		name string
		r    req
	}{
		{"table as list", req{"get_table", hmsreq.Args(hmsreq.Str(1, "db0"), hmsreq.Strings(2, "t1")), scA}},
		{"db as list", req{"get_table", hmsreq.Args(hmsreq.Strings(1, "db0"), hmsreq.Str(2, "t1")), scA}},
		{"cat as list", req{"get_table_req", hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, "db0"), hmsreq.Str(2, "t1"), hmsreq.Strings(4, "hive"))), scA}},
		{"table list as string", req{"get_table_objects_by_name", hmsreq.Args(hmsreq.Str(1, "db0"), hmsreq.Str(2, "t1")), scA}},
	}
	legit, _ := getTable("db0", "t1").key(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, ok := tc.r.key(t)
			if ok && bytes.Equal(k, legit) {
				t.Errorf("got key %q, ok; want ok false or a key unlike get_table(db0, t1)", k)
			}
			if ok {
				t.Errorf("got ok true; want false")
			}
		})
	}
}

func TestAppendKeyGarbage(t *testing.T) {
	good := getTableReq("db0", "t1", "hive", "x").args
	inputs := map[string][]byte{"empty": nil, "stop": {0}, "bad type": {0x7f, 0, 1, 0}}
	for i := range good {
		inputs["truncated "+string(rune('a'+i%26))+string(rune('0'+i/26))] = good[:i]
	}
	inputs["huge string"] = []byte{wire.TStruct, 0, 1, wire.TString, 0, 1, 0x7f, 0xff, 0xff, 0xff}
	for _, meth := range []string{"get_table", "get_table_req", "get_partitions_by_names_req", "get_table_objects_by_name"} {
		m := method(t, meth)
		for name, a := range inputs {
			n, _ := ExtractNames(&m.Target, a, "hive")
			k, ok := AppendKey(nil, scA, m, &n, a)
			// Only a whole struct may key: every input here but the
			// empty struct ("stop") is cut short or malformed.
			if ok != (name == "stop") {
				t.Errorf("%s %s: got ok %v (key %q); want %v", meth, name, ok, k, name == "stop")
			}
		}
	}
}

func TestNotFoundField(t *testing.T) {
	tests := []struct {
		meth string
		want int16
	}{{"get_table", 2}, {"get_database", 1}, {"get_table_req", 2}, {"get_all_tables", 0}, {"nope", 0}}
	for _, tc := range tests {
		if got := NotFoundField(tc.meth); got != tc.want {
			t.Errorf("NotFoundField(%q) = %d; want %d", tc.meth, got, tc.want)
		}
	}
}

func TestExtractNames(t *testing.T) {
	tests := []struct {
		name    string
		r       req
		cat, db string
		hasDB   bool
		tables  []string
	}{
		{"legacy", getTable("@Spark#DB0", "T1"), "spark", "db0", true, []string{"t1"}},
		{"null db", getTable("@spark#", "t1"), "spark", "", false, []string{"t1"}},
		{"empty db", getTable("@spark#!", "t1"), "spark", "", true, []string{"t1"}},
		{"no @", getTable("db#0", "t1"), "hive", "db#0", true, []string{"t1"}},
		{"req cat", getTableReq("db0", "t1", "SPARK", ""), "spark", "db0", true, []string{"t1"}},
		{"list", objectsByName("db0", "A", "b"), "hive", "db0", true, []string{"a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := readNames(t, method(t, tc.r.meth), tc.r.args)
			if n.Cat != tc.cat || n.DB != tc.db || n.HasDB != tc.hasDB || !equalStrings(n.Tables, tc.tables) {
				t.Errorf("got %+v; want cat %q db %q hasDB %v tables %q", n, tc.cat, tc.db, tc.hasDB, tc.tables)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
