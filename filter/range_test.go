package filter

import (
	"math"
	"strconv"
	"testing"
)

// TestIntegralRanges: ranges and [NOT] BETWEEN on an integral key are
// Exact, and Eval and a Bound filter decide them numerically, as the
// metastore's direct SQL does (it casts the stored value to
// decimal(21,0)); the default partition is NULL there, so it matches no
// range and no NOT BETWEEN.
func TestIntegralRanges(t *testing.T) {
	const maxI, minI = math.MaxInt64, math.MinInt64
	for _, tc := range []struct {
		filter string
		want   func(x int64) bool
	}{
		{`n < 5`, func(x int64) bool { return x < 5 }},
		{`n <= 5`, func(x int64) bool { return x <= 5 }},
		{`n > 5`, func(x int64) bool { return x > 5 }},
		{`n >= 5`, func(x int64) bool { return x >= 5 }},
		{`5 > n`, func(x int64) bool { return x < 5 }},
		{`5 >= n`, func(x int64) bool { return x <= 5 }},
		{`5 < n`, func(x int64) bool { return x > 5 }},
		{`5 <= n`, func(x int64) bool { return x >= 5 }},
		{`n > -3`, func(x int64) bool { return x > -3 }},
		{`n<-1`, func(x int64) bool { return x < -1 }},
		{`n >= 10`, func(x int64) bool { return x >= 10 }}, // numeric: "9" < "10"
		{`n between 2 and 10`, func(x int64) bool { return 2 <= x && x <= 10 }},
		{`n between -3 and -1`, func(x int64) bool { return -3 <= x && x <= -1 }},
		{`n between 5 and 5`, func(x int64) bool { return x == 5 }},
		{`n between 10 and 2`, func(x int64) bool { return false }}, // lo > hi: empty
		{`n not between 2 and 10`, func(x int64) bool { return x < 2 || x > 10 }},
		{`n not between 10 and 2`, func(x int64) bool { return x < 10 || x > 2 }}, // every number
		{`n NOT BETWEEN -1 AND 1`, func(x int64) bool { return x < -1 || x > 1 }},
		// Beyond the key type's range (tinyint here): still numeric.
		{`n > 1000`, func(x int64) bool { return x > 1000 }},
		{`n < 3000000000`, func(x int64) bool { return x < 3000000000 }},
		{`n > 9223372036854775807`, func(x int64) bool { return false }},
		{`n <= 9223372036854775807`, func(x int64) bool { return true }},
		{`n >= -9223372036854775808`, func(x int64) bool { return true }},
		{`n < -9223372036854775808`, func(x int64) bool { return false }},
		{`n between -9223372036854775808 and 9223372036854775807`, func(x int64) bool { return true }},
		// Combined with each other and with = / IN.
		{`n > 2 and n < 8`, func(x int64) bool { return x > 2 && x < 8 }},
		{`n < 0 or n between 10 and 12`, func(x int64) bool { return x < 0 || (x >= 10 && x <= 12) }},
		{`(n) in (1, 2) or n >= 100`, func(x int64) bool { return x == 1 || x == 2 || x >= 100 }},
		{`n != 5 and n not between 7 and 9`, func(x int64) bool { return x != 5 && (x < 7 || x > 9) }},
	} {
		for _, typ := range []string{"tinyint", "smallint", "int", "bigint"} {
			types := map[string]string{"n": typ}
			e, err := Parse(tc.filter)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.filter, err)
			}
			if !e.Exact(types) {
				t.Errorf("%q on %s: not Exact", tc.filter, typ)
			}
			b, err := e.Bind([]string{"n"}, []string{typ})
			if err != nil {
				t.Fatalf("Bind(%q): %v", tc.filter, err)
			}
			for _, x := range []int64{minI, minI + 1, -100, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 99, 100, 101,
				127, 128, 999, 1000, 1001, 2999999999, 3000000000, maxI - 1, maxI} {
				v := strconv.FormatInt(x, 10)
				got, err := e.Eval(map[string]string{"n": v}, types)
				if err != nil {
					t.Fatalf("Eval(%q, %s): %v", tc.filter, v, err)
				}
				bgot, err := b.Eval([]string{v})
				if err != nil {
					t.Fatalf("Bound(%q).Eval(%s): %v", tc.filter, v, err)
				}
				if want := tc.want(x); got != want || bgot != want {
					t.Errorf("%q on %s=%s: Eval %v, Bound %v; want %v", tc.filter, typ, v, got, bgot, want)
				}
			}
			// The default partition is NULL: no comparison with it is
			// true, NOT BETWEEN included.
			got, err := e.Eval(map[string]string{"n": DefaultPartition}, types)
			bgot, berr := b.Eval([]string{DefaultPartition})
			if err != nil || berr != nil || got || bgot {
				t.Errorf("%q on the default partition: Eval %v, %v, Bound %v, %v; want false", tc.filter, got, err, bgot, berr)
			}
		}
	}
}

// TestRangesThreeValued: the default partition in an integral range
// under OR and AND, as SQL NULL.
func TestRangesThreeValued(t *testing.T) {
	types := map[string]string{"n": "int", "ds": "string"}
	for _, tc := range []struct {
		filter string
		want   bool
	}{
		{`n > 1 or ds = 'a'`, true},
		{`n > 1 and ds = 'a'`, false},
		{`n not between 1 and 2 or ds = 'a'`, true},
		{`n not between 1 and 2 and ds = 'a'`, false},
		{`n < 1 or n >= 1`, false}, // NULL or NULL
		{`(n < 1 or ds = 'a') and n between 1 and 2`, false},
	} {
		e, err := Parse(tc.filter)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Eval(map[string]string{"n": DefaultPartition, "ds": "a"}, types)
		if err != nil || got != tc.want {
			t.Errorf("%q: got %v, %v; want %v", tc.filter, got, err, tc.want)
		}
		b, err := e.Bind([]string{"ds", "n"}, []string{"string", "int"})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := b.Eval([]string{"a", DefaultPartition}); err != nil || got != tc.want {
			t.Errorf("Bound %q: got %v, %v; want %v", tc.filter, got, err, tc.want)
		}
	}
}

// TestRangeLiteralOverflow: an integer literal beyond int64 is refused by
// Parse (the metastore's Long.parseLong refuses it too), so the filter is
// never evaluated locally.
func TestRangeLiteralOverflow(t *testing.T) {
	for _, f := range []string{
		`n > 9223372036854775808`,
		`n < -9223372036854775809`,
		`n between 1 and 99999999999999999999`,
		`n not between -99999999999999999999 and 1`,
	} {
		if e, err := Parse(f); err == nil {
			t.Errorf("Parse(%q): got %v; want an error", f, e)
		}
	}
}

// TestRangeNonCanonical: Eval on non-canonical stored values ("07", "+1")
// compares numerically too, but Exact cannot vouch for them (the caller
// forwards a table holding any, see proxy/prune.go); a value that is not
// a number is an error, never a guess.
func TestRangeNonCanonical(t *testing.T) {
	e, err := Parse(`n between 5 and 8`)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{"n": "int"}
	if got, err := e.Eval(map[string]string{"n": "07"}, types); err != nil || !got {
		t.Errorf("07: got %v, %v; want true", got, err)
	}
	if _, err := e.Eval(map[string]string{"n": "x"}, types); err == nil {
		t.Errorf("x: got no error")
	}
	b, err := e.Bind([]string{"n"}, []string{"int"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Eval([]string{"x"}); err == nil {
		t.Errorf("bound x: got no error")
	}
}
