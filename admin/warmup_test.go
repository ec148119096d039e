package admin

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/ops/housekeeping"
	"github.com/hmsproxy/hmsproxy/proxy"
)

// newWarmUp is a warm-up over two background connections of p, as
// cmd/hmsproxy builds it.
func newWarmUp(t testing.TB, p *proxy.Server) *housekeeping.WarmUp {
	t.Helper()
	callers, closeCallers, err := housekeeping.NewClients(housekeeping.ClientConfig{
		Dial: func(context.Context) (net.Conn, error) { return p.DialBackground() }}, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeCallers)
	w, err := housekeeping.NewWarmUp(housekeeping.WarmUpConfig{Callers: callers, Batch: 8, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

func post(t testing.TB, url, token, body string) httpResult {
	t.Helper()
	return request(t, "POST", url, token, strings.NewReader(body))
}

// TestWarmUpEndpoint guards issue 12: POST /cache/warm is behind the
// admin token, starts a warm-up of the targets it names, refuses a
// second one while the first runs, and the run's progress shows on
// /status.json, GET /cache/warm and /metrics.
func TestWarmUpEndpoint(t *testing.T) {
	const token = "s3cret-token"
	e := startEnv(t, envOpts{token: token, warmUp: true})
	t.Cleanup(func() { e.demo.Close() }) // ends the delayed calls before the proxy waits for them
	for _, tc := range []struct {
		name, auth, body string
		want             int
	}{
		{"without token", "", `{"targets":["demo_db0"]}`, 401},
		{"no targets", "Bearer " + token, `{"targets":[]}`, 400},
		{"not JSON", "Bearer " + token, `demo_db0`, 400},
		{"bad target", "Bearer " + token, `{"targets":["a.b.c"]}`, 400},
	} {
		if r := post(t, e.url+"/cache/warm", tc.auth, tc.body); r.code != tc.want {
			t.Fatalf("%s: got %d %q; want %d", tc.name, r.code, r.body, tc.want)
		}
	}
	if p := e.warm.Progress(); p.Runs != 0 || p.Running {
		t.Fatalf("refused requests started a warm-up: %+v", p)
	}

	if r := post(t, e.url+"/cache/warm", "Bearer "+token, `{"targets":["demo_db0", "demo_db1.t1"]}`); r.code != http.StatusAccepted {
		t.Fatalf("POST /cache/warm: got %d %q; want 202", r.code, r.body)
	}
	waitFor(t, "the warm-up to finish", func() bool { return e.warm.Progress().Runs == 1 })
	var st struct {
		WarmUp *warmUpStatus `json:"warm_up"`
	}
	if err := json.Unmarshal([]byte(do(t, "GET", e.url+"/status.json", "").body), &st); err != nil {
		t.Fatal(err)
	}
	if w := st.WarmUp; w == nil || w.Running || w.Tables != 4 || w.TablesDone != 4 || w.Partitions != 80 ||
		w.PartitionsFound != 80 || w.Errors != 0 || w.Rate <= 0 || w.Finished == nil || len(w.Targets) != 2 {
		t.Fatalf("status.json warm_up: got %+v; want 4 tables and 80 partitions done", w)
	}
	if r := do(t, "GET", e.url+"/cache/warm", "Bearer "+token); r.code != 200 || !strings.Contains(r.body, `"partitions":80`) {
		t.Fatalf("GET /cache/warm: got %d %q", r.code, r.body)
	}
	series, _ := scrape(t, e.url)
	wantSeries(t, series, map[string]float64{
		`hmsproxy_warmup_partitions{state="loaded"}`: 80, `hmsproxy_warmup_partitions{state="found"}`: 80,
		`hmsproxy_warmup_tables{state="done"}`: 4, `hmsproxy_warmup_runs_total`: 1, `hmsproxy_warmup_running`: 0,
		`hmsproxy_warmup_errors`: 0,
	})

	// A second warm-up while one runs is refused.
	e.demo.SetDelay("get_partitions_by_names", time.Hour)
	if r := post(t, e.url+"/cache/warm", "Bearer "+token, `{"targets":["demo_db1"]}`); r.code != http.StatusAccepted {
		t.Fatalf("POST /cache/warm: got %d %q; want 202", r.code, r.body)
	}
	if r := post(t, e.url+"/cache/warm", "Bearer "+token, `{"targets":["demo_db0"]}`); r.code != http.StatusConflict {
		t.Fatalf("POST /cache/warm while one runs: got %d %q; want 409", r.code, r.body)
	}
	if series, _ := scrape(t, e.url); series[`hmsproxy_warmup_running`] != 1 {
		t.Errorf("hmsproxy_warmup_running = %v while running; want 1", series[`hmsproxy_warmup_running`])
	}
}
