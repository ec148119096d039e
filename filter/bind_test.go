package filter

import (
	"errors"
	"slices"
	"testing"
)

// TestBindAgreesWithEval: a bound filter decides every partition as
// Eval does over the same values by key, errors included.
func TestBindAgreesWithEval(t *testing.T) {
	keys := []string{"ds", "hr", "region"}
	types := []string{"string", "int", "varchar(8)"}
	typeOf := map[string]string{"ds": "string", "hr": "int", "region": "varchar(8)"}
	filters := []string{
		`ds = '2024-01-02'`,
		`ds = '2024-01-02' and (hr) in (1, 2, 3) and region <> 'eu'`,
		`ds = 'a' or not hr = 7`,
		`(hr) not in (1, 7) or region like 'e.*'`,
		`hr between 2 and 8 and ds > '2024-01-01'`,
		`(struct(ds, hr)) in (struct('a', 1), struct('b', 7))`,
		`HR = 7 and Region = 'us'`,
		`hr = '07'`,
		`7 < hr`,
		`hr >= 7 and hr < 9 or region = 'us'`,
		`hr not between 2 and 8 or ds = 'a'`,
		`hr between 8 and 2`,
		`hr <= -1 or hr > 9223372036854775806`,
	}
	var values [][]string
	for _, ds := range []string{"a", "b", "2024-01-02"} {
		for _, hr := range []string{"1", "07", "7", "-1", "x", DefaultPartition} {
			for _, region := range []string{"eu", "us"} {
				values = append(values, []string{ds, hr, region})
			}
		}
	}
	for _, f := range filters {
		e, err := Parse(f)
		if err != nil {
			t.Fatalf("Parse(%q): %v", f, err)
		}
		b, err := e.Bind(keys, types)
		if err != nil {
			t.Fatalf("Bind(%q): %v", f, err)
		}
		for _, vals := range values {
			byKey := map[string]string{"ds": vals[0], "hr": vals[1], "region": vals[2]}
			want, wantErr := e.Eval(byKey, typeOf)
			got, gotErr := b.Eval(vals)
			if got != want || (gotErr == nil) != (wantErr == nil) {
				t.Errorf("%q on %q: got %v, %v; want %v, %v", f, vals, got, gotErr, want, wantErr)
			}
		}
	}
}

// TestSans: less the conjunct pinning a key, a bound filter decides
// every partition having one of that key's pinned values as before, and
// what is left is evaluated (a filter wrongly dropped whole would pass
// partitions the other conjuncts refuse).
func TestSans(t *testing.T) {
	keys := []string{"ds", "hr", "region"}
	types := []string{"string", "int", "varchar(8)"}
	typeOf := map[string]string{"ds": "string", "hr": "int", "region": "varchar(8)"}
	for _, tc := range []struct {
		filter, key string
		refused     []string // values (ds, hr, region) pinned but refused by what is left
	}{
		{`ds = 'a' and (hr) in (1, 7) and region <> 'eu'`, "ds", []string{"a", "1", "eu"}},
		{`ds = 'a' and (hr) in (1, 7) and region <> 'eu'`, "hr", []string{"b", "7", "us"}},
		{`(ds = 'a' and hr = 7) and (region = 'us' and ds = 'b')`, "ds", []string{"a", "7", "us"}},
		{`ds = 'a'`, "ds", nil},
		{`ds = 'a' or hr = 7`, "ds", nil}, // nothing pinned: Sans is the filter itself
	} {
		e, err := Parse(tc.filter)
		if err != nil {
			t.Fatal(err)
		}
		b, err := e.Bind(keys, types)
		if err != nil {
			t.Fatal(err)
		}
		sans := b.Sans(tc.key, typeOf)
		pos := slices.Index(keys, tc.key)
		set := e.Pinned(typeOf)[tc.key]
		for _, ds := range []string{"a", "b"} {
			for _, hr := range []string{"1", "7", "9"} {
				for _, region := range []string{"eu", "us"} {
					vals := []string{ds, hr, region}
					if set != nil && !slices.Contains(set, vals[pos]) {
						continue
					}
					want, _ := b.Eval(vals)
					if got, _ := sans.Eval(vals); got != want {
						t.Errorf("%q less %s on %q: %v; want %v", tc.filter, tc.key, vals, got, want)
					}
				}
			}
		}
		if tc.refused != nil {
			if got, _ := sans.Eval(tc.refused); got {
				t.Errorf("%q less %s passes %q", tc.filter, tc.key, tc.refused)
			}
		}
	}
}

func TestBindMissingKey(t *testing.T) {
	e, err := Parse(`ds = 'a' and colour = 'red'`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Bind([]string{"ds"}, []string{"string"}); !errors.Is(err, ErrMissingKey) {
		t.Fatalf("got %v; want ErrMissingKey", err)
	}
}
