package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/changes"
	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestProxyWritesReachChangeStream runs the binary's own wiring (run, with
// the demo metastore and a real Redis) and makes a write through the
// proxy: it must appear on the change-event stream. Issue 10: the stream
// was attached to the caching config after proxy.New had copied it, so
// it never saw a write made through the proxy.
func TestProxyWritesReachChangeStream(t *testing.T) {
	r := redistest.Start(t)
	// Only the proxy's own writes may reach the stream in this test,
	// which demoConfig sees to.
	cfg := demoConfig(t)
	cfg.Admin.Listen = ""
	cfg.Redis.URL = r.Addr

	c := runInProcess(t, cfg)
	args := hmsreq.Args(hmsreq.Database{Name: "lineage", Description: "d", Location: "file:/tmp/wh/lineage.db"}.Field(1))
	m, err := c.Call(ctxT(t), "create_database", args)
	if err != nil {
		t.Fatalf("create_database through the proxy: %v", err)
	}
	if m.Type != wire.Reply {
		t.Fatalf("create_database: message type %d; want a reply", m.Type)
	}

	rdb := r.Client()
	var keys []string
	var seen []changes.Change
	reached := func() bool {
		var err error
		seen = nil
		keys, err = rdb.Keys(ctxT(t), "hmsproxy:changes:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			msgs, err := rdb.XRange(ctxT(t), k, "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, msg := range msgs {
				var ch changes.Change
				if err := json.Unmarshal([]byte(msg.Values["c"].(string)), &ch); err != nil {
					t.Fatalf("entry %s: %v", msg.ID, err)
				}
				if ch.Source == "proxy" && ch.Type == "create_database" && ch.DB == "lineage" && ch.OK {
					return true
				}
				seen = append(seen, ch)
			}
		}
		return false
	}
	if !wait.Poll(10*time.Second, 20*time.Millisecond, reached) {
		t.Fatalf("the write through the proxy never reached the change stream; stream keys %v, entries %+v", keys, seen)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln := proxytest.Listen(t)
	defer ln.Close()
	return ln.Addr().String()
}

// dialWhenUp connects to the proxy once run has bound its port.
func dialWhenUp(t *testing.T, addr string, done chan error) *hmsclient.Client {
	t.Helper()
	var c *hmsclient.Client
	var err error
	up := func() bool {
		if c, err = hmsclient.Dial(ctxT(t), addr, wire.Buffered); err == nil {
			return true
		}
		select {
		case err := <-done:
			done <- err // for the cleanup
			t.Fatalf("run stopped before listening: %v", err)
		default:
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial the proxy: %v", err)
		}
		return false
	}
	if !wait.Poll(10*time.Second, 20*time.Millisecond, up) {
		t.Fatalf("dial the proxy: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var ctxT = proxytest.Ctx

// runInProcess runs the binary's own wiring (run) with cfg until the test
// ends (with no drain delay), and returns a client of its proxy listener.
// demoConfig is the config of a proxy in front of the demo metastore on
// free loopback ports, with no background calls of its own to the
// metastore (event log, housekeeping), quiet logs and a short shutdown.
func demoConfig(t *testing.T) settings.File {
	t.Helper()
	cfg, err := settings.Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Demo = true
	quiet(t, &cfg)
	return cfg
}

// quiet puts cfg's proxy and admin port on free loopback ports, stops its
// background calls to the metastore (event log, housekeeping), quiets
// its logs and shortens its shutdown.
func quiet(t *testing.T, cfg *settings.File) {
	t.Helper()
	cfg.Listen = freeAddr(t)
	cfg.Admin.Listen = freeAddr(t)
	cfg.EventLog.Interval = 0
	cfg.Housekeeping.OpenTxnsInterval = 0
	cfg.Housekeeping.CompactionsInterval = 0
	cfg.Log.Level = "error"
	cfg.Shutdown.Timeout = 5 * time.Second
}

func runInProcess(t *testing.T, cfg settings.File) *hmsclient.Client {
	t.Helper()
	cfg.Shutdown.DrainDelay = 0
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
	if cfg.Admin.Listen != "" {
		// run binds the admin port after the proxy's: a test that asks it
		// right away must not find it closed.
		var err error
		if !wait.Until(10*time.Second, func() bool {
			var ac net.Conn
			if ac, err = net.Dial("tcp", cfg.Admin.Listen); err == nil {
				ac.Close()
				return true
			}
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("dial the admin port: %v", err)
			}
			return false
		}) {
			t.Fatalf("dial the admin port: %v", err)
		}
	}
	return c
}
