package twin

import "testing"

func TestSameNotFound(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{`{1:{1:"There is no database named d2"}}`, `{1:{1:"d2"}}`, true},
		{`{1:{1:"d2"}}`, `{1:{1:"There is no database named d2"}}`, true},
		{`{1:{1:"There is no database named d2"}}`, `{1:{1:"d3"}}`, false},
		{`{1:{1:"There is no database named d2"}}`, `{0:{1:"d2"}}`, false},
		{`{0:[]}`, `{1:{1:"Filtering is supported only on partition keys of type string"}}`, false},
	} {
		if got := sameNotFound(tc.a, tc.b); got != tc.want {
			t.Errorf("sameNotFound(%s, %s) = %v; want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
