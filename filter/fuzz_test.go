package filter

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`ds = '2024-01-01' and hr > 5`,
		`(ds) in ('a', "b") or not hr between -1 and 3`,
		`(struct(a, b)) not in (const struct('x', 1), struct('y', 2))`,
		"`k``x` like 'a.*' OR dt >= DATE '2024-01-01' and ts < 2024-01-01 10:00:00",
		`hr = - 9223372036854775808`,
		`'a' 'b' <> s`,
		`((((x = 1))))`,
	} {
		f.Add(s, "1")
	}
	types := map[string]string{"ds": "string", "hr": "int", "a": "bigint", "dt": "date"}
	f.Fuzz(func(t *testing.T, s, v string) {
		e, err := Parse(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "filter: syntax error at offset ") {
				t.Fatalf("Parse(%q): error %q lacks its offset", s, err)
			}
			return
		}
		values := map[string]string{}
		for _, k := range e.Keys() {
			if k != strings.ToLower(k) {
				t.Fatalf("Keys(%q): %q is not lower-case", s, k)
			}
			values[k] = v
		}
		e.Exact(types)
		want, err := e.Eval(values, types)
		if errors.Is(err, errInternal) {
			t.Fatalf("Eval(%q): %v", s, err)
		}
		// Bound to the filter's own keys, it decides as Eval does.
		keys := e.Keys()
		typs := make([]string, len(keys))
		vals := make([]string, len(keys))
		for i, k := range keys {
			typs[i], vals[i] = types[k], v
		}
		b, berr := e.Bind(keys, typs)
		if berr != nil {
			t.Fatalf("Bind(%q): %v", s, berr)
		}
		if got, gerr := b.Eval(vals); got != want || (gerr == nil) != (err == nil) {
			t.Fatalf("Bound(%q).Eval(%q): got %v, %v; want %v, %v", s, v, got, gerr, want, err)
		}
		// Less a conjunct that pins a key, it decides alike the
		// partitions having one of the pinned values.
		for k, set := range e.Pinned(types) {
			if !slices.Contains(set, v) {
				continue
			}
			if got, gerr := b.Sans(k, types).Eval(vals); got != want || (gerr == nil) != (err == nil) {
				t.Fatalf("Bound(%q).Sans(%q).Eval(%q): got %v, %v; want %v, %v", s, k, v, got, gerr, want, err)
			}
		}
	})
}

func FuzzPartitionValues(f *testing.F) {
	for _, s := range []string{"ds=2024-01-01/hr=07", "p=a%2Fb%3D", "p=%", "p=%zz/q=", "k%3D=v%25"} {
		f.Add(s, "k", "v")
	}
	f.Fuzz(func(t *testing.T, name, k, v string) {
		// Whatever PartitionValues accepts, MakePartName writes back as a
		// name that PartitionValues reads as the same keys and values.
		if keys, values, err := PartitionValues(name); err == nil {
			again := MakePartName(keys, values)
			k2, v2, err := PartitionValues(again)
			if err != nil || !slices.Equal(k2, keys) || !slices.Equal(v2, values) {
				t.Fatalf("%q -> %q %q -> %q -> %q %q %v", name, keys, values, again, k2, v2, err)
			}
			if MakePartName(k2, v2) != again {
				t.Fatalf("MakePartName not stable for %q", name)
			}
		}
		// A name MakePartName wrote round-trips exactly.
		if k == "" {
			return
		}
		keys, values := []string{k, "hr"}, []string{v, k}
		made := MakePartName(keys, values)
		k2, v2, err := PartitionValues(made)
		if err != nil {
			t.Fatalf("PartitionValues(%q): %v", made, err)
		}
		if !slices.Equal(k2, keys) || !slices.Equal(v2, values) {
			t.Fatalf("PartitionValues(%q): got %q %q; want %q %q", made, k2, v2, keys, values)
		}
		if again := MakePartName(k2, v2); again != made {
			t.Fatalf("MakePartName(PartitionValues(%q)) = %q", made, again)
		}
	})
}
