// Package fleet tests hmsproxy run as a fleet (issue 15): three real
// nodes behind a real HAProxy that health-checks /readyz, restarted one
// at a time under a client load, and scraped by a real Prometheus.
// scripts/fleet-check.sh (make fleet-check) installs the tools and runs
// it; without HMSPROXY_FLEET=1 it is skipped.
package fleet

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proctest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

var waitFor = proxytest.Eventually

// TestMain removes the hmsproxy binary the test built.
func TestMain(m *testing.M) {
	os.Exit(proctest.Run(m))
}

// TestFleetBehindHAProxy: clients that retry as the Java metastore
// client does see no failed call and no stale read while one node of
// three is restarted with SIGTERM and another killed with SIGKILL
// behind HAProxy; a real Prometheus scraping the nodes answers every
// query of dashboards/hmsproxy.json with series, and fires the alert for
// a node cut from Redis.
func TestFleetBehindHAProxy(t *testing.T) {
	if os.Getenv("HMSPROXY_FLEET") == "" {
		t.Skip("the fleet test needs HAProxy and Prometheus: run scripts/fleet-check.sh (make fleet-check)")
	}
	haproxyBin := os.Getenv("HMSPROXY_HAPROXY")
	if haproxyBin == "" {
		t.Fatal("HMSPROXY_FLEET set without HMSPROXY_HAPROXY")
	}
	t0 := time.Now()
	bin := proctest.Hmsproxy(t)
	r := redistest.Start(t)
	_, metastore := proxytest.Demo(t, proxytest.DemoOptions{})

	nodes := make([]*node, 3)
	for i := range nodes {
		nodes[i] = &node{name: fmt.Sprintf("n%d", i), listen: freeAddr(t), admin: freeAddr(t),
			relay: redistest.NewRelay(t, r.Addr), bin: bin, metastore: metastore}
		nodes[i].start(t)
	}
	for _, n := range nodes {
		waitFor(t, n.name+" ready", n.ready)
	}
	lb := startHAProxy(t, haproxyBin, nodes)
	waitFor(t, "every node UP in HAProxy", func() bool { return lb.countUp(t) == 3 })
	var prom *prometheus
	if bin := os.Getenv("HMSPROXY_PROMETHEUS"); bin != "" {
		prom = startPrometheus(t, bin, nodes)
	} else {
		t.Log("SKIP the Prometheus part: HMSPROXY_PROMETHEUS is empty (scripts/fleet-check.sh says why)")
	}
	t.Logf("started in %v: 3 nodes, redis, HAProxy%s", time.Since(t0).Round(time.Millisecond), map[bool]string{true: ", Prometheus"}[prom != nil])

	setup, err := hmsclient.Dial(proxytest.Ctx(t), nodes[0].listen, wire.Buffered)
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	proxytest.Call(t, setup, "create_table", hmsreq.Args(table(0).Field(1)))

	ld := startLoad(t, lb.addr, nodes[0].listen)
	// Two seconds of load before the restarts warm the caches of every
	// node, and give the dashboards a level to compare with: a measured
	// span of load.
	time.Sleep(2 * time.Second)
	if prom != nil {
		refuseSome(t, nodes[0].listen) // the errors panel's series begins
	}

	// Rolling restart of n1: SIGTERM drains it (readiness false, HAProxy
	// takes it out, then its listener closes), and it comes back.
	restartStart := time.Now()
	n1 := nodes[1]
	n1.proc.Cmd.Process.Signal(syscall.SIGTERM)
	sawDown := false
	if !wait.Poll(time.Minute, 50*time.Millisecond, func() bool {
		if !sawDown && lb.status(t, n1.name) != "UP" {
			sawDown = true
		}
		return n1.proc.Exited()
	}) {
		t.Fatal("n1 did not exit within a minute of SIGTERM")
	}
	if code := n1.proc.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("n1 exited %d after SIGTERM; want 0", code)
	}
	if !sawDown {
		t.Errorf("HAProxy never took n1 out before it exited: its drain delay did not fail readiness first")
	}
	drained := time.Since(restartStart)
	n1.start(t)
	waitFor(t, "n1 back UP in HAProxy", func() bool { return lb.status(t, n1.name) == "UP" })
	restartEnd := time.Now()
	time.Sleep(time.Second) // a measured span of load between the phases

	// n2 dies without a word.
	killStart := time.Now()
	n2 := nodes[2]
	n2.proc.Stop(syscall.SIGKILL, time.Minute)
	waitFor(t, "HAProxy takes n2 out", func() bool { return lb.status(t, n2.name) != "UP" })
	n2.start(t)
	waitFor(t, "n2 back UP in HAProxy", func() bool { return lb.status(t, n2.name) == "UP" })
	killEnd := time.Now()
	if prom != nil {
		refuseSome(t, nodes[0].listen) // and grows: a rate
	}
	time.Sleep(time.Second) // a measured span of load after the last phase
	res := ld.stop()

	t.Logf("n1 SIGTERM to exit %v (drain delay 2s), back UP %v after the SIGTERM; n2 SIGKILL to back UP %v",
		drained.Round(time.Millisecond), restartEnd.Sub(restartStart).Round(time.Millisecond), killEnd.Sub(killStart).Round(time.Millisecond))
	t.Logf("load: %d reads through HAProxy, %d writes through n0; failed calls %d; stale reads %d; transport errors retried %d",
		res.reads, res.writes, res.failed, res.stale, res.retried)
	t.Logf("read latency p50 %v, p99 %v overall; p99 %v during the SIGTERM restart, %v during the SIGKILL; write p99 %v overall, %v during the SIGKILL",
		res.quantile(res.readLat, 0.5, time.Time{}, time.Time{}), res.quantile(res.readLat, 0.99, time.Time{}, time.Time{}),
		res.quantile(res.readLat, 0.99, restartStart, restartEnd), res.quantile(res.readLat, 0.99, killStart, killEnd),
		res.quantile(res.writeLat, 0.99, time.Time{}, time.Time{}), res.quantile(res.writeLat, 0.99, killStart, killEnd))
	if res.failed != 0 {
		t.Errorf("%d calls failed for clients retrying as the Java client does; want 0 (first: %v)", res.failed, res.firstErr)
	}
	if res.stale != 0 {
		t.Errorf("%d reads through HAProxy older than a write through n0 that had returned before they began; want 0", res.stale)
	}
	if res.reads < 1000 || res.writes < 100 {
		t.Errorf("load too small to tell: %d reads, %d writes", res.reads, res.writes)
	}
	if res.retried == 0 {
		t.Errorf("no client saw a transport error: the restarts did not reach the clients, the test proved nothing")
	}

	if prom != nil {
		prom.checkDashboard(t)
		// A node cut from Redis: its bus stops, and the alert fires. The
		// SIGKILL left a silent peer that stopped every bus until it was
		// forgotten: first every node is synced and the alert resolved.
		waitFor(t, "every node synced, the alert not firing", func() bool {
			n, err := prom.query(t, "hmsproxy_bus_synced == 1")
			return err == nil && n == 3 && !prom.firing(t, "HmsproxyBusNotSynced", n2.admin)
		})
		n2.relay.Cut()
		at := time.Now()
		waitFor(t, "HmsproxyBusNotSynced firing for n2", func() bool { return prom.firing(t, "HmsproxyBusNotSynced", n2.admin) })
		t.Logf("HmsproxyBusNotSynced firing for n2 %v after its cut from Redis (for: 2s, scrape and evaluation 1s)", time.Since(at).Round(time.Millisecond))
		n2.relay.Restore()
	}
	t.Logf("fleet test took %v", time.Since(t0).Round(time.Millisecond))
}

// refuseSome makes calls that n0 refuses: a rate limit of one "other"
// call a second on every node refuses most of a burst of five, counted
// as errors for the dashboard's errors panel.
func refuseSome(t *testing.T, addr string) {
	t.Helper()
	c, err := hmsclient.Dial(proxytest.Ctx(t), addr, wire.Buffered)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 5 {
		proxytest.Call(t, c, "getStatus", hmsclient.Args())
	}
}

// table is the test's table at version v (the parameter "v").
func table(v int64) hmsreq.Table {
	return hmsreq.Table{DB: "demo_db0", Name: "fleet", Owner: "tester", CreateTime: 1700000000,
		SD:     hmsreq.TextSD("file:/tmp/wh/demo_db0.db/fleet", hmsreq.Column{Name: "id", Type: "bigint"}),
		Params: map[string]string{"v": strconv.FormatInt(v, 10)}}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln := proxytest.Listen(t)
	defer ln.Close()
	return ln.Addr().String()
}

// node is one hmsproxy process; restarted, it keeps its ports.
type node struct {
	name, listen, admin string
	relay               *redistest.Relay // its way to Redis, cut to cut it off
	bin, metastore      string

	proc *proctest.Proc
}

func (n *node) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(n.bin, "--upstream.uris", "thrift://"+n.metastore, "--listen", n.listen, "--admin.listen", n.admin,
		"--redis.url", n.relay.Addr, "--redis.heartbeat", "200ms", "--redis.peer_gone", "5s",
		"--shutdown.drain_delay", "2s", "--shutdown.timeout", "10s", "--upstream.health_interval", "500ms",
		"--eventlog.interval", "1s", "--ratelimit.other.rate", "1", "--log.format", "json", "--log.level", "warn")
	n.proc = proctest.Start(t, n.name, cmd, os.Kill, 0)
}

func (n *node) ready() bool {
	resp, err := http.Get("http://" + n.admin + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// haproxy is a real HAProxy in tcp mode before the nodes.
type haproxy struct {
	addr  string // the clients' address
	stats string // the CSV stats URL
}

func startHAProxy(t *testing.T, bin string, nodes []*node) *haproxy {
	t.Helper()
	h := &haproxy{addr: freeAddr(t)}
	statsAddr := freeAddr(t)
	h.stats = "http://" + statsAddr + "/stats;csv"
	var cfg strings.Builder
	// Checks every 300ms, two to fall or rise: a node failing /readyz is
	// out within 0.6-0.9 s, inside its 2 s drain delay. A connection the
	// chosen node refuses is retried and redispatched to another.
	fmt.Fprintf(&cfg, `global
    maxconn 2000
defaults
    mode tcp
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    retries 3
    option redispatch
frontend stats
    mode http
    bind %s
    stats enable
    stats uri /stats
frontend hms
    bind %s
    default_backend nodes
backend nodes
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz
    http-check expect status 200
    default-server inter 300ms fall 2 rise 2
`, statsAddr, h.addr)
	for _, n := range nodes {
		_, port, _ := net.SplitHostPort(n.admin)
		fmt.Fprintf(&cfg, "    server %s %s check port %s\n", n.name, n.listen, port)
	}
	p := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(p, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	proctest.Start(t, "haproxy", exec.Command(bin, "-f", p, "-db"), syscall.SIGTERM, 5*time.Second)
	return h
}

// status is a server's status in HAProxy's stats ("UP", "DOWN", ...).
func (h *haproxy) status(t *testing.T, server string) string {
	t.Helper()
	rows := h.rows(t)
	for _, r := range rows {
		if r["pxname"] == "nodes" && r["svname"] == server {
			return r["status"]
		}
	}
	return ""
}

func (h *haproxy) countUp(t *testing.T) int {
	n := 0
	for _, r := range h.rows(t) {
		if r["pxname"] == "nodes" && r["svname"] != "BACKEND" && r["status"] == "UP" {
			n++
		}
	}
	return n
}

func (h *haproxy) rows(t *testing.T) []map[string]string {
	t.Helper()
	resp, err := http.Get(h.stats)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	recs, err := csv.NewReader(resp.Body).ReadAll()
	if err != nil || len(recs) == 0 {
		return nil
	}
	head := recs[0]
	head[0] = strings.TrimPrefix(head[0], "# ")
	var rows []map[string]string
	for _, rec := range recs[1:] {
		m := map[string]string{}
		for i, v := range rec {
			if i < len(head) {
				m[head[i]] = v
			}
		}
		rows = append(rows, m)
	}
	return rows
}

// retrying is a client that handles failures as Hive's
// RetryingMetaStoreClient does with its defaults: on a transport error
// it waits hive.metastore.client.connect.retry.delay (1s), reconnects
// (hive.metastore.connect.retries, 3 attempts) and retries the call,
// at most hive.metastore.failure.retries (1) times.
type retrying struct {
	addr    string
	c       *hmsclient.Client
	retried *atomic.Int64
}

const (
	retryDelay      = time.Second
	failureRetries  = 1
	connectAttempts = 3
	callTimeout     = 20 * time.Second
)

// call makes the call; fn reads the reply before the next call.
func (r *retrying) call(method string, args []byte, fn func(wire.Message) error) error {
	var err error
	for attempt := 0; ; attempt++ {
		if err = r.open(); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			var m wire.Message
			m, err = r.c.Call(ctx, method, args)
			cancel()
			if err == nil {
				return fn(m)
			}
			r.c.Close()
			r.c = nil
		}
		if attempt >= failureRetries {
			return err
		}
		r.retried.Add(1)
		time.Sleep(retryDelay) // a client's backoff, as the Hive client's
	}
}

func (r *retrying) open() error {
	if r.c != nil {
		return nil
	}
	var err error
	for i := range connectAttempts {
		if i > 0 {
			time.Sleep(retryDelay) // a client's backoff, as the Hive client's
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.c, err = hmsclient.Dial(ctx, r.addr, wire.Buffered)
		cancel()
		if err == nil {
			return nil
		}
	}
	return err
}

func (r *retrying) close() {
	if r.c != nil {
		r.c.Close()
	}
}

type sample struct {
	at time.Time // when the call began
	d  time.Duration
}

// load is readers through HAProxy and one writer through n0.
type load struct {
	stopc chan struct{}
	wg    sync.WaitGroup

	committed atomic.Int64 // the last version whose write returned
	retried   atomic.Int64
	mu        sync.Mutex // guards the fields below
	res       loadResult
}

type loadResult struct {
	reads, writes, failed, stale int
	retried                      int64
	firstErr                     error
	readLat, writeLat            []sample
}

const readers = 6

func startLoad(t *testing.T, lbAddr, writerAddr string) *load {
	l := &load{stopc: make(chan struct{})}
	l.committed.Store(0)
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "fleet"))
	for range readers {
		l.wg.Go(func() {
			c := &retrying{addr: lbAddr, retried: &l.retried}
			defer c.close()
			for !l.stopped(2 * time.Millisecond) {
				want := l.committed.Load()
				start := time.Now()
				var got int64
				err := c.call("get_table", get, func(m wire.Message) error {
					v, ok := proxytest.TableParam(m.Buf, "v")
					if !ok {
						return errors.New("no table in the reply")
					}
					got, _ = strconv.ParseInt(v, 10, 64)
					return nil
				})
				l.record(&l.res.readLat, &l.res.reads, start, err, got < want)
			}
		})
	}
	l.wg.Go(func() {
		c := &retrying{addr: writerAddr, retried: &l.retried}
		defer c.close()
		for v := int64(1); !l.stopped(10 * time.Millisecond); v++ {
			start := time.Now()
			err := c.call("alter_table", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "fleet"), table(v).Field(3)),
				func(m wire.Message) error {
					if m.Type != wire.Reply {
						return fmt.Errorf("alter_table: message type %d", m.Type)
					}
					return nil
				})
			if err == nil {
				l.committed.Store(v)
			}
			l.record(&l.res.writeLat, &l.res.writes, start, err, false)
		}
	})
	t.Cleanup(func() { l.stop() })
	return l
}

// stopped waits d, or reports that the load is over.
func (l *load) stopped(d time.Duration) bool {
	select {
	case <-l.stopc:
		return true
	case <-time.After(d):
		return false
	}
}

func (l *load) record(lat *[]sample, n *int, start time.Time, err error, stale bool) {
	d := time.Since(start)
	l.mu.Lock()
	defer l.mu.Unlock()
	*n++
	if err != nil {
		l.res.failed++
		if l.res.firstErr == nil {
			l.res.firstErr = err
		}
		return
	}
	if stale {
		l.res.stale++
	}
	*lat = append(*lat, sample{start, d})
}

func (l *load) stop() loadResult {
	select {
	case <-l.stopc:
	default:
		close(l.stopc)
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.res
	r.retried = l.retried.Load()
	return r
}

// quantile of the latencies of calls begun within [from, to] (all when
// zero).
func (loadResult) quantile(s []sample, q float64, from, to time.Time) time.Duration {
	var ds []time.Duration
	for _, x := range s {
		if from.IsZero() || !x.at.Before(from) && !x.at.After(to) {
			ds = append(ds, x.d)
		}
	}
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))].Round(10 * time.Microsecond)
}

// prometheus is a real Prometheus scraping the nodes every second, with
// the shipped alert rules whose for: durations are cut to 2s.
type prometheus struct {
	url string
}

var forDuration = regexp.MustCompile(`(?m)^(\s+for:\s*)\S+`)

func startPrometheus(t *testing.T, bin string, nodes []*node) *prometheus {
	t.Helper()
	dir := t.TempDir()
	rules, err := os.ReadFile("../../deploy/prometheus/hmsproxy-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rules = forDuration.ReplaceAll(rules, []byte("${1}2s"))
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o600); err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, n := range nodes {
		targets = append(targets, strconv.Quote(n.admin))
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yaml]
scrape_configs:
  - job_name: hmsproxy
    static_configs:
      - targets: [%s]
`, strings.Join(targets, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	proctest.Start(t, "prometheus", exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn"), syscall.SIGTERM, 5*time.Second)
	p := &prometheus{url: "http://" + addr}
	waitFor(t, "prometheus ready", func() bool {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return p
}

// query runs an instant query and returns how many series it gave.
func (p *prometheus) query(t *testing.T, q string) (int, error) {
	t.Helper()
	resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string
		Error  string
		Data   struct{ Result []json.RawMessage }
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("%s", body.Error)
	}
	return len(body.Data.Result), nil
}

// checkDashboard runs every query of the dashboard, its variables
// replaced as Grafana would ($instance: all; $__rate_interval: 30s).
func (p *prometheus) checkDashboard(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("../../dashboards/hmsproxy.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct{ Panels []panel }
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				if tg.Expr != "" {
					exprs = append(exprs, tg.Expr)
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	repl := strings.NewReplacer("$instance", ".*", "$__rate_interval", "30s")
	empty := 0
	for _, e := range exprs {
		q := repl.Replace(e)
		var n int
		var err error
		// A rate needs two scrapes after what it counts: a few seconds.
		wait.Poll(5*time.Second, 200*time.Millisecond, func() bool {
			n, err = p.query(t, q)
			return n > 0
		})
		if err != nil || n == 0 {
			empty++
			t.Errorf("dashboard query returns no series (err %v): %s", err, q)
		}
	}
	t.Logf("dashboard: %d of %d queries return series through Prometheus's /api/v1/query", len(exprs)-empty, len(exprs))
}

type panel struct {
	Targets []struct{ Expr string }
	Panels  []panel
}

// firing reports whether alert is firing for instance.
func (p *prometheus) firing(t *testing.T, alert, instance string) bool {
	t.Helper()
	resp, err := http.Get(p.url + "/api/v1/alerts")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string
				State  string
			}
		}
	}
	if json.NewDecoder(resp.Body).Decode(&body) != nil {
		return false
	}
	for _, a := range body.Data.Alerts {
		if a.Labels["alertname"] == alert && a.Labels["instance"] == instance && a.State == "firing" {
			return true
		}
	}
	return false
}
