package filter

import (
	"errors"
	"slices"
	"testing"
)

func TestParseValid(t *testing.T) {
	for _, tc := range []struct {
		filter string
		keys   []string
	}{
		{`ds = '2024-01-01'`, []string{"ds"}},
		{`ds="x"`, []string{"ds"}},
		{`'x' = ds`, []string{"ds"}},
		{`hr > 5 and hr <= 10`, []string{"hr"}},
		{`hr >= -5 OR hr < 3 Or hr <> 4 or hr != 1 or hr == 2`, []string{"hr"}},
		{`(ds = 'a' or ds = 'b') and HR = 1`, []string{"ds", "hr"}},
		{`ds like '2024.*'`, []string{"ds"}},
		{`hr between 1 and 5`, []string{"hr"}},
		{`hr NOT BETWEEN 1 AND 5`, []string{"hr"}},
		{`(ds) in ('a', 'b', "c")`, []string{"ds"}},
		{`(ds) NOT IN ('a')`, []string{"ds"}},
		{`ds in ('a','b')`, []string{"ds"}},
		{`ds not in (1, 2)`, []string{"ds"}},
		{`not (ds = 'a' and not hr = 1)`, []string{"ds", "hr"}},
		{"`weird key` = 'x'", []string{"weird key"}},
		{"`a``b` = 'x'", []string{"a`b"}},
		{`dt = 2024-02-29`, []string{"dt"}},
		{`dt = DATE '2024-02-29'`, []string{"dt"}},
		{`ts >= 2024-02-29 10:00:00`, []string{"ts"}},
		{`ts < timestamp '2024-02-29 10:00:00'`, []string{"ts"}},
		{`(struct(a, b)) in (const struct('x', 1), struct('y', 2))`, []string{"a", "b"}},
		{`(STRUCT(a)) NOT IN (STRUCT('x'))`, []string{"a"}},
		{`hr = - 5`, []string{"hr"}},
		{`s = 'it\'s'`, []string{"s"}},
		{`s = 'a' 'b'`, []string{"s"}},
		{`1abc = 1`, []string{"1abc"}},
		{`_x = 1`, []string{"_x"}},
		{`hr = 9223372036854775807 or hr = -9223372036854775808`, []string{"hr"}},
		{" \t\nds\r\n=\t'x' ", []string{"ds"}},
	} {
		t.Run(tc.filter, func(t *testing.T) {
			e, err := Parse(tc.filter)
			if err != nil {
				t.Fatalf("got error %v; want none", err)
			}
			if got := e.Keys(); !slices.Equal(got, tc.keys) {
				t.Errorf("Keys: got %q; want %q", got, tc.keys)
			}
			if e.String() != tc.filter {
				t.Errorf("String: got %q; want %q", e.String(), tc.filter)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	for _, tc := range []struct {
		filter string
		want   string // the full error text
	}{
		{``, `filter: syntax error at offset 0: empty filter`},
		{`   `, `filter: syntax error at offset 0: empty filter`},
		{`ds = `, `filter: syntax error at offset 5: expected a value (string, integer, date or timestamp); found end of filter`},
		{`ds = 'abc`, `filter: syntax error at offset 5: unterminated string literal`},
		{`ds = 'a' and`, `filter: syntax error at offset 12: expected a comparison, NOT or "("; found end of filter`},
		{`ds 'a'`, `filter: syntax error at offset 3: expected a comparison operator; found "'a'"`},
		{`ds = 'a' ds = 'b'`, `filter: syntax error at offset 9: expected AND, OR or end of filter; found "ds"`},
		{`(ds = 'a'`, `filter: syntax error at offset 9: expected ")"; found end of filter`},
		{`ds = 'a')`, `filter: syntax error at offset 8: expected AND, OR or end of filter; found ")"`},
		{`ds <=> 'a'`, `filter: syntax error at offset 3: operator <=> is not supported by the metastore`},
		{`ds ! 'a'`, `filter: syntax error at offset 3: unexpected "!"`},
		{`ds = 'a' ; drop`, `filter: syntax error at offset 9: unexpected character ';'`},
		{`ds = ds`, `filter: syntax error at offset 5: expected a value (string, integer, date or timestamp); found "ds"`},
		{`'a' = 'b'`, `filter: syntax error at offset 6: expected a partition key; found "'b'"`},
		{`and = 1`, `filter: syntax error at offset 0: expected a comparison, NOT or "("; found "and"`},
		{`date = '2024-01-01'`, `filter: syntax error at offset 5: expected a quoted value after DATE; found "="`},
		{`hr between 1 or 2`, `filter: syntax error at offset 13: expected AND in BETWEEN; found "or"`},
		{`hr not = 1`, `filter: syntax error at offset 7: expected BETWEEN or IN after NOT; found "="`},
		{`(hr) in 1`, `filter: syntax error at offset 8: expected "(" after IN; found "1"`},
		{`(hr) in (1,)`, `filter: syntax error at offset 11: expected a value (string, integer, date or timestamp); found ")"`},
		{`(hr) = 1`, `filter: syntax error at offset 5: expected IN after (key); found "="`},
		{`hr = 9223372036854775808`, `filter: syntax error at offset 5: integer "9223372036854775808" out of range`},
		{`hr = -x`, `filter: syntax error at offset 5: "-" must be followed by digits`},
		{`dt = 2024-02-30`, `filter: syntax error at offset 5: invalid date "2024-02-30"`},
		{`dt = date '2024-2-3'`, `filter: syntax error at offset 10: invalid date "2024-2-3"`},
		{`ts = timestamp '2024-01-01'`, `filter: syntax error at offset 15: invalid timestamp "2024-01-01"`},
		{"`` = 1", "filter: syntax error at offset 0: empty back-quoted identifier"},
		{"`ab = 1", "filter: syntax error at offset 0: unterminated back-quoted identifier"},
		{`(struct(a, b)) in (struct('x'))`, `filter: syntax error at offset 19: STRUCT has 1 values for 2 keys`},
		{`(struct(a)) in (struct('x', 'y'))`, `filter: syntax error at offset 16: STRUCT has more values than its 1 keys`},
		{`(struct(a)) = 1`, `filter: syntax error at offset 12: expected IN after STRUCT(...); found "="`},
	} {
		t.Run(tc.filter, func(t *testing.T) {
			e, err := Parse(tc.filter)
			if err == nil {
				t.Fatalf("got %v, no error; want %q", e, tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("got  %q\nwant %q", err.Error(), tc.want)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Errorf("got %T; want *SyntaxError", err)
			}
		})
	}
}

func TestParseDepthLimit(t *testing.T) {
	deep := ""
	for i := 0; i < maxDepth+1; i++ {
		deep += "("
	}
	deep += "a = 1"
	for i := 0; i < maxDepth+1; i++ {
		deep += ")"
	}
	if _, err := Parse(deep); err == nil {
		t.Fatal("got no error for nesting beyond maxDepth; want one")
	}
}

func TestExact(t *testing.T) {
	types := map[string]string{
		"ds": "string", "hr": "int", "big": "BIGINT", "v": "varchar(10)", "c": "char(3)",
		"dt": "date", "ts": "timestamp", "dec": "decimal(10,2)",
	}
	for _, tc := range []struct {
		filter string
		want   bool
	}{
		{`ds = 'a'`, true},
		{`'a' = ds`, true},
		{`ds != 'a' and ds <> 'b'`, true},
		{`(ds = 'a' or ds = 'b') and hr = 5`, true},
		{`(ds) in ('a', 'b')`, true},
		{`(hr) not in (1, 2)`, true},
		{`big = -3`, true},
		{`v = 'x'`, true},
		{`hr = 5 or (ds = 'a' and (big != 1))`, true},

		// Ranges on integral keys against integer literals.
		{`hr > 5`, true},
		{`hr >= -5 and hr < 10`, true},
		{`5 <= hr`, true},
		{`big <= 9223372036854775807`, true},
		{`hr between 1 and 3`, true},
		{`hr not between -3 and 3`, true},
		{`hr between 3 and 1`, true},
		{`hr > 99999999999`, true}, // beyond int: the metastore casts to decimal(21,0)
		{`ds = 'a' and (hr < 3 or hr between 10 and 12)`, true},

		// Ranges on strings depend on the backing database's collation.
		{`ds < 'b'`, false},
		{`'b' > ds`, false},
		{`v >= 'x'`, false},
		{`ds between 'a' and 'b'`, false},
		{`ds not between 'a' and 'b'`, false},
		{`hr between '1' and '3'`, false},
		{`hr between 1 and '3'`, false},
		{`hr > '5'`, false},
		{`ds > 5`, false},
		{`hr > - 5`, false},
		{`hr between - 1 and 3`, false},
		{"`hr` between 1 and 3", false},
		{`hr == 5`, false},
		{`not hr > 5`, false},
		{`dt > 2024-01-01`, false},
		{`dec between 1 and 2`, false},
		{`hr like '5'`, false},
		{`ds like 'a.*'`, false},
		{`ds = 5`, false},
		{`hr = '5'`, false},
		{`c = 'abc'`, false},
		{`dt = '2024-01-01'`, false},
		{`dt = 2024-01-01`, false},
		{`ts = timestamp '2024-01-01 00:00:00'`, false},
		{`dec = 1`, false},
		{`unknown = 'a'`, false},
		{`ds = 'a' and unknown = 'a'`, false},
		{`not ds = 'a'`, false},
		{`ds in ('a')`, false},
		{`ds == 'a'`, false},
		{"`ds` = 'a'", false},
		{`hr = - 5`, false},
		{`ds = 'a\'b'`, false},
		{`ds = 'a' 'b'`, false},
		{`(struct(ds, hr)) in (struct('a', 1))`, false},
		{`(ds) in ('a', 1)`, false},
	} {
		t.Run(tc.filter, func(t *testing.T) {
			e, err := Parse(tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.Exact(types); got != tc.want {
				t.Errorf("Exact: got %v; want %v", got, tc.want)
			}
		})
	}
}
