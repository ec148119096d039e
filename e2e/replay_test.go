package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/bench"
	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/trace"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// replayCaching is hmsproxy's default cache, as hmsbench replay builds
// it without --config (shadow reads off: they would add metastore calls
// by chance).
func replayCaching() (*proxy.Caching, error) {
	st, err := cache.New(cache.Config{MaxBytes: 256 << 20, Kinds: cache.DefaultKinds()})
	if err != nil {
		return nil, err
	}
	return &proxy.Caching{Store: st, Upstream: "replay", Shadow: proxy.Shadow{Rate: -1}}, nil
}

// TestRecordReplay (issue 24): a Trino-like planning workload (table,
// partition names, partitions by name, table and partition statistics;
// the same queries over and over) is recorded through a proxy with the
// cache off on HMS 3.1, then replayed with the cache on and off: the
// replayed calls are the recorded calls, and with the cache on most of
// them never reach the metastore. The metastore's own audit log of the
// same workload replays too.
func TestRecordReplay(t *testing.T) {
	if !slices.Contains(versions(t), "3.1") {
		t.Skip("record and replay run on HMS 3.1")
	}
	ms := start(t, "3.1")
	ctx := proxytest.Within(t, 5*time.Minute)
	begin := time.Now()
	took := func() time.Duration { return time.Since(begin).Round(100 * time.Millisecond) }
	spec := bench.Spec{Databases: 1, Tables: 2, Partitions: 12, Columns: 4, Params: 1}
	if _, err := bench.Setup(ctx, bench.Target{Name: "direct", Addr: ms.addr}, wire.Buffered, spec, nil); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(ms.work, "hms.log")
	before := fileSize(t, logPath)

	// Four engine connections at once, two of them as set_ugi users,
	// each planning the same two queries six times.
	work := bench.Planning{DB: bench.DBName(0), Tables: []string{bench.TableName(0), bench.TableName(1)},
		Queries: 2, Rounds: 6, Window: 6}
	var made atomic.Int64
	calls := recordPassthrough(t, ms.addr, func(addr string) {
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for _, user := range []string{"", "analyst", "", "etl"} {
			wg.Go(func() {
				cl, err := hmsclient.Dial(ctx, addr, wire.Buffered)
				if err != nil {
					errs <- err
					return
				}
				defer cl.Close()
				if user != "" {
					made.Add(1)
					if _, err := cl.Call(ctx, "set_ugi", hmsreq.Args(hmsreq.Str(1, user), hmsreq.Strings(2, "analysts"))); err != nil {
						errs <- err
						return
					}
				}
				n, err := work.Run(ctx, cl)
				made.Add(int64(n))
				if err != nil {
					errs <- fmt.Errorf("as %q: %w", user, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	})
	fmt.Printf("e2e: record/replay HMS 3.1: %d calls recorded (at %v)\n", len(calls), took())
	if int64(len(calls)) != made.Load() {
		t.Fatalf("recorded %d calls; want the %d made", len(calls), made.Load())
	}
	recorded := countByMethod(calls)
	after := fileSize(t, logPath) // the replays below are logged too

	for _, tc := range []struct {
		name     string
		caching  func() (*proxy.Caching, error)
		min, max float64
	}{{"cache on", replayCaching, 0.8, 1}, {"cache off", nil, 0, 0}} {
		rep := replayOrFail(t, ctx, calls, ms.addr, tc.caching)
		if rep.Replayed != len(calls) {
			t.Fatalf("%s: replayed %d calls; want the %d recorded", tc.name, rep.Replayed, len(calls))
		}
		for _, r := range rep.Rows {
			if r.Calls != recorded[r.Method] || r.DirectErrors+r.ProxyErrors != 0 {
				t.Fatalf("%s: %s replayed %d times (%d/%d errors); recorded %d", tc.name, r.Method, r.Calls, r.DirectErrors, r.ProxyErrors, recorded[r.Method])
			}
		}
		if s := rep.Total.Saved; s < tc.min || s > tc.max {
			t.Fatalf("%s: %.1f%% metastore calls saved; want within %.0f%% and %.0f%%", tc.name, 100*s, 100*tc.min, 100*tc.max)
		}
		fmt.Printf("e2e: record/replay HMS 3.1, %s (at %v): %s\n", tc.name, took(), rep.Line())
	}

	// The metastore logged the same calls in its audit log.
	audit := auditBetween(t, logPath, before, after, work.DB)
	a, err := bench.FromAudit(ctx, audit, ms.addr, wire.Buffered)
	if err != nil {
		t.Fatal(err)
	}
	fromAudit := countByMethod(a.Calls)
	for m, as := range map[string]string{"get_table": "get_table_req", "get_partition_names": "get_partition_names",
		"get_partitions_by_names": "get_partitions_by_names", "get_table_statistics_req": "get_table_statistics_req",
		"get_partitions_statistics_req": "get_partitions_statistics_req"} {
		if fromAudit[as] != recorded[m] {
			t.Errorf("the audit log makes %d %s calls; the proxy recorded %d %s calls", fromAudit[as], as, recorded[m], m)
		}
	}
	if a.Approximated["get_partitions_by_names"] != recorded["get_partitions_by_names"] {
		t.Errorf("approximated %v; want every by-names call (the log has no names)", a.Approximated)
	}
	rep := replayOrFail(t, ctx, a.Calls, ms.addr, replayCaching)
	rep.NoteAudit(a)
	if rep.Total.Saved < 0.8 || rep.Total.ProxyErrors+rep.Total.DirectErrors != 0 {
		t.Fatalf("audit replay: %.1f%% saved, %d/%d errors", 100*rep.Total.Saved, rep.Total.DirectErrors, rep.Total.ProxyErrors)
	}
	fmt.Printf("e2e: record/replay HMS 3.1, audit log (%d approximated, at %v): %s\n", rep.Total.Approximated, took(), rep.Line())
}

// recordPassthrough records, through a proxy with no cache in front of
// addr, the calls work makes, and returns them once every call is written.
func recordPassthrough(t *testing.T, addr string, work func(proxyAddr string)) []trace.Call {
	t.Helper()
	path := filepath.Join(t.TempDir(), "calls.trace")
	rec, err := trace.New(trace.Config{Path: path, Logger: proxytest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	srv, err := proxy.New(proxy.Config{Logger: proxytest.Logger(t), Recorder: rec}, proxytest.Group(t, upstream.Config{}, addr))
	if err != nil {
		t.Fatal(err)
	}
	paddr := proxytest.Serve(t, srv)
	rec.Start(0)
	work(paddr)
	// Shutdown waits for every connection: each call has been handed over.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	rec.Stop()
	l, err := trace.Load(path, 0)
	if err != nil || len(l.Damaged) != 0 {
		t.Fatalf("load the trace: %v %v", err, l.Damaged)
	}
	return l.Calls
}

func replayOrFail(t *testing.T, ctx context.Context, calls []trace.Call, addr string, caching func() (*proxy.Caching, error)) *bench.ReplayReport {
	t.Helper()
	rep, err := bench.Replay(ctx, bench.ReplayConfig{Calls: calls, Upstream: []string{addr}, Caching: caching})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.WriteTable(&out)
	t.Log("\n" + out.String())
	if !strings.HasSuffix(strings.TrimSpace(out.String()), rep.Line()) {
		t.Fatalf("the report does not end with the replay line:\n%s", out.String())
	}
	return rep
}

func countByMethod(calls []trace.Call) map[string]int {
	out := map[string]int{}
	for _, c := range calls {
		out[c.Method]++
	}
	return out
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// auditBetween is the audit lines the metastore wrote to its log between
// two offsets about db, and the connection ends among them (other tests
// may share the metastore).
func auditBetween(t *testing.T, path string, offset, end int64, db string) []trace.AuditLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	lines, _, err := trace.ParseAudit(io.LimitReader(f, end-offset))
	if err != nil {
		t.Fatal(err)
	}
	var out []trace.AuditLine
	for _, l := range lines {
		if l.Close || l.DB == db {
			out = append(out, l)
		}
	}
	return out
}
