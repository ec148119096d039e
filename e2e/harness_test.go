// Package e2e runs hmsproxy against real Hive Metastores (2.3 from
// PySpark's jars, 3.1 and 4.0 from Maven Central) that testbed/hms.sh
// fetches and starts, with real clients through the proxy. It runs when
// HMSPROXY_E2E lists the versions ("2.3,3.1,4.0"); make e2e sets it.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proctest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// metastore is one real HMS process, shared by the tests of its version.
type metastore struct {
	version string
	addr    string
	work    string // its work directory
	hms     *proctest.Metastore
	err     error
}

var (
	msMu   sync.Mutex // guards stores
	stores = map[string]*metastore{}
	// basePort spaces the versions' ports apart, below Linux's ephemeral
	// range (32768-60999): a port in it can be any outgoing connection's
	// local port at the moment a metastore binds.
	basePort = map[string]int{"2.3": 29083, "3.1": 29183, "4.0": 29283}
)

func versions(t *testing.T) []string {
	v := os.Getenv("HMSPROXY_E2E")
	if v == "" {
		t.Skip("HMSPROXY_E2E not set (make e2e sets it)")
	}
	return strings.Split(v, ",")
}

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Dir(wd)
}

// start returns the running metastore of version v, starting it once.
func start(t *testing.T, v string) *metastore {
	t.Helper()
	return startShared(t, v, v, 0)
}

// startShared returns the metastore of version v known as key, starting
// it once on the version's port plus delta, with env added to hms.sh's
// environment (a variant such as the filter hook).
func startShared(t *testing.T, v, key string, delta int, env ...string) *metastore {
	t.Helper()
	msMu.Lock()
	defer msMu.Unlock()
	if ms, ok := stores[key]; ok {
		if ms.err != nil {
			t.Fatalf("HMS %s did not start earlier: %v", key, ms.err)
		}
		return ms
	}
	port := proctest.PortOffset(basePort[v] + delta)
	// Two keys on one port: the second start fails on a busy port (CI once
	// lost TestPartitionLimitReal that way, behind the filter hook's
	// metastore); say which test chose the port.
	for other, ms := range stores {
		if ms.addr == fmt.Sprintf("127.0.0.1:%d", port) {
			t.Fatalf("HMS %s would take port %d of HMS %s: give it another delta", key, port, other)
		}
	}
	ms := &metastore{version: v, addr: fmt.Sprintf("127.0.0.1:%d", port)}
	stores[key] = ms
	begin := time.Now()
	ms.hms, ms.err = proctest.StartMetastore(t, "hmsproxy-e2e-"+strings.ReplaceAll(key, "+", "-"), v, port, env...)
	if ms.err != nil {
		t.Fatal(ms.err)
	}
	ms.work = ms.hms.Work
	fmt.Printf("e2e: HMS %s started on %s in %v\n", key, ms.addr, time.Since(begin).Round(100*time.Millisecond))
	return ms
}

// atExit lists what stopAll stops besides metastores (a KDC). Guarded by msMu.
var atExit []func()

// stopAll stops every metastore started by the tests.
func stopAll() {
	msMu.Lock()
	defer msMu.Unlock()
	for _, f := range atExit { // before the work directories go
		f()
	}
	for v, ms := range stores {
		if ms.hms != nil {
			ms.hms.Stop(false)
			fmt.Printf("e2e: HMS %s stopped\n", v)
		}
	}
}

func TestMain(m *testing.M) {
	code := proctest.Run(m)
	stopAll()
	os.Exit(code)
}

// node is an in-process hmsproxy in front of a metastore.
type node struct {
	addr  string
	srv   *proxy.Server
	store *cache.Store
	bus   *coherence.Bus // nodeOpts.bus
}

type nodeOpts struct {
	noCache bool
	bus     *coherence.Bus
	// kinds, when set, replaces cache.DefaultKinds (e.g. to cache
	// KindOther, which the defaults leave uncached).
	kinds *[cache.NumKinds]cache.KindConfig
	// scope is cache.scope; zero: auto.
	scope proxy.ScopeMode
	// maxConns, when set, bounds the upstream connections (default 64).
	maxConns int
	// shadow, when set, replaces the default shadow validation.
	shadow *proxy.Shadow
	// ttlUnlogged is cache.ttl_without_eventlog for the kinds the
	// metastore's unlogged writes change; zero: no bound.
	ttlUnlogged time.Duration
}

func startProxy(t *testing.T, ms *metastore, o nodeOpts) *node {
	t.Helper()
	g := proxytest.Group(t, upstream.Config{MaxConns: o.maxConns}, ms.addr)
	n := &node{bus: o.bus}
	cfg := proxy.Config{Logger: proxytest.Logger(t)}
	if !o.noCache {
		var kinds [cache.NumKinds]cache.KindConfig // zero: the defaults
		if o.kinds != nil {
			kinds = *o.kinds
		}
		n.store = proxytest.Store(t, cache.Config{Kinds: kinds})
		cfg.Cache = &proxy.Caching{Store: n.store, Upstream: ms.addr, Scope: o.scope, TTLUnlogged: o.ttlUnlogged}
		if o.bus != nil {
			cfg.Cache.Coherence = o.bus
		}
		if o.shadow != nil {
			cfg.Cache.Shadow = *o.shadow
		}
	}
	var err error
	if n.srv, err = proxy.New(cfg, g); err != nil {
		t.Fatal(err)
	}
	n.addr = proxytest.Serve(t, n.srv)
	return n
}

// startBusNodes runs count caching proxies in front of ms that share
// invalidations over a fresh Redis; their buses run until the test ends
// and are in sync, every node knowing the others, when it returns.
func startBusNodes(t *testing.T, ms *metastore, count int) []*node {
	t.Helper()
	r := redistest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() }) // before the proxies stop
	nodes := make([]*node, count)
	for i := range nodes {
		bus, err := coherence.New(coherence.Config{Client: r.Client(), Group: ms.addr, Heartbeat: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = startProxy(t, ms, nodeOpts{bus: bus})
		wg.Go(func() { bus.Run(ctx, nodes[i].srv) })
	}
	for i, n := range nodes {
		proxytest.Eventually(t, fmt.Sprintf("node %d's bus to sync", i), func() bool { return n.bus.Synced() && len(n.bus.Peers()) == count-1 })
	}
	return nodes
}

func dial(t *testing.T, addr string) *hmsclient.Client {
	return proxytest.Dial(t, addr, wire.Buffered)
}

// call makes one call with a generous timeout (a cold metastore is slow)
// and returns a copy of the whole reply.
func call(t *testing.T, c *hmsclient.Client, method string, args []byte) []byte {
	t.Helper()
	return proxytest.CallWithin(t, 2*time.Minute, c, method, args)
}

// counted returns once the proxy has counted every call answered on c:
// it counts a call after writing its reply and before reading the
// connection's next, so the reply to one more call means the count is in.
func counted(t *testing.T, c *hmsclient.Client) {
	t.Helper()
	call(t, c, "getVersion", hmsreq.Args())
}

// sameButSeqID compares two whole messages, seqid aside.
func sameButSeqID(a, b []byte) bool {
	ma, errA := wire.Parse(a, wire.Limits{MaxMessage: 1 << 30})
	mb, errB := wire.Parse(b, wire.Limits{MaxMessage: 1 << 30})
	return errA == nil && errB == nil && ma.Type == mb.Type &&
		string(ma.Name()) == string(mb.Name()) && string(ma.Body()) == string(mb.Body())
}

// outcome names a reply's result: "ok", "ex<field>" for a declared
// exception, or "app<code>" for a TApplicationException.
func outcome(t *testing.T, reply []byte) string {
	t.Helper()
	m, err := wire.Parse(reply, wire.Limits{MaxMessage: 1 << 30})
	if err != nil {
		t.Fatalf("unparsable reply: %v", err)
	}
	if m.Type == wire.Exception {
		ex, _ := wire.DecodeApplicationException(m.Body())
		if ex == nil {
			return "app?"
		}
		return fmt.Sprintf("app%d", ex.Code)
	}
	f, err := wire.ResultField(m.Body())
	if err != nil {
		return "bad"
	}
	if f <= 0 {
		return "ok"
	}
	return fmt.Sprintf("ex%d", f)
}

// clientLimit bounds one test-bed client run: a client that hangs (a
// Spark session waiting on a metastore that never answers) fails its
// test instead of holding the whole e2e run until its 45-minute timeout.
const clientLimit = 6 * time.Minute

// runTimed runs a test-bed client with the test-bed cache and env on top
// of this process's environment, and says how long it took. The client
// runs in a process group of its own, killed whole at clientLimit: Spark
// starts a JVM beside its Python driver.
func runTimed(cmd *exec.Cmd, env ...string) ([]byte, error, time.Duration) {
	return runFor(cmd, clientLimit, env...)
}

// runFor is runTimed with a limit of the caller's: a writer of hundreds
// of appends may take longer than clientLimit.
func runFor(cmd *exec.Cmd, limit time.Duration, env ...string) ([]byte, error, time.Duration) {
	cmd.Env = append(append(os.Environ(), "HMSPROXY_CACHE="+cacheDir()), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	g, err := startGroup(cmd, limit)
	if err != nil {
		return nil, err, 0
	}
	err = g.wait()
	return out.Bytes(), err, g.took()
}

// groupRun is a client running in a process group of its own, killed
// whole at its limit.
type groupRun struct {
	cmd    *exec.Cmd
	limit  time.Duration
	begin  time.Time
	killed atomic.Bool
	timer  *time.Timer
}

// startGroup starts cmd, its output already set, in a process group of
// its own and arms the kill at limit.
func startGroup(cmd *exec.Cmd, limit time.Duration) (*groupRun, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 10 * time.Second // a child still holding the output
	g := &groupRun{cmd: cmd, limit: limit, begin: time.Now()}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g.timer = time.AfterFunc(limit, func() {
		g.killed.Store(true)
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
	return g, nil
}

// wait waits for the client and disarms the kill; its error says when
// the limit killed it.
func (g *groupRun) wait() error {
	err := g.cmd.Wait()
	g.timer.Stop()
	if errors.Is(err, exec.ErrWaitDelay) {
		// The client succeeded; a child of its still held the output.
		syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
		err = nil
	}
	if g.killed.Load() {
		err = fmt.Errorf("killed after %v: %w", g.limit, err)
	}
	return err
}

// took is how long the client ran, to a tenth of a second.
func (g *groupRun) took() time.Duration {
	return time.Since(g.begin).Round(100 * time.Millisecond)
}
