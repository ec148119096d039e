package proxy

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/kdctest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/trace"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// seenRecorder counts the calls the proxy handed to a recorder, so that
// a test stops recording only once the proxy is done with its calls: a
// call is recorded after its reply is written.
type seenRecorder struct {
	*trace.Recorder
	n atomic.Int64
}

func (r *seenRecorder) Record(c *trace.Call) {
	r.Recorder.Record(c)
	r.n.Add(1)
}

// newSeenRecorder is a recorder writing to a file in the test's
// temporary directory, closed when the test ends.
func newSeenRecorder(t *testing.T) *seenRecorder {
	return &seenRecorder{Recorder: newTrace(t, trace.Config{})}
}

// newTrace is a recorder with cfg writing to a file in the test's
// temporary directory, closed when the test ends.
func newTrace(tb testing.TB, cfg trace.Config) *trace.Recorder {
	tb.Helper()
	cfg.Path = filepath.Join(tb.TempDir(), "calls.trace")
	tr, err := trace.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tr.Close() })
	return tr
}

// benchTrace is large enough that a benchmark's calls never fill it.
var benchTrace = trace.Config{FileBytes: 16 << 20, MaxBytes: 64 << 20}

// cachedProxies starts a caching proxy over ms for each recorder (nil:
// none) and makes the miss for args through each, so that what follows
// are hits.
func cachedProxies(b *testing.B, ms string, args []byte, recs ...CallRecorder) []string {
	addrs := make([]string, len(recs))
	for i, r := range recs {
		_, addrs[i] = serve(b, Config{Cache: newCaching(b, nil), Recorder: r}, proxytest.Group(b, upstream.Config{}, ms))
		call(b, dial(b, addrs[i], wire.Buffered), "get_table", args)
	}
	return addrs
}

// load reads back what the recorder wrote.
func (r *seenRecorder) load(t *testing.T) *trace.Loaded {
	t.Helper()
	l, err := trace.Load(r.Path(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// stopAfter stops recording once n calls were handed over.
func (r *seenRecorder) stopAfter(t *testing.T, n int64) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d calls handed to the recorder", n), func() bool { return r.n.Load() >= n })
	r.Stop()
}

// recorded is one call a test made and what its client received.
type recorded struct {
	method string
	args   []byte
	reply  []byte
	out    trace.Outcome
	field  int16
	served string
}

// The recorder sees every client call as the client made it: its args
// byte for byte, its identity, and the size and outcome of the reply the
// client received, whether the reply came from the cache, the metastore
// whole, or streamed through (larger than upstream.HoldMax).
func TestRecordCalls(t *testing.T) {
	_, ms := startDemo(t, wire.Buffered)
	for _, tc := range []struct {
		name  string
		cache bool
	}{{"cached", true}, {"passthrough streamed", false}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newSeenRecorder(t)
			cfg := Config{Recorder: rec}
			if tc.cache {
				cfg.Cache = newCaching(t, nil)
			}
			g := proxytest.Group(t, upstream.Config{HoldMax: 4 << 10}, ms)
			_, addr := serve(t, cfg, g)
			rec.Start(0)

			c := dial(t, addr, wire.Buffered)
			var made []recorded
			do := func(method string, args []byte, out trace.Outcome, field int16, served string) {
				reply := bytes.Clone(call(t, c, method, args))
				made = append(made, recorded{method, args, reply, out, field, served})
			}
			tableArgs := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
			allParts := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.I16(3, -1))
			first, again := "miss", "hit"
			if !tc.cache {
				first, again = "passthrough", "passthrough"
			}
			do("set_ugi", ugiArgs("alice", "analysts"), trace.OK, 0, "passthrough")
			do("get_table", tableArgs, trace.OK, 0, first)
			if tc.cache {
				cfg.Cache.Store.Wait() // the store admits asynchronously: the next read must find it
			}
			do("get_table", tableArgs, trace.OK, 0, again)
			do("get_table", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "nope")), trace.Declared, 2, first)
			do("get_partitions", allParts, trace.OK, 0, first) // 240 partitions: streamed when not cached
			do("no_such_method_at_all", hmsreq.Args(), trace.AppError, 0, map[bool]string{true: "write", false: "passthrough"}[tc.cache])
			rec.stopAfter(t, int64(len(made)))

			l := rec.load(t)
			if len(l.Calls) != len(made) {
				t.Fatalf("%d calls recorded; want %d", len(l.Calls), len(made))
			}
			for i, got := range l.Calls {
				want := made[i]
				if got.Method != want.method || !bytes.Equal(got.Args, want.args) {
					t.Errorf("call %d: %s %x; want %s %x", i, got.Method, got.Args, want.method, want.args)
				}
				if got.ReplySize != int64(len(want.reply)) || got.Outcome != want.out || got.ExField != want.field || got.Served != want.served {
					t.Errorf("call %d (%s): reply %d bytes %v field %d served %s; want %d bytes %v field %d served %s", i, got.Method,
						got.ReplySize, got.Outcome, got.ExField, got.Served, len(want.reply), want.out, want.field, want.served)
				}
				if got.Conn != l.Calls[0].Conn || got.Conn == 0 {
					t.Errorf("call %d on connection %d; want all on one, numbered", i, got.Conn)
				}
				if i > 0 && (got.User != "alice" || got.UserKind != trace.Claimed) {
					t.Errorf("call %d as %q (%d); want alice, claimed", i, got.User, got.UserKind)
				}
			}
			if tc.cache {
				return
			}
			if n := g.Stats().Streamed; n == 0 {
				t.Fatal("no reply was streamed: the streamed path went untested")
			}
		})
	}
}

// Recording stopped means nothing is recorded, and a new connection
// after a restart of the recording gets a new number.
func TestRecordOnlyWhileRecording(t *testing.T) {
	_, ms := startDemo(t, wire.Buffered)
	rec := newSeenRecorder(t)
	_, addr := serve(t, Config{Recorder: rec}, proxytest.Group(t, upstream.Config{}, ms))
	c := dial(t, addr, wire.Buffered)
	args := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	call(t, c, "get_table", args)
	rec.Start(0)
	call(t, c, "get_table", args)
	call(t, dial(t, addr, wire.Buffered), "get_table", args)
	rec.stopAfter(t, 2)
	call(t, c, "get_table", args)
	call(t, c, "get_table", args) // the one before is done with
	if n := rec.n.Load(); n != 2 {
		t.Fatalf("%d calls handed to the recorder; want the 2 made while recording", n)
	}
	l := rec.load(t)
	if len(l.Calls) != 2 || l.Calls[0].Conn == l.Calls[1].Conn {
		t.Fatalf("recorded %+v; want the two calls made while recording, on two connections", l.Calls)
	}
}

// callTimer is a client and the time its calls took.
type callTimer struct {
	c     *hmsclient.Client
	total time.Duration
}

// BenchmarkRecordOverhead: cached get_table hits through three proxies
// over one metastore, side by side in one run: no recorder, a recorder
// that is off, and one recording. Each iteration calls each proxy once,
// in rotating order; the client reads replies raw. Reported: ns per call
// of each and the ratios to no recorder. Off must cost nothing
// measurable (one atomic load a call).
func BenchmarkRecordOverhead(b *testing.B) {
	_, ms := startDemo(b, wire.Buffered)
	off, on := newTrace(b, trace.Config{}), newTrace(b, benchTrace)
	on.Start(0)
	args := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	names := []string{"none", "off", "on"}
	var conns [3]*callTimer
	for i, addr := range cachedProxies(b, ms, args, nil, off, on) {
		conns[i] = &callTimer{c: dial(b, addr, wire.Buffered)}
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for j := range conns {
			ct := conns[(n+j)%len(conns)]
			start := time.Now()
			if _, err := ct.c.Call(ctxT(b), "get_table", args); err != nil {
				b.Fatal(err)
			}
			ct.total += time.Since(start)
		}
	}
	b.StopTimer()
	for i, ct := range conns {
		b.ReportMetric(float64(ct.total.Nanoseconds())/float64(b.N), "ns/call-"+names[i])
	}
	b.ReportMetric(float64(conns[1].total)/float64(conns[0].total), "off/none")
	b.ReportMetric(float64(conns[2].total)/float64(conns[0].total), "on/none")
	if st := on.Stats(); st.Dropped > 0 {
		b.Log(fmt.Sprintf("recording dropped %d calls (buffer full)", st.Dropped))
	}
}

// BenchmarkRecordParallel: cached get_table hits from 16 connections at
// once to each of two proxies over one metastore, one recording and one
// not, every goroutine alternating between them so both see the same
// load. Reported: ns per call each way and the ratio, which shows what
// the recorder's one lock costs under concurrency.
func BenchmarkRecordParallel(b *testing.B) {
	_, ms := startDemo(b, wire.Buffered)
	on := newTrace(b, benchTrace)
	on.Start(0)
	args := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	addrs := cachedProxies(b, ms, args, nil, on)
	const workers = 16
	var totals [2]atomic.Int64
	per := max(b.N/workers, 1)
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range workers {
		cs := [2]*hmsclient.Client{dial(b, addrs[0], wire.Buffered), dial(b, addrs[1], wire.Buffered)}
		wg.Go(func() {
			var local [2]time.Duration
			for n := range per {
				for j := range 2 {
					k := (n + w + j) % 2
					start := time.Now()
					if _, err := cs[k].Call(context.Background(), "get_table", args); err != nil {
						b.Error(err)
						return
					}
					local[k] += time.Since(start)
				}
			}
			totals[0].Add(int64(local[0]))
			totals[1].Add(int64(local[1]))
		})
	}
	wg.Wait()
	b.StopTimer()
	calls := float64(per * workers)
	b.ReportMetric(float64(totals[0].Load())/calls, "ns/call-none")
	b.ReportMetric(float64(totals[1].Load())/calls, "ns/call-on")
	b.ReportMetric(float64(totals[1].Load())/float64(totals[0].Load()), "on/none")
	if st := on.Stats(); st.Dropped > 0 {
		b.Logf("recording dropped %d calls (buffer full)", st.Dropped)
	}
}

// Under Kerberos the recorded identity is the authenticated principal, of
// kind Authenticated, and a set_ugi claim changes it no more than it
// changes the session.
func TestRecordKerberosIdentity(t *testing.T) {
	rec := newSeenRecorder(t)
	b := newKrbBed(t, nil, func(c *Config) { c.Recorder = rec })
	rec.Start(0)
	alice := b.mustDial(t, "alice", kdctest.Alice)
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	call(t, alice, "get_table", get)
	call(t, alice, "set_ugi", ugiArgs("bob"))
	call(t, alice, "get_table", get)
	rec.stopAfter(t, 3)
	l := rec.load(t)
	if len(l.Calls) != 3 {
		t.Fatalf("%d calls recorded; want 3", len(l.Calls))
	}
	for _, c := range l.Calls {
		if c.UserKind != trace.Authenticated || c.User == "" || c.User == "bob" || c.User != l.Calls[0].User {
			t.Fatalf("%s recorded as %q (kind %d); want alice's principal, authenticated, throughout", c.Method, c.User, c.UserKind)
		}
	}
}
