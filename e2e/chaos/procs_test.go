package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/auth/certs/certstest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proctest"
)

// proxyProc is the hmsproxy process under test.
type proxyProc struct {
	cmd         *exec.Cmd
	log         *logTail
	addr, admin string
	done        <-chan struct{} // closed once it has exited
	proc        *proctest.Proc
}

// exit says how the process exited, once done is closed.
func (p *proxyProc) exit() string {
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by " + ws.Signal().String()
	}
	return fmt.Sprintf("%v (%s)", p.proc.Err(), p.cmd.ProcessState)
}

// features are the settings the suite uses that an older binary may not
// know, with what its config error names when it does not. Without one,
// the suite runs on (and says so): the behaviours that need it are
// skipped.
var features = []struct {
	name    string
	markers []string
	without string
}{
	{"federation", []string{"federation"}, "no read-only group: deep-drop cannot be checked"},
	{"ratelimit", []string{"sources", "field ratelimit"}, "rate limits by set_ugi user instead (ratelimit-by-user)"},
	{"ratelimit-by-user", []string{"users", "field ratelimit"}, "no rate limits: ugi-cycling meets no bucket"},
	{"per-address", []string{"max_clients_per_address"}, "no per-address connection cap"},
	{"inflight-budget", []string{"inflight_bytes"}, "no in-flight budget setting"},
	{"drain-delay", []string{"drain-delay", "drain_delay"}, "its default drain delay at shutdown"},
}

// rateLimited reports whether the proxy runs with rate limits that
// ugi-cycling's calls must meet.
func rateLimited(f map[string]bool) bool { return f["ratelimit"] || f["ratelimit-by-user"] }

func featureNotes(f map[string]bool) string {
	var on, off []string
	for _, x := range features {
		switch {
		case f[x.name]:
			on = append(on, x.name)
		case x.name == "ratelimit-by-user" && f["ratelimit"]:
		default:
			off = append(off, x.name+" off: "+x.without)
		}
	}
	return "features " + strings.Join(append(on, off...), "; ")
}

// proxyConfig is the config file: TLS toward clients, a read-only
// federated group serving demo_db2 of the same metastore, demo_db1
// uncached, the connection limits, and rate limits: tight for the
// addresses of ugi-cycling (whose calls must meet them whatever names
// it claims), none for the victim's address and the flushing
// behaviours' (the flush budget, not a rate limit, must stop those),
// loose for the rest.
func proxyConfig(metastore string, files certstest.Files, f map[string]bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "upstream:\n  uris: [\"thrift://%s\"]\n", metastore)
	if f["federation"] {
		b.WriteString("  name: main\n")
	}
	fmt.Fprintf(&b, "tls:\n  cert: %q\n  key: %q\n  reload_interval: -1s\n", files.Cert, files.Key)
	b.WriteString("cache:\n  deny: [demo_db1]\n")
	fmt.Fprintf(&b, "limits:\n  max_clients: %d\n  max_depth: %d\n", maxClients, maxDepth)
	if f["inflight-budget"] {
		fmt.Fprintf(&b, "  inflight_bytes: %d\n", budget)
	}
	if f["per-address"] {
		fmt.Fprintf(&b, "  max_clients_per_address: %d\n", perAddress)
	}
	if f["federation"] {
		fmt.Fprintf(&b, "federation:\n  federated:\n    - name: ro\n      uris: [\"thrift://%s\"]\n      databases: [demo_db2]\n      access: read-only\n", metastore)
	}
	if f["ratelimit"] {
		b.WriteString("ratelimit:\n  read: {rate: 200}\n  write: {rate: 100}\n  other: {rate: 200}\n  sources:\n")
		for _, a := range []string{victimAddr, flusherAddr} {
			fmt.Fprintf(&b, "    %q: {read: {rate: 0}, write: {rate: 0}, other: {rate: 0}}\n", a)
		}
		fmt.Fprintf(&b, "    %q: {read: {rate: %d}}\n", cyclerPrefix, cyclerRate)
	} else if f["ratelimit-by-user"] {
		// Binaries before issue 22 keyed buckets on the set_ugi user ("":
		// none, as the victim's and most hostile clients'): each claimed
		// name is limited, the rest are not.
		fmt.Fprintf(&b, "ratelimit:\n  read: {rate: %d}\n  users:\n    \"\": {read: {rate: 0}}\n", cyclerRate)
	}
	return b.String()
}

// startProxy starts bin with every feature, dropping those an older
// binary refuses to start with.
func startProxy(t *testing.T, bin, metastore string, files certstest.Files) (*proxyProc, map[string]bool) {
	t.Helper()
	feats := map[string]bool{}
	for _, f := range features {
		feats[f.name] = true
	}
	feats["ratelimit-by-user"] = false // only where "ratelimit" is refused
	dir := t.TempDir()
	for attempt := 0; ; attempt++ {
		cfg := filepath.Join(dir, fmt.Sprintf("hmsproxy-%d.yaml", attempt))
		if err := os.WriteFile(cfg, []byte(proxyConfig(metastore, files, feats)), 0o600); err != nil {
			t.Fatal(err)
		}
		p := launchProxy(t, bin, cfg, feats["drain-delay"])
		select {
		case <-p.log.ready:
			p.addr, p.admin = p.log.addrs()
			if p.addr == "" || p.admin == "" {
				t.Fatalf("hmsproxy is ready but logged no listen or admin address:\n%s", p.log.tail(40))
			}
			return p, feats
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("hmsproxy not ready after 30s:\n%s", p.log.tail(40))
		}
		out := p.log.tail(40)
		var dropped []string
		for _, f := range features {
			if feats[f.name] && slices.ContainsFunc(f.markers, func(m string) bool { return strings.Contains(out, m) }) {
				dropped = append(dropped, f.name)
			}
		}
		for _, name := range dropped {
			feats[name] = false
			t.Logf("this hmsproxy refuses %s; running without it", name)
			if name == "ratelimit" {
				feats["ratelimit-by-user"] = true // tried next
			}
		}
		if len(dropped) == 0 {
			t.Fatalf("hmsproxy exited at start (%s):\n%s", p.exit(), out)
		}
	}
}

func launchProxy(t *testing.T, bin, cfg string, noDrainDelay bool) *proxyProc {
	t.Helper()
	p := &proxyProc{log: newLogTail()}
	keys := keyFlags(bin)
	flag := func(key, old string) string {
		if keys {
			return "--" + key
		}
		return "--" + old
	}
	args := []string{"--config", cfg, "--listen", "127.0.0.1:0", flag("admin.listen", "admin"), "127.0.0.1:0",
		flag("log.format", "log-format"), "json", flag("shutdown.timeout", "shutdown-timeout"), "5s"}
	if noDrainDelay {
		off := "off"
		if !keys {
			off = "0" // off before the settings' rule for 0
		}
		args = append(args, flag("shutdown.drain_delay", "drain-delay"), off)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "HMSPROXY_") })
	p.cmd.Stderr = p.log
	if path := os.Getenv("CHAOS_PROXY_LOG"); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		p.cmd.Stderr = io.MultiWriter(p.log, f)
	}
	p.proc = proctest.Start(t, "hmsproxy", p.cmd, syscall.SIGTERM, 15*time.Second)
	p.done = p.proc.Done()
	return p
}

// keyFlags reports whether bin names its flags by their keys
// (--admin.listen), as every build that knows --version does; an older
// build (CHAOS_PROXY_BIN) knows only the old names, which the newer ones
// still take, with a deprecation warning.
func keyFlags(bin string) bool { return exec.Command(bin, "--version").Run() == nil }

// alive reports whether the process is still running.
func (p *proxyProc) alive() bool { return !p.proc.Exited() }

// sleepUntil waits until end, or until the process exits.
func (p *proxyProc) sleepUntil(end time.Time) {
	select {
	case <-time.After(time.Until(end)):
	case <-p.done:
	}
}

// logTail keeps the proxy's last log lines and counts its messages by
// level, never holding more than a bounded amount (the process logs
// for every hostile connection it refuses).
type logTail struct {
	mu      sync.Mutex // guards the fields below
	partial []byte
	ring    []string
	next    int
	counts  map[string]int
	addr    string
	admin   string
	ready   chan struct{}
	isReady bool
}

const (
	tailLines   = 400
	maxLineKept = 4 << 10
)

func newLogTail() *logTail {
	return &logTail{counts: map[string]int{}, ready: make(chan struct{})}
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.keep(p)
			break
		}
		l.keep(p[:i])
		l.line(string(l.partial))
		l.partial = l.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (l *logTail) keep(b []byte) {
	if room := maxLineKept - len(l.partial); room > 0 {
		l.partial = append(l.partial, b[:min(len(b), room)]...)
	}
}

func (l *logTail) line(s string) {
	if len(l.ring) < tailLines {
		l.ring = append(l.ring, s)
	} else {
		l.ring[l.next] = s
		l.next = (l.next + 1) % tailLines
	}
	if strings.HasPrefix(s, "{") {
		var rec struct{ Level, Msg, Addr string }
		if json.Unmarshal([]byte(s), &rec) == nil {
			l.counts[rec.Level+" "+rec.Msg]++
			switch rec.Msg {
			case "hmsproxy listening":
				l.addr = rec.Addr
			case "admin listening":
				l.admin = rec.Addr
			}
		}
	}
	if !l.isReady && strings.Contains(s, "hmsproxy is ready") {
		l.isReady = true
		close(l.ready)
	}
}

func (l *logTail) addrs() (string, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addr, l.admin
}

// tail is the last n lines.
func (l *logTail) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	all := append(slices.Clone(l.ring[l.next:]), l.ring[:l.next]...)
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return strings.Join(all, "\n")
}

// top is the n most frequent log messages with their counts.
func (l *logTail) top(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]string, 0, len(l.counts))
	for k := range l.counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return l.counts[b] - l.counts[a] })
	var out []string
	for _, k := range keys[:min(n, len(keys))] {
		out = append(out, fmt.Sprintf("%7d  %s", l.counts[k], k))
	}
	return out
}

// event is one line a role process writes on its stdout.
type event struct {
	Ev      string          `json:"ev"` // ready, error, start, end, summary
	T       int64           `json:"t"`  // Unix milliseconds
	B       string          `json:"b,omitempty"`
	I       int             `json:"i,omitempty"`
	Phase   string          `json:"phase,omitempty"`
	Err     string          `json:"err,omitempty"`
	Victim  *victimSummary  `json:"victim,omitempty"`
	Hostile *hostileSummary `json:"hostile,omitempty"`
}

// emitter writes events, one JSON line each.
type emitter struct {
	mu  sync.Mutex // guards enc
	enc *json.Encoder
}

func newEmitter() *emitter { return &emitter{enc: json.NewEncoder(os.Stdout)} }

func (e *emitter) emit(ev event) {
	ev.T = time.Now().UnixMilli()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.enc.Encode(ev)
}

// role is the test binary run again as the victim or the hostile
// clients.
type role struct {
	name   string
	cmd    *exec.Cmd
	stdin  *os.File
	stderr *logTail

	mu     sync.Mutex // guards events
	events []event
	cond   *sync.Cond

	done chan struct{} // closed once it has exited and its output is read
	exit string
}

// startRole runs exe as the named role; niced runs it at nice 10, as
// clients on other hosts would not take the proxy's CPU.
func startRole(t *testing.T, exe, name string, niced bool, env []string) *role {
	t.Helper()
	r := &role{name: name, stderr: newLogTail(), done: make(chan struct{})}
	r.cond = sync.NewCond(&r.mu)
	args := []string{exe}
	if path, err := exec.LookPath("nice"); niced && err == nil {
		args = append([]string{path, "-n", "10"}, args...)
	}
	r.cmd = exec.Command(args[0], args[1:]...)
	r.cmd.Env = append(append(os.Environ(), "CHAOS_ROLE="+name), env...)
	r.cmd.Stderr = r.stderr
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.cmd.Stdin = in
	r.stdin = w
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	in.Close()
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var ev event
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.cond.Broadcast()
			r.mu.Unlock()
		}
		err := r.cmd.Wait()
		r.mu.Lock()
		r.exit = fmt.Sprintf("%v (%s)", err, r.cmd.ProcessState)
		close(r.done)
		r.cond.Broadcast()
		r.mu.Unlock()
	}()
	t.Cleanup(func() {
		r.stdin.Close()
		r.kill()
		<-r.done
	})
	return r
}

func (r *role) send(cmd string) { fmt.Fprintln(r.stdin, cmd) }

// wait waits at most d for the role to exit.
func (r *role) wait(d time.Duration) {
	select {
	case <-r.done:
	case <-time.After(d):
	}
}

// failed describes how the role failed: a non-zero exit status, or a
// data race it reported; "" if it did not, is still running or was
// killed (by the suite, when the proxy died).
func (r *role) failed() string {
	select {
	case <-r.done:
	default:
		return ""
	}
	if out := r.stderr.tail(tailLines); strings.Contains(out, "DATA RACE") || r.cmd.ProcessState.ExitCode() > 0 {
		return fmt.Sprintf("the %s process exited %s; its stderr:\n%s", r.name, r.exit, r.stderr.tail(60))
	}
	return ""
}

func (r *role) kill() {
	select {
	case <-r.done:
	default:
		r.cmd.Process.Kill()
	}
}

// await waits for the role's first event named ev, at most wait (0:
// until the role exits) and, with p, only while p lives.
func (r *role) await(ev string, wait time.Duration, p *proxyProc) (event, bool) {
	var timeout <-chan time.Time
	if wait > 0 {
		timeout = time.After(wait)
	}
	var pdone <-chan struct{}
	if p != nil {
		pdone = p.done
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() { // wakes the wait below on a timeout or the proxy's exit
		select {
		case <-timeout:
		case <-pdone:
		case <-stop:
			return
		}
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	}()
	deadline := time.Now().Add(wait)
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		for _, e := range r.events {
			if e.Ev == ev {
				return e, true
			}
		}
		select {
		case <-r.done:
			return event{}, false
		case <-pdone:
			return event{}, false
		default:
		}
		if wait > 0 && !time.Now().Before(deadline) {
			return event{}, false
		}
		r.cond.Wait()
	}
}

// all is every event named ev so far.
func (r *role) all(ev string) []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []event
	for _, e := range r.events {
		if e.Ev == ev {
			out = append(out, e)
		}
	}
	return out
}

// why describes a role that ended or stalled.
func (r *role) why() string {
	select {
	case <-r.done:
		return fmt.Sprintf("%s exited %s; its stderr:\n%s", r.name, r.exit, r.stderr.tail(40))
	default:
		return fmt.Sprintf("%s still running; its stderr:\n%s", r.name, r.stderr.tail(40))
	}
}
