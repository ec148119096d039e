package twin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proctest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
)

// The twin's world: one real metastore per version, started by the test
// bed's own script, and one or more real hmsproxy processes in front of
// it (the binary a user runs, at its default settings), sharing a real
// Redis when there are several.

// Metastore is one running metastore of the test bed.
type Metastore struct {
	Version string
	Addr    string
	work    string              // "" when started by hand
	hms     *proctest.Metastore // nil when started by hand
}

var (
	msMu   sync.Mutex // guards stores
	stores = map[string]*Metastore{}
	// keepLogs keeps the metastores' work directories, with their logs,
	// once a run failed.
	keepLogs atomic.Bool
)

// basePort spaces the twin's metastores apart from the e2e tests' ones,
// below Linux's ephemeral port range as those are.
var basePort = map[string]int{"2.3": 28083, "3.1": 28183, "4.0": 28283}

// ServerProps are the metastore settings the twin runs with beyond the
// test bed's: a partition request limit, so that the proxy must answer
// as a limited metastore does.
const ServerProps = "hive.metastore.limit.partition.request=" + LimitPartitions + " metastore.limit.partition.request=" + LimitPartitions

// LimitPartitions is the metastore's hive.metastore.limit.partition.request.
const LimitPartitions = "12"

// StartMetastore returns the metastore of version v, starting it once per
// process; StopAll stops them. A version followed by "m" ("3.1m") is a
// second metastore of that version: a federation's member.
func StartMetastore(t testing.TB, v string) *Metastore {
	t.Helper()
	msMu.Lock()
	defer msMu.Unlock()
	if ms, ok := stores[v]; ok {
		return ms
	}
	key := v
	v, member := strings.CutSuffix(v, "m")
	if addr := os.Getenv("TWIN_HMS_" + strings.ToUpper(strings.ReplaceAll(key, ".", ""))); addr != "" {
		// A metastore started by hand (testbed/hms.sh start with HMS_PROPS
		// set to ServerProps): used, not stopped.
		ms := &Metastore{Version: v, Addr: addr}
		stores[key] = ms
		return ms
	}
	port, ok := basePort[v]
	if !ok {
		t.Fatalf("twin: unknown metastore version %q (want 2.3, 3.1 or 4.0)", v)
	}
	if member {
		port += 10
	}
	port = proctest.PortOffset(port)
	begin := time.Now()
	hms, err := proctest.StartMetastore(t, "hmsproxy-twin-"+key, v, port, "HMS_PROPS="+ServerProps)
	if err != nil {
		t.Fatalf("twin: %v", err)
	}
	ms := &Metastore{Version: v, Addr: hms.Addr, work: hms.Work, hms: hms}
	stores[key] = ms
	fmt.Printf("twin: HMS %s started on %s in %v\n", key, ms.Addr, time.Since(begin).Round(100*time.Millisecond))
	return ms
}

// StopAll stops every metastore StartMetastore started.
func StopAll() {
	msMu.Lock()
	defer msMu.Unlock()
	for v, ms := range stores {
		if ms.hms == nil {
			continue
		}
		ms.hms.Stop(keepLogs.Load())
		if keepLogs.Load() {
			// the metastore's own log explains some differences (a
			// fallback from direct SQL, a retried write)
			fmt.Printf("twin: HMS %s's log is %s\n", v, filepath.Join(ms.work, "hms.log"))
		}
		delete(stores, v)
	}
}

func repoRoot() string {
	dir, _ := os.Getwd()
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	return dir
}

// proxyBinary is the hmsproxy binary under test: TWIN_PROXY_BIN when set
// (a build of another commit, say), else this tree's, built once.
func proxyBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TWIN_PROXY_BIN"); p != "" {
		return p
	}
	return proctest.Hmsproxy(t)
}

// Node is one hmsproxy process.
type Node struct {
	Addr, Admin string
	cmd         *exec.Cmd
	logPath     string
	exited      chan struct{}
	err         error // set before exited closes
}

// Fleet is the proxies in front of one metastore.
type Fleet struct {
	Nodes []*Node
	ms    *Metastore
	redis *redistest.Server
	t     testing.TB
	args  []string
	dir   string
	bin   string
	// keyFlags: bin names its flags by their settings' keys.
	keyFlags bool
	fed      *federation // nil: one metastore
	n        int         // nodes
}

// metastoreThreads is the test bed's hive.metastore.server.max.threads
// (testbed/hms.sh), and directConns what the twin's own sessions open
// straight to the metastore at the most. The metastore serves one
// connection per thread and refuses connections past them, so the nodes
// are sized as the README asks of a fleet: nodes × upstream.max_conns
// within the metastore's threads. Past them, a metastore stall that
// makes each node open its 64 connections starved the twin's own
// sessions (the run of seed 155885836 with 3 nodes).
const (
	metastoreThreads = 200
	directConns      = 56
)

// nodeConns is upstream.max_conns for each of n nodes.
func nodeConns(n int) int { return min(64, (metastoreThreads-directConns)/max(n, 1)) }

// StartFleet runs n hmsproxy processes in front of ms (with a Redis of
// their own when n > 1), each with args added to its flags.
func StartFleet(t testing.TB, ms *Metastore, n int, args ...string) *Fleet {
	t.Helper()
	return startFleet(t, ms, nil, n, args...)
}

func startFleet(t testing.TB, ms *Metastore, fed *federation, n int, args ...string) *Fleet {
	t.Helper()
	dir, err := os.MkdirTemp("", "hmsproxy-twin-logs-")
	if err != nil {
		t.Fatal(err)
	}
	f := &Fleet{ms: ms, t: t, args: args, dir: dir, bin: proxyBinary(t), fed: fed, n: n}
	f.keyFlags = exec.Command(f.bin, "--version").Run() == nil
	if fed != nil {
		p, err := fed.writeConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		f.args = append([]string{"--config", p}, f.args...)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			keepLogs.Store(true)
			fmt.Printf("twin: the nodes' logs are in %s\n", dir)
		}
	})
	if n > 1 {
		f.redis = redistest.Start(t)
	}
	t.Cleanup(f.Stop)
	for i := 0; i < n; i++ {
		nd, err := f.start(i)
		if err != nil {
			t.Fatal(err)
		}
		f.Nodes = append(f.Nodes, nd)
	}
	return f
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// start runs node i. It may run on any goroutine: it returns errors
// rather than failing the test.
func (f *Fleet) start(i int) (*Node, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	n := &Node{Addr: addr, Admin: admin, exited: make(chan struct{}),
		logPath: filepath.Join(f.dir, fmt.Sprintf("node%d-%d.log", i, time.Now().UnixNano()))}
	// Builds that know --version name their flags by their settings'
	// keys; older ones (TWIN_PROXY_BIN) by the names before.
	admin, upstream, logFormat, nodeID, redis := "--admin.listen", "--upstream.uris", "--log.format", "--redis.node_id", "--redis.url"
	if !f.keyFlags {
		admin, upstream, logFormat, nodeID, redis = "--admin", "--upstream", "--log-format", "--node-id", "--redis"
	}
	maxConns := "--upstream.max_conns"
	if !f.keyFlags {
		maxConns = "--upstream-max-conns"
	}
	args := []string{"--listen", n.Addr, admin, n.Admin, upstream, "thrift://" + f.ms.Addr,
		logFormat, "json", nodeID, fmt.Sprintf("twin%d", i), maxConns, strconv.Itoa(nodeConns(f.n))}
	if f.redis != nil {
		args = append(args, redis, f.redis.Addr)
	}
	args = append(args, f.args...)
	logf, err := os.Create(n.logPath)
	if err != nil {
		return nil, err
	}
	n.cmd = exec.Command(f.bin, args...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() {
		n.err = n.cmd.Wait()
		logf.Close()
		close(n.exited)
	}()
	exited := false
	if wait.Poll(30*time.Second, 50*time.Millisecond, func() bool {
		select {
		case <-n.exited:
			exited = true
			return true
		default:
		}
		return ready(n.Admin)
	}) && !exited {
		return n, nil
	}
	if exited {
		return nil, fmt.Errorf("twin: hmsproxy %d exited at start: %v\n%s", i, n.err, n.LogTail(40))
	}
	n.stop()
	return nil, fmt.Errorf("twin: hmsproxy %d not ready in 30s\n%s", i, n.LogTail(40))
}

func ready(admin string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + admin + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Restart stops every node and starts them again with empty caches, on a
// Redis emptied too.
func (f *Fleet) Restart() {
	f.Stop()
	if f.redis != nil {
		f.redis.Restart()
	}
	for i := range f.Nodes {
		f.restartNode(i)
	}
}

// restartNode starts node i again (after it died). A node that cannot
// start keeps its dead process: its sessions then see transport errors.
func (f *Fleet) restartNode(i int) {
	f.Nodes[i].stop()
	n, err := f.start(i)
	if err != nil {
		fmt.Println(err)
		return
	}
	f.Nodes[i] = n
}

// Stop stops every node. Safe twice.
func (f *Fleet) Stop() {
	for _, n := range f.Nodes {
		n.stop()
	}
}

func (n *Node) stop() {
	select {
	case <-n.exited:
		return
	default:
	}
	syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
		syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.exited
	}
}

// Dead reports the exit of a node that was not stopped: the process
// crashed.
func (n *Node) Dead() (bool, string) {
	select {
	case <-n.exited:
		return true, fmt.Sprintf("%v\n%s", n.err, n.LogTail(60))
	default:
		return false, ""
	}
}

// LogTail is the last lines of the node's log.
func (n *Node) LogTail(lines int) string {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// AppliedEvents are the notification-log event ids the node reports
// having applied to its cache, one per series (as
// hmsproxy_eventlog_applied_event_id, or a group's
// hmsproxy_group_eventlog_applied_event_id{group="member"}); -1 where it
// does not say.
func (n *Node) AppliedEvents(ctx context.Context, series []string) []int64 {
	out := make([]int64, len(series))
	for i := range out {
		out[i] = -1
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.Admin+"/metrics", nil)
	if err != nil {
		return out
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for i, name := range series {
			if rest, ok := strings.CutPrefix(line, name+" "); ok {
				if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
					out[i] = int64(v)
				}
			}
		}
	}
	return out
}

// logged reports whether the metastore's log has a line holding text
// written at or after since. It reads the log's last few megabytes: the
// twin asks about the read it just made.
func (ms *Metastore) logged(since time.Time, text string) bool {
	if ms.work == "" {
		return false
	}
	f, err := os.Open(filepath.Join(ms.work, "hms.log"))
	if err != nil {
		return false
	}
	defer f.Close()
	const tail = 4 << 20
	if st, err := f.Stat(); err == nil && st.Size() > tail {
		f.Seek(st.Size()-tail, io.SeekStart)
	}
	// a line begins with its local time, to the millisecond
	const layout = "2006-01-02T15:04:05,000"
	from := since.Add(-time.Second).Format(layout) // the log's clock has milliseconds
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	stamp := ""
	for sc.Scan() {
		line := sc.Text()
		if len(line) >= len(layout) && line[4] == '-' && line[10] == 'T' {
			stamp = line[:len(layout)]
		}
		if stamp >= from && strings.Contains(line, text) {
			return true
		}
	}
	return false
}
