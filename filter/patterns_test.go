package filter

import (
	"strings"
	"testing"
)

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name        string
		allow, deny []string
		want        string
	}{
		{"empty pattern", []string{""}, nil, `allow pattern 0 "": empty database part`},
		{"empty table", nil, []string{"db."}, `deny pattern 0 "db.": empty table part`},
		{"empty db", []string{"x", ".t"}, nil, `allow pattern 1 ".t": empty database part`},
		{"two dots", []string{"a.b.c"}, nil, "more than one dot"},
		{"spaces", []string{" db"}, nil, "leading or trailing space"},
		{"bad regex", nil, []string{"re:("}, "missing closing )"},
		{"empty regex", nil, []string{"re:"}, "empty regular expression"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.allow, tc.deny)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "filter: ") {
				t.Fatalf("got %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestAllowed(t *testing.T) {
	type q struct {
		db, table string
		want      bool
	}
	for _, tc := range []struct {
		name        string
		allow, deny []string
		queries     []q
	}{
		{"no patterns", nil, nil, []q{{"a", "", true}, {"a", "b", true}}},
		{"db only allow", []string{"sales"}, nil, []q{
			{"sales", "", true}, {"sales", "orders", true}, {"SALES", "Orders", true},
			{"sales2", "", false}, {"sale", "x", false}, {"other", "", false},
		}},
		{"db.* equals db", []string{"sales.*"}, nil, []q{
			{"sales", "", true}, {"sales", "x", true}, {"hr", "x", false},
		}},
		{"one table", []string{"sales.orders"}, nil, []q{
			{"sales", "orders", true}, {"Sales", "ORDERS", true}, {"sales", "orders2", false},
			{"sales", "", false}, {"hr", "orders", false},
		}},
		{"deny tmp tables everywhere", nil, []string{"*.tmp_*"}, []q{
			{"a", "tmp_x", false}, {"a", "TMP_X", false}, {"b", "tmp_", false},
			{"a", "tmpx", true}, {"a", "x_tmp_y", true}, {"a", "", true}, {"tmp_db", "", true},
		}},
		{"question mark", []string{"db?.t?"}, nil, []q{
			{"db1", "t2", true}, {"db", "t2", false}, {"db12", "t2", false}, {"dbé", "té", true},
		}},
		{"deny beats allow", []string{"*"}, []string{"secret"}, []q{
			{"secret", "", false}, {"secret", "t", false}, {"public", "t", true},
		}},
		{"regex over qualified name", nil, []string{"re:^tmp_.*$"}, []q{
			{"tmp_db", "", false}, {"tmp_db", "t", false}, {"TMP_DB", "t", false},
			{"db", "tmp_t", true}, {"db", "", true},
		}},
		{"regex on tables", []string{`re:^sales\.(orders|items)$`}, nil, []q{
			{"sales", "orders", true}, {"sales", "ITEMS", true}, {"sales", "", false}, {"sales", "ordersx", false},
		}},
		{"stars", []string{"*a*b*"}, nil, []q{
			{"xaxbx", "", true}, {"ab", "", true}, {"ba", "", false}, {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaac", "", false},
		}},
		{"unicode case", []string{"ÉTÉ"}, nil, []q{{"été", "", true}, {"ÉTÉ", "x", true}, {"ete", "", false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.allow, tc.deny)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range tc.queries {
				if got := p.Allowed(q.db, q.table); got != q.want {
					t.Errorf("Allowed(%q, %q) with %v: got %v; want %v", q.db, q.table, p, got, q.want)
				}
			}
		})
	}
}

func TestAllowedNil(t *testing.T) {
	var p *Patterns
	if !p.Allowed("any", "thing") {
		t.Fatal("nil Patterns: got false; want true")
	}
}

func TestAllowedDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	p, err := Compile([]string{"sales", "hr.*", "re:^logs\\..*$"}, []string{"*.tmp_*", "re:^x.*secret"})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range [][2]string{{"Sales", "Orders"}, {"logs", "events"}, {"hr", ""}, {"xdb", "top_secret"}, {"other", "t"}} {
		if n := testing.AllocsPerRun(200, func() { p.Allowed(q[0], q[1]) }); n != 0 {
			t.Errorf("Allowed(%q, %q): got %v allocations; want 0", q[0], q[1], n)
		}
	}
}

func TestAllowedConcurrent(t *testing.T) {
	p, err := Compile([]string{"re:^a.*"}, []string{"*.tmp_*"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan bool)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 1000; i++ {
				if !p.Allowed("abc", "t") || p.Allowed("abc", "tmp_1") || p.Allowed("b", "t") {
					done <- false
					return
				}
			}
			done <- true
		}()
	}
	for g := 0; g < 8; g++ {
		if !<-done {
			t.Fatal("concurrent Allowed: got a wrong answer")
		}
	}
}
