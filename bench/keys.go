package bench

import (
	"fmt"
	"math/rand/v2"
)

// KeyDist picks keys in [0, n).
type KeyDist interface {
	Key() int
}

type uniformKeys struct {
	r *rand.Rand
	n int
}

func (u uniformKeys) Key() int { return u.r.IntN(u.n) }

type zipfKeys struct{ z *rand.Zipf }

func (z zipfKeys) Key() int { return int(z.z.Uint64()) }

// NewKeyDist returns a distribution over n keys: "uniform", or "zipf" with
// exponent s (> 1; key 0 is the hottest, key k is drawn about
// (k+1)^-s as often).
func NewKeyDist(kind string, s float64, n int, r *rand.Rand) (KeyDist, error) {
	if n <= 0 {
		return nil, fmt.Errorf("bench: empty key set")
	}
	switch kind {
	case "uniform", "":
		return uniformKeys{r, n}, nil
	case "zipf":
		if s <= 1 {
			return nil, fmt.Errorf("bench: zipf exponent must be > 1, got %g", s)
		}
		return zipfKeys{rand.NewZipf(r, s, 1, uint64(n-1))}, nil
	}
	return nil, fmt.Errorf("bench: key distribution must be uniform or zipf, got %q", kind)
}
