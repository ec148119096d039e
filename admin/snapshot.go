package admin

import (
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

// Bus is the invalidation bus; *coherence.Bus implements it.
type Bus interface {
	Stats() *coherence.Stats
	Synced() bool
	// Connected is the node's own link to the bus, peers aside: /readyz.
	Connected() bool
	Peers() []coherence.Peer
}

// LatencyStats is the proxy's call latency histograms; *proxy.Stats
// implements it. cumulative holds the counts at or below each of
// proxy.LatencyBuckets, then the count at +Inf.
type LatencyStats interface {
	EachLatency(fn func(name string, o proxy.Outcome, cumulative []uint64, count uint64, sum float64))
}

// Workers reports the background workers; the worker runner implements it.
type Workers interface {
	Snapshot() []WorkerStatus
}

// EventLog is the notification-log poller (eventlog.Poller).
type EventLog interface {
	Stats() *eventlog.Stats
}

// Shadow is shadow validation's counts; *proxy.ShadowStats implements it.
type Shadow interface {
	Count(k hms.Kind, o proxy.ShadowOutcome) uint64
}

// Prune is how the proxy answered pruning reads; *proxy.PruneStats
// implements it.
type Prune interface {
	Count(r proxy.PruneResult) uint64
}

// shadowOutcomes are the shadow outcomes of a check that ran; skipped
// hits are counted apart.
var shadowOutcomes = []proxy.ShadowOutcome{proxy.ShadowMatched, proxy.ShadowMismatched, proxy.ShadowExplained, proxy.ShadowFailed}

// WorkerStatus is one background worker as Workers reports it.
type WorkerStatus struct {
	Name        string    // stable, bounded: it is a label value
	Runs        uint64    // runs finished, failed ones included
	Failures    uint64    // runs that returned an error
	LastSuccess time.Time // zero: never succeeded
	LastError   string    // of the latest failed run; "" if none
}

// lossReasons are the bus's reasons for dropping the cache, exported
// (as 0) before they first happen so that rate() sees their start.
var lossReasons = coherence.LossReasons

// lagQuantiles are the quantiles of hmsproxy_bus_lag_seconds.
var lagQuantiles = []float64{0.5, 0.99}

// outcomes are all call outcomes, in the order of proxy.Outcome.
var outcomes = []proxy.Outcome{
	proxy.OutcomeHit, proxy.OutcomeMiss, proxy.OutcomeCoalesced,
	proxy.OutcomePassthrough, proxy.OutcomeWrite, proxy.OutcomeError,
}

const numOutcomes = int(proxy.OutcomeError) + 1

// snapshot is every counter the admin server exports, read once. Both
// /metrics and /status.json are rendered from one, so the page and a
// scrape taken at the same moment agree. A nil or false has* part had no
// source in Config.
type snapshot struct {
	at time.Time

	hasCalls bool
	methods  map[string]*[numOutcomes]uint64
	kinds    [lastKind + 1][numOutcomes]uint64 // cacheable reads by kind and outcome
	latency  map[latencyKey]*latencySnap       // nil unless Calls is a LatencyStats

	hasStore bool
	store    [lastKind + 1]storeSnap

	upstreams []upstreamSnap // nil without Config.Upstreams

	hasClients bool
	clients    int

	bus *busSnap

	hasWorkers bool
	workers    []WorkerStatus

	hasShadow bool
	shadow    [lastKind + 1][proxy.ShadowSkipped + 1]uint64 // by kind and outcome

	prune map[proxy.PruneResult]uint64 // nil without Config.Prune
}

type storeSnap struct {
	bytes, entries                                       int64
	evicted, admitted, rejected, stale, invalidatedLoads uint64
}

// latencyKey is the label set of hmsproxy_request_duration_seconds.
type latencyKey struct {
	class hms.Class
	path  proxy.Outcome
}

// latencySnap is one histogram: methods of a class summed.
type latencySnap struct {
	cumulative []uint64 // at proxy.LatencyBuckets, then +Inf
	count      uint64
	sum        float64
}

type upstreamSnap struct {
	Addr    string `json:"addr"`
	Healthy bool   `json:"healthy"`
}

type busSnap struct {
	published, publishErrors, received, applied uint64
	synced                                      bool
	losses                                      map[string]uint64
	lagSamples                                  int
	lag                                         []float64 // seconds at lagQuantiles; NaN without samples
	wait                                        []float64 // Publish's hold of a writer, seconds at lagQuantiles
	ackTimeouts, rejoins                        uint64
	peers                                       []coherence.Peer // sorted by node
	alive, silent, mismatched                   int
}

// take reads every source in cfg.
func take(cfg *Config) *snapshot {
	s := &snapshot{at: time.Now()}
	if c := cfg.Calls; c != nil {
		s.hasCalls = true
		s.methods = map[string]*[numOutcomes]uint64{}
		c.EachMethod(func(name string, o proxy.Outcome, n uint64) {
			row := s.methods[name]
			if row == nil {
				row = new([numOutcomes]uint64)
				s.methods[name] = row
			}
			row[o] = n
		})
		for k := firstKind; k <= lastKind; k++ {
			for _, o := range kindOutcomes {
				s.kinds[k][o] = c.Kind(k, o)
			}
		}
		if l, ok := c.(LatencyStats); ok {
			s.latency = takeLatency(l)
		}
	}
	if st := cfg.Store; st != nil {
		s.hasStore = true
		for k := firstKind; k <= lastKind; k++ {
			ks := st.Stats(k)
			s.store[k] = storeSnap{
				bytes: ks.Bytes.Load(), entries: ks.Entries.Load(),
				evicted: ks.Evicted.Load(), admitted: ks.Admitted.Load(), rejected: ks.Rejected.Load(),
				stale: ks.Stale.Load(), invalidatedLoads: ks.Invalidated.Load(),
			}
		}
	}
	if u := cfg.Upstreams; u != nil {
		addrs, healthy := u.Addrs(), u.Healthy()
		s.upstreams = make([]upstreamSnap, 0, len(addrs))
		for i := range min(len(addrs), len(healthy)) {
			s.upstreams = append(s.upstreams, upstreamSnap{Addr: addrs[i], Healthy: healthy[i]})
		}
	}
	if c := cfg.Clients; c != nil {
		s.hasClients, s.clients = true, c.Clients()
	}
	if b := cfg.Bus; b != nil {
		s.bus = takeBus(b)
	}
	if sh := cfg.Shadow; sh != nil {
		s.hasShadow = true
		for k := firstKind; k <= lastKind; k++ {
			for o := range s.shadow[k] {
				s.shadow[k][o] = sh.Count(k, proxy.ShadowOutcome(o))
			}
		}
	}
	if p := cfg.Prune; p != nil {
		s.prune = map[proxy.PruneResult]uint64{}
		for _, r := range proxy.PruneResults() {
			s.prune[r] = p.Count(r)
		}
	}
	if w := cfg.Workers; w != nil {
		s.hasWorkers = true
		s.workers = w.Snapshot()
		sort.SliceStable(s.workers, func(i, j int) bool { return s.workers[i].Name < s.workers[j].Name })
		// A name twice would make the scrape fail; the first one wins.
		s.workers = slices.CompactFunc(s.workers, func(a, b WorkerStatus) bool { return a.Name == b.Name })
	}
	return s
}

// takeLatency sums the latency histograms of the methods of each class.
// Methods outside the method table pass through.
func takeLatency(l LatencyStats) map[latencyKey]*latencySnap {
	out := map[latencyKey]*latencySnap{}
	l.EachLatency(func(name string, o proxy.Outcome, cumulative []uint64, count uint64, sum float64) {
		class := hms.Passthrough
		if m := hms.Lookup([]byte(name)); m != nil {
			class = m.Class
		}
		k := latencyKey{class, o}
		h := out[k]
		if h == nil {
			h = &latencySnap{cumulative: make([]uint64, len(cumulative))}
			out[k] = h
		}
		for i := range min(len(cumulative), len(h.cumulative)) {
			h.cumulative[i] += cumulative[i]
		}
		h.count += count
		h.sum += sum
	})
	return out
}

func takeBus(b Bus) *busSnap {
	st := b.Stats()
	bs := &busSnap{
		published: st.Published.Load(), publishErrors: st.PublishErrors.Load(),
		received: st.Received.Load(), applied: st.Applied.Load(),
		synced: b.Synced(),
		losses: busLosses(st),
	}
	lags := st.Lags()
	bs.lagSamples = len(lags)
	slices.Sort(lags)
	waits := st.PublishWaits()
	slices.Sort(waits)
	for _, q := range lagQuantiles {
		bs.lag = append(bs.lag, quantile(lags, q))
		bs.wait = append(bs.wait, quantile(waits, q))
	}
	bs.ackTimeouts = st.AckTimeouts.Load()
	bs.rejoins = st.Rejoins.Load()
	bs.peers = b.Peers()
	sort.Slice(bs.peers, func(i, j int) bool { return bs.peers[i].Node < bs.peers[j].Node })
	for _, p := range bs.peers {
		if p.Silent {
			bs.silent++
		} else {
			bs.alive++
		}
		if p.LayoutMismatch {
			bs.mismatched++
		}
	}
	return bs
}

// busLosses reads the loss counters: the known reasons, and any other the
// bus has counted.
func busLosses(st *coherence.Stats) map[string]uint64 {
	out := make(map[string]uint64, len(lossReasons))
	for _, r := range lossReasons {
		out[r] = st.Loss(r)
	}
	st.Losses.Range(func(k, _ any) bool {
		if r, ok := k.(string); ok {
			out[r] = st.Loss(r)
		}
		return true
	})
	return out
}

// quantile is the nearest-rank q-quantile of sorted, in seconds; NaN when
// it is empty (as a Prometheus summary without observations).
func quantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i].Seconds()
}

// total is the number of calls of one method, all outcomes.
func total(row *[numOutcomes]uint64) uint64 {
	var n uint64
	for _, v := range row {
		n += v
	}
	return n
}

// hitRatio is hits / (hits + misses + coalesced) of kind k; ok is false
// before the first such read.
func (s *snapshot) hitRatio(k hms.Kind) (r float64, ok bool) {
	c := &s.kinds[k]
	den := c[proxy.OutcomeHit] + c[proxy.OutcomeMiss] + c[proxy.OutcomeCoalesced]
	if den == 0 {
		return 0, false
	}
	return float64(c[proxy.OutcomeHit]) / float64(den), true
}

// lossWatch turns increments of the bus's loss counters into events. The
// counters are polled (by Server.watchLosses and by every snapshot), so an
// event's time is when it was noticed, at most a poll interval late.
type lossWatch struct {
	mu   sync.Mutex        // guards last
	last map[string]uint64 // loss counters at the previous poll
}

// poll records an event in ev for every reason whose count grew.
func (w *lossWatch) poll(b Bus, ev *events, now time.Time) {
	cur := busLosses(b.Stats())
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[string]uint64{}
	}
	reasons := make([]string, 0, len(cur))
	for r := range cur {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		if n := cur[r]; n > w.last[r] {
			ev.add(event{Time: now, Type: "bus-loss", Detail: r, Count: n - w.last[r]})
			w.last[r] = n
		}
	}
}
