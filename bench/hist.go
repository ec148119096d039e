package bench

import (
	"math"
	"slices"
	"time"
)

// Hist holds every latency sample of one series (8 bytes per call), so
// percentiles are exact. The zero value is empty and ready; it is not
// safe for concurrent use: each worker keeps its own and Merge combines
// them.
type Hist struct {
	samples     []int64 // nanoseconds
	sorted      bool
	Errors      int64 // calls that failed (transport error or exception)
	Unsupported int64 // calls skipped because the target answered UNKNOWN_METHOD
	Bytes       int64 // reply body bytes of the recorded calls
}

// Record adds one successful call's latency.
func (h *Hist) Record(d time.Duration) {
	h.samples = append(h.samples, int64(d))
	h.sorted = false
}

// Count is the number of recorded samples.
func (h *Hist) Count() int { return len(h.samples) }

// Merge adds o's samples and counters to h.
func (h *Hist) Merge(o *Hist) {
	h.samples = append(h.samples, o.samples...)
	h.sorted = false
	h.Errors += o.Errors
	h.Unsupported += o.Unsupported
	h.Bytes += o.Bytes
}

func (h *Hist) sort() {
	if !h.sorted {
		slices.Sort(h.samples)
		h.sorted = true
	}
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100): the
// smallest sample with at least p% of the samples at or below it. It is 0
// for an empty Hist.
func (h *Hist) Percentile(p float64) time.Duration {
	n := len(h.samples)
	if n == 0 {
		return 0
	}
	h.sort()
	// The epsilon keeps float error from pushing an exact rank up
	// (99.9% of 1000 must be rank 999, not 1000).
	rank := int(math.Ceil(p*float64(n)/100 - 1e-9))
	rank = min(max(rank, 1), n)
	return time.Duration(h.samples[rank-1])
}

// Max is the largest sample, 0 when empty.
func (h *Hist) Max() time.Duration {
	if len(h.samples) == 0 {
		return 0
	}
	h.sort()
	return time.Duration(h.samples[len(h.samples)-1])
}

// Mean is the arithmetic mean, 0 when empty.
func (h *Hist) Mean() time.Duration {
	if len(h.samples) == 0 {
		return 0
	}
	var sum float64
	for _, s := range h.samples {
		sum += float64(s)
	}
	return time.Duration(math.Round(sum / float64(len(h.samples))))
}
