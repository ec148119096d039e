package admin

import (
	"strings"
	"sync/atomic"
	"testing"
)

// drainFlag is a Drainer that only records the drain.
type drainFlag struct{ on atomic.Bool }

func (d *drainFlag) Draining() bool { return d.on.Load() }
func (d *drainFlag) Drain()         { d.on.Store(true) }
func (d *drainFlag) Resume()        { d.on.Store(false) }

// TestReadyz: /readyz fails, with the reason, while the node drains
// (entered and left through /drain, behind the token), while its bus is
// cut from Redis, and while no metastore is healthy; /healthz (liveness)
// ignores the first two (issue 15).
func TestReadyz(t *testing.T) {
	const token = "s3cret-token"
	d := &drainFlag{}
	e := startEnv(t, envOpts{bus: true, drain: d, token: token})
	ready := func(t *testing.T, wantCode int, wantIn string) {
		t.Helper()
		var r httpResult
		waitFor(t, "GET /readyz "+wantIn, func() bool {
			r = do(t, "GET", e.url+"/readyz", "")
			return r.code == wantCode && strings.Contains(r.body, wantIn)
		})
	}
	ready(t, 200, "ready")

	if r := do(t, "POST", e.url+"/drain", ""); r.code != 401 || d.Draining() {
		t.Fatalf("POST /drain without the token: got %d, draining %v; want 401, not draining", r.code, d.Draining())
	}
	if r := do(t, "POST", e.url+"/drain", "Bearer "+token); r.code != 200 || !d.Draining() {
		t.Fatalf("POST /drain: got %d %q, draining %v; want 200, draining", r.code, r.body, d.Draining())
	}
	ready(t, 503, "draining")
	if r := do(t, "GET", e.url+"/healthz", ""); r.code != 200 {
		t.Fatalf("GET /healthz while draining: got %d; want 200 (liveness)", r.code)
	}
	if r := do(t, "DELETE", e.url+"/drain", "Bearer "+token); r.code != 200 || d.Draining() {
		t.Fatalf("DELETE /drain: got %d, draining %v; want 200, not draining", r.code, d.Draining())
	}
	ready(t, 200, "ready")

	e.rs.Stop()
	ready(t, 503, "invalidation bus not synced")
	if r := do(t, "GET", e.url+"/healthz", ""); r.code != 200 {
		t.Fatalf("GET /healthz with Redis down: got %d; want 200 (liveness)", r.code)
	}
	e.rs.Restart()
	ready(t, 200, "ready")

	e.demo.Close()
	ready(t, 503, "no healthy metastore: "+e.upAddr)
}
