package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/hmsclient"
	"github.com/hmsproxy/hmsproxy/internal/hmsreq"
	"github.com/hmsproxy/hmsproxy/internal/wire"
)

// TestShadowWiring runs the binary's wiring with the demo metastore, no
// event log and every hit checked (cache.shadow.rate 1): a table dropped
// directly on the metastore is found on its next hit, and the status
// page says so.
func TestShadowWiring(t *testing.T) {
	cfg := defaults()
	cfg.Demo = true
	cfg.Listen = freeAddr(t)
	cfg.Admin.Listen = freeAddr(t)
	cfg.EventLog.Interval = 0
	cfg.Housekeeping.OpenTxnsInterval = 0
	cfg.Housekeeping.CompactionsInterval = 0
	cfg.Cache.Shadow.Rate = 1
	cfg.Log.Level = "error"
	cfg.ShutdownTimeout = 5 * time.Second

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	c := dialWhenUp(t, cfg.Listen, done)

	type shadowStatus struct {
		Checks, Mismatches uint64
	}
	var st struct {
		Upstreams []struct{ Addr string }
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
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if status(); st.Shadow != nil && cond() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("status never showed %s: %+v", what, st.Shadow)
			}
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
