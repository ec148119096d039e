package bucket

import (
	"testing"
	"time"
)

func TestTake(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name        string
		rate, burst float64
		at          []time.Duration // when each Take comes, after t0
		want        []bool
	}{
		{"burst then empty", 1, 3, []time.Duration{0, 0, 0, 0}, []bool{true, true, true, false}},
		{"refills at the rate", 2, 1, []time.Duration{0, 0, 499 * time.Millisecond, 500 * time.Millisecond}, []bool{true, false, false, true}},
		{"refills no more than burst", 10, 2, []time.Duration{time.Hour, time.Hour, time.Hour}, []bool{true, true, false}},
		{"a clock gone back refills nothing", 1, 1, []time.Duration{10 * time.Second, 0, 10 * time.Second, 11 * time.Second}, []bool{true, false, false, true}},
		{"rate 0 never refills", 0, 1, []time.Duration{0, time.Hour}, []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Full(tc.burst, t0)
			for i, d := range tc.at {
				if got := b.Take(t0.Add(d), tc.rate, tc.burst); got != tc.want[i] {
					t.Fatalf("take %d at +%v: got %t; want %t", i, d, got, tc.want[i])
				}
			}
		})
	}
}

func TestRefilled(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := Full(2, t0)
	if !b.Refilled(t0, 1, 2) {
		t.Fatal("a new bucket: not refilled; want refilled")
	}
	b.Take(t0, 1, 2)
	if b.Refilled(t0.Add(999*time.Millisecond), 1, 2) {
		t.Fatal("one token short: refilled; want not")
	}
	if !b.Refilled(t0.Add(time.Second), 1, 2) {
		t.Fatal("a second later at 1/s: not refilled; want refilled")
	}
}
