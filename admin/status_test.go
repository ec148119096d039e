package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// fakeWorkers is a hand-written Workers.
type fakeWorkers struct {
	mu   sync.Mutex // guards list
	list []WorkerStatus
}

func (f *fakeWorkers) Snapshot() []WorkerStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]WorkerStatus(nil), f.list...)
}

var lastSync = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func newFakeWorkers() *fakeWorkers {
	return &fakeWorkers{list: []WorkerStatus{
		{Name: "eventlog-poller", Runs: 120, Failures: 2, LastSuccess: time.Now().Add(-3 * time.Second), LastError: "hms: get_next_notification: connection reset"},
		{Name: "upstream-health", Runs: 60, LastSuccess: time.Now().Add(-time.Second)},
		{Name: "refresh-ahead", Runs: 7, LastSuccess: lastSync},
		{Name: "txn-monitor"}, // never ran
	}}
}

// busyEnv starts an env with a bus and workers, and gives it n bus
// events and cache traffic, so that every status figure has a value.
func busyEnv(t *testing.T, n int) *env {
	t.Helper()
	e := startEnv(t, envOpts{bus: true, workers: newFakeWorkers()})
	busEvents(t, e, n)
	traffic(t, e)
	return e
}

// busEvents makes the bus of e count a loss (an undecodable message) and
// apply n invalidations from another node, so that lag has samples. It
// runs before the cache traffic: the loss drops the cache.
func busEvents(t testing.TB, e *env, n int) {
	t.Helper()
	ctx := context.Background()
	stream := "hmsproxy:inval:test"
	if err := e.redis.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"m", "not json"}}).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the undecodable loss", func() bool { return e.bus.Stats().Loss("undecodable") == 1 })

	other, err := coherence.New(coherence.Config{Client: e.redis, Group: "test", NodeID: "node-b", Heartbeat: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	otherCtx, stopOther := context.WithCancel(ctx)
	otherDone := make(chan struct{})
	go func() { defer close(otherDone); other.Run(otherCtx, nopCache{}) }()
	defer func() { stopOther(); <-otherDone }()
	waitFor(t, "node-b to sync", other.Synced)
	for i := range n {
		ent := cache.Entity{Level: cache.LevelTable, Cat: "hive", DB: "demo_db1", Table: fmt.Sprintf("t%d", i)}
		if err := other.Publish(ctx, []cache.Entity{ent}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the invalidations to apply", func() bool { return e.bus.Stats().Applied.Load() == uint64(n) })
	waitFor(t, "the bus to sync", e.bus.Synced)
}

// nopCache is a peer's cache that holds nothing.
type nopCache struct{}

func (nopCache) ApplyRemote([]cache.Entity) {}
func (nopCache) DropAll(string)             {}

// traffic makes hits and misses over several kinds and methods, and one
// admin flush.
func traffic(t testing.TB, e *env) {
	t.Helper()
	c := e.client(t)
	for range 4 { // 1 miss, 3 hits
		e.call(t, c, "get_table", getTable("demo_db0", "t0"))
	}
	for range 2 { // 1 miss, 1 hit
		e.call(t, c, "get_table", getTable("demo_db0", "t1"))
	}
	for range 3 { // 1 miss, 2 hits
		e.call(t, c, "get_all_databases", hmsclient.Args())
	}
	for range 2 { // 1 miss, 1 hit
		e.call(t, c, "get_partition_names", partitionNames("demo_db0", "t0"))
	}
	e.call(t, c, "get_partition_names", partitionNames("demo_db0", "t1"))
	e.call(t, c, "no_such_method_anywhere", hmsclient.Args())
	if r := do(t, "POST", e.url+"/cache/flush/demo_db1/t2", ""); r.code != http.StatusOK {
		t.Fatalf("flush: got %d %s; want 200", r.code, r.body)
	}
}

// fromMetrics derives what the status page shows from a scrape.
type fromMetrics struct {
	series map[string]float64
}

func (m fromMetrics) kindRatio(kind string) (float64, bool) {
	get := func(o string) float64 {
		return m.series[`hmsproxy_cache_requests_total{kind="`+kind+`",outcome="`+o+`"}`]
	}
	den := get("hit") + get("miss") + get("coalesced")
	if den == 0 {
		return 0, false
	}
	return get("hit") / den, true
}

func (m fromMetrics) method(name, outcome string) float64 {
	return m.series[`hmsproxy_requests_total{method="`+name+`",outcome="`+outcome+`"}`]
}

func (m fromMetrics) methodCalls(name string) float64 {
	var n float64
	for _, o := range []string{"hit", "miss", "coalesced", "passthrough", "write", "error"} {
		n += m.method(name, o)
	}
	return n
}

func (m fromMetrics) totalCalls() float64 {
	var n float64
	for s, v := range m.series {
		if strings.HasPrefix(s, "hmsproxy_requests_total{") {
			n += v
		}
	}
	return n
}

func TestBusAndWorkerMetrics(t *testing.T) {
	e := busyEnv(t, 5)

	series, families := scrape(t, e.url)
	wantFamilies(t, families,
		"hmsproxy_bus_published_total", "hmsproxy_bus_publish_errors_total",
		"hmsproxy_bus_received_total", "hmsproxy_bus_applied_total", "hmsproxy_bus_synced",
		"hmsproxy_invalidation_losses_total", "hmsproxy_bus_lag_seconds",
		"hmsproxy_worker_runs_total", "hmsproxy_worker_failures_total",
		"hmsproxy_worker_last_success_timestamp_seconds",
	)
	wantSeries(t, series, map[string]float64{
		`hmsproxy_bus_applied_total`:                                             5,
		`hmsproxy_bus_publish_errors_total`:                                      0,
		`hmsproxy_bus_synced`:                                                    1,
		`hmsproxy_invalidation_losses_total{reason="undecodable"}`:               1,
		`hmsproxy_invalidation_losses_total{reason="gap"}`:                       0,
		`hmsproxy_invalidation_losses_total{reason="reconnect"}`:                 0,
		`hmsproxy_invalidation_losses_total{reason="redis-restart"}`:             0,
		`hmsproxy_worker_runs_total{worker="eventlog-poller"}`:                   120,
		`hmsproxy_worker_failures_total{worker="eventlog-poller"}`:               2,
		`hmsproxy_worker_failures_total{worker="upstream-health"}`:               0,
		`hmsproxy_worker_last_success_timestamp_seconds{worker="refresh-ahead"}`: float64(lastSync.Unix()),
		`hmsproxy_worker_last_success_timestamp_seconds{worker="txn-monitor"}`:   0,
	})
	if v := series[`hmsproxy_bus_received_total`]; v < 6 {
		t.Errorf("hmsproxy_bus_received_total = %v; want >= 6 (5 invalidations and heartbeats)", v)
	}
	p50, p99 := series[`hmsproxy_bus_lag_seconds{quantile="0.5"}`], series[`hmsproxy_bus_lag_seconds{quantile="0.99"}`]
	if !(p50 > 0 && p50 <= p99 && p99 < 10) {
		t.Errorf("bus lag p50 %v, p99 %v; want 0 < p50 <= p99 < 10s", p50, p99)
	}
}

// TestBusPeersAndLayoutAlarm (issue 10, items 3 and 4): the peers and a
// peer serving other metastores under this group's name show in /metrics
// and on the status page.
func TestBusPeersAndLayoutAlarm(t *testing.T) {
	e := startEnv(t, envOpts{bus: true})
	other, err := coherence.New(coherence.Config{Client: e.redis, Group: "test", NodeID: "node-b",
		Layout: coherence.Layout([]string{"thrift://hms-b:9083"}), Heartbeat: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); other.Run(ctx, nopCache{}) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "the alarm", func() bool { return e.bus.Stats().LayoutAlarms.Load() == 1 })

	series, families := scrape(t, e.url)
	wantFamilies(t, families, "hmsproxy_bus_peers", "hmsproxy_bus_layout_mismatch", "hmsproxy_bus_ack_timeouts_total", "hmsproxy_bus_rejoins_total", "hmsproxy_bus_publish_wait_seconds")
	wantSeries(t, series, map[string]float64{
		`hmsproxy_bus_layout_mismatch`:       1,
		`hmsproxy_bus_peers{state="alive"}`:  1,
		`hmsproxy_bus_peers{state="silent"}`: 0,
		`hmsproxy_bus_ack_timeouts_total`:    0,
	})
	st := getStatus(t, e.url)
	if st.Bus == nil || !st.Bus.LayoutAlarm || len(st.Bus.Peers) != 1 || st.Bus.Peers[0].Node != "node-b" || !st.Bus.Peers[0].LayoutMismatch {
		t.Errorf("status bus = %+v; want the layout alarm and node-b with another layout", st.Bus)
	}
}

// TestBusLagWithoutSamples: before the first applied invalidation the lag
// quantiles are NaN in /metrics and null in /status.json.
func TestBusLagWithoutSamples(t *testing.T) {
	e := startEnv(t, envOpts{bus: true})
	series, _ := scrape(t, e.url)
	if v, ok := series[`hmsproxy_bus_lag_seconds{quantile="0.5"}`]; !ok || !math.IsNaN(v) {
		t.Errorf(`hmsproxy_bus_lag_seconds{quantile="0.5"} = %v (present %v); want NaN`, v, ok)
	}
	st := getStatus(t, e.url)
	if st.Bus == nil || st.Bus.LagP50 != nil || st.Bus.LagSamples != 0 {
		t.Errorf("status bus = %+v; want lag null with no samples", st.Bus)
	}
}

func getStatus(t testing.TB, url string) status {
	t.Helper()
	r := do(t, "GET", url+"/status.json", "")
	if r.code != http.StatusOK || !strings.HasPrefix(r.hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /status.json: got %d %q; want 200 JSON", r.code, r.hdr.Get("Content-Type"))
	}
	var st status
	if err := json.Unmarshal([]byte(r.body), &st); err != nil {
		t.Fatalf("GET /status.json: %v in %s", err, r.body)
	}
	return st
}

// TestStatusJSON: /status.json shows the numbers of /metrics.
func TestStatusJSON(t *testing.T) {
	e := busyEnv(t, 3)
	series, _ := scrape(t, e.url)
	m := fromMetrics{series}
	st := getStatus(t, e.url)

	if len(st.Upstreams) != 1 || st.Upstreams[0].Addr != e.upAddr || !st.Upstreams[0].Healthy {
		t.Errorf("upstreams = %+v; want [%s healthy]", st.Upstreams, e.upAddr)
	}
	if st.Calls == nil || float64(st.Calls.Total) != m.totalCalls() {
		t.Fatalf("calls = %+v; want total %v", st.Calls, m.totalCalls())
	}
	for _, k := range st.Kinds {
		want, ok := m.kindRatio(k.Kind)
		switch {
		case !ok && k.HitRatio != nil:
			t.Errorf("kind %s: hit ratio %v; want null", k.Kind, *k.HitRatio)
		case ok && (k.HitRatio == nil || *k.HitRatio != want):
			t.Errorf("kind %s: hit ratio %v; want %v", k.Kind, k.HitRatio, want)
		}
		if e := series[`hmsproxy_cache_entries{kind="`+k.Kind+`"}`]; k.Entries == nil || float64(*k.Entries) != e {
			t.Errorf("kind %s: entries %v; want %v", k.Kind, k.Entries, e)
		}
	}
	if r, _ := m.kindRatio("table"); r != 4.0/6 {
		t.Errorf("table hit ratio from /metrics = %v; want 4/6", r)
	}
	if len(st.Methods) == 0 || st.Methods[0].Method != "get_table" || st.Methods[0].Calls != 6 {
		t.Errorf("top method = %+v; want get_table with 6 calls", st.Methods)
	}
	for _, me := range st.Methods {
		if float64(me.Calls) != m.methodCalls(me.Method) {
			t.Errorf("method %s: %d calls; want %v", me.Method, me.Calls, m.methodCalls(me.Method))
		}
	}
	if st.Bus == nil || float64(st.Bus.Applied) != series["hmsproxy_bus_applied_total"] || !st.Bus.Synced ||
		st.Bus.LagP50 == nil || *st.Bus.LagP50 != series[`hmsproxy_bus_lag_seconds{quantile="0.5"}`] {
		t.Errorf("bus = %+v; want the numbers of /metrics", st.Bus)
	}
	var flush, loss bool
	for _, ev := range st.Events {
		flush = flush || (ev.Type == "flush" && ev.Level == "table" && ev.Detail == "hive.demo_db1.t2")
		loss = loss || (ev.Type == "bus-loss" && ev.Detail == "undecodable" && ev.Count == 1)
	}
	if !flush || !loss {
		t.Errorf("events = %+v; want the table flush and the undecodable loss", st.Events)
	}
	if len(st.Workers) != 4 || st.Workers[0].Name != "eventlog-poller" || st.Workers[0].Failures != 2 ||
		st.Workers[3].Name != "upstream-health" || st.Workers[2].LastSuccess != nil {
		t.Errorf("workers = %+v; want the four, by name, txn-monitor never succeeded", st.Workers)
	}
}

// TestStatusNilSafe: with no sources at all, the page and the JSON still
// answer, with null parts and an empty workers array.
func TestStatusNilSafe(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	ln := listen(t)
	go s.Serve(ln)
	url := "http://" + ln.Addr().String()

	r := do(t, "GET", url+"/", "")
	if r.code != http.StatusOK || !strings.Contains(r.body, "<title>hmsproxy status</title>") {
		t.Fatalf("GET /: got %d; want the status page", r.code)
	}
	if csp := r.hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q; want default-src 'none'", csp)
	}
	for _, ext := range []string{"http://", "https://", "//cdn", "<link", "src="} {
		if strings.Contains(r.body, ext) {
			t.Errorf("status page references an external asset: %q", ext)
		}
	}
	body := do(t, "GET", url+"/status.json", "").body
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"upstreams", "clients", "calls", "kinds", "cache", "methods", "bus"} {
		if string(raw[k]) != "null" {
			t.Errorf("%s = %s; want null", k, raw[k])
		}
	}
	if string(raw["workers"]) != "[]" || string(raw["events"]) != "[]" {
		t.Errorf("workers = %s, events = %s; want []", raw["workers"], raw["events"])
	}
}

// TestEventsRing keeps the latest maxEvents, newest first.
func TestEventsRing(t *testing.T) {
	var ev events
	if got := ev.recent(); len(got) != 0 {
		t.Fatalf("empty ring: got %d events", len(got))
	}
	for i := range maxEvents + 5 {
		ev.add(event{Type: "flush", Detail: fmt.Sprint(i)})
	}
	got := ev.recent()
	if len(got) != maxEvents || got[0].Detail != fmt.Sprint(maxEvents+4) || got[maxEvents-1].Detail != "5" {
		t.Errorf("got %d events, first %q last %q; want %d, %q, %q",
			len(got), got[0].Detail, got[len(got)-1].Detail, maxEvents, fmt.Sprint(maxEvents+4), "5")
	}
}

// TestEventLogHealth (issue 10, item 9): the node's verdict on the
// notification log is on /metrics and the status page.
func TestEventLogHealth(t *testing.T) {
	e := startEnv(t, envOpts{eventLog: true})
	st := e.admin.cfg.EventLog.Stats()
	for _, tc := range []struct {
		state eventlog.HealthState
		gauge float64
	}{
		{eventlog.HealthUnknown, 1},
		{eventlog.HealthMissing, 0},
		{eventlog.HealthOK, 1},
	} {
		st.Health.Store(int32(tc.state))
		series, _ := scrape(t, e.url)
		if got := series["hmsproxy_eventlog_healthy"]; got != tc.gauge {
			t.Errorf("%v: hmsproxy_eventlog_healthy %v; want %v", tc.state, got, tc.gauge)
		}
		s := getStatus(t, e.url)
		if s.EventLog == nil || s.EventLog.Health != tc.state.String() {
			t.Errorf("%v: status.json eventlog %+v; want health %q", tc.state, s.EventLog, tc.state)
		}
	}
}

// TestPruneOnStatus: how pruning reads were answered reaches /metrics
// (hmsproxy_prune_total{result}, every result of the closed set) and the
// status page, and the two agree with the proxy's own counts.
func TestPruneOnStatus(t *testing.T) {
	e := startEnv(t, envOpts{prune: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.proxy.SettingsRead(ctx); err != nil {
		t.Fatal(err)
	}
	c := e.client(t)
	byFilter := func(f string) []byte {
		return hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Str(3, f), hmsreq.I16(4, -1))
	}
	for range 2 { // the first fills what the prune reads; both are answered here
		e.call(t, c, "get_partitions_by_filter", byFilter(`ds = '2024-01-01'`))
	}
	// A LIKE is a filter the proxy does not evaluate itself.
	e.call(t, c, "get_partitions_by_filter", byFilter(`ds like '2024%'`))
	p := e.proxy.PruneStats()
	if p.Count(proxy.PruneLocal) != 2 || p.Count(proxy.PruneInexact) != 1 {
		t.Fatalf("prune counts: local %d, inexact %d; want 2 and 1", p.Count(proxy.PruneLocal), p.Count(proxy.PruneInexact))
	}

	series, families := scrape(t, e.url)
	if !families["hmsproxy_prune_total"] {
		t.Fatal("family hmsproxy_prune_total missing from /metrics")
	}
	for _, r := range proxy.PruneResults() {
		name := `hmsproxy_prune_total{result="` + r.String() + `"}`
		got, ok := series[name]
		if !ok {
			t.Errorf("%s missing: every result is exported from the start", name)
		}
		if got != float64(p.Count(r)) {
			t.Errorf("%s = %v; want %d", name, got, p.Count(r))
		}
	}
	st := getStatus(t, e.url)
	if st.Prune == nil || st.Prune.Local != 2 || st.Prune.Inexact != 1 || st.Prune.Forwarded != 0 {
		t.Fatalf("status prune = %+v; want 2 local, 1 inexact, none forwarded", st.Prune)
	}
	if off := getStatus(t, startEnv(t, envOpts{}).url); off.Prune != nil {
		t.Errorf("status prune without a source = %+v; want null", off.Prune)
	}
}

// TestShadowOnStatus: shadow validation's checks and mismatches reach
// /metrics and the status page, and agree.
func TestShadowOnStatus(t *testing.T) {
	e := startEnv(t, envOpts{shadow: true})
	sh := e.proxy.ShadowStats()
	c := e.client(t)
	for range 3 { // a miss, then two hits that match
		e.call(t, c, "get_table", getTable("demo_db0", "t1"))
	}
	waitFor(t, "two matched checks", func() bool { return sh.Count(hms.KindTable, proxy.ShadowMatched) == 2 })

	// A table dropped behind the proxy's back, with no event log: the
	// next hit is stale, and its check says so.
	direct, err := hmsclient.Dial(context.Background(), e.upAddr, wire.Buffered)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if _, err := direct.Call(context.Background(), "drop_table", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t1"), hmsreq.Bool(3, true))); err != nil {
		t.Fatal(err)
	}
	e.call(t, c, "get_table", getTable("demo_db0", "t1"))
	waitFor(t, "the mismatch", func() bool { return sh.Mismatches() == 1 })

	series, families := scrape(t, e.url)
	wantFamilies(t, families, "hmsproxy_shadow_checks_total", "hmsproxy_shadow_mismatches_total", "hmsproxy_shadow_skipped_total")
	if got := series[`hmsproxy_shadow_mismatches_total{kind="table"}`]; got != 1 {
		t.Errorf("hmsproxy_shadow_mismatches_total{kind=table} = %v; want 1", got)
	}
	if got := series[`hmsproxy_shadow_checks_total{kind="table",outcome="matched"}`]; got != 2 {
		t.Errorf("matched checks = %v; want 2", got)
	}
	st := getStatus(t, e.url)
	if st.Shadow == nil || st.Shadow.Checks != 3 || st.Shadow.Mismatches != 1 || st.Shadow.MismatchesByKind["table"] != 1 {
		t.Fatalf("status shadow = %+v; want 3 checks, 1 mismatch of kind table", st.Shadow)
	}
	if off := getStatus(t, startEnv(t, envOpts{}).url); off.Shadow != nil {
		t.Errorf("status shadow without a source = %+v; want null", off.Shadow)
	}
}
