package bench

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestZipfKeys(t *testing.T) {
	const n, draws, s = 100, 200_000, 1.2
	d, err := NewKeyDist("zipf", s, n, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, n)
	for i := 0; i < draws; i++ {
		k := d.Key()
		if k < 0 || k >= n {
			t.Fatalf("key %d out of [0,%d)", k, n)
		}
		counts[k]++
	}
	// P(k) is proportional to (k+1)^-s.
	var norm float64
	for k := 0; k < n; k++ {
		norm += math.Pow(float64(k+1), -s)
	}
	for _, k := range []int{0, 1, 2, 9} {
		want := draws * math.Pow(float64(k+1), -s) / norm
		if got := float64(counts[k]); math.Abs(got-want) > 0.05*want {
			t.Errorf("key %d drawn %v times; want %.0f ±5%%", k, got, want)
		}
	}
	if counts[0] <= counts[1] || counts[1] <= counts[2] {
		t.Errorf("counts not decreasing: %v", counts[:3])
	}
	var top10 int
	for _, c := range counts[:10] {
		top10 += c
	}
	if float64(top10)/draws < 0.5 {
		t.Errorf("top 10%% of keys drew %.2f of calls; want a skew over 0.5", float64(top10)/draws)
	}
}

func TestUniformKeys(t *testing.T) {
	const n, draws = 10, 100_000
	d, err := NewKeyDist("uniform", 0, n, rand.New(rand.NewPCG(3, 4)))
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, n)
	for i := 0; i < draws; i++ {
		counts[d.Key()]++
	}
	for k, c := range counts {
		if math.Abs(float64(c)-draws/n) > 0.05*draws/n {
			t.Errorf("key %d drawn %d times; want %d ±5%%", k, c, draws/n)
		}
	}
}

func TestKeyDistErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, tt := range []struct {
		name, kind string
		s          float64
		n          int
	}{{"zipf s<=1", "zipf", 1, 10}, {"unknown", "pareto", 2, 10}, {"empty", "uniform", 0, 0}} {
		if _, err := NewKeyDist(tt.kind, tt.s, tt.n, r); err == nil {
			t.Errorf("%s: got no error", tt.name)
		}
	}
}
