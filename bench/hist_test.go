package bench

import (
	"testing"
	"time"
)

func TestHistPercentiles(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(100-i) * time.Millisecond // 100..1, reversed
	}
	thousand := make([]time.Duration, 1000)
	for i := range thousand {
		thousand[i] = time.Duration(i+1) * time.Microsecond
	}
	tests := []struct {
		name                         string
		in                           []time.Duration
		p50, p90, p99, p999, max, mn time.Duration
	}{
		{"empty", nil, 0, 0, 0, 0, 0, 0},
		{"one", ms(7), 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond},
		{"four", ms(4, 1, 3, 2), 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond, 2500 * time.Microsecond},
		{"1..100", hundred, 50 * time.Millisecond, 90 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 50500 * time.Microsecond},
		{"1..1000us", thousand, 500 * time.Microsecond, 900 * time.Microsecond, 990 * time.Microsecond, 999 * time.Microsecond, 1000 * time.Microsecond, 500500 * time.Nanosecond},
		{"outlier", ms(1, 1, 1, 1, 1, 1, 1, 1, 1, 1000), 1 * time.Millisecond, 1 * time.Millisecond, 1000 * time.Millisecond, 1000 * time.Millisecond, 1000 * time.Millisecond, 100900 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Hist
			for _, d := range tt.in {
				h.Record(d)
			}
			for _, c := range []struct {
				what      string
				got, want time.Duration
			}{
				{"p50", h.Percentile(50), tt.p50}, {"p90", h.Percentile(90), tt.p90},
				{"p99", h.Percentile(99), tt.p99}, {"p99.9", h.Percentile(99.9), tt.p999},
				{"max", h.Max(), tt.max}, {"mean", h.Mean(), tt.mn},
			} {
				if c.got != c.want {
					t.Errorf("%s: got %v; want %v", c.what, c.got, c.want)
				}
			}
			if h.Count() != len(tt.in) {
				t.Errorf("count: got %d; want %d", h.Count(), len(tt.in))
			}
		})
	}
}

func TestHistMerge(t *testing.T) {
	var a, b Hist
	for i := 1; i <= 50; i++ {
		a.Record(time.Duration(2*i) * time.Millisecond)
		b.Record(time.Duration(2*i-1) * time.Millisecond)
	}
	a.Percentile(50) // sorts a: Merge must resort
	a.Errors, b.Errors, b.Unsupported = 1, 2, 3
	a.Merge(&b)
	if got := a.Percentile(50); got != 50*time.Millisecond {
		t.Errorf("p50 after merge: got %v; want 50ms", got)
	}
	if a.Count() != 100 || a.Errors != 3 || a.Unsupported != 3 {
		t.Errorf("after merge: count %d errors %d unsupported %d; want 100 3 3", a.Count(), a.Errors, a.Unsupported)
	}
}
