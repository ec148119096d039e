package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hmsproxy/hmsproxy/internal/hms"
	"github.com/hmsproxy/hmsproxy/proxy"
)

// firstKind and lastKind bound the cache kinds exported as label values.
const (
	firstKind = hms.KindDatabase
	lastKind  = hms.KindOther
)

// kindOutcomes are the outcomes a cacheable read can have; writes are
// never counted per kind.
var kindOutcomes = []proxy.Outcome{
	proxy.OutcomeHit, proxy.OutcomeMiss, proxy.OutcomeCoalesced,
	proxy.OutcomePassthrough, proxy.OutcomeError,
}

// collector reads the proxy's and the store's own counters at scrape
// time, so the core packages stay free of Prometheus (the pattern of
// client_golang's collectors/dbstats_collector.go). A nil source leaves
// its families out.
type collector struct {
	calls     CallStats
	store     Store
	upstreams Upstreams
	clients   ClientCounter

	requests      *prometheus.Desc
	cacheRequests *prometheus.Desc
	bytes         *prometheus.Desc
	entries       *prometheus.Desc
	evictions     *prometheus.Desc
	admissions    *prometheus.Desc
	rejections    *prometheus.Desc
	stale         *prometheus.Desc
	discarded     *prometheus.Desc
	upstreamUp    *prometheus.Desc
	connections   *prometheus.Desc
}

func newCollector(cfg *Config) *collector {
	kind := []string{"kind"}
	return &collector{
		calls:     cfg.Calls,
		store:     cfg.Store,
		upstreams: cfg.Upstreams,
		clients:   cfg.Clients,

		requests: prometheus.NewDesc("hmsproxy_requests_total",
			"Client calls by HMS method and how the proxy answered them (hit, miss, coalesced, passthrough, write, error). Methods outside the method table are counted as \"other\".",
			[]string{"method", "outcome"}, nil),
		cacheRequests: prometheus.NewDesc("hmsproxy_cache_requests_total",
			"Cacheable reads by cache kind and outcome.",
			[]string{"kind", "outcome"}, nil),
		bytes: prometheus.NewDesc("hmsproxy_cache_bytes",
			"Bytes of cached replies (keys included) by cache kind.", kind, nil),
		entries: prometheus.NewDesc("hmsproxy_cache_entries",
			"Cached entries by cache kind.", kind, nil),
		evictions: prometheus.NewDesc("hmsproxy_cache_evictions_total",
			"Entries evicted to stay within the byte budget, by cache kind.", kind, nil),
		admissions: prometheus.NewDesc("hmsproxy_cache_admissions_total",
			"Replies admitted to the cache, by cache kind.", kind, nil),
		rejections: prometheus.NewDesc("hmsproxy_cache_rejections_total",
			"Replies the store refused to admit (admission policy or contention), by cache kind.", kind, nil),
		stale: prometheus.NewDesc("hmsproxy_cache_stale_total",
			"Lookups that found an entry invalidated or past its TTL (counted as misses too), by cache kind.", kind, nil),
		discarded: prometheus.NewDesc("hmsproxy_cache_discarded_loads_total",
			"Upstream loads not cached because an invalidation raced them, by cache kind.", kind, nil),
		upstreamUp: prometheus.NewDesc("hmsproxy_upstream_up",
			"1 when the last health check of the metastore succeeded, else 0.",
			[]string{"upstream"}, nil),
		connections: prometheus.NewDesc("hmsproxy_client_connections",
			"Open client connections.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	if c.calls != nil {
		ch <- c.requests
		ch <- c.cacheRequests
	}
	if c.store != nil {
		for _, d := range []*prometheus.Desc{c.bytes, c.entries, c.evictions, c.admissions, c.rejections, c.stale, c.discarded} {
			ch <- d
		}
	}
	if c.upstreams != nil {
		ch <- c.upstreamUp
	}
	if c.clients != nil {
		ch <- c.connections
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	if c.calls != nil {
		c.calls.EachMethod(func(name string, o proxy.Outcome, n uint64) {
			ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(n), name, o.String())
		})
		for k := firstKind; k <= lastKind; k++ {
			for _, o := range kindOutcomes {
				ch <- prometheus.MustNewConstMetric(c.cacheRequests, prometheus.CounterValue,
					float64(c.calls.Kind(k, o)), k.String(), o.String())
			}
		}
	}
	if c.store != nil {
		for k := firstKind; k <= lastKind; k++ {
			st := c.store.Stats(k)
			name := k.String()
			gauge := func(d *prometheus.Desc, v int64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), name)
			}
			counter := func(d *prometheus.Desc, v uint64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), name)
			}
			gauge(c.bytes, st.Bytes.Load())
			gauge(c.entries, st.Entries.Load())
			counter(c.evictions, st.Evicted.Load())
			counter(c.admissions, st.Admitted.Load())
			counter(c.rejections, st.Rejected.Load())
			counter(c.stale, st.Stale.Load())
			counter(c.discarded, st.Invalidated.Load())
		}
	}
	if c.upstreams != nil {
		addrs, healthy := c.upstreams.Addrs(), c.upstreams.Healthy()
		for i := range min(len(addrs), len(healthy)) {
			up := 0.0
			if healthy[i] {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(c.upstreamUp, prometheus.GaugeValue, up, addrs[i])
		}
	}
	if c.clients != nil {
		ch <- prometheus.MustNewConstMetric(c.connections, prometheus.GaugeValue, float64(c.clients.Clients()))
	}
}
