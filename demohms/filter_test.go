package demohms

import (
	"errors"
	"testing"
)

func TestFilterGrammar(t *testing.T) {
	keys := []fieldSchema{{Name: "ds", Type: "string"}, {Name: "hr", Type: "int"}, {Name: "Region", Type: "string"}}
	vals := []string{"2024-01-02", "7", "eu"}
	cases := []struct {
		filter string
		want   bool
		err    bool // MetaException
	}{
		{filter: "ds = '2024-01-02'", want: true},
		{filter: `ds = "2024-01-02"`, want: true},
		{filter: "ds == '2024-01-03'", want: false},
		{filter: "hr > 5", want: true},
		{filter: "hr > 10", want: false}, // numeric, not "7" > "10" as strings
		{filter: "hr < 10", want: true},
		{filter: "hr >= 7 AND hr <= 7", want: true},
		{filter: "hr != 7", want: false},
		{filter: "hr <> 8", want: true},
		{filter: "hr = '7'", want: true},
		{filter: "ds > '2024-01-01'", want: true},
		{filter: "5 < hr", want: true},
		{filter: "'eu' = region", want: true},
		{filter: "REGION = 'eu' or hr = 1", want: true},
		{filter: "ds = 'x' or hr = 1 and region = 'eu'", want: false}, // and binds tighter
		{filter: "(ds = 'x' or hr = 7) and region = 'eu'", want: true},
		{filter: "((hr = 7))", want: true},
		{filter: "hr = -1", want: false},
		{filter: "hr =", err: true},
		{filter: "hr = 1 and", err: true},
		{filter: "(hr = 1", err: true},
		{filter: "hr = 1)", err: true},
		{filter: "hr ~ 1", err: true},
		{filter: "ds = 'open", err: true},
		{filter: "hr = region", err: true},
		{filter: "1 = 1", err: true},
		{filter: "nokey = 1", err: true},
		{filter: "ds like '2024-01-.*'", want: true},
		{filter: "region like 'e.'", want: true},
		{filter: "not (hr = 7)", want: false},
		{filter: "hr in (1, 7)", want: true},
	}
	for _, tc := range cases {
		f, err := parseFilter(tc.filter, keys)
		var got bool
		if err == nil {
			got, err = f.match(vals)
		}
		if tc.err {
			var he *hmsError
			if !errors.As(err, &he) || he.kind != exMeta {
				t.Errorf("%q: err %v, want MetaException", tc.filter, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.filter, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%q = %v, want %v", tc.filter, got, tc.want)
		}
	}
}

func TestPartNameEscaping(t *testing.T) {
	keys := []fieldSchema{{Name: "DS", Type: "string"}, {Name: "p", Type: "string"}}
	vals := []string{"2024/01:02", "a=b%c"}
	name := partName(keys, vals)
	if name != "ds=2024%2F01%3A02/p=a%3Db%25c" {
		t.Fatalf("name %q", name)
	}
	back, err := valuesFromName(keys, name)
	if err != nil || back[0] != vals[0] || back[1] != vals[1] {
		t.Fatalf("round trip %q %v", back, err)
	}
}

func TestSplitDBName(t *testing.T) {
	for in, want := range map[string][3]string{
		"Demo":     {"hive", "demo", ""},
		"@HIVE#Db": {"hive", "db", ""},
		"@spark#":  {"spark", "", "null"},
		"@hive#!":  {"hive", "", ""},
		"@nohash":  {"hive", "@nohash", ""},
	} {
		cat, db, null := splitDBName(in)
		n := ""
		if null {
			n = "null"
		}
		if [3]string{cat, db, n} != want {
			t.Errorf("%q: got %q %q %v", in, cat, db, null)
		}
	}
}
