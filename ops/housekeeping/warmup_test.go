package housekeeping_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/ops/housekeeping"
	"github.com/hmsproxy/hmsproxy/ops/worker"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// warmBed is a caching proxy in front of a seeded demo metastore.
type warmBed struct {
	demo  *demohms.Server
	addr  string // the demo's
	srv   *proxy.Server
	paddr string // the proxy's client listener
	store *cache.Store
	group *upstream.Metastores
}

func newWarmBed(t *testing.T, up upstream.Config) *warmBed {
	t.Helper()
	b := &warmBed{}
	b.demo, b.addr = startDemo(t)
	b.store = proxytest.Store(t, cache.Config{})
	// Shadow re-reads would add metastore calls these tests count.
	caching := &proxy.Caching{Store: b.store, Upstream: "test", Shadow: proxy.Shadow{Rate: -1}}
	var err error
	b.group = proxytest.Group(t, up, b.addr)
	if b.srv, err = proxy.New(proxy.Config{Cache: caching, Logger: testLogger(t)}, b.group); err != nil {
		t.Fatal(err)
	}
	b.paddr = proxytest.Serve(t, b.srv)
	return b
}

// warmUp is a warm-up over n background connections of the bed's proxy,
// as the binary builds it.
func (b *warmBed) warmUp(t *testing.T, n, batch int, targets ...string) *housekeeping.WarmUp {
	t.Helper()
	tg, err := housekeeping.ParseTargets(targets)
	if err != nil {
		t.Fatal(err)
	}
	callers, closeCallers, err := housekeeping.NewClients(housekeeping.ClientConfig{User: "hive",
		Dial: func(context.Context) (net.Conn, error) { return b.srv.DialBackground() }}, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeCallers)
	w, err := housekeeping.NewWarmUp(housekeeping.WarmUpConfig{Callers: callers, Targets: tg, Batch: batch, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

func partNamesArgs(db, tbl string) []byte {
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.I16(3, -1))
}

func byNamesArgs(db, tbl string, names []string) []byte {
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, names...))
}

// names decodes a list<string> success.
func names(t *testing.T, reply []byte) []string {
	t.Helper()
	m, err := wire.Parse(reply, wire.Limits{MaxMessage: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	d := wire.NewDecoder(m.Body())
	if typ, id := d.FieldBegin(); typ != wire.TList || id != 0 {
		t.Fatalf("no list success: field %d type %d", id, typ)
	}
	_, n := d.ListBegin()
	out := make([]string, n)
	for i := range out {
		out[i] = d.String()
	}
	return out
}

func body(t *testing.T, reply []byte) []byte {
	t.Helper()
	m, err := wire.Parse(reply, wire.Limits{MaxMessage: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	return m.Body()
}

// TestWarmUpFillsClientEntries guards issue 12: after a warm-up of a
// database and of tables named by a glob, with batches spread over three
// background connections, a client's own calls for those tables, their
// partition names and their partitions (asked in one batch, not the
// warm-up's) reach the metastore no more, and answer the metastore's
// bytes.
func TestWarmUpFillsClientEntries(t *testing.T) {
	b := newWarmBed(t, upstream.Config{})
	w := b.warmUp(t, 3, 7, "demo_db0", "demo_db1.t1", "demo_db1.t?")
	if task := w.Task(); task.Every != 0 || task.Scope != worker.EveryNode {
		t.Fatalf("warm-up task: got every %v scope %v; want once on every node", task.Every, task.Scope)
	}
	if err := w.Task().Run(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	p := w.Progress()
	// demo_db0: 3 tables; demo_db1.t?: t0, t1, t2; 20 partitions each
	if p.Tables != 6 || p.TablesDone != 6 || p.TablesListed != 6 || p.Partitions != 120 || p.PartitionsFound != 120 ||
		p.Errors != 0 || p.Running || p.Runs != 1 || p.Finished.IsZero() {
		t.Fatalf("progress: got %+v; want 6 tables and 120 partitions done, no error", p)
	}
	if n := b.demo.CallCount("get_partitions_by_names"); n != 6*3 { // 20 names in batches of 7
		t.Fatalf("warm-up: metastore saw %d get_partitions_by_names; want 18", n)
	}
	b.store.Wait()
	b.demo.ResetCalls()
	client := proxytest.Dial(t, b.paddr, wire.Buffered)
	direct := proxytest.Dial(t, b.addr, wire.Buffered)
	for _, tbl := range [][2]string{{"demo_db0", "t0"}, {"demo_db0", "t2"}, {"demo_db1", "t1"}} {
		for _, c := range []struct {
			method string
			args   []byte
		}{
			{"get_table", hmsreq.Args(hmsreq.Str(1, tbl[0]), hmsreq.Str(2, tbl[1]))},
			{"get_partition_names", partNamesArgs(tbl[0], tbl[1])},
		} {
			got := proxytest.Call(t, client, c.method, c.args)
			if n := b.demo.CallCount(c.method); n != 0 {
				t.Fatalf("%s %s.%s after the warm-up: metastore called %d times; want 0", c.method, tbl[0], tbl[1], n)
			}
			if want := proxytest.Call(t, direct, c.method, c.args); !bytes.Equal(body(t, got), body(t, want)) {
				t.Fatalf("%s %s.%s: the cached reply differs from the metastore's", c.method, tbl[0], tbl[1])
			}
			b.demo.ResetCalls()
		}
		all := names(t, proxytest.Call(t, direct, "get_partition_names", partNamesArgs(tbl[0], tbl[1])))
		slices.Reverse(all)
		args := byNamesArgs(tbl[0], tbl[1], all)
		b.demo.ResetCalls()
		got := proxytest.Call(t, client, "get_partitions_by_names", args)
		if n := b.demo.CallCount("get_partitions_by_names"); n != 0 {
			t.Fatalf("get_partitions_by_names %s.%s after the warm-up: metastore called %d times; want 0", tbl[0], tbl[1], n)
		}
		if want := proxytest.Call(t, direct, "get_partitions_by_names", args); !bytes.Equal(body(t, got), body(t, want)) {
			t.Fatalf("get_partitions_by_names %s.%s: the cached reply differs from the metastore's", tbl[0], tbl[1])
		}
		b.demo.ResetCalls()
	}
	// A table the targets leave out was not warmed.
	proxytest.Call(t, client, "get_partition_names", partNamesArgs("demo_db1", "t9"))
	if n := b.demo.CallCount("get_partition_names"); n != 1 {
		t.Fatalf("a table outside the targets: metastore called %d times; want 1", n)
	}
}

// TestWarmUpInvalidationWins guards issue 12 (promise 3): a warm-up load
// in flight when its table is invalidated does not land, so the client's
// next read goes to the metastore.
func TestWarmUpInvalidationWins(t *testing.T) {
	for _, tc := range []struct {
		name       string
		flush      bool
		wantLoaded int // get_partitions_by_names calls of the client's read
	}{
		{"no invalidation", false, 0},
		{"invalidated while loading", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newWarmBed(t, upstream.Config{})
			w := b.warmUp(t, 1, 20, "demo_db0.t0")
			targets, err := housekeeping.ParseTargets([]string{"demo_db0.t0"})
			if err != nil {
				t.Fatal(err)
			}
			b.demo.SetDelay("get_partitions_by_names", time.Second)
			done := make(chan error, 1)
			go func() { done <- w.Run(context.Background(), targets) }()
			proxytest.Eventually(t, "the warm-up's batch to reach the metastore", func() bool {
				return b.demo.CallCount("get_partitions_by_names") == 1
			})
			if tc.flush {
				if err := b.srv.Flush(ctxT(t), []cache.Entity{{Level: cache.LevelTable, Cat: "hive", DB: "demo_db0", Table: "t0"}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			b.store.Wait()
			b.demo.SetDelay("get_partitions_by_names", 0)
			b.demo.ResetCalls()
			direct := proxytest.Dial(t, b.addr, wire.Buffered)
			all := names(t, proxytest.Call(t, direct, "get_partition_names", partNamesArgs("demo_db0", "t0")))
			proxytest.Call(t, proxytest.Dial(t, b.paddr, wire.Buffered), "get_partitions_by_names", byNamesArgs("demo_db0", "t0", all))
			if n := b.demo.CallCount("get_partitions_by_names"); n != tc.wantLoaded {
				t.Fatalf("client read after the warm-up: metastore called %d times; want %d", n, tc.wantLoaded)
			}
		})
	}
}

// TestWarmUpLeavesReservedConns guards issue 12: a warm-up wider than the
// upstream pool, stuck on a slow metastore, holds only the connections
// that reads do not reserve, so a client's read is served meanwhile; and
// Close cancels the stuck warm-up.
func TestWarmUpLeavesReservedConns(t *testing.T) {
	b := newWarmBed(t, upstream.Config{MaxConns: 3, ReservedReadConns: 1})
	w := b.warmUp(t, 3, 5, "demo_db0")
	b.demo.SetDelay("get_partitions_by_names", time.Hour) // Close interrupts it
	t.Cleanup(func() { b.demo.Close() })                  // before the proxy waits for its calls
	targets, err := housekeeping.ParseTargets([]string{"demo_db0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(targets); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(targets); !errors.Is(err, housekeeping.ErrWarmUpRunning) {
		t.Fatalf("second Start: got %v; want ErrWarmUpRunning", err)
	}
	// Two batches hold the unreserved connections, the third waits for
	// one; the client's read must not.
	proxytest.Eventually(t, "two warm-up batches at the metastore and one queued", func() bool {
		return b.demo.CallCount("get_partitions_by_names") == 2 && b.group.Queued() == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	m, err := proxytest.Dial(t, b.paddr, wire.Buffered).Call(ctx, "get_table", hmsreq.Args(hmsreq.Str(1, "demo_db1"), hmsreq.Str(2, "t1")))
	if err != nil || m.Type != wire.Reply {
		t.Fatalf("client read while the warm-up holds the pool: %v", err)
	}
	if n := b.demo.CallCount("get_partitions_by_names"); n != 2 {
		t.Fatalf("%d warm-up batches reached the metastore; want 2 (3 connections less 1 reserved)", n)
	}
	p := w.Progress()
	if !p.Running || p.Partitions != 0 || p.PartitionsFound == 0 {
		t.Fatalf("progress while stuck: got %+v; want running, names found, nothing loaded", p)
	}
	stopped := make(chan struct{})
	go func() { w.Close(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(proxytest.Timeout):
		t.Fatal("Close did not cancel the warm-up")
	}
	if p := w.Progress(); p.Running || p.Runs != 1 || p.Finished.IsZero() {
		t.Fatalf("progress after Close: got %+v; want a finished run", p)
	}
	if err := w.Start(targets); !errors.Is(err, housekeeping.ErrClosed) {
		t.Fatalf("Start after Close: got %v; want ErrClosed", err)
	}
}

func TestParseTargets(t *testing.T) {
	for _, tc := range []struct {
		in        string
		db, table string
		wantErr   bool
	}{
		{in: "db", db: "db"},
		{in: " db.t ", db: "db", table: "t"},
		{in: "sales_*.daily_?", db: "sales_*", table: "daily_?"},
		{in: "re:^web\\.", db: ""},
		{in: ".t", wantErr: true},
		{in: "a.b.c", wantErr: true},
		{in: "re:(", wantErr: true},
	} {
		got, err := housekeeping.ParseTargets([]string{tc.in})
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: got error %v; want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if err == nil && (got[0].DB != tc.db || got[0].Table != tc.table || got[0].String() != fmt.Sprint(strings.TrimSpace(tc.in))) {
			t.Errorf("%q: got %q.%q (%s); want %q.%q", tc.in, got[0].DB, got[0].Table, got[0], tc.db, tc.table)
		}
	}
}

// BenchmarkWarmUp warms one table of 20,000 partitions of the demo
// metastore straight from it and through a caching proxy (cold cache
// each time), with the same batch and concurrency: the ratio is the
// proxy's cost on the warm-up when the metastore is fast. Partitions per
// second are reported as parts/s.
func BenchmarkWarmUp(b *testing.B) {
	const parts, batch, conc = 20000, 500, 4
	_, addr := proxytest.Demo(b, proxytest.DemoOptions{Seed: [3]int{1, 1, parts}})
	store := proxytest.Store(b, cache.Config{MaxBytes: 4 << 30})
	caching := &proxy.Caching{Store: store, Upstream: "bench", Shadow: proxy.Shadow{Rate: -1}}
	srv, err := proxy.New(proxy.Config{Cache: caching}, proxytest.Group(b, upstream.Config{}, addr))
	if err != nil {
		b.Fatal(err)
	}
	proxytest.Serve(b, srv)
	targets, err := housekeeping.ParseTargets([]string{"demo_db0.t0"})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		cfg  housekeeping.ClientConfig
	}{
		{"direct", housekeeping.ClientConfig{Addrs: []string{addr}}},
		{"proxy", housekeeping.ClientConfig{Dial: func(context.Context) (net.Conn, error) { return srv.DialBackground() }}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			callers, closeCallers, err := housekeeping.NewClients(bc.cfg, conc)
			if err != nil {
				b.Fatal(err)
			}
			defer closeCallers()
			w, err := housekeeping.NewWarmUp(housekeeping.WarmUpConfig{Callers: callers, Batch: batch})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			var took time.Duration
			for b.Loop() {
				b.StopTimer()
				store.Clear()
				b.StartTimer()
				start := time.Now()
				if err := w.Run(context.Background(), targets); err != nil {
					b.Fatal(err)
				}
				took += time.Since(start)
				if p := w.Progress(); p.Partitions != parts {
					b.Fatalf("%d partitions warmed; want %d", p.Partitions, parts)
				}
			}
			b.ReportMetric(float64(parts*b.N)/took.Seconds(), "parts/s")
		})
	}
}

// TestWarmUpWithoutGetTable guards issue 12: against a metastore that no
// longer knows get_table (Hive 4.0.1 on), the warm-up loads tables with
// get_table_req, asking get_table only once, and still warms partitions.
func TestWarmUpWithoutGetTable(t *testing.T) {
	demo, daddr := startDemo(t)
	var mu sync.Mutex // guards fwd and gets
	fwd := proxytest.Dial(t, daddr, wire.Buffered)
	gets := 0
	addr := proxytest.Fake(t, wire.Buffered, func(c *proxytest.FakeConn, m wire.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if string(m.Name()) == "get_table" {
			gets++
			c.Scratch = wire.AppendApplicationException(c.Scratch[:0], "get_table", m.SeqID, 1, "Invalid method name: 'get_table'")
			return c.W.Write(c.Scratch)
		}
		r, err := fwd.Call(context.Background(), string(m.Name()), m.Body())
		if err != nil {
			return err
		}
		c.Scratch = wire.AppendHeader(c.Scratch[:0], r.Type, m.Name(), m.SeqID)
		return c.W.Write(c.Scratch, r.Body())
	})
	caller, err := housekeeping.NewClient(housekeeping.ClientConfig{Addrs: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { caller.Close() })
	targets, err := housekeeping.ParseTargets([]string{"demo_db0"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := housekeeping.NewWarmUp(housekeeping.WarmUpConfig{Callers: []housekeeping.Caller{caller}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctxT(t), targets); err != nil {
		t.Fatal(err)
	}
	if p := w.Progress(); p.TablesDone != 3 || p.Partitions != 60 || p.Errors != 0 {
		t.Fatalf("progress: got %+v; want 3 tables and 60 partitions, no error", p)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := demo.CallCount("get_table_req"); gets != 1 || n != 3 {
		t.Fatalf("get_table asked %d times, get_table_req %d; want 1 and 3", gets, n)
	}
}

// A run that Progress shows as finished no longer holds the warm-up: the
// next Start, at once, is accepted (the admin endpoint's 202 after a
// finished run, not 409).
func TestWarmUpStartableOnceFinished(t *testing.T) {
	b := newWarmBed(t, upstream.Config{})
	w := b.warmUp(t, 1, 50, "demo_db1.t1")
	targets, err := housekeeping.ParseTargets([]string{"demo_db1.t1"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range uint64(30) {
		if err := w.Start(targets); err != nil {
			t.Fatalf("run %d: Start right after run %d was shown finished: %v", i+1, i, err)
		}
		deadline := time.Now().Add(proxytest.Timeout)
		for w.Progress().Runs != i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("run %d did not finish", i+1)
			}
			runtime.Gosched()
		}
	}
}

// A run Start accepted shows as running at once, with its own targets: a
// client that polls the progress after its 202 (GET /cache/warm,
// hmsproxy_warmup_running) must never take the previous run's finished
// record for its own. The run is held before it loads anything (Ready)
// so that it cannot have finished by the time it is looked at.
func TestWarmUpShownRunningOnceStarted(t *testing.T) {
	_, addr := startDemo(t)
	proceed := make(chan struct{})
	w, err := housekeeping.NewWarmUp(housekeeping.WarmUpConfig{Callers: []housekeeping.Caller{newClient(t, addr)},
		Ready: func(ctx context.Context) error {
			select {
			case <-proceed:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	for i := range uint64(30) {
		spec := fmt.Sprintf("demo_db1.t%d", i%2+1)
		targets, err := housekeeping.ParseTargets([]string{spec})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(targets); err != nil {
			t.Fatalf("run %d: Start: %v", i+1, err)
		}
		if p := w.Progress(); !p.Running || p.Runs != i || !p.Finished.IsZero() || !slices.Equal(p.Targets, []string{spec}) ||
			p.Tables != 0 || p.Partitions != 0 {
			t.Fatalf("run %d: progress right after Start: %+v; want it running on [%s], nothing counted yet, %d runs finished before", i+1, p, spec, i)
		}
		proceed <- struct{}{}
		proxytest.Eventually(t, fmt.Sprintf("run %d to finish", i+1), func() bool { return w.Progress().Runs == i+1 })
		if p := w.Progress(); p.Running || p.Errors != 0 || p.Partitions != 20 {
			t.Fatalf("run %d finished: %+v; want 20 partitions loaded", i+1, p)
		}
	}
}
