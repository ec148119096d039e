package main

import (
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestShadowWiring runs the binary's wiring with the demo metastore, no
// event log and every hit checked (cache.shadow.rate 1): a table dropped
// directly on the metastore is found on its next hit, and the status
// page says so.
func TestShadowWiring(t *testing.T) {
	cfg := demoConfig(t)
	cfg.Cache.Shadow.Rate = 1

	c := runInProcess(t, cfg)
	// run binds the admin listener after the proxy's, which c reached.
	proxytest.Eventually(t, "the admin listener", func() bool {
		nc, err := net.Dial("tcp", cfg.Admin.Listen)
		if err == nil {
			nc.Close()
		}
		return err == nil
	})

	type shadowStatus struct {
		Checks, Mismatches, Failed, Skipped uint64
	}
	var st struct {
		Upstreams []struct{ Addr string }
		Kinds     []struct{ Hits uint64 }
		Shadow    *shadowStatus
	}
	status := func() {
		t.Helper()
		resp, err := http.Get("http://" + cfg.Admin.Listen + "/status.json")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
	}
	waitStatus := func(what string, cond func() bool) {
		t.Helper()
		// A check of the condition may make a call: paced as a client.
		if !wait.Poll(10*time.Second, 10*time.Millisecond, func() bool { status(); return st.Shadow != nil && cond() }) {
			t.Fatalf("status never showed %s: %+v", what, st.Shadow)
		}
	}

	get := hmsclient.Args("demo_db0", "t1")
	// A miss, then hits once the store has admitted the entry (it does
	// so asynchronously); each hit is checked.
	waitStatus("a check", func() bool {
		if _, err := c.Call(ctxT(t), "get_table", get); err != nil {
			t.Fatal(err)
		}
		return st.Shadow.Checks >= 1
	})
	// Every hit is sampled (rate 1) and ends in one outcome. Until each
	// hit has its outcome, a check runs in the background, and run after
	// the drop below it would count a second mismatch.
	waitStatus("an outcome for every hit", func() bool {
		hits := uint64(0)
		for _, k := range st.Kinds {
			hits += k.Hits
		}
		return st.Shadow.Checks+st.Shadow.Failed+st.Shadow.Skipped == hits
	})
	if st.Shadow.Mismatches != 0 {
		t.Fatalf("%d mismatches before the metastore changed; want 0", st.Shadow.Mismatches)
	}

	// Behind the proxy's back: the demo metastore is the one upstream.
	direct, err := hmsclient.Dial(ctxT(t), st.Upstreams[0].Addr, wire.Buffered)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if _, err := direct.Call(ctxT(t), "drop_table", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t1"), hmsreq.Bool(3, true))); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctxT(t), "get_table", get); err != nil {
		t.Fatal(err)
	}
	waitStatus("the mismatch", func() bool { return st.Shadow.Mismatches == 1 })
}

// TestShadowConfig: the cache.shadow keys and flag reach the proxy's
// Shadow; 0 turns it off, and the grace period follows the event log.
func TestShadowConfig(t *testing.T) {
	file := writeConfig(t, "cache:\n  shadow:\n    rate: 0.5\n    max_per_second: 7\neventlog:\n  interval: 0s\n")
	for _, tc := range []struct {
		name    string
		args    []string
		want    proxy.Shadow
		wantErr bool
	}{
		{"defaults", []string{"-demo"}, proxy.Shadow{Rate: 0.001, MaxPerSecond: 20, Grace: 1250 * time.Millisecond}, false},
		{"flag off", []string{"-demo", "-cache-shadow-rate", "0"}, proxy.Shadow{Rate: -1, MaxPerSecond: 20, Grace: 1250 * time.Millisecond}, false},
		{"file, no event log", []string{"-demo", "-config", file}, proxy.Shadow{Rate: 0.5, MaxPerSecond: 7, Grace: -1}, false},
		{"out of range", []string{"-demo", "-cache-shadow-rate", "2"}, proxy.Shadow{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := load(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			caching, err := settings.NewCaching(cfg)
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer caching.Store.Close()
			if caching.Shadow != tc.want {
				t.Fatalf("got %+v; want %+v", caching.Shadow, tc.want)
			}
		})
	}
}
