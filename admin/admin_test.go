package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/ops/housekeeping"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// env is a demo metastore, a caching proxy in front of it and the admin
// server, all on loopback.
type env struct {
	demo   *demohms.Server // nil when the upstream is down
	up     *upstream.Metastores
	store  *cache.Store
	proxy  *proxy.Server
	paddr  string
	admin  *Server
	url    string
	upAddr string
	bus    *coherence.Bus       // nil unless envOpts.bus
	warm   *housekeeping.WarmUp // nil unless envOpts.warmUp
	redis  *redis.Client        // the bus's, nil unless envOpts.bus
	rs     *redistest.Server
}

type envOpts struct {
	token    string
	deadUp   bool // the upstream address refuses connections
	registry *prometheus.Registry
	bus      bool    // run a real redis-server and an invalidation bus
	workers  Workers // passed as Config.Workers when set
	eventLog bool    // run an event-log poller against the demo metastore
	shadow   bool    // check every cache hit against the metastore
	drain    Drainer // passed as Config.Drain when set
	warmUp   bool    // a warm-up over two background connections of the proxy
	prune    bool    // pass the proxy's prune counts as Config.Prune
	// changeFeed is passed as Config.ChangeFeed when set.
	changeFeed ChangeFeed
	// listenAll: the admin port listens on every address (0.0.0.0), not
	// on loopback alone; e.url still dials 127.0.0.1.
	listenAll bool
}

var (
	testLogger = proxytest.Logger
	listen     = proxytest.Listen
	waitFor    = proxytest.Eventually
)

func startEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	e := &env{}
	if o.deadUp {
		ln := listen(t)
		e.upAddr = ln.Addr().String()
		ln.Close()
	} else {
		e.demo, e.upAddr = proxytest.Demo(t, proxytest.DemoOptions{})
	}
	e.up = proxytest.Group(t, upstream.Config{HealthInterval: 50 * time.Millisecond}, e.upAddr)
	e.store = proxytest.Store(t, cache.Config{})
	// Shadow re-reads would add metastore calls some tests count.
	caching := &proxy.Caching{Store: e.store, Upstream: "test", Shadow: proxy.Shadow{Rate: -1}}
	if o.shadow {
		caching.Shadow = proxy.Shadow{Rate: 1, MaxPerSecond: 1000, Grace: -1}
	}
	if o.bus {
		e.startBus(t, caching)
	}
	var err error
	if e.proxy, err = proxy.New(proxy.Config{Logger: testLogger(t), Cache: caching}, e.up); err != nil {
		t.Fatal(err)
	}
	e.paddr = proxytest.Serve(t, e.proxy)
	if e.bus != nil {
		e.runBus(t)
	}

	cfg := Config{
		Logger:    testLogger(t),
		Token:     o.token,
		Flusher:   e.proxy,
		Store:     e.store,
		Calls:     e.proxy.Stats(),
		Upstreams: e.up,
		Clients:   e.proxy,
	}
	if o.registry != nil {
		cfg.Registerer = o.registry
	}
	if e.bus != nil {
		cfg.Bus = e.bus
	}
	if o.workers != nil {
		cfg.Workers = o.workers
	}
	if o.drain != nil {
		cfg.Drain = o.drain
	}
	if o.shadow {
		cfg.Shadow = e.proxy.ShadowStats()
	}
	if o.prune {
		cfg.Prune = e.proxy.PruneStats()
	}
	if o.changeFeed != nil {
		cfg.ChangeFeed = o.changeFeed
	}
	if o.warmUp {
		e.warm = newWarmUp(t, e.proxy)
		cfg.WarmUp = e.warm
	}
	if o.eventLog && e.demo != nil {
		caller := &hmsclient.Redialer{Addr: e.upAddr}
		t.Cleanup(func() { caller.Close() })
		p, err := eventlog.New(eventlog.Config{Caller: caller, Cursor: &eventlog.MemCursor{},
			Apply: func(ctx context.Context, ents []cache.Entity) { e.proxy.Flush(ctx, ents) }, Drop: e.proxy.DropAll})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Poll(context.Background()); err != nil {
			t.Fatal(err)
		}
		cfg.EventLog = p
	}
	e.admin, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	aln := listen(t)
	e.url = "http://" + aln.Addr().String()
	if o.listenAll {
		aln.Close()
		var err error
		if aln, err = net.Listen("tcp", "0.0.0.0:0"); err != nil {
			t.Fatal(err)
		}
		e.url = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(aln.Addr().(*net.TCPAddr).Port))
	}
	served := make(chan error, 1)
	go func() { served <- e.admin.Serve(aln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.admin.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v; want ErrServerClosed", err)
		}
	})
	return e
}

// startBus starts a redis-server and the node's bus, wired into caching
// as cmd/hmsproxy does; runBus runs it once the proxy exists.
func (e *env) startBus(t testing.TB, caching *proxy.Caching) {
	t.Helper()
	e.rs = redistest.Start(t)
	e.redis = redis.NewClient(&redis.Options{Addr: e.rs.Addr, MaxRetries: -1})
	t.Cleanup(func() { e.redis.Close() })
	var err error
	e.bus, err = coherence.New(coherence.Config{Client: e.redis, Group: caching.Upstream, NodeID: "node-a",
		Layout: coherence.Layout([]string{"thrift://hms-a:9083"}), Heartbeat: 100 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	caching.Coherence = e.bus
}

func (e *env) runBus(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.bus.Run(ctx, e.proxy)
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the bus to sync", e.bus.Synced)
}

func (e *env) client(t testing.TB) *hmsclient.Client {
	t.Helper()
	c, err := hmsclient.Dial(context.Background(), e.paddr, wire.Buffered)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// call makes one HMS call through the proxy and lets the store apply the
// admission, so that the next identical call can hit.
func (e *env) call(t testing.TB, c *hmsclient.Client, method string, args []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := e.calls()
	if _, err := c.Call(ctx, method, args); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	e.store.Wait()
	// The proxy counts a call once its reply is written, so the client
	// may see the reply first.
	waitFor(t, "the call to be counted", func() bool { return e.calls() > before })
}

// calls is the number of calls the proxy has counted.
func (e *env) calls() uint64 {
	var n uint64
	e.proxy.Stats().EachMethod(func(_ string, _ proxy.Outcome, c uint64) { n += c })
	return n
}

type httpResult struct {
	code int
	body string
	hdr  http.Header
}

func do(t testing.TB, method, url, token string) httpResult {
	t.Helper()
	return request(t, method, url, token, nil)
}

// request sends one request with token, if any, as its Authorization
// and returns the whole answer.
func request(t testing.TB, method, url, token string, body io.Reader) httpResult {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return httpResult{code: resp.StatusCode, body: string(b), hdr: resp.Header}
}

// serve serves an admin port of cfg on loopback until the test ends, and
// returns its base URL.
func serve(t *testing.T, cfg Config) string {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	go s.Serve(ln)
	t.Cleanup(func() { s.Shutdown(t.Context()) })
	return "http://" + ln.Addr().String()
}

// scrape reads /metrics: the value of every series, keyed as printed
// (name{labels}), and the set of families with a TYPE line.
func scrape(t testing.TB, url string) (series map[string]float64, families map[string]bool) {
	t.Helper()
	r := do(t, "GET", url+"/metrics", "")
	if r.code != http.StatusOK {
		t.Fatalf("GET /metrics: got %d; want 200", r.code)
	}
	series, families = map[string]float64{}, map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(r.body))
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			families[strings.Fields(f)[0]] = true
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample line %q: %v", line, err)
		}
		series[line[:i]] = v
	}
	return series, families
}

func getTable(db, tbl string) []byte { return hmsclient.Args(db, tbl) }

func partitionNames(db, tbl string) []byte {
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.I16(3, -1))
}

func TestMetrics(t *testing.T) {
	e := startEnv(t, envOpts{})
	c := e.client(t)
	for range 2 { // a miss, then a hit
		e.call(t, c, "get_table", getTable("demo_db0", "t0"))
	}
	for range 3 { // a miss, then two hits
		e.call(t, c, "get_all_databases", hmsclient.Args())
	}
	e.call(t, c, "no_such_method_anywhere", hmsclient.Args()) // "other", a write: it flushes (issue 10)
	// A name that is no valid UTF-8 once crashed the process at the next
	// scrape as a label value (issue 22): every unknown name is "other".
	e.call(t, c, "get_\xff\xfetable", hmsclient.Args())
	if r := do(t, "POST", e.url+"/cache/flush/demo_db1", ""); r.code != http.StatusOK {
		t.Fatalf("flush: got %d %s; want 200", r.code, r.body)
	}

	series, families := scrape(t, e.url)
	wantFamilies(t, families,
		"hmsproxy_requests_total",
		"hmsproxy_cache_requests_total",
		"hmsproxy_cache_bytes",
		"hmsproxy_cache_entries",
		"hmsproxy_cache_evictions_total",
		"hmsproxy_cache_admissions_total",
		"hmsproxy_cache_rejections_total",
		"hmsproxy_cache_stale_total",
		"hmsproxy_cache_discarded_loads_total",
		"hmsproxy_cache_flushes_total",
		"hmsproxy_unknown_method_flushes_total",
		"hmsproxy_cache_flush_calls_total",
		"hmsproxy_upstream_up",
		"hmsproxy_client_connections",
		"hmsproxy_request_duration_seconds",
		"go_goroutines",
		"process_open_fds",
	)
	wantSeries(t, series, map[string]float64{
		`hmsproxy_requests_total{method="get_table",outcome="miss"}`:                         1,
		`hmsproxy_requests_total{method="get_table",outcome="hit"}`:                          1,
		`hmsproxy_requests_total{method="get_all_databases",outcome="miss"}`:                 1,
		`hmsproxy_requests_total{method="get_all_databases",outcome="hit"}`:                  2,
		`hmsproxy_requests_total{method="other",outcome="write"}`:                            2,
		`hmsproxy_unknown_method_flushes_total{method="other"}`:                              2,
		`hmsproxy_cache_flush_calls_total{path="immediate"}`:                                 2, // within the default burst
		`hmsproxy_cache_flush_calls_total{path="coalesced"}`:                                 0,
		`hmsproxy_cache_requests_total{kind="table",outcome="miss"}`:                         1,
		`hmsproxy_cache_requests_total{kind="table",outcome="hit"}`:                          1,
		`hmsproxy_cache_requests_total{kind="database_names",outcome="hit"}`:                 2,
		`hmsproxy_cache_requests_total{kind="partition",outcome="hit"}`:                      0,
		`hmsproxy_cache_admissions_total{kind="table"}`:                                      1,
		`hmsproxy_cache_admissions_total{kind="database_names"}`:                             1,
		`hmsproxy_cache_entries{kind="table"}`:                                               1,
		`hmsproxy_cache_entries{kind="partition"}`:                                           0,
		`hmsproxy_cache_evictions_total{kind="table"}`:                                       0,
		`hmsproxy_cache_stale_total{kind="table"}`:                                           0,
		`hmsproxy_cache_discarded_loads_total{kind="table"}`:                                 0,
		`hmsproxy_cache_rejections_total{kind="table"}`:                                      0,
		`hmsproxy_cache_flushes_total{level="database"}`:                                     1,
		`hmsproxy_cache_flushes_total{level="all"}`:                                          0,
		`hmsproxy_upstream_up{upstream="` + e.upAddr + `"}`:                                  1,
		`hmsproxy_client_connections`:                                                        1,
		`hmsproxy_request_duration_seconds_count{method_class="read",path="hit"}`:            3,
		`hmsproxy_request_duration_seconds_count{method_class="read",path="miss"}`:           2,
		`hmsproxy_request_duration_seconds_bucket{method_class="read",path="hit",le="+Inf"}`: 3,
		`hmsproxy_request_duration_seconds_count{method_class="passthrough",path="write"}`:   2,
	})
	if v := series[`hmsproxy_cache_bytes{kind="table"}`]; v <= 0 {
		t.Errorf(`hmsproxy_cache_bytes{kind="table"} = %v; want > 0`, v)
	}
	for s := range series {
		if strings.HasPrefix(s, "hmsproxy_cache_bytes{") && strings.Contains(s, `kind="none"`) {
			t.Errorf("kind none exported: %s", s)
		}
	}
}

// TestFlush: each flush endpoint invalidates what it names and nothing
// the level does not cover.
func TestFlush(t *testing.T) {
	e := startEnv(t, envOpts{})
	c := e.client(t)
	tests := []struct {
		name, path  string
		wantFlushed string
		wantLevel   string
		method      string // the read checked after the flush
		args        []byte
		reload      bool // the read must go to the metastore again
	}{
		{"table", "/cache/flush/demo_db0/t0", "hive.demo_db0.t0", "table", "get_table", getTable("demo_db0", "t0"), true},
		{"table names lower-cased", "/cache/flush/DEMO_DB0/T0", "hive.demo_db0.t0", "table", "get_table", getTable("demo_db0", "t0"), true},
		{"other table", "/cache/flush/demo_db0/t1", "hive.demo_db0.t1", "table", "get_table", getTable("demo_db0", "t0"), false},
		{"other catalog", "/cache/flush/demo_db0/t0?catalog=Spark", "spark.demo_db0.t0", "table", "get_table", getTable("demo_db0", "t0"), false},
		{"explicit catalog", "/cache/flush/demo_db0/t0?catalog=HIVE", "hive.demo_db0.t0", "table", "get_table", getTable("demo_db0", "t0"), true},
		{"database", "/cache/flush/demo_db0", "hive.demo_db0", "database", "get_table", getTable("demo_db0", "t0"), true},
		{"other database", "/cache/flush/demo_db1", "hive.demo_db1", "database", "get_table", getTable("demo_db0", "t0"), false},
		{"partitions", "/cache/flush/demo_db0/t0/partitions", "hive.demo_db0.t0", "partitions", "get_partition_names", partitionNames("demo_db0", "t0"), true},
		{"partitions keep the table", "/cache/flush/demo_db0/t0/partitions", "hive.demo_db0.t0", "partitions", "get_table", getTable("demo_db0", "t0"), false},
		{"all", "/cache/flush", "all", "all", "get_table", getTable("demo_db0", "t0"), true},
		{"all, lists too", "/cache/flush", "all", "all", "get_all_databases", hmsclient.Args(), true},
	}
	flushes := map[string]float64{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Warm the entry and check that it is served from the cache.
			e.call(t, c, tc.method, tc.args)
			before := e.demo.CallCount(tc.method)
			e.call(t, c, tc.method, tc.args)
			if n := e.demo.CallCount(tc.method) - before; n != 0 {
				t.Fatalf("%s not cached before the flush: metastore saw %d calls", tc.method, n)
			}

			r := do(t, "POST", e.url+tc.path, "")
			if r.code != http.StatusOK {
				t.Fatalf("POST %s: got %d %s; want 200", tc.path, r.code, r.body)
			}
			var got map[string]string
			if err := json.Unmarshal([]byte(r.body), &got); err != nil {
				t.Fatalf("POST %s: body %q: %v", tc.path, r.body, err)
			}
			if got["flushed"] != tc.wantFlushed || got["level"] != tc.wantLevel {
				t.Errorf("POST %s: got %v; want flushed %q level %q", tc.path, got, tc.wantFlushed, tc.wantLevel)
			}
			flushes[tc.wantLevel]++

			before = e.demo.CallCount(tc.method)
			e.call(t, c, tc.method, tc.args)
			want := 0
			if tc.reload {
				want = 1
			}
			if n := e.demo.CallCount(tc.method) - before; n != want {
				t.Errorf("after POST %s the metastore saw %d %s calls; want %d", tc.path, n, tc.method, want)
			}
		})
	}
	series, _ := scrape(t, e.url)
	for level, n := range flushes {
		s := `hmsproxy_cache_flushes_total{level="` + level + `"}`
		if series[s] != n {
			t.Errorf("%s = %v; want %v", s, series[s], n)
		}
	}
}

func TestAuthAndMethods(t *testing.T) {
	const token = "s3cret-token"
	secured := startEnv(t, envOpts{token: token})
	open := startEnv(t, envOpts{})
	tests := []struct {
		name   string
		e      *env
		method string
		path   string
		auth   string
		want   int
	}{
		{"flush without token", secured, "POST", "/cache/flush/demo_db0/t0", "", 401},
		{"flush with wrong token", secured, "POST", "/cache/flush/demo_db0/t0", "Bearer nope", 401},
		{"flush with token prefix", secured, "POST", "/cache/flush/demo_db0/t0", "Bearer s3cret", 401},
		{"flush with basic auth", secured, "POST", "/cache/flush/demo_db0/t0", "Basic czNjcmV0LXRva2Vu", 401},
		{"flush with token", secured, "POST", "/cache/flush/demo_db0/t0", "Bearer " + token, 200},
		{"flush all with token", secured, "POST", "/cache/flush", "Bearer " + token, 200},
		{"partitions with token", secured, "POST", "/cache/flush/demo_db0/t0/partitions", "Bearer " + token, 200},
		{"unknown cache path without token", secured, "GET", "/cache/nothing", "", 401},
		{"GET flush without token", secured, "GET", "/cache/flush", "", 401},
		{"GET flush with token", secured, "GET", "/cache/flush", "Bearer " + token, 405},
		{"DELETE table flush with token", secured, "DELETE", "/cache/flush/demo_db0/t0", "Bearer " + token, 405},
		{"metrics stay open", secured, "GET", "/metrics", "", 200},
		{"healthz stays open", secured, "GET", "/healthz", "", 200},
		{"open flush", open, "POST", "/cache/flush/demo_db0", "", 200},
		{"open GET flush", open, "GET", "/cache/flush/demo_db0", "", 405},
		{"open PUT flush", open, "PUT", "/cache/flush", "", 405},
		{"POST metrics", open, "POST", "/metrics", "", 405},
		{"unknown path", open, "GET", "/nothing", "", 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, tc.method, tc.e.url+tc.path, tc.auth)
			if r.code != tc.want {
				t.Fatalf("%s %s: got %d %q; want %d", tc.method, tc.path, r.code, r.body, tc.want)
			}
			if r.code == 401 && !strings.HasPrefix(r.hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without a Bearer challenge: %q", r.hdr.Get("WWW-Authenticate"))
			}
			if r.code == 405 && r.hdr.Get("Allow") == "" && tc.path != "/cache/nothing" {
				t.Errorf("405 without Allow header")
			}
		})
	}
	series, _ := scrape(t, secured.url)
	if n := series[`hmsproxy_cache_flushes_total{level="table"}`]; n != 1 {
		t.Errorf("secured table flushes = %v; want 1 (refused requests are not flushes)", n)
	}
}

func TestHealthz(t *testing.T) {
	tests := []struct {
		name     string
		deadUp   bool
		wantCode int
		wantBody string
		wantUp   float64
	}{
		{"upstream healthy", false, 200, "ok\n", 1},
		{"upstream down", true, 503, "no healthy metastore\n", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := startEnv(t, envOpts{deadUp: tc.deadUp})
			// The first health check runs in the background at start.
			var r httpResult
			wait.Until(5*time.Second, func() bool {
				r = do(t, "GET", e.url+"/healthz", "")
				return r.code == tc.wantCode
			})
			if r.code != tc.wantCode || r.body != tc.wantBody {
				t.Fatalf("GET /healthz: got %d %q; want %d %q", r.code, r.body, tc.wantCode, tc.wantBody)
			}
			series, _ := scrape(t, e.url)
			s := `hmsproxy_upstream_up{upstream="` + e.upAddr + `"}`
			if series[s] != tc.wantUp {
				t.Errorf("%s = %v; want %v", s, series[s], tc.wantUp)
			}
		})
	}
}

// TestUpstreamGoesDown: /healthz follows the health checker when the only
// metastore stops.
func TestUpstreamGoesDown(t *testing.T) {
	e := startEnv(t, envOpts{})
	if r := do(t, "GET", e.url+"/healthz", ""); r.code != 200 {
		t.Fatalf("GET /healthz before: got %d; want 200", r.code)
	}
	e.demo.Close()
	var r httpResult
	if wait.Until(5*time.Second, func() bool {
		r = do(t, "GET", e.url+"/healthz", "")
		return r.code == 503
	}) {
		return
	}
	t.Fatalf("GET /healthz after the metastore stopped: got %d; want 503", r.code)
}

func TestNewConfig(t *testing.T) {
	reg := prometheus.NewRegistry()
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"zero value", Config{}, false},
		{"registry", Config{Registerer: reg}, false},
		{"registerer without gatherer", Config{Registerer: prometheus.WrapRegistererWithPrefix("x_", reg)}, true},
		{"gatherer without registerer", Config{Gatherer: reg}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("New: got err %v; want error %v", err, tc.wantErr)
			}
			if s != nil {
				for range 2 { // safe twice, and without Serve
					if err := s.Shutdown(context.Background()); err != nil {
						t.Errorf("Shutdown: %v", err)
					}
				}
			}
		})
	}
}

// TestSharedRegistry: the caller's registry gets the collectors, a second
// server on it is refused while the first runs, and Shutdown releases them.
func TestSharedRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := startEnv(t, envOpts{registry: reg})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		found = found || mf.GetName() == "hmsproxy_client_connections"
	}
	if !found {
		t.Error("hmsproxy_client_connections not in the caller's registry")
	}
	if _, err := New(Config{Registerer: reg, Clients: e.proxy}); err == nil {
		t.Error("second server on one registry: got nil error; want a registration error")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.admin.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Registerer: reg, Clients: e.proxy})
	if err != nil {
		t.Fatalf("New after Shutdown released the registry: %v", err)
	}
	s.Shutdown(ctx)
}

// wantFamilies fails the test for each of names missing from the
// families of a scrape.
func wantFamilies(t testing.TB, families map[string]bool, names ...string) {
	t.Helper()
	for _, f := range names {
		if !families[f] {
			t.Errorf("family %s missing from /metrics", f)
		}
	}
}

// wantSeries fails the test for each series of want that the series of a
// scrape lack or hold at another value.
func wantSeries(t testing.TB, series, want map[string]float64) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if got, ok := series[name]; !ok || got != want[name] {
			t.Errorf("%s = %v (present %v); want %v", name, got, ok, want[name])
		}
	}
}
