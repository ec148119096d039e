package hms

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestTargetInvariants: every Read says where its names are; nothing else
// has a Target.
func TestTargetInvariants(t *testing.T) {
	for _, m := range All() {
		e := m.Target
		paths := []Path{e.Cat, e.DB, e.Table, e.Part, e.NewDB, e.NewTable}
		if m.Class != Read {
			for _, p := range paths {
				if p != nil || e.Scope != ScopeNone || e.DBInName {
					t.Errorf("%s: %v method with Target %+v", m.Name, m.Class, e)
					break
				}
			}
			continue
		}
		if e.Scope == ScopeNone {
			t.Errorf("%s: Read without Target", m.Name)
		}
		if e.Scope >= ScopeDatabase && e.Scope != ScopeAll && e.Scope != ScopeCatalog && e.DB == nil {
			t.Errorf("%s: %v target without DB path", m.Name, e.Scope)
		}
		switch e.Scope {
		case ScopeTxn:
			t.Errorf("%s: txn scope on a read", m.Name)
		case ScopeAll:
			for _, p := range paths {
				if p != nil || e.DBInName {
					t.Errorf("%s: ScopeAll target with names %+v", m.Name, e)
					break
				}
			}
		case ScopeTable, ScopePartition:
			if e.Table == nil {
				t.Errorf("%s: %v target without Table path", m.Name, e.Scope)
			}
		}
		if e.Part != nil && e.Scope != ScopePartition {
			t.Errorf("%s: Part path on a %v target", m.Name, e.Scope)
		}
		if e.Table != nil && e.Scope < ScopeTable {
			t.Errorf("%s: Table path on a %v target", m.Name, e.Scope)
		}
		if e.NewDB != nil || e.NewTable != nil {
			t.Errorf("%s: rename paths on a read", m.Name)
		}
		if e.DBInName && (e.DB == nil || e.Cat != nil) {
			t.Errorf("%s: DBInName needs a DB path and no Cat path", m.Name)
		}
		// Legacy methods take the db as positional string arg 1 and are
		// called with "@cat#db"; _req methods carry a catalog field
		// (get_partitions_by_names_req, which has none, folds it too).
		if e.DB != nil && len(e.DB) == 1 && !e.DBInName {
			t.Errorf("%s: top-level db arg without DBInName", m.Name)
		}
		if len(e.DB) > 1 && e.Cat == nil && !e.DBInName {
			t.Errorf("%s: request struct with neither catalog field nor DBInName", m.Name)
		}
		for _, p := range paths {
			if p == nil {
				continue
			}
			if len(p) == 0 || p[0] <= 0 {
				t.Errorf("%s: path %v must start with an arg field id", m.Name, p)
			}
			for _, id := range p {
				if id == 0 || id < Each {
					t.Errorf("%s: bad step %d in %v", m.Name, id, p)
				}
			}
		}
	}
}

// resolved is what a Target's paths yield on one request.
type resolved struct{ cat, db, table, part []string }

func (r resolved) String() string {
	return fmt.Sprintf("cat=%q db=%q table=%q part=%q", r.cat, r.db, r.table, r.part)
}

func resolve(t *testing.T, args []byte, e Effect) resolved {
	t.Helper()
	get := func(p Path) []string {
		if p == nil {
			return nil
		}
		var out []string
		if err := Walk(args, p, func(typ byte, val []byte) bool {
			if typ != wire.TString {
				t.Errorf("path %v: type %d", p, typ)
			}
			out = append(out, string(val))
			return true
		}); err != nil {
			t.Fatalf("path %v: %v", p, err)
		}
		return out
	}
	return resolved{get(e.Cat), get(e.DB), get(e.Table), get(e.Part)}
}

func ss(v ...string) []string { return v }

// TestTargets pins a dozen Targets and resolves each against a request
// encoded as its IDL says (hms-protocol.md §3, §3.11, §9).
func TestTargets(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Effect
		args []byte // encoded as the IDL says
		got  resolved
	}{
		{"get_table",
			Effect{Scope: ScopeTable, DB: Path{1}, Table: Path{2}, DBInName: true},
			hmsreq.Args(hmsreq.Str(1, "@hive#db"), hmsreq.Str(2, "t")),
			resolved{db: ss("@hive#db"), table: ss("t")}},
		{"get_table_req",
			Effect{Scope: ScopeTable, Cat: Path{1, 4}, DB: Path{1, 1}, Table: Path{1, 2}},
			// GetTableRequest: 1 dbName, 2 tblName, 4 catName, 6 validWriteIdList
			hmsreq.Req(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), hmsreq.Str(4, "cat"), hmsreq.Str(6, "db.t:5:9::")),
			resolved{cat: ss("cat"), db: ss("db"), table: ss("t")}},
		{"get_partition_names",
			Effect{Scope: ScopePartition, DB: Path{1}, Table: Path{2}, DBInName: true},
			hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), hmsreq.I16(3, -1)),
			resolved{db: ss("db"), table: ss("t")}},
		{"get_partitions_by_names",
			Effect{Scope: ScopePartition, DB: Path{1}, Table: Path{2}, Part: Path{3, Each}, DBInName: true},
			hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), hmsreq.Strings(3, "ds=1/h=2", "ds=1/h=3")),
			resolved{db: ss("db"), table: ss("t"), part: ss("ds=1/h=2", "ds=1/h=3")}},
		{"get_partitions_by_names_req",
			Effect{Scope: ScopePartition, DB: Path{1, 1}, Table: Path{1, 2}, Part: Path{1, 3, Each}, DBInName: true},
			// GetPartitionsByNamesRequest: 1 db_name, 2 tbl_name, 3 names, 4 get_col_stats
			hmsreq.Req(hmsreq.Str(1, "@c#db"), hmsreq.Str(2, "t"), hmsreq.Strings(3, "ds=1"), hmsreq.Bool(4, true)),
			resolved{db: ss("@c#db"), table: ss("t"), part: ss("ds=1")}},
		{"get_partitions_by_filter",
			Effect{Scope: ScopePartition, DB: Path{1}, Table: Path{2}, DBInName: true},
			hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), hmsreq.Str(3, `ds > "1"`), hmsreq.I16(4, -1)),
			resolved{db: ss("db"), table: ss("t")}},
		{"get_table_objects_by_name_req",
			Effect{Scope: ScopeTable, Cat: Path{1, 4}, DB: Path{1, 1}, Table: Path{1, 2, Each}},
			// GetTablesRequest: 1 dbName, 2 tblNames, 4 catName, 8 tablesPattern
			hmsreq.Req(hmsreq.Str(1, "db"), hmsreq.Strings(2, "a", "b"), hmsreq.Str(4, "cat")),
			resolved{cat: ss("cat"), db: ss("db"), table: ss("a", "b")}},
		{"get_database",
			Effect{Scope: ScopeDatabase, DB: Path{1}, DBInName: true},
			hmsreq.Args(hmsreq.Str(1, "@spark#db")),
			resolved{db: ss("@spark#db")}},
		{"get_database_req",
			Effect{Scope: ScopeDatabase, Cat: Path{1, 2}, DB: Path{1, 1}},
			// GetDatabaseRequest: 1 name, 2 catalogName, 3 processorCapabilities
			hmsreq.Req(hmsreq.Str(1, "db"), hmsreq.Str(2, "cat"), hmsreq.Strings(3, "EXTWRITE")),
			resolved{cat: ss("cat"), db: ss("db")}},
		{"get_all_tables",
			Effect{Scope: ScopeDatabase, DB: Path{1}, DBInName: true},
			hmsreq.Args(hmsreq.Str(1, "db")),
			resolved{db: ss("db")}},
		{"get_table_statistics_req",
			Effect{Scope: ScopeTable, Cat: Path{1, 4}, DB: Path{1, 1}, Table: Path{1, 2}},
			// TableStatsRequest: 1 dbName, 2 tblName, 3 colNames, 4 catName, 6 engine
			hmsreq.Req(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), hmsreq.Strings(3, "c1", "c2"), hmsreq.Str(4, "cat"), hmsreq.Str(6, "hive")),
			resolved{cat: ss("cat"), db: ss("db"), table: ss("t")}},
		{"get_partitions_statistics_req",
			Effect{Scope: ScopePartition, Cat: Path{1, 5}, DB: Path{1, 1}, Table: Path{1, 2}, Part: Path{1, 4, Each}},
			// PartitionsStatsRequest: 1 dbName, 2 tblName, 3 colNames, 4 partNames, 5 catName
			hmsreq.Req(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), hmsreq.Strings(3, "c1"), hmsreq.Strings(4, "ds=1", "ds=2"), hmsreq.Str(5, "cat")),
			resolved{cat: ss("cat"), db: ss("db"), table: ss("t"), part: ss("ds=1", "ds=2")}},
		// A few more that are easy to get wrong.
		{"get_partition",
			Effect{Scope: ScopePartition, DB: Path{1}, Table: Path{2}, Part: Path{3}, DBInName: true},
			hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), hmsreq.Strings(3, "2024", "01")),
			resolved{db: ss("db"), table: ss("t"), part: ss("2024", "01")}},
		{"get_databases",
			Effect{Scope: ScopeCatalog, DB: Path{1}, DBInName: true},
			hmsreq.Args(hmsreq.Str(1, "@hive#")),
			resolved{db: ss("@hive#")}},
		{"get_partitions_by_expr",
			Effect{Scope: ScopePartition, Cat: Path{1, 6}, DB: Path{1, 1}, Table: Path{1, 2}},
			// PartitionsByExprRequest: 1 dbName, 2 tblName, 3 expr, 6 catName
			hmsreq.Req(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), hmsreq.Str(3, "\x00\x01expr"), hmsreq.Str(6, "cat")),
			resolved{cat: ss("cat"), db: ss("db"), table: ss("t")}},
		{"get_function",
			Effect{Scope: ScopeFunction, DB: Path{1}, Table: Path{2}, DBInName: true},
			hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "f")),
			resolved{db: ss("db"), table: ss("f")}},
		{"get_all_functions", Effect{Scope: ScopeAll}, hmsreq.Args(), resolved{}},
		{"get_config_value", Effect{Scope: ScopeAll}, hmsreq.Args(hmsreq.Str(1, "hive.x"), hmsreq.Str(2, "")), resolved{}},
		{"getVersion", Effect{Scope: ScopeAll}, hmsreq.Args(), resolved{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Lookup([]byte(tc.name))
			if m == nil {
				t.Fatal("unknown method")
			}
			if g, w := fmt.Sprintf("%+v", m.Target), fmt.Sprintf("%+v", tc.want); g != w {
				t.Errorf("Target\n got %s\nwant %s", g, w)
			}
			got := resolve(t, tc.args, m.Target)
			if got.String() != tc.got.String() {
				t.Errorf("resolved\n got %v\nwant %v", got, tc.got)
			}
		})
	}
}

// TestTargetsDBInNameLegacy: every legacy Read with a plain db string arg
// (its Target's DB path is one top-level arg) is marked DBInName, per §1.11.
func TestTargetsDBInNameLegacy(t *testing.T) {
	n := 0
	for _, m := range All() {
		if m.Class != Read || len(m.Target.DB) != 1 {
			continue
		}
		n++
		if !m.Target.DBInName {
			t.Errorf("%s: legacy db arg without DBInName", m.Name)
		}
		if strings.HasSuffix(m.Name, "_req") {
			t.Errorf("%s: _req method with a positional db", m.Name)
		}
	}
	if n < 30 {
		t.Errorf("only %d legacy reads with a db arg", n)
	}
}
