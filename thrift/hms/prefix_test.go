package hms

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// prefixRow is one line of testdata/catalog_prefixed.txt.
type prefixRow struct {
	method, path, who string
	line              int
}

func readPrefixed(t *testing.T) []prefixRow {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "catalog_prefixed.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []prefixRow
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 3 || (fs[2] != "client" && fs[2] != "server") {
			t.Fatalf("catalog_prefixed.txt:%d: want \"method db-path client|server\", got %q", n, line)
		}
		rows = append(rows, prefixRow{fs[0], fs[1], fs[2], n})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// dotted writes a path as the testdata file does: "1.1", "1.*.2".
func dotted(p Path) string {
	s := make([]string, len(p))
	for i, x := range p {
		if x == Each {
			s[i] = "*"
		} else {
			s[i] = strconv.Itoa(int(x))
		}
	}
	return strings.Join(s, ".")
}

// namedEntries are a method's entries that locate a database: its Target
// (for a Read) and its Effects.
func namedEntries(m *Method) []*Effect {
	var out []*Effect
	if m.Class == Read && m.Target.DB != nil {
		out = append(out, &m.Target)
	}
	for i := range m.Effects {
		if m.Effects[i].DB != nil {
			out = append(out, &m.Effects[i])
		}
	}
	return out
}

// TestCatalogPrefixed (issue 10): every method-table entry whose database
// string a client may send as "@cat#db" is marked DBInName, and no other.
// truncate_table_req was not, so its writes invalidated "@hive#db.t"
// while the real entries stayed.
func TestCatalogPrefixed(t *testing.T) {
	rows := readPrefixed(t)
	listed := map[[2]string]*prefixRow{}
	for i := range rows {
		r := &rows[i]
		k := [2]string{r.method, r.path}
		if listed[k] != nil {
			t.Errorf("catalog_prefixed.txt:%d: %s %s listed twice", r.line, r.method, r.path)
		}
		listed[k] = r
		if Lookup([]byte(r.method)) == nil {
			t.Errorf("catalog_prefixed.txt:%d: %s is not in the method table", r.line, r.method)
		}
	}
	matched := map[[2]string]bool{}
	for _, m := range All() {
		for _, e := range namedEntries(m) {
			k := [2]string{m.Name, dotted(e.DB)}
			_, want := listed[k]
			matched[k] = true
			t.Run(m.Name+"/"+k[1], func(t *testing.T) {
				if e.DBInName != want {
					t.Errorf("DBInName = %v; want %v (testdata/catalog_prefixed.txt lists it: %v)", e.DBInName, want, want)
				}
				// The file is not the only source: a catalog-less db
				// string of a method a 3.0+ server has is parsed for
				// the catalog, whatever the file says.
				onThree := m.Gone == "" || m.Gone > "3.0"
				if e.Cat == nil && onThree && !want {
					t.Errorf("db path %s has no catalog beside it on a 3.0+ method: it must be listed", k[1])
				}
				if want && e.Cat != nil {
					t.Errorf("listed, but the entry has a catalog path %v: the server reads the catalog there", e.Cat)
				}
			})
		}
	}
	for k, r := range listed {
		if !matched[k] {
			t.Errorf("catalog_prefixed.txt:%d: %s has no entry with db path %s", r.line, k[0], k[1])
		}
	}
}

// TestCatalogPrefixedDoc cross-checks the testdata against the doc, where
// the shared folder is present: every RPC that §1.11 names as sent with
// "@cat#db" by the 3.x/4.0 Java client is listed as "client". The file
// itself is checked by TestCatalogPrefixed in every clone.
func TestCatalogPrefixedDoc(t *testing.T) {
	b, err := os.ReadFile(docPath)
	if os.IsNotExist(err) {
		t.Skipf("%s not found: the in-repo list is checked by TestCatalogPrefixed", docPath)
	}
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "### 1.11 ")
	j := strings.Index(doc[i:], "\n* The server lower-cases")
	if i < 0 || j < 0 {
		t.Fatal("doc §1.11 not found")
	}
	para := doc[i : i+j]
	client := map[string]bool{}
	for _, r := range readPrefixed(t) {
		if r.who == "client" {
			client[r.method] = true
		}
	}
	// §3.12: which RPCs the 3.1.2 and 4.0 Java clients send at all; the
	// wildcards of §1.11 ("get_partition*") cover only those.
	sent := map[string]bool{}
	k := strings.Index(doc, "### 3.12 ")
	if k < 0 {
		t.Fatal("doc §3.12 not found")
	}
	for _, line := range strings.Split(doc[k:], "\n")[1:] {
		if strings.HasPrefix(line, "#") {
			break
		}
		cols := strings.Split(line, "|")
		if len(cols) == 6 && strings.HasPrefix(strings.TrimSpace(cols[1]), "`") {
			name := strings.Trim(strings.TrimSpace(cols[1]), "`")
			sent[name] = strings.TrimSpace(cols[3]) == "yes" || strings.TrimSpace(cols[4]) == "yes"
		}
	}
	if len(sent) < 100 {
		t.Fatalf("parsed %d rows of §3.12; the parse is broken", len(sent))
	}
	named := map[string]bool{}
	n := 0
	for _, mm := range regexp.MustCompile("`([a-z_]+\\*?)`").FindAllStringSubmatch(para, -1) {
		pat := mm[1]
		for _, m := range All() {
			ok := m.Name == pat || strings.HasSuffix(pat, "*") && strings.HasPrefix(m.Name, strings.TrimSuffix(pat, "*"))
			if !ok || !sent[m.Name] || len(namedEntries(m)) == 0 || namedEntries(m)[0].Cat != nil {
				continue
			}
			n++
			named[m.Name] = true
			if !client[m.Name] {
				t.Errorf("doc §1.11 names %s (%s) as sent with \"@cat#db\"; testdata says otherwise", m.Name, pat)
			}
		}
	}
	// The other "client" rows: function calls (named as a group) and the
	// request structs without a catalog field (§3.11: the client folds
	// the catalog into their db name).
	for _, r := range readPrefixed(t) {
		if r.who == "client" && !named[r.method] && !strings.Contains(r.path, ".") && !strings.Contains(r.method, "function") {
			t.Errorf("catalog_prefixed.txt:%d: %s is marked client but the doc does not say so", r.line, r.method)
		}
	}
	if n < 20 {
		t.Errorf("matched %d methods from §1.11; the parse is broken", n)
	}
	for _, name := range []string{"get_function", "get_functions", "drop_function", "alter_function"} { // "function calls"
		if !client[name] {
			t.Errorf("doc §1.11 names function calls; %s is not listed as client", name)
		}
	}
}
