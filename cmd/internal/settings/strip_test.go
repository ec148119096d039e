package settings

import "testing"

func TestStripUserinfo(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		stripped bool
	}{
		{"thrift://hms:9083", "thrift://hms:9083", false},
		{"thrift://u:pw@hms:9083", "thrift://hms:9083", true},
		{"u:p@ss@hms:9083", "hms:9083", true},
		{"thrift://hms:9083/x@y", "thrift://hms:9083/x@y", false},
	} {
		got, stripped := StripUserinfo(tc.in)
		if got != tc.want || stripped != tc.stripped {
			t.Errorf("StripUserinfo(%q) = %q, %v; want %q, %v", tc.in, got, stripped, tc.want, tc.stripped)
		}
	}
}
