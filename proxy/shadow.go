package proxy

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// Shadow validation is the production evidence that the cache is fresh:
// a sample of cache hits is re-read from the metastore in the background
// and compared byte for byte with what the client was served. A
// difference that no invalidation explains is a hole in the invalidation
// machinery (a write the proxy did not see and the event log did not
// report): it is counted per kind, logged with the key, and the entry is
// dropped.
//
// A difference is explained when any entity the entry depends on was
// invalidated after the hit: the snapshot of its generations is taken
// before the lookup, and a difference seen while the snapshot is no
// longer current is not counted. A write made directly on the metastore
// is reported by the event log only at its next poll, so a difference is
// confirmed only after Grace has passed without such an invalidation.

// Shadow configures shadow validation. The zero value samples 0.1 % of
// hits, at most 20 a second. A batch call served per entry counts as one
// hit: one of its cached entries is checked, with a request for that
// entry alone.
type Shadow struct {
	// Rate is the fraction of cache hits re-read and compared. Default
	// 0.001; negative turns shadow validation off; at most 1.
	Rate float64
	// MaxPerSecond bounds re-reads a second, whatever the rate, so the
	// metastore's extra load is bounded. Default 20.
	MaxPerSecond int
	// Grace is how long a difference waits for an invalidation that
	// explains it (a write the event log has not reported yet) before it
	// counts as a mismatch. Default 3s: the event log's default poll
	// interval plus 1s. Negative: none.
	Grace time.Duration
}

// ShadowOutcome is the result of one shadow check.
type ShadowOutcome uint8

const (
	// ShadowMatched: the metastore's reply equals the cached one.
	ShadowMatched ShadowOutcome = iota
	// ShadowMismatched: it differs and no invalidation explains it.
	ShadowMismatched
	// ShadowExplained: it differs, and an invalidation of a dependency
	// came after the hit.
	ShadowExplained
	// ShadowFailed: the re-read failed or was not comparable (the
	// metastore did not answer, or answered with an exception).
	ShadowFailed
	// ShadowSkipped: a sampled hit was not checked: the per-second bound
	// or the queue was full.
	ShadowSkipped
	numShadowOutcomes
)

var shadowOutcomeNames = [numShadowOutcomes]string{"matched", "mismatched", "explained", "failed", "skipped"}

func (o ShadowOutcome) String() string { return shadowOutcomeNames[o] }

// ShadowStats count shadow checks by kind and outcome.
type ShadowStats struct {
	n [cache.NumKinds][numShadowOutcomes]atomic.Uint64
}

// Count is the number of checks of kind k with outcome o.
func (s *ShadowStats) Count(k hms.Kind, o ShadowOutcome) uint64 {
	if s == nil || int(k) >= cache.NumKinds {
		return 0
	}
	return s.n[k][o].Load()
}

// Checks is the number of hits compared with the metastore (matched,
// mismatched or explained) over all kinds.
func (s *ShadowStats) Checks() uint64 {
	var n uint64
	for k := range cache.NumKinds {
		n += s.Count(hms.Kind(k), ShadowMatched) + s.Count(hms.Kind(k), ShadowMismatched) + s.Count(hms.Kind(k), ShadowExplained)
	}
	return n
}

// Mismatches is the number of unexplained differences over all kinds.
func (s *ShadowStats) Mismatches() uint64 {
	var n uint64
	for k := range cache.NumKinds {
		n += s.Count(hms.Kind(k), ShadowMismatched)
	}
	return n
}

func (s *ShadowStats) add(k hms.Kind, o ShadowOutcome) { s.n[k][o].Add(1) }

// shadowJob is one sampled hit to check.
type shadowJob struct {
	sess *upstream.Session
	meth *hms.Method
	msg  []byte // the request to re-read, header and args, owned by the job
	key  []byte
	want []byte // the cached bytes the client was served
	snap cache.Snapshot

	// For an entry of a batch (a partition of a by-names call, a table of
	// a table-objects call): the batch's shape and the entry's name. msg
	// then asks for that one entry.
	batch *hms.Batch
	name  string
}

// observed is what the metastore's reply r says the entry holds: nil for
// a batch entry the metastore no longer has. ok is false when r cannot be
// compared (an exception, a shape this code cannot take apart).
func (j *shadowJob) observed(r loaded) (body []byte, ok bool) {
	if r.typ != wire.Reply {
		return nil, false
	}
	switch {
	case j.batch == nil:
	case j.batch.Of == hms.BatchTables:
		return j.batch.SplitTable(r.typ, r.body, j.name)
	default:
		parts, ok := j.batch.SplitPartitions(r.typ, r.body, []string{j.name})
		if !ok || len(parts) > 1 {
			return nil, false
		}
		if len(parts) == 0 {
			return nil, true
		}
		return parts[0].Body, true
	}
	return r.body, true
}

// pendingMismatch is a difference waiting out the grace period.
type pendingMismatch struct {
	job   shadowJob
	got   []byte
	until time.Time
}

// shadower samples hits and checks them with one background worker.
type shadower struct {
	cfg       Shadow
	threshold uint64 // a hit is sampled when a random uint64 is below it
	store     *cache.Store
	stats     *ShadowStats
	log       *slog.Logger
	jobs      chan shadowJob

	second atomic.Int64 // the unix second sampled counts
	taken  atomic.Int64 // jobs taken in that second

	// checked, if set, is called after each check with its outcome;
	// parked, when a difference starts waiting out the grace period.
	// Seams for tests only: they show a check ran and could have counted.
	checked func(ShadowOutcome)
	parked  func()

	wg   sync.WaitGroup // the worker
	stop chan struct{}
	once sync.Once
}

// newShadower returns nil when shadow validation is off.
func newShadower(cfg Shadow, store *cache.Store, log *slog.Logger) *shadower {
	if cfg.Rate == 0 {
		cfg.Rate = 0.001
	}
	if cfg.Rate < 0 {
		return nil
	}
	cfg.Rate = min(cfg.Rate, 1)
	if cfg.MaxPerSecond <= 0 {
		cfg.MaxPerSecond = 20
	}
	if cfg.Grace == 0 {
		cfg.Grace = 3 * time.Second
	}
	cfg.Grace = max(cfg.Grace, 0)
	th := uint64(math.MaxUint64)
	if cfg.Rate < 1 {
		th = uint64(cfg.Rate * math.MaxUint64)
	}
	return &shadower{cfg: cfg, threshold: th, store: store, stats: &ShadowStats{}, log: log,
		jobs: make(chan shadowJob, min(cfg.MaxPerSecond, 256)), stop: make(chan struct{})}
}

// sample reports whether this hit is to be checked: the only cost shadow
// validation adds to a hit that is not.
func (s *shadower) sample() bool {
	return s != nil && (s.threshold == math.MaxUint64 || rand.Uint64() < s.threshold)
}

// admit enforces the per-second bound on sampled hits. Two hits racing
// into a new second may let a few more through: the bound is a cap on
// load, not an exact count.
func (s *shadower) admit(kind hms.Kind) bool {
	now := time.Now().Unix()
	if sec := s.second.Load(); sec != now && s.second.CompareAndSwap(sec, now) {
		s.taken.Store(0)
	}
	if s.taken.Add(1) > int64(s.cfg.MaxPerSecond) {
		s.stats.add(kind, ShadowSkipped)
		return false
	}
	return true
}

// enqueue hands a job to the worker without waiting.
func (s *shadower) enqueue(j shadowJob) {
	select {
	case s.jobs <- j:
	default:
		s.stats.add(j.meth.Kind, ShadowSkipped)
	}
}

func (s *shadower) start(ctx context.Context, up Forwarder) {
	s.wg.Add(1)
	go s.run(ctx, up)
}

func (s *shadower) close() {
	s.once.Do(func() { close(s.stop) })
	s.wg.Wait()
}

// run checks jobs one at a time, and confirms differences once their
// grace period has passed.
func (s *shadower) run(ctx context.Context, up Forwarder) {
	defer s.wg.Done()
	var pending []pendingMismatch
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var due <-chan time.Time
		if len(pending) > 0 {
			timer.Reset(time.Until(pending[0].until))
			due = timer.C
		}
		select {
		case <-s.stop:
			return
		case j := <-s.jobs:
			if p, ok := s.check(ctx, up, j); ok {
				pending = append(pending, p)
			}
		case <-due:
		}
		for len(pending) > 0 && !time.Now().Before(pending[0].until) {
			s.confirm(pending[0])
			pending[0] = pendingMismatch{}
			pending = pending[1:]
		}
	}
}

// check re-reads j's request. A difference is returned to wait out the
// grace period.
func (s *shadower) check(ctx context.Context, up Forwarder, j shadowJob) (pendingMismatch, bool) {
	m, err := wire.Parse(j.msg, wire.Limits{MaxMessage: len(j.msg)})
	if err != nil {
		s.done(j.meth.Kind, ShadowFailed)
		return pendingMismatch{}, false
	}
	var sink captureSink
	if err := up.Do(ctx, upstream.Call{Session: j.sess, Class: upstream.Read, Msg: m}, &sink); err != nil {
		s.log.Debug("shadow re-read failed", "method", j.meth.Name, "err", err)
		s.done(j.meth.Kind, ShadowFailed)
		return pendingMismatch{}, false
	}
	got, ok := j.observed(sink.res)
	if !ok {
		s.done(j.meth.Kind, ShadowFailed)
		return pendingMismatch{}, false
	}
	switch {
	case got != nil && bytes.Equal(got, j.want):
		s.done(j.meth.Kind, ShadowMatched)
	case !s.store.Gens().Current(&j.snap):
		s.done(j.meth.Kind, ShadowExplained)
	default:
		p := pendingMismatch{job: j, got: got, until: time.Now().Add(s.cfg.Grace)}
		if s.cfg.Grace > 0 {
			if s.parked != nil {
				s.parked()
			}
			return p, true
		}
		s.confirm(p)
	}
	return pendingMismatch{}, false
}

// confirm counts a difference that no invalidation explained within the
// grace period, and drops the entry.
func (s *shadower) confirm(p pendingMismatch) {
	j := &p.job
	if !s.store.Gens().Current(&j.snap) {
		s.done(j.meth.Kind, ShadowExplained)
		return
	}
	s.store.Delete(j.key)
	// Keys hold names and request fields, nothing secret.
	s.log.Warn("shadow validation: cached reply differs from the metastore's and no invalidation explains it; entry dropped",
		"method", j.meth.Name, "kind", j.meth.Kind.String(), "key", fmt.Sprintf("%q", j.key), "entry", j.name,
		"cached_bytes", len(j.want), "metastore_bytes", len(p.got), "metastore_has_it", p.got != nil)
	s.done(j.meth.Kind, ShadowMismatched)
}

func (s *shadower) done(k hms.Kind, o ShadowOutcome) {
	s.stats.add(k, o)
	if s.checked != nil {
		s.checked(o)
	}
}
