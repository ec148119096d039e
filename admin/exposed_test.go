package admin

import (
	"testing"
)

// TestAdminWritesNeedTokenBeyondLoopback guards issue 22: the admin
// writes (drain, flush, warm-up) need admin.token whenever the admin port
// listens beyond loopback. Without one they are refused with 403 and the
// read endpoints keep serving (a node scraped by Prometheus on 0.0.0.0
// keeps working after an upgrade); on loopback they stay open, as before.
func TestAdminWritesNeedTokenBeyondLoopback(t *testing.T) {
	const token = "s3cret-token"
	writes := []struct{ method, path string }{
		{"POST", "/cache/flush"},
		{"POST", "/cache/flush/demo_db0"},
		{"POST", "/cache/flush/demo_db0/t0"},
		{"POST", "/cache/flush/demo_db0/t0/partitions"},
		{"POST", "/cache/warm"},
		{"POST", "/drain"},
		{"DELETE", "/drain"},
	}
	reads := []string{"/metrics", "/healthz", "/status.json", "/"}
	for _, tc := range []struct {
		name      string
		listenAll bool
		token     string // configured
		send      string // Authorization header sent
		want      int    // for every write
	}{
		{"loopback, no token", false, "", "", 0},
		{"every address, no token", true, "", "", 403},
		{"every address, token, none sent", true, token, "", 401},
		{"every address, token sent", true, token, "Bearer " + token, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &drainFlag{}
			e := startEnv(t, envOpts{listenAll: tc.listenAll, token: tc.token, drain: d})
			for _, w := range writes {
				r := do(t, w.method, e.url+w.path, tc.send)
				refused := r.code == 401 || r.code == 403
				switch {
				case tc.want != 0 && r.code != tc.want:
					t.Errorf("%s %s: got %d %q; want %d", w.method, w.path, r.code, r.body, tc.want)
				case tc.want == 0 && refused:
					t.Errorf("%s %s: got %d %q; want it served", w.method, w.path, r.code, r.body)
				}
			}
			if tc.want != 0 && d.Draining() {
				t.Errorf("a refused POST /drain drained the node")
			}
			for _, p := range reads {
				if r := do(t, "GET", e.url+p, ""); r.code != 200 {
					t.Errorf("GET %s: got %d; want 200", p, r.code)
				}
			}
		})
	}
}
