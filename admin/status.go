package admin

import (
	_ "embed"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/proxy"
)

// statusHTML is the status page: one self-contained document (inline CSS
// and script, no external assets) that polls /status.json.
//
//go:embed status.html
var statusHTML []byte

// topMethods is how many methods the status page lists.
const topMethods = 10

// status is the body of /status.json. A null part has no source in
// Config.
type status struct {
	Time      time.Time       `json:"time"`
	Upstreams []upstreamSnap  `json:"upstreams"`
	Clients   *int            `json:"clients"`
	Calls     *callTotals     `json:"calls"`
	Kinds     []kindStatus    `json:"kinds"`
	Cache     *cacheTotals    `json:"cache"`
	Methods   []methodStatus  `json:"methods"`
	Bus       *busStatus      `json:"bus"`
	Events    []event         `json:"events"`
	Workers   []workerStatus  `json:"workers"`
	Scope     *scopeStatus    `json:"cache_scope"`
	EventLog  *eventLogStatus `json:"eventlog"`
	Shadow    *shadowStatus   `json:"shadow"`
	Prune     *pruneStatus    `json:"prune"`
	WarmUp    *warmUpStatus   `json:"warm_up"`
	// ChangeFeed is the Kafka change feed; null when off.
	ChangeFeed *changeFeedStatus `json:"change_feed"`
	// Groups are every upstream group of a federated proxy, the primary
	// first; null with one group.
	Groups []groupStatus `json:"groups"`
}

// eventLogStatus is the notification log as this node sees it.
type eventLogStatus struct {
	// Health is "ok", "missing" (TTLs are cut) or "unknown".
	Health  string `json:"health"`
	Latest  int64  `json:"latest_event_id"`
	Applied int64  `json:"applied_event_id"`
}

// shadowStatus is shadow validation: hits re-read from the metastore.
type shadowStatus struct {
	Checks     uint64 `json:"checks"` // compared: matched, mismatched or explained
	Mismatches uint64 `json:"mismatches"`
	Explained  uint64 `json:"explained"`
	Failed     uint64 `json:"failed"`
	Skipped    uint64 `json:"skipped"`
	// MismatchesByKind lists the kinds with mismatches.
	MismatchesByKind map[string]uint64 `json:"mismatches_by_kind"`
}

// pruneStatus is how pruning reads were answered.
type pruneStatus struct {
	Local     uint64 `json:"local"`
	Inexact   uint64 `json:"inexact"` // inexact and over_limit: the metastore's own answer, by design
	Forwarded uint64 `json:"forwarded"`
	// ForwardedBy counts the forwarded ones by the step that gave up.
	ForwardedBy map[string]uint64 `json:"forwarded_by"`
}

type callTotals struct {
	Total     uint64 `json:"total"`
	FromCache uint64 `json:"from_cache"` // hit or coalesced: no upstream call of their own
	// UpstreamLoadSaved is FromCache/Total: the share of client calls the
	// metastore did not see. Null before the first call.
	UpstreamLoadSaved *float64 `json:"upstream_load_saved"`
}

type kindStatus struct {
	Kind      string `json:"kind"`
	Hits      uint64 `json:"hits"`
	Misses    uint64 `json:"misses"`
	Coalesced uint64 `json:"coalesced"`
	// HitRatio is hits / (hits + misses + coalesced); null before the
	// first read of the kind.
	HitRatio *float64 `json:"hit_ratio"`
	Bytes    *int64   `json:"bytes"`
	Entries  *int64   `json:"entries"`
}

type cacheTotals struct {
	Bytes   int64 `json:"bytes"`
	Entries int64 `json:"entries"`
}

type methodStatus struct {
	Method   string            `json:"method"`
	Calls    uint64            `json:"calls"`
	Outcomes map[string]uint64 `json:"outcomes"`
}

type busStatus struct {
	Synced        bool              `json:"synced"`
	Published     uint64            `json:"published"`
	PublishErrors uint64            `json:"publish_errors"`
	Received      uint64            `json:"received"`
	Applied       uint64            `json:"applied"`
	LagP50        *float64          `json:"lag_p50_seconds"` // null without samples
	LagP99        *float64          `json:"lag_p99_seconds"`
	LagSamples    int               `json:"lag_samples"`
	Losses        map[string]uint64 `json:"losses"`
	WaitP50       *float64          `json:"publish_wait_p50_seconds"` // null without samples
	WaitP99       *float64          `json:"publish_wait_p99_seconds"`
	AckTimeouts   uint64            `json:"ack_timeouts"`
	// LayoutAlarm: a peer on this group's stream serves other metastores.
	LayoutAlarm bool         `json:"layout_alarm"`
	Peers       []peerStatus `json:"peers"`
}

type peerStatus struct {
	Node           string    `json:"node"`
	LastHeard      time.Time `json:"last_heard"`
	Silent         bool      `json:"silent"`
	LayoutMismatch bool      `json:"layout_mismatch"`
}

type workerStatus struct {
	Name        string     `json:"name"`
	Runs        uint64     `json:"runs"`
	Failures    uint64     `json:"failures"`
	LastSuccess *time.Time `json:"last_success"`
	LastError   string     `json:"last_error"`
}

func (s *Server) statusPage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Nothing but the page itself and /status.json may load.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src data:")
	h.Set("X-Content-Type-Options", "nosniff")
	w.Write(statusHTML)
}

func (s *Server) statusJSON(w http.ResponseWriter, r *http.Request) {
	snap := take(&s.cfg)
	s.noticeLosses(snap)
	writeJSON(w, http.StatusOK, s.status(snap))
}

// status renders snap, with the events recorded so far.
func (s *Server) status(snap *snapshot) *status {
	st := &status{Time: snap.at, Upstreams: snap.upstreams, Events: s.events.recent(), Workers: []workerStatus{},
		Scope: takeScope(s.cfg.Scope), WarmUp: takeWarmUp(s.cfg.WarmUp, snap.at), ChangeFeed: takeChangeFeed(s.cfg.ChangeFeed)}
	if snap.hasClients {
		st.Clients = &snap.clients
	}
	if snap.hasCalls {
		c := &callTotals{}
		for _, row := range snap.methods {
			c.Total += total(row)
			c.FromCache += row[proxy.OutcomeHit] + row[proxy.OutcomeCoalesced]
		}
		if c.Total > 0 {
			c.UpstreamLoadSaved = ptr(float64(c.FromCache) / float64(c.Total))
		}
		st.Calls = c
		st.Methods = top(snap.methods, topMethods)
	}
	if snap.hasStore {
		st.Cache = &cacheTotals{}
	}
	if snap.hasCalls || snap.hasStore {
		for k := firstKind; k <= lastKind; k++ {
			ks := kindStatus{Kind: k.String()}
			if snap.hasCalls {
				c := &snap.kinds[k]
				ks.Hits, ks.Misses, ks.Coalesced = c[proxy.OutcomeHit], c[proxy.OutcomeMiss], c[proxy.OutcomeCoalesced]
				if r, ok := snap.hitRatio(k); ok {
					ks.HitRatio = ptr(r)
				}
			}
			if snap.hasStore {
				ks.Bytes, ks.Entries = ptr(snap.store[k].bytes), ptr(snap.store[k].entries)
				st.Cache.Bytes += snap.store[k].bytes
				st.Cache.Entries += snap.store[k].entries
			}
			st.Kinds = append(st.Kinds, ks)
		}
	}
	if b := snap.bus; b != nil {
		st.Bus = &busStatus{
			Synced: b.synced, Published: b.published, PublishErrors: b.publishErrors,
			Received: b.received, Applied: b.applied,
			LagP50: finite(b.lag[0]), LagP99: finite(b.lag[1]), LagSamples: b.lagSamples,
			Losses:  b.losses,
			WaitP50: finite(b.wait[0]), WaitP99: finite(b.wait[1]), AckTimeouts: b.ackTimeouts,
			LayoutAlarm: b.mismatched > 0, Peers: []peerStatus{},
		}
		for _, p := range b.peers {
			st.Bus.Peers = append(st.Bus.Peers, peerStatus{Node: p.Node, LastHeard: p.Heard, Silent: p.Silent, LayoutMismatch: p.LayoutMismatch})
		}
	}
	for i := range s.cfg.Groups {
		st.Groups = append(st.Groups, takeGroup(&s.cfg.Groups[i]))
	}
	if el := s.cfg.EventLog; el != nil {
		es := el.Stats()
		st.EventLog = &eventLogStatus{Health: eventlog.HealthState(es.Health.Load()).String(),
			Latest: es.Latest.Load(), Applied: es.Applied.Load()}
	}
	if snap.hasShadow {
		sh := &shadowStatus{MismatchesByKind: map[string]uint64{}}
		for k := firstKind; k <= lastKind; k++ {
			row := &snap.shadow[k]
			sh.Checks += row[proxy.ShadowMatched] + row[proxy.ShadowMismatched] + row[proxy.ShadowExplained]
			sh.Mismatches += row[proxy.ShadowMismatched]
			sh.Explained += row[proxy.ShadowExplained]
			sh.Failed += row[proxy.ShadowFailed]
			sh.Skipped += row[proxy.ShadowSkipped]
			if n := row[proxy.ShadowMismatched]; n > 0 {
				sh.MismatchesByKind[k.String()] = n
			}
		}
		st.Shadow = sh
	}
	if snap.prune != nil {
		st.Prune = takePrune(snap.prune)
	}
	for _, w := range snap.workers {
		ws := workerStatus{Name: w.Name, Runs: w.Runs, Failures: w.Failures, LastError: w.LastError}
		if !w.LastSuccess.IsZero() {
			ws.LastSuccess = ptr(w.LastSuccess)
		}
		st.Workers = append(st.Workers, ws)
	}
	return st
}

// takePrune sums the prune results for the page.
func takePrune(counts map[proxy.PruneResult]uint64) *pruneStatus {
	p := &pruneStatus{ForwardedBy: map[string]uint64{}}
	for r, n := range counts {
		switch r {
		case proxy.PruneLocal:
			p.Local += n
		case proxy.PruneInexact, proxy.PruneOverLimit:
			p.Inexact += n
		default:
			p.Forwarded += n
			if n > 0 {
				p.ForwardedBy[strings.TrimPrefix(r.String(), "forwarded_")] = n
			}
		}
	}
	return p
}

// top returns the n methods with the most calls, ties by name.
func top(methods map[string]*[numOutcomes]uint64, n int) []methodStatus {
	out := make([]methodStatus, 0, len(methods))
	for name, row := range methods {
		m := methodStatus{Method: name, Calls: total(row), Outcomes: map[string]uint64{}}
		for _, o := range outcomes {
			m.Outcomes[o.String()] = row[o]
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Calls != out[j].Calls {
			return out[i].Calls > out[j].Calls
		}
		return out[i].Method < out[j].Method
	})
	return out[:min(n, len(out))]
}

func ptr[T any](v T) *T { return &v }

// finite is v, or nil for NaN and infinities, which JSON cannot carry.
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
