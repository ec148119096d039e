package hms

import (
	"slices"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"t1", "t1"},
		{"T1", "t1"},
		{"t1 ", "t1"},
		{" \tT1\n", "t1"},
		{"\x01t1\x1f", "t1"},     // Java's trim drops every control character
		{"t1\u00a0", "t1\u00a0"}, // but not a no-break space
		{"t 1", "t 1"},           // nor a blank inside
		{"\u212aey", "key"},      // KELVIN SIGN lower-cases to k
		{"\u0130x", "i\u0307x"},  // as Java: not ASCII, so no stored name
		{"", ""},
		{"   ", ""},
	} {
		if got := NormalizeString(tc.in); got != tc.want {
			t.Errorf("NormalizeString(%q) = %q; want %q", tc.in, got, tc.want)
		}
		if got := Normalize([]byte(tc.in)); got != tc.want {
			t.Errorf("Normalize(%q) = %q; want %q", tc.in, got, tc.want)
		}
		if got := string(AppendNormalized([]byte("x"), []byte(tc.in))); got != "x"+tc.want {
			t.Errorf("AppendNormalized(x, %q) = %q; want %q", tc.in, got, "x"+tc.want)
		}
		if NeedsNormalizing([]byte(tc.in)) != (tc.in != tc.want) {
			t.Errorf("NeedsNormalizing(%q) = %v; want %v", tc.in, !(tc.in != tc.want), tc.in != tc.want)
		}
	}
}

// TestNormalizeNonASCII: a name that is not ASCII once normalised names
// no stored object (the metastore refuses to create one), so its exact
// lower case does not matter; only that it stays non-ASCII, and that
// invalid UTF-8 does not pass for another name.
func TestNormalizeNonASCII(t *testing.T) {
	for _, in := range []string{"\u0130x", "é", "\xff\xfet", "t\u017f"} {
		got := NormalizeString(in)
		ascii := true
		for i := 0; i < len(got); i++ {
			ascii = ascii && got[i] < 0x80
		}
		if ascii {
			t.Errorf("NormalizeString(%q) = %q: ASCII, so it would name a stored object the metastore does not", in, got)
		}
	}
}

func TestAppendPartName(t *testing.T) {
	for _, tc := range []struct {
		keys, vals []string
		want       string
	}{
		{[]string{"ds"}, []string{"a"}, "ds=a"},
		{[]string{"DS"}, []string{"A"}, "ds=A"},
		{[]string{"ds", "hr"}, []string{"a:b", "07"}, "ds=a%3Ab/hr=07"},
		{[]string{"p"}, []string{""}, "p=__HIVE_DEFAULT_PARTITION__"},
		{[]string{"p"}, []string{"a b/c=d%e#f'g*h?i\\j{k[l]m^n\"o\x01\x7f}|<>é"}, "p=a b%2Fc%3Dd%25e%23f%27g%2Ah%3Fi%5Cj%7Bk%5Bl%5Dm%5En%22o%01%7F}|<>é"},
	} {
		if got := string(AppendPartName(nil, tc.keys, tc.vals)); got != tc.want {
			t.Errorf("AppendPartName(%q, %q) = %q; want %q", tc.keys, tc.vals, got, tc.want)
		}
	}
}

// TestSplitPartitionsByStoredName: a partition is named only by a name
// the metastore could have stored for it (issue 20: "ds=a:b" and the
// stored "ds=a%3Ab" were both matched to the one partition, and a wrong
// key name "dt=e" to the partition of "ds=e").
func TestSplitPartitionsByStoredName(t *testing.T) {
	shape := byName["get_partitions_by_names"].Batch
	for _, tc := range []struct {
		name   string
		asked  []string
		values []string // of the partitions in the reply
		want   []string // the names they answer; nil: cannot split
	}{
		{"stored form", []string{"p=a%3Ab", "p=a:b"}, []string{"a:b"}, []string{"p=a%3Ab"}},
		{"only the unescaped form", []string{"p=a:b"}, []string{"a:b"}, nil},
		{"upper-case key", []string{"P=x"}, []string{"x"}, nil},
		{"two keys with the values", []string{"p=e", "q=e"}, []string{"e"}, nil},
		{"default partition", []string{"p=__HIVE_DEFAULT_PARTITION__"}, []string{"__HIVE_DEFAULT_PARTITION__"}, []string{"p=__HIVE_DEFAULT_PARTITION__"}},
		{"none found", []string{"p=1", "p=2"}, nil, []string{}},
		{"both found", []string{"p=2", "p=1"}, []string{"1", "2"}, []string{"p=1", "p=2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parts, ok := shape.SplitPartitions(wire.Reply, fuzzReply(false, tc.values...), tc.asked)
			if tc.want == nil {
				if ok {
					t.Fatalf("split into %v; want no split", parts)
				}
				return
			}
			if !ok {
				t.Fatalf("no split; want %q", tc.want)
			}
			got := []string{}
			for _, p := range parts {
				got = append(got, p.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("names %q; want %q", got, tc.want)
			}
		})
	}
}
