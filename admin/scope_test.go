package admin

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hmsproxy/hmsproxy/proxy"
)

type fakeScope struct{ st proxy.ScopeStatus }

func (f *fakeScope) CacheScope() (proxy.ScopeStatus, bool) { return f.st, true }

// TestScopeMetricsAndStatus (issue 14): the cache scope decision is on
// /metrics and on /status.json.
func TestScopeMetricsAndStatus(t *testing.T) {
	src := &fakeScope{proxy.ScopeStatus{Mode: proxy.ScopeAuto, PerUser: true, Decided: true,
		Reason: "metastore filter hook io.example.Hook", FilterHook: "io.example.Hook",
		Checked: time.Now(), Checks: 3, Failures: 1, Changes: 2}}
	url := serve(t, Config{Registerer: prometheus.NewRegistry(), Scope: src})

	series, _ := scrape(t, url)
	wantSeries(t, series, map[string]float64{
		`hmsproxy_cache_scope_per_user{mode="auto"}`: 1,
		`hmsproxy_cache_scope_checks_total`:          3,
		`hmsproxy_cache_scope_check_failures_total`:  1,
		`hmsproxy_cache_scope_changes_total`:         2,
	})
	r := do(t, "GET", url+"/status.json", "")
	if r.code != http.StatusOK {
		t.Fatalf("GET /status.json: %d", r.code)
	}
	var st struct {
		Scope *scopeStatus `json:"cache_scope"`
	}
	if err := json.Unmarshal([]byte(r.body), &st); err != nil {
		t.Fatal(err)
	}
	if st.Scope == nil || st.Scope.Scope != "user" || st.Scope.Mode != "auto" || st.Scope.FilterHook != "io.example.Hook" {
		t.Fatalf("status cache_scope %+v; want user scope from auto naming the hook", st.Scope)
	}
}

// TestScopeOnStatusPage: the page's script shows the decision.
func TestScopeOnStatusPage(t *testing.T) {
	if os.Getenv("HMSPROXY_SKIP_BROWSER") == "1" {
		t.Skip("HMSPROXY_SKIP_BROWSER=1")
	}
	src := &fakeScope{proxy.ScopeStatus{Mode: proxy.ScopeAuto, PerUser: true, Decided: true,
		Reason: "metastore filter hook io.example.Hook"}}
	dom := string(chromium(t, serve(t, Config{Registerer: prometheus.NewRegistry(), Scope: src})+"/", "--dump-dom"))
	if _, text := domByID(t, dom, "cache-scope"); text != "per user · auto" {
		t.Fatalf("page shows cache scope %q; want %q", text, "per user · auto")
	}
}
