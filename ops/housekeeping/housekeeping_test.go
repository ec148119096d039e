package housekeeping_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/ops/housekeeping"
	"github.com/hmsproxy/hmsproxy/ops/worker"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

func startDemo(t *testing.T) (*demohms.Server, string) {
	return proxytest.Demo(t, proxytest.DemoOptions{})
}

func newClient(t *testing.T, addrs ...string) *housekeeping.Client {
	t.Helper()
	c, err := housekeeping.NewClient(housekeeping.ClientConfig{Addrs: addrs, User: "hive"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var (
	ctxT       = proxytest.Ctx
	testLogger = proxytest.Logger
)

// mustCall makes a call that must succeed with a REPLY without exception.
func mustCall(t *testing.T, c housekeeping.Caller, method string, args []byte) wire.Message {
	t.Helper()
	m, err := c.Call(ctxT(t), method, args)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if f, _ := wire.ResultField(m.Body()); m.Type != wire.Reply || f > 0 {
		t.Fatalf("%s: type %d result field %d", method, m.Type, f)
	}
	return m
}

// openTxns opens n transactions (ids are 1.. on a fresh demo).
func openTxns(t *testing.T, c housekeeping.Caller, n int32) {
	mustCall(t, c, "open_txns", hmsreq.Req(hmsreq.I32(1, n), hmsreq.Str(2, "etl"), hmsreq.Str(3, "worker-7")))
}

func txnReq(id int64) []byte { return hmsreq.Req(hmsreq.I64(1, id)) }

func heartbeatReq(id int64) []byte { return hmsreq.Req(hmsreq.I64(2, id)) }

func TestOpenTxnsGauge(t *testing.T) {
	_, addr := startDemo(t)
	c := newClient(t, addr)
	openTxns(t, c, 4)                       // 1..4
	mustCall(t, c, "abort_txn", txnReq(2))  // aborted, still listed
	mustCall(t, c, "commit_txn", txnReq(3)) // gone
	later := time.Now().Add(301 * time.Second)
	g, err := housekeeping.NewOpenTxns(housekeeping.OpenTxnsConfig{Caller: c, Now: func() time.Time { return later }})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.Counts(); ok {
		t.Fatal("counts reported before the first run")
	}
	task := g.Task()
	if task.Scope != worker.LeaderOnly || task.Name != "open-txns" {
		t.Fatalf("task: got %q scope %v", task.Name, task.Scope)
	}
	if err := task.Run(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	got, ok := g.Counts()
	if !ok || got.Open != 2 || got.Aborted != 1 || got.Stale != 2 || got.HighWaterMark != 4 {
		t.Fatalf("counts: got %+v; want open 2, aborted 1, stale 2, hwm 4", got)
	}
	if got.OldestOpenAge < 300*time.Second || got.OldestOpenAge > 310*time.Second {
		t.Fatalf("oldest open age: got %v; want about 301s", got.OldestOpenAge)
	}
}

// TestReaper: the reaper aborts a transaction whose heartbeats stopped,
// and only when enabled and not in dry-run mode; one that keeps
// heartbeating is left alone.
func TestReaper(t *testing.T) {
	demo, addr := startDemo(t)
	c := newClient(t, addr)
	openTxns(t, c, 2) // 1 heartbeats, 2 goes silent

	// The demo stamps transactions with its wall clock in milliseconds;
	// the reaper reads the time through its Now seam. Txn 2 started by
	// opened; txn 1 heartbeats in a later millisecond; the reaper's clock
	// is set to opened+timeout, so txn 2 is exactly stale and txn 1 is not,
	// without waiting for the timeout to pass.
	opened := time.Now().UnixMilli()
	wait.Eventually(t, time.Second, func() bool { return time.Now().UnixMilli() > opened }, "the next millisecond")
	mustCall(t, newClient(t, addr), "heartbeat", heartbeatReq(1))
	const timeout = 300 * time.Millisecond
	now := func() time.Time { return time.UnixMilli(opened).Add(timeout) }

	for _, tc := range []struct {
		name           string
		enabled, abort bool
		wantState2     string
		wantStats      housekeeping.ReaperStats
	}{
		{"disabled", false, true, "open", housekeeping.ReaperStats{}},
		{"dry run", true, false, "open", housekeeping.ReaperStats{Stale: 1, WouldAbort: 1}},
		{"enabled", true, true, "aborted", housekeeping.ReaperStats{Stale: 1, Aborted: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := demo.CallCount("get_open_txns_info")
			r, err := housekeeping.NewReaper(housekeeping.ReaperConfig{Caller: c, Enabled: tc.enabled,
				Abort: tc.abort, Timeout: timeout, Now: now, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Task().Run(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			if !tc.enabled && demo.CallCount("get_open_txns_info") != before {
				t.Fatal("a disabled reaper called the metastore")
			}
			if got := demo.TxnState(2); got != tc.wantState2 {
				t.Fatalf("silent txn: got %q; want %q", got, tc.wantState2)
			}
			if got := demo.TxnState(1); got != "open" {
				t.Fatalf("heartbeating txn: got %q; want open", got)
			}
			if got := r.Stats(); got != tc.wantStats {
				t.Fatalf("stats: got %+v; want %+v", got, tc.wantStats)
			}
			if !tc.abort && demo.CallCount("abort_txns") != 0 {
				t.Fatal("abort_txns called in a dry run")
			}
		})
	}
}

// TestReaperOneByOne: when abort_txns throws (one id vanished between
// the read and the abort), the others are still aborted one by one.
func TestReaperOneByOne(t *testing.T) {
	demo, addr := startDemo(t)
	c := newClient(t, addr)
	openTxns(t, c, 3)
	// Commit txn 2 between the reaper's read and its abort.
	racing := &commitBeforeAbort{Caller: c, commit: 2}
	r, err := housekeeping.NewReaper(housekeeping.ReaperConfig{Caller: racing, Enabled: true, Abort: true,
		Now: func() time.Time { return time.Now().Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Task().Run(ctxT(t))
	var ce *housekeeping.CallError
	if !errors.As(err, &ce) || ce.Method != "abort_txn" || ce.Field != 1 {
		t.Fatalf("got %v; want the NoSuchTxnException of abort_txn for txn 2", err)
	}
	if demo.TxnState(1) != "aborted" || demo.TxnState(3) != "aborted" {
		t.Fatalf("states: got %q, %q; want both aborted", demo.TxnState(1), demo.TxnState(3))
	}
	if got := r.Stats(); got.Aborted != 2 || got.Failed != 1 {
		t.Fatalf("stats: got %+v; want 2 aborted, 1 failed", got)
	}
}

type commitBeforeAbort struct {
	housekeeping.Caller
	commit int64
	once   sync.Once
}

func (c *commitBeforeAbort) Call(ctx context.Context, method string, args []byte) (wire.Message, error) {
	if method == "abort_txns" {
		c.once.Do(func() { c.Caller.Call(ctx, "commit_txn", txnReq(c.commit)) })
	}
	return c.Caller.Call(ctx, method, args)
}

func TestCompactions(t *testing.T) {
	demo, addr := startDemo(t)
	for _, s := range []string{"failed", "succeeded", "initiated", "failed", "ready for cleaning"} {
		demo.SeedCompaction(demohms.Compaction{DB: "demo_db0", Table: "t0", Type: 2, State: s})
	}
	m, err := housekeeping.NewCompactions(housekeeping.CompactionsConfig{Caller: newClient(t, addr), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Task().Run(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	got, ok := m.Counts()
	want := map[string]int{"failed": 2, "succeeded": 1, "initiated": 1, "ready for cleaning": 1}
	if !ok || got.Total != 5 || got.Failed != 2 || len(got.ByState) != len(want) {
		t.Fatalf("counts: got %+v; want total 5, failed 2, by state %v", got, want)
	}
	for s, n := range want {
		if got.ByState[s] != n {
			t.Errorf("state %q: got %d; want %d", s, got.ByState[s], n)
		}
	}
}

func TestClientFailoverAndReconnect(t *testing.T) {
	demo, addr := startDemo(t)
	dead := proxytest.Listen(t)
	deadAddr := dead.Addr().String()
	dead.Close()
	c := newClient(t, deadAddr, addr)
	args := []byte{wire.TStop}
	mustCall(t, c, "get_all_databases", args)

	demo.SetDelay("get_all_databases", 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Call(ctx, "get_all_databases", args); err == nil {
		t.Fatal("call past its deadline succeeded")
	}
	demo.SetDelay("get_all_databases", 0)
	mustCall(t, c, "get_all_databases", args) // a new connection
	if n := len(connIDs(demo)); n != 2 {
		t.Fatalf("metastore saw %d connections; want 2 (one reconnect)", n)
	}
	if got := demo.Calls()[0]; got.Method != "set_ugi" || got.User != "hive" {
		t.Fatalf("first call: got %+v; want set_ugi as hive", got)
	}
	c.Close()
	if _, err := c.Call(ctxT(t), "get_all_databases", args); !errors.Is(err, housekeeping.ErrClosed) {
		t.Fatalf("after Close: got %v; want ErrClosed", err)
	}
}

func connIDs(d *demohms.Server) map[uint64]bool {
	ids := map[uint64]bool{}
	for _, c := range d.Calls() {
		ids[c.Conn] = true
	}
	return ids
}

// TestRunnerDrivesReaper: the reaper as a leader-only task of a Runner.
func TestRunnerDrivesReaper(t *testing.T) {
	demo, addr := startDemo(t)
	c := newClient(t, addr)
	openTxns(t, c, 1)
	r, err := housekeeping.NewReaper(housekeeping.ReaperConfig{Caller: c, Enabled: true, Abort: true,
		Every: 10 * time.Millisecond, Now: func() time.Time { return time.Now().Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	run, err := worker.New(worker.Config{}, r.Task())
	if err != nil {
		t.Fatal(err)
	}
	run.Start()
	defer run.Close()
	if !wait.Until(5*time.Second, func() bool { return demo.TxnState(1) == "aborted" }) {
		t.Fatalf("txn not aborted by the runner; stats %+v", run.Snapshot())
	}
}
