package filter

import (
	"errors"
	"slices"
	"testing"
)

func TestPartitionNames(t *testing.T) {
	for _, tc := range []struct {
		name         string
		keys, values []string
	}{
		{"ds=2024-01-01/hr=07", []string{"ds", "hr"}, []string{"2024-01-01", "07"}},
		{"p=a%2Fb", []string{"p"}, []string{"a/b"}},
		{"p=a%3Db%3Ac", []string{"p"}, []string{"a=b:c"}},
		{"p=100%25", []string{"p"}, []string{"100%"}},
		{"p=%23%5C%22%27%2A%3F%7B%5B%5D%5E%7F", []string{"p"}, []string{"#\\\"'*?{[]^\x7f"}},
		{"p=%00%01%0A%1F", []string{"p"}, []string{"\x00\x01\n\x1f"}},
		{"p=a b<c>|d}e", []string{"p"}, []string{"a b<c>|d}e"}},
		{"p=été", []string{"p"}, []string{"été"}},
		{"k%3Dx=v", []string{"k=x"}, []string{"v"}},
		{"p=", []string{"p"}, []string{""}},
		{"p=" + DefaultPartition, []string{"p"}, []string{DefaultPartition}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MakePartName(tc.keys, tc.values); got != tc.name {
				t.Errorf("MakePartName: got %q; want %q", got, tc.name)
			}
			keys, values, err := PartitionValues(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(keys, tc.keys) || !slices.Equal(values, tc.values) {
				t.Errorf("PartitionValues: got %q %q; want %q %q", keys, values, tc.keys, tc.values)
			}
		})
	}
}

func TestPartitionValuesLenient(t *testing.T) {
	// Escapes the metastore reads but never writes.
	for _, tc := range []struct{ name, value string }{
		{"p=%2f", "/"},
		{"p=%", "%"},
		{"p=%4", "%4"},
		{"p=%zz", "%zz"},
		{"p=a%", "a%"},
		{"p=%41%", "A%"},
		{"p=%E9", "é"}, // code 0xE9 is the rune U+00E9, as in Java
	} {
		_, values, err := PartitionValues(tc.name)
		if err != nil {
			t.Fatalf("PartitionValues(%q): %v", tc.name, err)
		}
		if values[0] != tc.value {
			t.Errorf("PartitionValues(%q): got %q; want %q", tc.name, values[0], tc.value)
		}
	}
}

func TestPartitionValuesErrors(t *testing.T) {
	for _, name := range []string{"", "p", "=v", "a=1/", "a=1//b=2", "a=1=2", "/a=1"} {
		if k, v, err := PartitionValues(name); !errors.Is(err, ErrPartName) {
			t.Errorf("PartitionValues(%q): got %q %q %v; want ErrPartName", name, k, v, err)
		}
	}
}
