package bench

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/trace"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// recordThrough runs a proxy with no cache and a recorder in front of
// addr, lets work make calls through it, and returns the recorded trace.
func recordThrough(t *testing.T, addr string, work func(proxyAddr string)) []trace.Call {
	t.Helper()
	path := filepath.Join(t.TempDir(), "calls.trace")
	rec, err := trace.New(trace.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	g, err := upstream.New(upstream.Config{URIs: []string{"thrift://" + addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	srv, err := proxy.New(proxy.Config{Recorder: rec}, g)
	if err != nil {
		t.Fatal(err)
	}
	ln := proxytest.Listen(t)
	go srv.Serve(ln)
	rec.Start(0)
	work(ln.Addr().String())
	// Shutdown waits for every connection, so every call is handed over.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	rec.Stop()
	l, err := trace.Load(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	return l.Calls
}

func defaultCaching() (*proxy.Caching, error) {
	st, err := cache.New(cache.Config{MaxBytes: 64 << 20, Kinds: cache.DefaultKinds()})
	if err != nil {
		return nil, err
	}
	return &proxy.Caching{Store: st, Upstream: "replay", Shadow: proxy.Shadow{Rate: -1}}, nil
}

var replayLine = regexp.MustCompile(`(?m)^replay: (\d+) calls, ([0-9.]+)% metastore calls saved, p50 direct \S+ proxy \S+$`)

// A repeated planning workload recorded through a proxy with no cache
// replays call for call, each way; with a cache the proxy answers most of
// it, without one it saves nothing; writes are skipped unless asked for.
func TestReplayRecordedPlanning(t *testing.T) {
	ms := demohms.New(demohms.Config{})
	ms.Seed(1, 2, 48)
	ln := proxytest.Listen(t)
	go ms.Serve(ln)
	defer ms.Close()
	addr := ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	work := Planning{DB: "demo_db0", Tables: []string{"t0", "t1"}, Queries: 4, Rounds: 10, Window: 12, NoStats: true}
	made := 0
	calls := recordThrough(t, addr, func(paddr string) {
		for i := range 2 { // two clients, one a set_ugi user that also writes
			cl, err := hmsclient.Dial(ctx, paddr, wire.Buffered)
			if err != nil {
				t.Fatal(err)
			}
			if i == 1 {
				if _, err := cl.Call(ctx, "set_ugi", hmsreq.Args(hmsreq.Str(1, "bob"), hmsreq.Strings(2))); err != nil {
					t.Fatal(err)
				}
				made++
				if _, err := cl.Call(ctx, "drop_table", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "nope"), hmsreq.Bool(3, false))); err != nil {
					t.Fatal(err)
				}
				made++
			}
			n, err := work.Run(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			made += n
			cl.Close()
		}
	})
	if len(calls) != made {
		t.Fatalf("recorded %d calls; want the %d made", len(calls), made)
	}
	for _, tc := range []struct {
		name      string
		caching   func() (*proxy.Caching, error)
		minSaved  float64
		maxSaved  float64
		wantHits  bool
		wantWrite bool
	}{
		{"cache on", defaultCaching, 0.8, 1, true, false},
		{"cache off", nil, 0, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Replay(ctx, ReplayConfig{Calls: calls, Upstream: []string{addr}, Caching: tc.caching, Speed: 0})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := rep.WriteTable(&out); err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + out.String())
			if rep.Replayed != made-1 || rep.Skipped[skipWrite] != 1 {
				t.Fatalf("replayed %d, skipped %v; want %d replayed and the drop_table skipped", rep.Replayed, rep.Skipped, made-1)
			}
			byMethod := map[string]int{}
			for _, c := range calls {
				byMethod[c.Method]++
			}
			for _, r := range rep.Rows {
				if r.Calls != byMethod[r.Method] || r.DirectErrors+r.ProxyErrors != 0 {
					t.Errorf("%s: %d calls (%d/%d errors); recorded %d", r.Method, r.Calls, r.DirectErrors, r.ProxyErrors, byMethod[r.Method])
				}
			}
			if s := rep.Total.Saved; s < tc.minSaved || s > tc.maxSaved || (rep.Total.Hits > 0) != tc.wantHits {
				t.Fatalf("saved %.3f, %d hits; want within [%v, %v], hits %v", s, rep.Total.Hits, tc.minSaved, tc.maxSaved, tc.wantHits)
			}
			m := replayLine.FindStringSubmatch(out.String())
			if m == nil || !strings.HasSuffix(strings.TrimSpace(out.String()), m[0]) || m[1] != fmt.Sprint(made-1) {
				t.Fatalf("the report's last line is not the replay line:\n%s", out.String())
			}
			var svg bytes.Buffer
			if err := rep.WriteSVG(&svg); err != nil || !strings.Contains(svg.String(), "get_partitions_by_names") {
				t.Fatalf("svg: %v", err)
			}
		})
	}
	t.Run("writes", func(t *testing.T) {
		rep, err := Replay(ctx, ReplayConfig{Calls: calls, Upstream: []string{addr}, Writes: true})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Replayed != made || len(rep.Skipped) != 0 {
			t.Fatalf("replayed %d, skipped %v; want all %d", rep.Replayed, rep.Skipped, made)
		}
	})
}
