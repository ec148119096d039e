package proxy

import (
	"sync/atomic"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/hms"
)

// Outcome is how the proxy answered a call.
type Outcome uint8

const (
	OutcomeHit Outcome = iota
	OutcomeMiss
	OutcomeCoalesced
	OutcomePassthrough
	OutcomeWrite
	OutcomeError
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"hit", "miss", "coalesced", "passthrough", "write", "error"}

func (o Outcome) String() string { return outcomeNames[o] }

// Stats counts calls by method and outcome, and cache outcomes by kind.
// Methods outside the table share one row, so the set stays bounded.
type Stats struct {
	methods map[*hms.Method]*[numOutcomes]atomic.Uint64
	unknown [numOutcomes]atomic.Uint64
	kinds   [cache.NumKinds][numOutcomes]atomic.Uint64
}

func newStats() *Stats {
	s := &Stats{methods: map[*hms.Method]*[numOutcomes]atomic.Uint64{}}
	for _, m := range hms.All() {
		s.methods[m] = new([numOutcomes]atomic.Uint64)
	}
	return s
}

func (s *Stats) count(m *hms.Method, o Outcome) {
	if m == nil {
		s.unknown[o].Add(1)
		return
	}
	s.methods[m][o].Add(1)
	if m.Class == hms.Read {
		s.kinds[m.Kind][o].Add(1)
	}
}

// Method reports the count of calls of method name with outcome o
// ("" for methods the table does not know).
func (s *Stats) Method(name string, o Outcome) uint64 {
	m := hms.Lookup([]byte(name))
	if m == nil {
		return s.unknown[o].Load()
	}
	return s.methods[m][o].Load()
}

// Kind reports the count of cacheable reads of kind k with outcome o.
func (s *Stats) Kind(k hms.Kind, o Outcome) uint64 { return s.kinds[k][o].Load() }

// EachMethod calls fn for every method with a non-zero count.
func (s *Stats) EachMethod(fn func(name string, o Outcome, n uint64)) {
	for m, c := range s.methods {
		for o := range c {
			if n := c[o].Load(); n > 0 {
				fn(m.Name, Outcome(o), n)
			}
		}
	}
	for o := range s.unknown {
		if n := s.unknown[o].Load(); n > 0 {
			fn("other", Outcome(o), n)
		}
	}
}
