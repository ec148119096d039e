package admin

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

type fakeUpstreams struct {
	addrs   []string
	healthy []bool
}

func (f *fakeUpstreams) Addrs() []string { return f.addrs }
func (f *fakeUpstreams) Healthy() []bool { return f.healthy }

type recordingFlusher struct {
	mu   sync.Mutex
	ents []cache.Entity
}

func (f *recordingFlusher) Flush(_ context.Context, ents []cache.Entity) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ents = append(f.ents, ents...)
	return nil
}

func (f *recordingFlusher) take() []cache.Entity {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.ents
	f.ents = nil
	return out
}

type countingStore struct {
	mu      sync.Mutex
	stats   [hms.KindOther + 1]cache.KindStats
	cleared int
}

func (s *countingStore) Stats(k hms.Kind) *cache.KindStats { return &s.stats[k] }
func (s *countingStore) Clear()                            { s.mu.Lock(); s.cleared++; s.mu.Unlock() }

type fakeGroupCalls map[proxy.Outcome]uint64

func (f fakeGroupCalls) GroupCalls(o proxy.Outcome) uint64 { return f[o] }

type fakeEventLog struct{ st eventlog.Stats }

func (f *fakeEventLog) Stats() *eventlog.Stats { return &f.st }

// TestGroups (issue 13): a federated proxy's admin surface covers every
// group: /status.json and the metrics list each group's metastores,
// calls and event log; ?group= flushes one group's entries only and
// never clears the shared store; /readyz stays about the primary, so a
// dead member does not take the node out of its load balancer.
func TestGroups(t *testing.T) {
	primaryUp := &fakeUpstreams{addrs: []string{"hms-a:9083"}, healthy: []bool{true}}
	lakeUp := &fakeUpstreams{addrs: []string{"lake-a:9083", "lake-b:9083"}, healthy: []bool{false, false}}
	pf, lf := &recordingFlusher{}, &recordingFlusher{}
	store := &countingStore{}
	el := &fakeEventLog{}
	el.st.Latest.Store(10)
	el.st.Applied.Store(7)
	el.st.Health.Store(int32(eventlog.HealthOK))
	srv, err := New(Config{Upstreams: primaryUp, Flusher: pf, Store: store, Groups: []GroupSurface{
		{Name: "primary", Upstreams: primaryUp, Flusher: pf, Calls: fakeGroupCalls{proxy.OutcomeHit: 5}},
		{Name: "lake", Upstreams: lakeUp, Flusher: lf, EventLog: el,
			Calls: fakeGroupCalls{proxy.OutcomeHit: 3, proxy.OutcomeMiss: 1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	if r := do(t, "GET", hs.URL+"/readyz", ""); r.code != 200 {
		t.Errorf("GET /readyz with a dead member: got %d %q; want 200 (the member is not the node)", r.code, r.body)
	}

	st := getStatus(t, hs.URL)
	if len(st.Groups) != 2 || st.Groups[0].Name != "primary" || st.Groups[1].Name != "lake" {
		t.Fatalf("status groups: %+v; want primary, lake", st.Groups)
	}
	lake := st.Groups[1]
	if lake.Healthy == nil || *lake.Healthy || len(lake.Upstreams) != 2 {
		t.Errorf("lake's metastores: healthy %v, %v; want both listed, down", lake.Healthy, lake.Upstreams)
	}
	if lake.Calls["hit"] != 3 || lake.HitRatio == nil || *lake.HitRatio != 0.75 {
		t.Errorf("lake's calls %v, hit ratio %v; want 3 hits, 0.75", lake.Calls, lake.HitRatio)
	}
	if lake.EventLog == nil || lake.EventLog.Applied != 7 || lake.EventLog.Health != "ok" {
		t.Errorf("lake's event log: %+v; want applied 7, ok", lake.EventLog)
	}
	if p := st.Groups[0]; p.Healthy == nil || !*p.Healthy || p.EventLog != nil {
		t.Errorf("primary's group row: %+v", p)
	}

	if r := do(t, "POST", hs.URL+"/cache/flush/Sales?group=lake", ""); r.code != 200 || !strings.Contains(r.body, "lake:hive.sales") {
		t.Fatalf("POST /cache/flush/Sales?group=lake: got %d %q", r.code, r.body)
	}
	if got := lf.take(); len(got) != 1 || got[0].DB != "sales" || got[0].Level != cache.LevelDatabase {
		t.Errorf("lake's flusher got %v; want database sales", got)
	}
	if got := pf.take(); len(got) != 0 {
		t.Errorf("a flush of lake reached the primary: %v", got)
	}
	if r := do(t, "POST", hs.URL+"/cache/flush?group=lake", ""); r.code != 200 {
		t.Fatalf("POST /cache/flush?group=lake: got %d %q", r.code, r.body)
	}
	if got := lf.take(); len(got) != 1 || got[0].Level != cache.LevelAll {
		t.Errorf("lake's flush-all: flusher got %v", got)
	}
	if store.cleared != 0 {
		t.Errorf("a flush of one group cleared the shared store (every group's entries)")
	}
	if r := do(t, "POST", hs.URL+"/cache/flush?group=nope", ""); r.code != 404 {
		t.Errorf("flush of an unknown group: got %d; want 404", r.code)
	}
	if r := do(t, "POST", hs.URL+"/cache/flush/db1", ""); r.code != 200 || len(pf.take()) != 1 || len(lf.take()) != 0 {
		t.Errorf("a flush naming no group: got %d; want the primary's", r.code)
	}
	if r := do(t, "POST", hs.URL+"/cache/flush?group=primary", ""); r.code != 200 || store.cleared != 1 {
		t.Errorf("flush-all of the primary by name: got %d, store cleared %d times; want as without ?group=", r.code, store.cleared)
	}

	series, _ := scrape(t, hs.URL)
	wantSeries(t, series, map[string]float64{
		`hmsproxy_group_upstream_up{addr="lake-b:9083",group="lake"}`:   0,
		`hmsproxy_group_upstream_up{addr="hms-a:9083",group="primary"}`: 1,
		`hmsproxy_group_requests_total{group="lake",outcome="hit"}`:     3,
		`hmsproxy_group_requests_total{group="primary",outcome="hit"}`:  5,
		`hmsproxy_group_eventlog_behind_events{group="lake"}`:           3,
		`hmsproxy_group_eventlog_health{group="lake",state="ok"}`:       1,
		`hmsproxy_group_eventlog_applied_event_id{group="lake"}`:        7,
	})
}
