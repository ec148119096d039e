package filter

import (
	"errors"
	"strconv"
	"testing"
)

func TestEval(t *testing.T) {
	intHr := map[string]string{"ds": "string", "hr": "int"}
	strHr := map[string]string{"ds": "string", "hr": "string"}
	for _, tc := range []struct {
		name   string
		filter string
		values map[string]string
		types  map[string]string
		want   bool
	}{
		{"int key compares numerically", `hr > 5`, map[string]string{"hr": "10"}, intHr, true},
		{"string key compares bytes", `hr > 5`, map[string]string{"hr": "10"}, strHr, false},
		{"no types means strings", `hr > 5`, map[string]string{"hr": "10"}, nil, false},
		{"int type name case", `hr > 5`, map[string]string{"hr": "10"}, map[string]string{"hr": "BigInt"}, true},
		{"leading zero numeric", `hr = 7`, map[string]string{"hr": "07"}, intHr, true},
		{"leading zero string", `hr = 7`, map[string]string{"hr": "07"}, strHr, false},
		{"string literal on int key compares bytes", `hr = '07'`, map[string]string{"hr": "07"}, intHr, true},
		{"reversed", `5 < hr`, map[string]string{"hr": "10"}, intHr, true},
		{"reversed le", `10 <= hr`, map[string]string{"hr": "10"}, intHr, true},
		{"reversed ge", `9 >= hr`, map[string]string{"hr": "10"}, intHr, false},
		{"equal string", `ds = '2024-01-01'`, map[string]string{"ds": "2024-01-01"}, intHr, true},
		{"case-sensitive", `ds = 'A'`, map[string]string{"ds": "a"}, intHr, false},
		{"and", `ds = 'a' and hr = 1`, map[string]string{"ds": "a", "hr": "1"}, intHr, true},
		{"and false", `ds = 'a' AND hr = 2`, map[string]string{"ds": "a", "hr": "1"}, intHr, false},
		{"or", `ds = 'b' or hr = 1`, map[string]string{"ds": "a", "hr": "1"}, intHr, true},
		{"precedence", `ds = 'x' and hr = 2 or hr = 1`, map[string]string{"ds": "a", "hr": "1"}, intHr, true},
		{"parens", `ds = 'x' and (hr = 2 or hr = 1)`, map[string]string{"ds": "a", "hr": "1"}, intHr, false},
		{"in", `(hr) in (1, 2, 3)`, map[string]string{"hr": "2"}, intHr, true},
		{"in miss", `(hr) in (1, 3)`, map[string]string{"hr": "2"}, intHr, false},
		{"not in", `hr not in (1, 3)`, map[string]string{"hr": "2"}, intHr, true},
		{"not in hit", `(hr) not in (1, 2)`, map[string]string{"hr": "2"}, intHr, false},
		{"between", `hr between 2 and 10`, map[string]string{"hr": "10"}, intHr, true},
		{"between strings", `hr between '2' and '10'`, map[string]string{"hr": "5"}, strHr, false},
		{"not between", `hr not between 2 and 10`, map[string]string{"hr": "11"}, intHr, true},
		{"not between inside", `hr not between 2 and 10`, map[string]string{"hr": "2"}, intHr, false},
		{"not", `not ds = 'a'`, map[string]string{"ds": "b"}, intHr, true},
		{"like regex", `ds like '2024-0[12].*'`, map[string]string{"ds": "2024-02-10"}, intHr, true},
		{"like whole value", `ds like '02'`, map[string]string{"ds": "2024-02-10"}, intHr, false},
		{"negative", `hr > -1`, map[string]string{"hr": "0"}, intHr, true},
		{"date literal", `ds >= 2024-01-01`, map[string]string{"ds": "2024-03-01"}, map[string]string{"ds": "date"}, true},
		{"struct in", `(struct(ds, hr)) in (struct('a', 1), struct('b', 2))`, map[string]string{"ds": "b", "hr": "2"}, intHr, true},
		{"struct in mixed", `(struct(ds, hr)) in (struct('a', 2))`, map[string]string{"ds": "b", "hr": "2"}, intHr, false},
		{"struct not in", `(struct(ds, hr)) not in (struct('a', 2))`, map[string]string{"ds": "b", "hr": "2"}, intHr, true},
		{"backslash kept", `ds = 'a\'b'`, map[string]string{"ds": `a\'b`}, intHr, true},
		{"key case", `HR = 1`, map[string]string{"hr": "1"}, intHr, true},

		// The default partition is SQL NULL for an integral key.
		{"default partition eq", `hr = 1`, map[string]string{"hr": DefaultPartition}, intHr, false},
		{"default partition ne", `hr != 1`, map[string]string{"hr": DefaultPartition}, intHr, false},
		{"default partition not in", `(hr) not in (1)`, map[string]string{"hr": DefaultPartition}, intHr, false},
		{"default partition not", `not hr = 1`, map[string]string{"hr": DefaultPartition}, intHr, false},
		{"default partition or", `hr = 1 or ds = 'a'`, map[string]string{"hr": DefaultPartition, "ds": "a"}, intHr, true},
		{"default partition string key", `hr != '1'`, map[string]string{"hr": DefaultPartition}, strHr, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse(tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Eval(tc.values, tc.types)
			if err != nil {
				t.Fatalf("Eval(%q): got error %v", tc.filter, err)
			}
			if got != tc.want {
				t.Errorf("Eval(%q, %v, %v): got %v; want %v", tc.filter, tc.values, tc.types, got, tc.want)
			}
		})
	}
}

func TestEvalErrors(t *testing.T) {
	intHr := map[string]string{"hr": "int"}
	for _, tc := range []struct {
		name, filter string
		values       map[string]string
		want         error
	}{
		{"missing key", `ds = 'a'`, map[string]string{"hr": "1"}, ErrMissingKey},
		{"not an integer", `hr = 1`, map[string]string{"hr": "x1"}, ErrNotInteger},
		{"overflow", `hr = 1`, map[string]string{"hr": "99999999999999999999"}, ErrNotInteger},
		{"bad like", `hr like '(?<=a)b'`, map[string]string{"hr": "ab"}, ErrLikePattern},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse(tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Eval(tc.values, intHr); !errors.Is(err, tc.want) {
				t.Errorf("got %v; want %v", err, tc.want)
			}
		})
	}
}

func TestEvalDoesNotAllocate(t *testing.T) {
	e, err := Parse(`(ds = '2024-01-01' or ds = '2024-01-02') and hr > 5 and (region) in ('eu', 'us')`)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{"ds": "2024-01-02", "hr": "10", "region": "us"}
	types := map[string]string{"ds": "string", "hr": "int", "region": "string"}
	if n := testing.AllocsPerRun(100, func() { e.Eval(values, types) }); n != 0 {
		t.Errorf("Eval: got %v allocations; want 0", n)
	}
}

// TestInternalErrorKind: the fuzzer tells a bug (a tree the parser should
// never build) from an answer about the input by errors.Is, not by the
// error's text (#11).
func TestInternalErrorKind(t *testing.T) {
	_, err := (&Expr{root: &node{kind: nodeKind(200), key: "hr"}}).Eval(map[string]string{"hr": "1"}, nil)
	if !errors.Is(err, errInternal) {
		t.Fatalf("unknown node kind: got %v; want errInternal", err)
	}
	e, err := Parse(`hr > 3`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Eval(map[string]string{"hr": "x"}, map[string]string{"hr": "int"})
	if !errors.Is(err, ErrNotInteger) || errors.Is(err, errInternal) {
		t.Fatalf("non-integer value: got %v; want ErrNotInteger, not errInternal", err)
	}
}

// FuzzParseInt: the fast parse of partition values agrees with strconv.
func FuzzParseInt(f *testing.F) {
	for _, s := range []string{"0", "7", "07", "-1", "+5", "", "1_000", "999999999999999999", "9223372036854775807", "9223372036854775808", "-9223372036854775808", " 1", "1x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := strconv.ParseInt(s, 10, 64)
		got, ok := parseInt(s)
		if ok != (err == nil) || (ok && got != want) {
			t.Fatalf("parseInt(%q) = %d, %v; strconv: %d, %v", s, got, ok, want, err)
		}
	})
}
