package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proctest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/syncbuf"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestMain removes the binary the tests built and ran.
func TestMain(m *testing.M) {
	os.Exit(proctest.Run(m))
}

// proc is a running hmsproxy binary.
type proc struct {
	*proctest.Proc
	stderr *syncbuf.Buffer // its output: hmsproxy logs to stderr
	addr   string          // the proxy's listen address
	admin  string          // the admin address, "" when off
}

// startBinary runs hmsproxy with args (JSON logs on loopback ports, no
// drain delay unless args set one) and waits until it is listening.
func startBinary(t *testing.T, args ...string) *proc {
	t.Helper()
	args = append([]string{"--listen", "127.0.0.1:0", "--log-format", "json", "--drain-delay", "0"}, args...)
	cmd := exec.Command(proctest.Hmsproxy(t), args...)
	p := &proc{Proc: proctest.Start(t, "hmsproxy", cmd, os.Kill, 0)}
	p.stderr = p.Out
	stderr := p.Out
	if !wait.Until(20*time.Second, func() bool {
		if p.Exited() {
			t.Fatalf("hmsproxy exited early:\n%s", stderr)
		}
		return strings.Contains(stderr.String(), "hmsproxy is ready")
	}) {
		t.Fatalf("hmsproxy not listening after 20s:\n%s", stderr)
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch rec.Msg {
		case "hmsproxy listening":
			p.addr = rec.Addr
		case "admin listening":
			p.admin = rec.Addr
		}
	}
	return p
}

// stop sends SIGTERM and returns how long the process took to exit and
// its exit status.
func (p *proc) stop(t *testing.T, within time.Duration) (time.Duration, int) {
	t.Helper()
	took, killed := p.Stop(syscall.SIGTERM, within)
	if killed {
		t.Fatalf("still running %v after SIGTERM", within)
	}
	return took, p.Cmd.ProcessState.ExitCode()
}

// hungMetastore accepts connections and reads calls but never answers,
// as a metastore stuck on its database. The method of each call read is
// sent on got (when there is room).
func hungMetastore(t *testing.T) (addr string, got chan string) {
	t.Helper()
	got = make(chan string, 100)
	return proxytest.Fake(t, wire.Buffered, func(_ *proxytest.FakeConn, m wire.Message) error {
		select {
		case got <- string(m.Name()):
		default:
		}
		return nil
	}), got
}

// With a metastore that accepts and never answers, the process exits
// within shutdown_timeout plus a second, cancelling its background work
// rather than waiting it out, and says with exit status 3 that it cut a
// call off (#9: it lived 60-86s after SIGTERM with a 30s timeout, and
// exited 0).
func TestShutdownBoundedWithHungMetastore(t *testing.T) {
	hung, got := hungMetastore(t)
	const timeout = 2 * time.Second
	// Background work on: the event-log poller, housekeeping and health
	// checks all talk to the hung metastore.
	p := startBinary(t, "--upstream", "thrift://"+hung, "--shutdown-timeout", timeout.String(), "--admin", "127.0.0.1:0",
		"--health-interval", "100ms", "--eventlog-interval", "100ms", "--open-txns-interval", "100ms", "--compactions-interval", "100ms")

	c, err := hmsclient.Dial(context.Background(), p.addr, wire.Buffered)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Send(context.Background(), wire.Call, "get_table", hmsclient.Args("db", "t")); err != nil {
		t.Fatal(err)
	}
	// The metastore has calls in hand: the client's, the workers'.
	seen := map[string]bool{}
	for !seen["get_table"] || len(seen) < 3 {
		select {
		case m := <-got:
			seen[m] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("calls at the metastore: %v; want the client's get_table and the workers'", seen)
		}
	}
	took, code := p.stop(t, 30*time.Second)
	if took > timeout+time.Second {
		t.Errorf("exited %v after SIGTERM; want within the %v timeout plus 1s", took, timeout)
	}
	if code != exitCallsCut {
		t.Errorf("exit status %d; want %d (calls were cut off)", code, exitCallsCut)
	}
	if strings.Contains(p.stderr.String(), "shutdown overran") {
		t.Error("the exit came from the last-resort timer: some part did not stop when cancelled")
	}
}

// With nothing in flight the process stops at once and exits 0.
func TestShutdownIdleExitsZero(t *testing.T) {
	hung, _ := hungMetastore(t)
	p := startBinary(t, "--upstream", "thrift://"+hung, "--shutdown-timeout", "5s", "--admin", "")
	took, code := p.stop(t, 30*time.Second)
	if code != 0 {
		t.Errorf("exit status %d; want 0", code)
	}
	if took > 2*time.Second {
		t.Errorf("exited %v after SIGTERM with nothing in flight; want well within the 5s timeout", took)
	}
}

// A password given in --redis, or credentials in an upstream URI, appear
// nowhere: not in the logs, the status page, the metrics or the error
// printed when the URL is bad (#9: the startup log printed it).
func TestSecretsRedacted(t *testing.T) {
	const redisPW, upPW = "S3cretRedisPW", "S3cretUpstreamPW"
	_, demoAddr := proxytest.Demo(t, proxytest.DemoOptions{Seed: [3]int{1, 1, 2}})
	rd := redistest.Start(t)

	p := startBinary(t, "--upstream", "thrift://hive:"+upPW+"@"+demoAddr,
		"--redis", "redis://:"+redisPW+"@"+rd.Addr, "--admin", "127.0.0.1:0", "--log-level", "debug")
	proxytest.Call(t, proxytest.Dial(t, p.addr, wire.Buffered), "get_table", hmsclient.Args("demo_db0", "t0"))
	var pages []string
	for _, path := range []string{"/", "/status.json", "/metrics", "/healthz"} {
		resp, err := http.Get("http://" + p.admin + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		pages = append(pages, path+":\n"+string(b))
	}
	p.stop(t, 30*time.Second)

	// A bad URL fails at start; its error quotes the URL.
	bad := exec.CommandContext(proxytest.Within(t, time.Minute), proctest.Hmsproxy(t), "--upstream", "thrift://"+demoAddr, "--listen", "127.0.0.1:0",
		"--admin", "", "--redis", "redis://:"+redisPW+"@127.0.0.1:notaport")
	badOut, _ := bad.CombinedOutput()

	seen := map[string]string{"log": p.stderr.String(), "bad url error": string(badOut)}
	for _, pg := range pages {
		seen[strings.SplitN(pg, ":", 2)[0]] = pg
	}
	if !strings.Contains(p.stderr.String(), "xxxxx") {
		t.Error("the log shows no redacted URL: the test did not exercise the redaction")
	}
	for where, text := range seen {
		for _, secret := range []string{redisPW, upPW} {
			if strings.Contains(text, secret) {
				t.Errorf("%s shows the secret %q:\n%s", where, secret, text)
			}
		}
	}
	if !strings.Contains(string(badOut), "hmsproxy:") {
		t.Errorf("a bad Redis URL did not fail the start:\n%s", badOut)
	}
}

// rssMiB is a process's resident set.
func rssMiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return kb >> 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// Four clients each holding a legal 48 MiB request, incomplete, take the
// process's resident memory up by no more than the in-flight budget: each
// claims its bytes as they arrive, one finishes on the budget's reserve,
// the others wait with the rest of their bytes in their sockets (#9: RSS
// went from 22 MB to 421 MB).
func TestRSSWithinBudget(t *testing.T) {
	hung, _ := hungMetastore(t)
	const budgetMiB = 100 // the smallest allowed: max_message_bytes
	p := startBinary(t, "--upstream", "thrift://"+hung, "--admin", "127.0.0.1:0", "--eventlog-interval", "0",
		"--inflight-bytes", strconv.Itoa(budgetMiB<<20))
	base := rssMiB(t, p.Cmd.Process.Pid)

	var e wire.Encoder
	e.FieldBegin(wire.TString, 1)
	e.I32(48 << 20) // the string's length: its bytes follow, all but the last MiB
	head := append(wire.AppendHeader(nil, wire.Call, []byte("get_table"), 1), e.B...)
	body := make([]byte, 47<<20)
	sent := make(chan struct{}, 4)
	for range 4 {
		nc, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		go func() {
			if _, err := nc.Write(head); err == nil {
				if _, err := nc.Write(body); err == nil {
					sent <- struct{}{}
				}
			}
		}()
	}
	select { // the finisher's request arrives whole (but its last MiB)
	case <-sent:
	case <-time.After(30 * time.Second):
		t.Fatal("not even one 47 MiB send completed in 30s")
	}
	// The other three are waiting for budget: all four are as large as
	// they will get.
	if !wait.Poll(30*time.Second, 20*time.Millisecond, func() bool { return inflightWaits(t, p.admin) >= 3 }) {
		t.Fatal("the other three requests never waited for budget")
	}
	grew := rssMiB(t, p.Cmd.Process.Pid) - base
	t.Logf("RSS grew %d MiB holding 4 incomplete 48 MiB requests; budget %d MiB", grew, budgetMiB)
	if grew > budgetMiB+16 {
		t.Errorf("RSS grew %d MiB; want at most the %d MiB budget (+16 MiB)", grew, budgetMiB)
	}
}

// inflightWaits reads hmsproxy_inflight_waits_total from the admin port.
func inflightWaits(t *testing.T, admin string) int {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "hmsproxy_inflight_waits_total "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	return 0
}

// A shutdown that cuts a write in flight leaves the bus as a crash
// would: the write may still land on the metastore after its
// invalidation went out, so the peers must bypass their caches, not
// forget the node cleanly as they do after a stop with nothing in flight
// or with only reads cut.
func TestCutShutdownLeavesBusSilently(t *testing.T) {
	for _, tc := range []struct {
		inFlight string // the call cut by the shutdown, if any
		silent   bool
	}{{"", false}, {"get_table", false}, {"drop_table", true}} {
		t.Run("in-flight="+tc.inFlight, func(t *testing.T) {
			hung, got := hungMetastore(t)
			rd := redistest.Start(t)
			peer, err := coherence.New(coherence.Config{Client: rd.Client(), Group: "cut", Heartbeat: 100 * time.Millisecond,
				HeartbeatTimeout: time.Second, PeerGone: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); peer.Run(ctx, nopCache{}) }()
			t.Cleanup(func() { cancel(); <-done })

			p := startBinary(t, "--upstream", "thrift://"+hung, "--upstream-name", "cut", "--redis", rd.Addr,
				"--redis-heartbeat", "100ms", "--redis-heartbeat-timeout", "1s", "--shutdown-timeout", "1s", "--admin", "",
				"--cache-scope", "shared") // reads would wait for the hung metastore to tell the scope
			proxytest.Eventually(t, "the node known to its peer", func() bool { return len(peer.Peers()) == 1 && peer.Synced() })
			want := 0
			if tc.inFlight != "" {
				want = exitCallsCut
				c, err := hmsclient.Dial(context.Background(), p.addr, wire.Buffered)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if err := c.Send(context.Background(), wire.Call, tc.inFlight, hmsclient.Args("db", "t")); err != nil {
					t.Fatal(err)
				}
				for m := ""; m != tc.inFlight; {
					select {
					case m = <-got:
					case <-time.After(10 * time.Second):
						t.Fatalf("%s never reached the metastore", tc.inFlight)
					}
				}
			}
			if _, code := p.stop(t, 30*time.Second); code != want {
				t.Fatalf("exit status %d; want %d", code, want)
			}
			var silent bool
			proxytest.Eventually(t, "the node to leave or fall silent", func() bool {
				silent = peer.Stats().Loss("peer-silent") == 1
				return silent || len(peer.Peers()) == 0
			})
			if silent != tc.silent {
				t.Fatalf("the peer took the node for silent: %v; want %v", silent, tc.silent)
			}
			if silent && len(peer.Peers()) != 1 {
				t.Fatal("the peer forgot the silent node at once, as after a goodbye")
			}
		})
	}
}

type nopCache struct{}

func (nopCache) ApplyRemote([]cache.Entity) {}
func (nopCache) DropAll(string)             {}
