package hms

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestJavaHashOrder: the order a real HMS 3.1 wrote the partition
// statistics maps of a table with 30 day partitions in, asked for all
// of them and for five.
func TestJavaHashOrder(t *testing.T) {
	day := func(days ...int) []string {
		var out []string
		for _, d := range days {
			out = append(out, fmt.Sprintf("ds=2024-01-%02d", d))
		}
		return out
	}
	all := make([]int, 30)
	for i := range all {
		all[i] = i + 1
	}
	for _, tc := range []struct {
		name       string
		keys, want []string
	}{
		{"30 partitions", day(all...), day(30, 13, 12, 11, 10, 17, 16, 15, 14, 19, 18, 20, 2, 24, 1, 23, 22, 21, 6, 28, 5, 27, 4, 26, 3, 25, 9, 8, 7, 29)},
		{"5 partitions", day(26, 27, 28, 29, 30), day(30, 28, 27, 26, 29)},
		{"none", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := slices.Clone(tc.keys)
			slices.Sort(keys)
			order, ok := JavaHashOrder(keys)
			if !ok {
				t.Fatal("JavaHashOrder refused")
			}
			var got []string
			for _, i := range order {
				got = append(got, keys[i])
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("order:\n got %s\nwant %s", strings.Join(got, " "), strings.Join(tc.want, " "))
			}
		})
	}
}

// TestJavaHashOrderTreeBins: keys that share a bucket at every capacity
// ("Aa" and "BB" have one String.hashCode, and so do their
// concatenations) make the map grow to 64 and then turn the bucket into
// a tree, whose order is not modelled.
func TestJavaHashOrderTreeBins(t *testing.T) {
	var keys []string
	for i := 0; i < 16; i++ {
		var b strings.Builder
		for j := 0; j < 4; j++ {
			if i>>j&1 == 1 {
				b.WriteString("BB")
			} else {
				b.WriteString("Aa")
			}
		}
		keys = append(keys, b.String())
	}
	if _, ok := JavaHashOrder(keys[:8]); !ok {
		t.Fatal("8 colliding keys: refused; a bucket of 8 is still a list")
	}
	if _, ok := JavaHashOrder(keys); ok {
		t.Fatal("16 colliding keys: got an order; want a refusal (a tree bin)")
	}
}
