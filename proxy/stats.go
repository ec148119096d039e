package proxy

import (
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
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

// LatencyBuckets are the upper bounds, in seconds, of the call latency
// histograms: from a cache hit (tens of microseconds) to DDL on a wide
// table (minutes).
var LatencyBuckets = []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 1, 5, 30, 300}

// histogram is a lock-free latency histogram.
type histogram struct {
	counts [17]atomic.Uint64 // len(LatencyBuckets)+1, the last is +Inf
	sumNs  atomic.Uint64
}

func (h *histogram) observe(d time.Duration) {
	sec := d.Seconds()
	i := 0
	for i < len(LatencyBuckets) && sec > LatencyBuckets[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(uint64(d))
}

type methodStats struct {
	n   [numOutcomes]atomic.Uint64
	lat [numOutcomes]histogram
}

// Stats counts calls by method and outcome, with their latency, and cache
// outcomes by kind. Methods outside the table share one row, so the set
// stays bounded.
type Stats struct {
	methods map[*hms.Method]*methodStats
	unknown methodStats
	kinds   [cache.NumKinds][numOutcomes]atomic.Uint64

	clientTimeouts [numTimeouts]atomic.Uint64
	clientsShed    [numShed]atomic.Uint64
}

func newStats() *Stats {
	s := &Stats{methods: map[*hms.Method]*methodStats{}}
	for _, m := range hms.All() {
		s.methods[m] = new(methodStats)
	}
	return s
}

func (s *Stats) observe(m *hms.Method, o Outcome, d time.Duration) {
	ms := &s.unknown
	if m != nil {
		ms = s.methods[m]
		if m.Class == hms.Read {
			s.kinds[m.Kind][o].Add(1)
		}
	}
	ms.n[o].Add(1)
	ms.lat[o].observe(d)
}

// EachLatency calls fn for every method and outcome with calls: the
// cumulative bucket counts (for LatencyBuckets, then +Inf), the count and
// the sum in seconds.
func (s *Stats) EachLatency(fn func(name string, o Outcome, cumulative []uint64, count uint64, sum float64)) {
	each := func(name string, ms *methodStats) {
		for o := range ms.lat {
			h := &ms.lat[o]
			if ms.n[o].Load() == 0 {
				continue
			}
			cum := make([]uint64, len(h.counts))
			var run uint64
			for i := range h.counts {
				run += h.counts[i].Load()
				cum[i] = run
			}
			fn(name, Outcome(o), cum, run, float64(h.sumNs.Load())/1e9)
		}
	}
	for m, ms := range s.methods {
		each(m.Name, ms)
	}
	each("other", &s.unknown)
}

// Method reports the count of calls of method name with outcome o
// ("" for methods the table does not know).
func (s *Stats) Method(name string, o Outcome) uint64 {
	m := hms.Lookup([]byte(name))
	if m == nil {
		return s.unknown.n[o].Load()
	}
	return s.methods[m].n[o].Load()
}

// Outcome reports the count of calls, of every method, with outcome o.
// Read off the per-method counters, so the hot path keeps no other.
func (s *Stats) Outcome(o Outcome) uint64 {
	n := s.unknown.n[o].Load()
	for _, c := range s.methods {
		n += c.n[o].Load()
	}
	return n
}

// Kind reports the count of cacheable reads of kind k with outcome o.
func (s *Stats) Kind(k hms.Kind, o Outcome) uint64 { return s.kinds[k][o].Load() }

// EachMethod calls fn for every method with a non-zero count.
func (s *Stats) EachMethod(fn func(name string, o Outcome, n uint64)) {
	for m, c := range s.methods {
		for o := range c.n {
			if n := c.n[o].Load(); n > 0 {
				fn(m.Name, Outcome(o), n)
			}
		}
	}
	for o := range s.unknown.n {
		if n := s.unknown.n[o].Load(); n > 0 {
			fn("other", Outcome(o), n)
		}
	}
}

// ClientTimeout is why a client connection was cut off by a deadline.
type ClientTimeout uint8

const (
	// TimeoutRead: a request was not complete within the read timeout.
	TimeoutRead ClientTimeout = iota
	// TimeoutIdle: no request started within the idle timeout.
	TimeoutIdle
	// TimeoutWrite: a reply was not taken within the write timeout.
	TimeoutWrite
	numTimeouts
)

var timeoutNames = [numTimeouts]string{"read", "idle", "write"}

func (t ClientTimeout) String() string { return timeoutNames[t] }

// ClientTimeouts reports how many client connections deadline t cut off.
func (s *Stats) ClientTimeouts(t ClientTimeout) uint64 { return s.clientTimeouts[t].Load() }

// ShedReason is why a client connection was closed at accept, or closed
// to admit another.
type ShedReason uint8

const (
	// ShedEvicted: an idle connection closed to admit a new one at a
	// limit (MaxClients, or its address's MaxClientsPerAddress).
	ShedEvicted ShedReason = iota
	// ShedMaxClients: a new connection refused at MaxClients, every
	// connection being in a call.
	ShedMaxClients
	// ShedPerAddress: a new connection refused at its address's
	// MaxClientsPerAddress, every one of that address's being in a call.
	ShedPerAddress
	numShed
)

var shedNames = [numShed]string{"idle_evicted", "max_clients", "per_address"}

func (r ShedReason) String() string { return shedNames[r] }

// ShedReasons are every ShedReason, for exporters.
func ShedReasons() []ShedReason { return []ShedReason{ShedEvicted, ShedMaxClients, ShedPerAddress} }

// ClientsShed reports how many client connections were shed for r.
func (s *Stats) ClientsShed(r ShedReason) uint64 { return s.clientsShed[r].Load() }
