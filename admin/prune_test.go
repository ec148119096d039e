package admin

import (
	"context"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
)

// TestPruneOnStatus: how pruning reads were answered reaches /metrics
// (hmsproxy_prune_total{result}, every result of the closed set) and the
// status page, and the two agree with the proxy's own counts.
func TestPruneOnStatus(t *testing.T) {
	e := startEnv(t, envOpts{prune: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.proxy.SettingsRead(ctx); err != nil {
		t.Fatal(err)
	}
	c := e.client(t)
	byFilter := func(f string) []byte {
		return hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Str(3, f), hmsreq.I16(4, -1))
	}
	for range 2 { // the first fills what the prune reads; both are answered here
		e.call(t, c, "get_partitions_by_filter", byFilter(`ds = '2024-01-01'`))
	}
	// A LIKE is a filter the proxy does not evaluate itself.
	e.call(t, c, "get_partitions_by_filter", byFilter(`ds like '2024%'`))
	p := e.proxy.PruneStats()
	if p.Count(proxy.PruneLocal) != 2 || p.Count(proxy.PruneInexact) != 1 {
		t.Fatalf("prune counts: local %d, inexact %d; want 2 and 1", p.Count(proxy.PruneLocal), p.Count(proxy.PruneInexact))
	}

	series, families := scrape(t, e.url)
	if !families["hmsproxy_prune_total"] {
		t.Fatal("family hmsproxy_prune_total missing from /metrics")
	}
	for _, r := range proxy.PruneResults() {
		name := `hmsproxy_prune_total{result="` + r.String() + `"}`
		got, ok := series[name]
		if !ok {
			t.Errorf("%s missing: every result is exported from the start", name)
		}
		if got != float64(p.Count(r)) {
			t.Errorf("%s = %v; want %d", name, got, p.Count(r))
		}
	}
	st := getStatus(t, e.url)
	if st.Prune == nil || st.Prune.Local != 2 || st.Prune.Inexact != 1 || st.Prune.Forwarded != 0 {
		t.Fatalf("status prune = %+v; want 2 local, 1 inexact, none forwarded", st.Prune)
	}
	if off := getStatus(t, startEnv(t, envOpts{}).url); off.Prune != nil {
		t.Errorf("status prune without a source = %+v; want null", off.Prune)
	}
}
