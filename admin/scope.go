package admin

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hmsproxy/hmsproxy/proxy"
)

// ScopeSource is the cache's scope decision; *proxy.Server implements it.
type ScopeSource interface {
	CacheScope() (proxy.ScopeStatus, bool)
}

// scopeCollector exports the scope decision, read at scrape time.
type scopeCollector struct {
	src                             ScopeSource
	perUser, checks, failures, chgs *prometheus.Desc
}

func newScopeCollector(src ScopeSource) *scopeCollector {
	return &scopeCollector{
		src: src,
		perUser: prometheus.NewDesc("hmsproxy_cache_scope_per_user",
			"1 when cached entries are keyed by client identity (set_ugi), 0 when shared across identities; mode is cache.scope (auto, shared, user).",
			[]string{"mode"}, nil),
		checks: prometheus.NewDesc("hmsproxy_cache_scope_checks_total",
			"Times cache scope auto asked the metastore for its filter hook and pre-event listeners.", nil, nil),
		failures: prometheus.NewDesc("hmsproxy_cache_scope_check_failures_total",
			"Scope checks that could not tell (errors, refusals); each keys entries by identity.", nil, nil),
		chgs: prometheus.NewDesc("hmsproxy_cache_scope_changes_total",
			"Times the scope decision changed at run time; each dropped the cache.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *scopeCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, c.perUser, c.checks, c.failures, c.chgs)
}

// Collect implements prometheus.Collector.
func (c *scopeCollector) Collect(ch chan<- prometheus.Metric) {
	st, ok := c.src.CacheScope()
	if !ok {
		return
	}
	ch <- constMetric(c.perUser, prometheus.GaugeValue, b2f(st.PerUser), st.Mode.String())
	ch <- constMetric(c.checks, prometheus.CounterValue, float64(st.Checks))
	ch <- constMetric(c.failures, prometheus.CounterValue, float64(st.Failures))
	ch <- constMetric(c.chgs, prometheus.CounterValue, float64(st.Changes))
}

// scopeStatus is the cache scope on /status.json.
type scopeStatus struct {
	Mode              string     `json:"mode"`
	Scope             string     `json:"scope"` // "user" or "shared"
	Decided           bool       `json:"decided"`
	Reason            string     `json:"reason"`
	FilterHook        string     `json:"filter_hook"`
	PreEventListeners string     `json:"pre_event_listeners"`
	Checked           *time.Time `json:"checked"`
	Changes           uint64     `json:"changes"`
}

func takeScope(src ScopeSource) *scopeStatus {
	if src == nil {
		return nil
	}
	st, ok := src.CacheScope()
	if !ok {
		return nil
	}
	out := &scopeStatus{Mode: st.Mode.String(), Scope: "shared", Decided: st.Decided, Reason: st.Reason,
		FilterHook: st.FilterHook, PreEventListeners: st.PreEventListeners, Changes: st.Changes}
	if st.PerUser {
		out.Scope = "user"
	}
	if !st.Checked.IsZero() {
		out.Checked = ptr(st.Checked)
	}
	return out
}
