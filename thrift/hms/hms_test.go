package hms

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Method counts from shared/hms-protocol.md: §9 lists 292 ThriftHiveMetastore
// methods, §7 lists 13 fb303 methods.
const (
	wantHMS   = 292
	wantFB303 = 13
)

// docPath is the shared protocol doc, beside the repository (../shared)
// or beside a worktree's parent; HMSPROXY_PROTOCOL_DOC overrides. The
// tests that read it only cross-check testdata/, which holds what the
// other tests need, so they run in any clone.
var docPath = func() string {
	if p := os.Getenv("HMSPROXY_PROTOCOL_DOC"); p != "" {
		return p
	}
	for _, up := range []string{"../../..", "../../../.."} {
		p := filepath.Join(up, "shared", "hms-protocol.md")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return filepath.Join("..", "..", "..", "shared", "hms-protocol.md")
}()

// docMethod is one row of a method table in the protocol doc.
type docMethod struct{ name, since, gone string }

// parseDoc returns the method rows of the doc section whose heading starts
// with "## <section>.", up to the next "## " heading.
func parseDoc(t *testing.T, section string) []docMethod {
	t.Helper()
	f, err := os.Open(docPath)
	if os.IsNotExist(err) {
		t.Skipf("%s not found: doc cross-check skipped", docPath)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docMethod
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = strings.HasPrefix(line, "## "+section+".")
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cols := strings.Split(line, "|")
		name := strings.Trim(strings.TrimSpace(cols[1]), "`")
		since, gone := docVersion(strings.TrimSpace(cols[2]))
		out = append(out, docMethod{name, since, gone})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// docVersion turns the doc's "Since" cell ("≤2.3", "4.0†", "4.0 (gone in
// 4.1-dev)") into the table's Since and Gone.
func docVersion(cell string) (since, gone string) {
	norm := func(v string) string {
		v = strings.TrimSpace(v)
		v = strings.TrimPrefix(v, "≤")
		v = strings.TrimSuffix(v, "†")
		v = strings.TrimSuffix(v, "-dev")
		return v
	}
	if i := strings.Index(cell, "(gone in "); i >= 0 {
		gone = norm(strings.TrimSuffix(cell[i+len("(gone in "):], ")"))
		cell = cell[:i]
	}
	return norm(cell), gone
}

// methodsFile reads testdata/methods.txt: the rows of one section.
func methodsFile(t *testing.T, section string) []docMethod {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "methods.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out []docMethod
	for n, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if len(fs) == 0 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		if len(fs) != 4 {
			t.Fatalf("methods.txt:%d: want 4 fields, got %q", n+1, line)
		}
		if fs[0] != section {
			continue
		}
		gone := fs[3]
		if gone == "-" {
			gone = ""
		}
		out = append(out, docMethod{fs[1], fs[2], gone})
	}
	return out
}

// TestEveryDocMethodPresent: every method of the doc's §9 and §7, as kept
// in testdata/methods.txt, is in the table with the doc's Since/Gone.
func TestEveryDocMethodPresent(t *testing.T) {
	for _, tc := range []struct {
		section string
		want    int
	}{
		{"9", wantHMS},
		{"7", wantFB303},
	} {
		t.Run("section"+tc.section, func(t *testing.T) {
			rows := methodsFile(t, tc.section)
			if len(rows) != tc.want {
				t.Errorf("methods.txt §%s lists %d methods, test expects %d", tc.section, len(rows), tc.want)
			}
			seen := map[string]bool{}
			for _, r := range rows {
				if seen[r.name] {
					t.Errorf("methods.txt §%s lists %s twice", tc.section, r.name)
				}
				seen[r.name] = true
				m := Lookup([]byte(r.name))
				if m == nil {
					t.Errorf("%s (doc §%s) missing from the table", r.name, tc.section)
					continue
				}
				if tc.section == "9" && (m.Since != r.since || m.Gone != r.gone) {
					t.Errorf("%s: Since/Gone = %q/%q, doc says %q/%q", r.name, m.Since, m.Gone, r.since, r.gone)
				}
			}
		})
	}
}

// TestMethodsFileMatchesDoc keeps testdata/methods.txt equal to the doc
// where the shared folder is present (elsewhere the file is the record).
func TestMethodsFileMatchesDoc(t *testing.T) {
	for _, s := range []string{"9", "7"} {
		doc, file := parseDoc(t, s), methodsFile(t, s)
		if len(doc) != len(file) {
			t.Errorf("§%s: doc lists %d methods, methods.txt %d", s, len(doc), len(file))
			continue
		}
		for i := range doc {
			if s == "7" { // §7 has no version column
				doc[i].since, doc[i].gone = "", ""
				file[i].since, file[i].gone = "", ""
			}
			if doc[i] != file[i] {
				t.Errorf("§%s row %d: doc %+v, methods.txt %+v", s, i, doc[i], file[i])
			}
		}
	}
}

// TestNothingExtra checks the table holds exactly the doc's methods.
func TestNothingExtra(t *testing.T) {
	doc := map[string]bool{}
	for _, s := range []string{"9", "7"} {
		for _, r := range methodsFile(t, s) {
			doc[r.name] = true
		}
	}
	for _, m := range All() {
		if !doc[m.Name] {
			t.Errorf("%s is in the table but not in the doc (§7, §9)", m.Name)
		}
	}
}

func TestCountAndUnique(t *testing.T) {
	if got, want := len(table), wantHMS+wantFB303; got != want {
		t.Errorf("table has %d methods, want %d", got, want)
	}
	seen := map[string]bool{}
	for _, m := range table {
		if seen[m.Name] {
			t.Errorf("%s listed twice", m.Name)
		}
		seen[m.Name] = true
	}
	all := All()
	if len(all) != len(table) {
		t.Fatalf("All() has %d methods, table %d", len(all), len(table))
	}
	for i := 1; i < len(all); i++ {
		if all[i-1].Name >= all[i].Name {
			t.Errorf("All() not sorted: %s before %s", all[i-1].Name, all[i].Name)
		}
	}
	all[0] = nil // the caller's copy
	if All()[0] == nil {
		t.Error("All() shares its slice with callers")
	}
}

var versions = map[string]bool{"2.3": true, "2.3.6": true, "3.0": true, "3.1": true, "4.0": true, "4.1": true}

func TestInvariants(t *testing.T) {
	for _, m := range All() {
		t.Run(m.Name, func(t *testing.T) {
			if !versions[m.Since] {
				t.Errorf("Since %q", m.Since)
			}
			if m.Gone != "" && (!versions[m.Gone] || m.Gone <= m.Since) {
				t.Errorf("Gone %q (Since %q)", m.Gone, m.Since)
			}
			switch m.Class {
			case Read:
				if m.Kind == KindNone {
					t.Error("Read without Kind")
				}
				if !m.Idempotent() {
					t.Error("Read not idempotent")
				}
			default:
				if m.Kind != KindNone {
					t.Errorf("%v with Kind %v", m.Class, m.Kind)
				}
				if m.Cacheable {
					t.Errorf("%v marked Cacheable", m.Class)
				}
			}
			if m.Class == Write {
				if len(m.Effects) == 0 {
					t.Error("Write without Effects")
				}
			} else if len(m.Effects) != 0 {
				t.Errorf("%v with Effects", m.Class)
			}
			if (m.Class == Write || m.Class == Session || m.Oneway) && m.Idempotent() {
				t.Error("state-changing method marked idempotent")
			}
			if m.Oneway && m.Class != Passthrough {
				t.Errorf("oneway %v", m.Class)
			}
			for i, e := range m.Effects {
				checkEffect(t, i, e)
			}
		})
	}
}

func checkEffect(t *testing.T, i int, e Effect) {
	t.Helper()
	// Per scope, which of the Cat, DB, Table and Part paths an effect
	// must have (need), must not have (none) or may have (may).
	const (
		may = iota
		need
		none
	)
	rules := map[Scope][4]int{
		ScopeCatalog:   {need, none, none, none},
		ScopeDatabase:  {may, need, none, none},
		ScopeTable:     {may, need, need, none},
		ScopeFunction:  {may, need, need, none},
		ScopePartition: {may, need, need, may},
	}
	paths, names := [4]Path{e.Cat, e.DB, e.Table, e.Part}, [4]string{"Cat", "DB", "Table", "Part"}
	switch rule, ok := rules[e.Scope]; {
	case ok:
		for j, r := range rule {
			if r == need && paths[j] == nil {
				t.Errorf("effect %d (%v): no %s path", i, e.Scope, names[j])
			}
			if r == none && paths[j] != nil {
				t.Errorf("effect %d (%v): unexpected %s path %v", i, e.Scope, names[j], paths[j])
			}
		}
	case e.Scope == ScopeTxn || e.Scope == ScopeAll:
		for _, p := range []Path{e.Cat, e.DB, e.Table, e.Part, e.NewDB, e.NewTable} {
			if p != nil {
				t.Errorf("effect %d (%v): unexpected path %v", i, e.Scope, p)
			}
		}
	default:
		t.Errorf("effect %d: scope %v", i, e.Scope)
	}
	if (e.NewDB != nil || e.NewTable != nil) && (e.Scope != ScopeTable || e.NewDB == nil || e.NewTable == nil) {
		t.Errorf("effect %d: NewDB/NewTable must come as a pair on a table effect", i)
	}
	if e.DBInName && (e.DB == nil || e.Cat != nil) {
		t.Errorf("effect %d: DBInName needs a DB path and no Cat path", i)
	}
	for _, p := range []Path{e.Cat, e.DB, e.Table, e.Part, e.NewDB, e.NewTable} {
		if p == nil {
			continue
		}
		if len(p) == 0 || p[0] <= 0 {
			t.Errorf("effect %d: path %v must start with an arg field id", i, p)
		}
		for _, id := range p {
			if id == 0 || id < Each {
				t.Errorf("effect %d: bad step %d in %v", i, id, p)
			}
		}
	}
}

// TestClassification pins the decisions the proxy relies on.
func TestClassification(t *testing.T) {
	for _, tc := range []struct {
		name      string
		class     Class
		kind      Kind
		cacheable bool
		oneway    bool
	}{
		{"get_table_req", Read, KindTable, true, false},
		{"get_partitions_by_names", Read, KindPartitions, true, false},
		{"get_partition_names_ps", Read, KindPartitionNames, true, false},
		{"get_partitions_by_filter", Read, KindPartitionFilter, true, false},
		{"get_table_statistics_req", Read, KindStatistics, true, false},
		{"get_databases", Read, KindDatabaseNames, true, false},
		{"get_partition_with_auth", Read, KindPartition, false, false},
		{"get_privilege_set", Read, KindOther, false, false},
		{"getMetaConf", Passthrough, KindNone, false, false},
		{"get_current_notificationEventId", Passthrough, KindNone, false, false},
		{"get_next_notification", Passthrough, KindNone, false, false},
		{"open_txns", Passthrough, KindNone, false, false},
		{"lock", Passthrough, KindNone, false, false},
		{"heartbeat", Passthrough, KindNone, false, false},
		{"compact2", Passthrough, KindNone, false, false},
		{"get_delegation_token", Passthrough, KindNone, false, false},
		{"set_ugi", Session, KindNone, false, false},
		{"setMetaConf", Session, KindNone, false, false},
		{"shutdown", Passthrough, KindNone, false, true},
		{"reinitialize", Passthrough, KindNone, false, true},
		{"commit_txn", Write, KindNone, false, false},
		{"alter_table", Write, KindNone, false, false},
	} {
		m := Lookup([]byte(tc.name))
		if m == nil {
			t.Errorf("%s: missing", tc.name)
			continue
		}
		if m.Class != tc.class || m.Kind != tc.kind || m.Cacheable != tc.cacheable || m.Oneway != tc.oneway {
			t.Errorf("%s: got %v/%v cacheable=%v oneway=%v, want %v/%v cacheable=%v oneway=%v",
				tc.name, m.Class, m.Kind, m.Cacheable, m.Oneway, tc.class, tc.kind, tc.cacheable, tc.oneway)
		}
	}
}

func TestEffects(t *testing.T) {
	eq := func(a, b Path) bool {
		if len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}
	for _, tc := range []struct {
		name string
		i    int
		want Effect
	}{
		{"alter_table", 0, Effect{Scope: ScopeTable, DB: Path{1}, Table: Path{2}, NewDB: Path{3, 2}, NewTable: Path{3, 1}, DBInName: true}},
		{"alter_table_req", 0, Effect{Scope: ScopeTable, Cat: Path{1, 1}, DB: Path{1, 2}, Table: Path{1, 3}, NewDB: Path{1, 4, 2}, NewTable: Path{1, 4, 1}}},
		{"create_table", 0, Effect{Scope: ScopeTable, Cat: Path{1, 17}, DB: Path{1, 2}, Table: Path{1, 1}}},
		{"add_partitions", 0, Effect{Scope: ScopePartition, Cat: Path{1, Each, 9}, DB: Path{1, Each, 2}, Table: Path{1, Each, 3}, Part: Path{1, Each, 1}}},
		{"drop_partitions_req", 0, Effect{Scope: ScopePartition, Cat: Path{1, 9}, DB: Path{1, 1}, Table: Path{1, 2}, Part: Path{1, 3, 1, Each}}},
		{"update_partition_column_statistics", 0, Effect{Scope: ScopePartition, Cat: Path{1, 1, 6}, DB: Path{1, 1, 2}, Table: Path{1, 1, 3}, Part: Path{1, 1, 4}}},
		{"drop_database", 0, Effect{Scope: ScopeDatabase, DB: Path{1}, DBInName: true}},
		{"commit_txn", 0, Effect{Scope: ScopeTxn}},
		{"update_transaction_statistics", 0, Effect{Scope: ScopeAll}},
	} {
		m := Lookup([]byte(tc.name))
		if m == nil || len(m.Effects) <= tc.i {
			t.Errorf("%s: no effect %d", tc.name, tc.i)
			continue
		}
		g, w := m.Effects[tc.i], tc.want
		if g.Scope != w.Scope || g.DBInName != w.DBInName || !eq(g.Cat, w.Cat) || !eq(g.DB, w.DB) ||
			!eq(g.Table, w.Table) || !eq(g.Part, w.Part) || !eq(g.NewDB, w.NewDB) || !eq(g.NewTable, w.NewTable) {
			t.Errorf("%s effect %d:\n got %+v\nwant %+v", tc.name, tc.i, g, w)
		}
	}
}

func TestStrings(t *testing.T) {
	seen := map[string]bool{}
	for k := KindNone; k <= KindOther; k++ {
		s := k.String()
		if s == "" || seen[s] || strings.ContainsAny(s, " -") {
			t.Errorf("Kind(%d).String() = %q", k, s)
		}
		seen[s] = true
		if got, ok := ParseKind(s); got != k || ok != (k != KindNone) {
			t.Errorf("ParseKind(%q) = %v, %t; want %v, %t", s, got, ok, k, k != KindNone)
		}
	}
	for _, s := range []string{"kind(14)", "Table", ""} {
		if got, ok := ParseKind(s); ok {
			t.Errorf("ParseKind(%q) = %v; want no kind", s, got)
		}
	}
	if KindDatabaseNames.String() != "database_names" || KindPartitionFilter.String() != "partition_filter" {
		t.Error("kind labels changed")
	}
	if Kind(200).String() != "kind(200)" || Class(9).String() != "class(9)" || Scope(9).String() != "scope(9)" {
		t.Error("unknown values")
	}
	if Write.String() != "write" || ScopeTxn.String() != "txn" {
		t.Error("class/scope labels")
	}
}

func TestLookupUnknown(t *testing.T) {
	for _, n := range []string{"", "get_tablex", "GET_TABLE", "get_databases_req", "get_partitions_spec_by_filter"} {
		if Lookup([]byte(n)) != nil {
			t.Errorf("Lookup(%q) != nil", n)
		}
	}
	var nilM *Method
	if nilM.Idempotent() {
		t.Error("nil method idempotent")
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	names := [][]byte{[]byte("get_table_req"), []byte("alter_partitions_req"), []byte("no_such_method")}
	allocs := testing.AllocsPerRun(1000, func() {
		for _, n := range names {
			_ = Lookup(n)
		}
	})
	if allocs != 0 {
		t.Errorf("Lookup allocates %.1f times per run", allocs)
	}
}

func BenchmarkLookup(b *testing.B) {
	names := [][]byte{
		[]byte("get_table_req"), []byte("get_partitions_by_names"), []byte("set_ugi"),
		[]byte("alter_table_with_environment_context"), []byte("no_such_method"),
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if Lookup(names[i%len(names)]) == nil && i%len(names) != 4 {
			b.Fatal("lookup failed")
		}
	}
}

// TestSummary pins how many methods each class holds, so a change of
// class anywhere in the table is a visible, reviewed change here.
func TestSummary(t *testing.T) {
	n := map[Class]int{}
	cacheable, idem := 0, 0
	for _, m := range All() {
		n[m.Class]++
		if m.Cacheable {
			cacheable++
		}
		if m.Idempotent() {
			idem++
		}
	}
	got := fmt.Sprintf("passthrough %d, read %d (cacheable %d), write %d, session %d; idempotent %d",
		n[Passthrough], n[Read], cacheable, n[Write], n[Session], idem)
	t.Log(got)
	const want = "passthrough 134, read 81 (cacheable 58), write 88, session 2; idempotent 136"
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	if sum := n[Passthrough] + n[Read] + n[Write] + n[Session]; sum != wantHMS+wantFB303 {
		t.Errorf("classes add up to %d; want %d", sum, wantHMS+wantFB303)
	}
}
