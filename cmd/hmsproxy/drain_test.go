package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// adminDo makes one admin request and returns its status and body.
func adminDo(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var waitFor = proxytest.Eventually

func demoCall(ctx context.Context, addr string) error {
	c, err := hmsclient.Dial(ctx, addr, wire.Buffered)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Call(ctx, "get_all_databases", hmsclient.Args())
	return err
}

// TestSIGTERMDrainsFirst: on SIGTERM /readyz fails at once while the
// listener still takes new clients for shutdown.drain_delay; then the
// listener closes, idle clients are closed, and the process exits 0
// (issue 15).
func TestSIGTERMDrainsFirst(t *testing.T) {
	p := startBinary(t, "--demo", "--admin", "127.0.0.1:0", "--drain-delay", "2s")
	ready := "http://" + p.admin + "/readyz"
	waitFor(t, "ready", func() bool { code, _ := adminDo(t, "GET", ready); return code == 200 })
	idle, err := hmsclient.Dial(ctxT(t), p.addr, wire.Buffered)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := idle.Call(ctxT(t), "get_all_databases", hmsclient.Args()); err != nil {
		t.Fatal(err)
	}

	signalled := time.Now()
	p.Cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, "readiness false", func() bool {
		code, body := adminDo(t, "GET", ready)
		return code == 503 && strings.Contains(body, "draining")
	})
	// Readiness is false and the node still serves, old and new clients.
	if err := demoCall(ctxT(t), p.addr); err != nil {
		t.Fatalf("a new client after SIGTERM, readiness false, %v into the 2s drain delay: %v; want served", time.Since(signalled), err)
	}
	if _, err := idle.Call(ctxT(t), "get_all_databases", hmsclient.Args()); err != nil {
		t.Fatalf("an open client during the drain delay: %v; want served", err)
	}

	waitFor(t, "the listener closed", func() bool { return demoCall(ctxT(t), p.addr) != nil })
	if took := time.Since(signalled); took < 2*time.Second {
		t.Fatalf("listener closed %v after SIGTERM; want the 2s drain delay first", took)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10s after the drain delay")
	}
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit status %d; want 0", code)
	}
}

// TestAdminDrain: POST /drain fails readiness at once and, after the
// drain delay, closes client connections between calls, new ones
// included, without stopping the process; DELETE /drain serves again.
func TestAdminDrain(t *testing.T) {
	p := startBinary(t, "--demo", "--admin", "127.0.0.1:0", "--drain-delay", "1s")
	base := "http://" + p.admin
	waitFor(t, "ready", func() bool { code, _ := adminDo(t, "GET", base+"/readyz"); return code == 200 })
	idle, err := hmsclient.Dial(ctxT(t), p.addr, wire.Buffered)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()

	if code, body := adminDo(t, "POST", base+"/drain"); code != 200 {
		t.Fatalf("POST /drain: %d %s", code, body)
	}
	if code, body := adminDo(t, "GET", base+"/readyz"); code != 503 || !strings.Contains(body, "draining") {
		t.Fatalf("GET /readyz after POST /drain: %d %q; want 503 draining", code, body)
	}
	waitFor(t, "new clients closed after the drain delay", func() bool { return demoCall(ctxT(t), p.addr) != nil })
	if _, err := idle.Call(ctxT(t), "get_all_databases", hmsclient.Args()); err == nil {
		t.Fatal("an idle client was served after the drain delay; want its connection closed")
	}
	if code, _ := adminDo(t, "GET", base+"/healthz"); code != 200 {
		t.Fatalf("GET /healthz while drained: %d; want 200 (the process lives)", code)
	}

	if code, body := adminDo(t, "DELETE", base+"/drain"); code != 200 {
		t.Fatalf("DELETE /drain: %d %s", code, body)
	}
	if code, _ := adminDo(t, "GET", base+"/readyz"); code != 200 {
		t.Fatalf("GET /readyz after DELETE /drain: %d; want 200", code)
	}
	if err := demoCall(ctxT(t), p.addr); err != nil {
		t.Fatalf("a client after DELETE /drain: %v; want served", err)
	}
}
