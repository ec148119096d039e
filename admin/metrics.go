package admin

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
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

// collector reads the proxy's, the store's, the bus's and the workers'
// own counters at scrape time, so the core packages stay free of
// Prometheus (the pattern of client_golang's
// collectors/dbstats_collector.go). A nil source leaves its families out.
type collector struct {
	cfg  *Config
	seen func(*snapshot) // called with every snapshot taken for a scrape

	requests      *prometheus.Desc
	duration      *prometheus.Desc
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

	busPublished     *prometheus.Desc
	busPublishErrors *prometheus.Desc
	busReceived      *prometheus.Desc
	busApplied       *prometheus.Desc
	busSynced        *prometheus.Desc
	busLosses        *prometheus.Desc
	busLag           *prometheus.Desc
	busWait          *prometheus.Desc
	busAckTimeouts   *prometheus.Desc
	busRejoins       *prometheus.Desc
	busPeers         *prometheus.Desc
	busLayout        *prometheus.Desc

	workerRuns        *prometheus.Desc
	workerFailures    *prometheus.Desc
	workerLastSuccess *prometheus.Desc

	evLatest, evApplied, evLagEvents, evLagSeconds, evEvents, evGaps, evHealthy *prometheus.Desc

	unknownFlushes *prometheus.Desc
	flushBudget    *prometheus.Desc

	inflightBytes, inflightLimit, inflightWaits *prometheus.Desc
	clientTimeouts                              *prometheus.Desc
	clientsShed                                 *prometheus.Desc

	shadowChecks, shadowMismatches, shadowSkipped *prometheus.Desc

	prune *prometheus.Desc
}

// unknownLabel is the method label of every method outside the method
// table: a client chooses those names, so none of them becomes a label.
const unknownLabel = "other"

// UnknownMethods reports the flushes of methods outside the method table;
// *proxy.Server implements it, and the Flusher is asked for it.
type UnknownMethods interface {
	EachUnknownFlush(fn func(method string, flushes uint64))
}

// FlushBudgets reports the cache-wide flushes clients caused, by path
// ("immediate", "coalesced"); *proxy.Server implements it, and the
// Flusher is asked for it.
type FlushBudgets interface {
	EachFlushBudget(fn func(path string, calls uint64))
}

func newCollector(cfg *Config, seen func(*snapshot)) *collector {
	kind := []string{"kind"}
	worker := []string{"worker"}
	return &collector{
		cfg:  cfg,
		seen: seen,

		requests: prometheus.NewDesc("hmsproxy_requests_total",
			"Client calls by HMS method and how the proxy answered them (hit, miss, coalesced, passthrough, write, error). Methods outside the method table are counted as \"other\".",
			[]string{"method", "outcome"}, nil),
		duration: prometheus.NewDesc("hmsproxy_request_duration_seconds",
			"Client call latency, from reading the request to writing the reply, by method class (read, write, passthrough, session) and path (the outcome: hit, miss, coalesced, passthrough, write, error).",
			[]string{"method_class", "path"}, nil),
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

		busPublished: prometheus.NewDesc("hmsproxy_bus_published_total",
			"Invalidation messages this node published on the Redis bus.", nil, nil),
		busPublishErrors: prometheus.NewDesc("hmsproxy_bus_publish_errors_total",
			"Invalidation messages this node failed to publish (the other nodes see a gap and flush).", nil, nil),
		busReceived: prometheus.NewDesc("hmsproxy_bus_received_total",
			"Messages read from the bus, this node's own and heartbeats included.", nil, nil),
		busApplied: prometheus.NewDesc("hmsproxy_bus_applied_total",
			"Invalidation messages from other nodes applied to this node's cache.", nil, nil),
		busSynced: prometheus.NewDesc("hmsproxy_bus_synced",
			"1 while the bus is connected and caught up (the cache is served), else 0.", nil, nil),
		busLosses: prometheus.NewDesc("hmsproxy_invalidation_losses_total",
			"Times this node dropped its cache because invalidations may have been missed, by reason (reconnect, gap, redis-restart, redis-reset, trimmed, undecodable, unreadable, peer-silent, peer-returned, peer-gone).",
			[]string{"reason"}, nil),
		busLag: prometheus.NewDesc("hmsproxy_bus_lag_seconds",
			"Propagation lag of bus invalidations (publish on another node to apply here), at the quantile, over the last 4096 applied messages; NaN before the first.",
			[]string{"quantile"}, nil),
		busWait: prometheus.NewDesc("hmsproxy_bus_publish_wait_seconds",
			"How long publishing held a write's reply (append, then every live peer's acknowledgement), at the quantile, over the last 4096 publishes; NaN before the first.",
			[]string{"quantile"}, nil),
		busAckTimeouts: prometheus.NewDesc("hmsproxy_bus_ack_timeouts_total",
			"Writes answered at the heartbeat timeout because a live peer had not acknowledged their invalidation.", nil, nil),
		busRejoins: prometheus.NewDesc("hmsproxy_bus_rejoins_total",
			"Times this node's append landed so long after its previous one that peers may have taken it for silent; each time it served no cache until it had read the stream up to that append.", nil, nil),
		busPeers: prometheus.NewDesc("hmsproxy_bus_peers",
			"Other nodes on this group's bus, by state: alive, or silent (not heard for the heartbeat timeout: this node's cache is not served).",
			[]string{"state"}, nil),
		busLayout: prometheus.NewDesc("hmsproxy_bus_layout_mismatch",
			"Peers on this group's stream announcing other metastores (another upstream layout); above 0 is a misconfiguration: give each group its own upstream.name.", nil, nil),

		workerRuns: prometheus.NewDesc("hmsproxy_worker_runs_total",
			"Runs of a background worker, failed ones included.", worker, nil),
		workerFailures: prometheus.NewDesc("hmsproxy_worker_failures_total",
			"Runs of a background worker that failed.", worker, nil),
		workerLastSuccess: prometheus.NewDesc("hmsproxy_worker_last_success_timestamp_seconds",
			"Unix time of the worker's latest successful run; 0 if none yet.", worker, nil),

		evLatest: prometheus.NewDesc("hmsproxy_eventlog_latest_event_id",
			"Newest notification-log event id the metastore reported.", nil, nil),
		evApplied: prometheus.NewDesc("hmsproxy_eventlog_applied_event_id",
			"Last notification-log event id applied to the caches.", nil, nil),
		evLagEvents: prometheus.NewDesc("hmsproxy_eventlog_lag_events",
			"Notification-log events not yet applied (latest minus applied).", nil, nil),
		evLagSeconds: prometheus.NewDesc("hmsproxy_eventlog_lag_seconds",
			"Age of the oldest unapplied notification-log event; 0 when caught up.", nil, nil),
		evEvents: prometheus.NewDesc("hmsproxy_eventlog_events_total",
			"Notification-log events read.", nil, nil),
		unknownFlushes: prometheus.NewDesc("hmsproxy_unknown_method_flushes_total",
			"Calls of methods outside the method table, each of which invalidated everything cached for the upstream group. The method label is always \"other\": names come from clients, and labels from closed sets; the log names each of the first 64 methods once. List those that only read in cache.known_reads.",
			[]string{"method"}, nil),
		flushBudget: prometheus.NewDesc("hmsproxy_cache_flush_calls_total",
			"Client calls that invalidated everything cached for their upstream group (methods outside the method table, flushCache), by path: immediate, within the identity's flush budget (limits.flush_burst, flush_rate), or coalesced, past it, waiting for the next shared flush (limits.flush_interval).",
			[]string{"path"}, nil),
		evGaps: prometheus.NewDesc("hmsproxy_eventlog_gaps_total",
			"Times events were missing from the log (purged, or ids going backwards) and the cache was dropped.", nil, nil),
		evHealthy: prometheus.NewDesc("hmsproxy_eventlog_healthy",
			"0 while the metastore keeps no notification log (writes through this node were not logged, or the log is empty) and every TTL is cut to cache.ttl_without_eventlog; else 1.", nil, nil),

		inflightBytes: prometheus.NewDesc("hmsproxy_inflight_bytes",
			"Bytes of requests being read and replies being held, claimed from the in-flight budget.", nil, nil),
		inflightLimit: prometheus.NewDesc("hmsproxy_inflight_limit_bytes",
			"The in-flight budget (limits.inflight_bytes); 0 when unbounded.", nil, nil),
		inflightWaits: prometheus.NewDesc("hmsproxy_inflight_waits_total",
			"Claims on the in-flight budget that had to wait for others to release bytes (back-pressure).", nil, nil),
		clientTimeouts: prometheus.NewDesc("hmsproxy_client_timeouts_total",
			"Client connections cut off by a deadline: read (request not complete in time), idle, write (reply not taken).",
			[]string{"deadline"}, nil),
		clientsShed: prometheus.NewDesc("hmsproxy_client_connections_shed_total",
			"Client connections shed at the connection limits: idle_evicted (the longest-idle connection closed to admit a new one), max_clients and per_address (a new one refused, every connection in a call).",
			[]string{"reason"}, nil),

		shadowChecks: prometheus.NewDesc("hmsproxy_shadow_checks_total",
			"Cache hits re-read from the metastore and compared, by cache kind and outcome (matched; mismatched: differs and no invalidation explains it; explained: an invalidation after the hit does; failed: the re-read failed).",
			[]string{"kind", "outcome"}, nil),
		shadowMismatches: prometheus.NewDesc("hmsproxy_shadow_mismatches_total",
			"Cache hits that differed from the metastore with no invalidation to explain it (the entry was dropped), by cache kind. Anything above 0 is a freshness bug.",
			kind, nil),
		shadowSkipped: prometheus.NewDesc("hmsproxy_shadow_skipped_total",
			"Cache hits sampled for shadow validation but not checked (per-second bound or queue full), by cache kind.",
			kind, nil),

		prune: prometheus.NewDesc("hmsproxy_prune_total",
			"Pruning reads (partitions or names by filter or partial spec) by result: local (answered from the cache), inexact (a filter the proxy does not evaluate exactly), over_limit (the metastore's partition request limit decides), or forwarded_* after a look, naming the step that gave up (table, partition_keys, name_list, name_index, evaluation, partitions, raced: an invalidation during the prune).",
			[]string{"result"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	var ds []*prometheus.Desc
	if c.cfg.Calls != nil {
		ds = append(ds, c.requests, c.cacheRequests)
		if _, ok := c.cfg.Calls.(LatencyStats); ok {
			ds = append(ds, c.duration)
		}
	}
	if c.cfg.Store != nil {
		ds = append(ds, c.bytes, c.entries, c.evictions, c.admissions, c.rejections, c.stale, c.discarded)
	}
	if c.cfg.Upstreams != nil {
		ds = append(ds, c.upstreamUp)
	}
	if c.cfg.Clients != nil {
		ds = append(ds, c.connections)
	}
	if c.cfg.Bus != nil {
		ds = append(ds, c.busPublished, c.busPublishErrors, c.busReceived, c.busApplied, c.busSynced, c.busLosses, c.busLag,
			c.busWait, c.busAckTimeouts, c.busRejoins, c.busPeers, c.busLayout)
	}
	if c.cfg.Workers != nil {
		ds = append(ds, c.workerRuns, c.workerFailures, c.workerLastSuccess)
	}
	if c.cfg.InFlight != nil {
		ds = append(ds, c.inflightBytes, c.inflightLimit, c.inflightWaits)
	}
	if c.cfg.Timeouts != nil {
		ds = append(ds, c.clientTimeouts)
	}
	if _, ok := c.cfg.Timeouts.(ShedStats); ok {
		ds = append(ds, c.clientsShed)
	}
	if c.cfg.EventLog != nil {
		ds = append(ds, c.evLatest, c.evApplied, c.evLagEvents, c.evLagSeconds, c.evEvents, c.evGaps, c.evHealthy)
	}
	if _, ok := c.cfg.Flusher.(UnknownMethods); ok {
		ds = append(ds, c.unknownFlushes)
	}
	if _, ok := c.cfg.Flusher.(FlushBudgets); ok {
		ds = append(ds, c.flushBudget)
	}
	if c.cfg.Shadow != nil {
		ds = append(ds, c.shadowChecks, c.shadowMismatches, c.shadowSkipped)
	}
	if c.cfg.Prune != nil {
		ds = append(ds, c.prune)
	}
	describe(ch, ds...)
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := take(c.cfg)
	if c.seen != nil {
		c.seen(s)
	}
	c.emit(s, ch)
	if u, ok := c.cfg.Flusher.(UnknownMethods); ok {
		var total uint64
		u.EachUnknownFlush(func(_ string, n uint64) { total += n })
		ch <- constMetric(c.unknownFlushes, prometheus.CounterValue, float64(total), unknownLabel)
	}
	if f, ok := c.cfg.Flusher.(FlushBudgets); ok {
		f.EachFlushBudget(func(path string, n uint64) {
			if path == "immediate" || path == "coalesced" { // a closed set
				ch <- constMetric(c.flushBudget, prometheus.CounterValue, float64(n), path)
			}
		})
	}
	if b := c.cfg.InFlight; b != nil {
		ch <- constMetric(c.inflightBytes, prometheus.GaugeValue, float64(b.InUse()))
		ch <- constMetric(c.inflightLimit, prometheus.GaugeValue, float64(b.Max()))
		ch <- constMetric(c.inflightWaits, prometheus.CounterValue, float64(b.Waits()))
	}
	if t := c.cfg.Timeouts; t != nil {
		for _, d := range []proxy.ClientTimeout{proxy.TimeoutRead, proxy.TimeoutIdle, proxy.TimeoutWrite} {
			ch <- constMetric(c.clientTimeouts, prometheus.CounterValue, float64(t.ClientTimeouts(d)), d.String())
		}
	}
	if sh, ok := c.cfg.Timeouts.(ShedStats); ok {
		for _, r := range proxy.ShedReasons() {
			ch <- constMetric(c.clientsShed, prometheus.CounterValue, float64(sh.ClientsShed(r)), r.String())
		}
	}
	if c.cfg.EventLog != nil {
		st := c.cfg.EventLog.Stats()
		latest, applied := st.Latest.Load(), st.Applied.Load()
		g := func(d *prometheus.Desc, v float64) { ch <- constMetric(d, prometheus.GaugeValue, v) }
		g(c.evLatest, float64(latest))
		g(c.evApplied, float64(applied))
		g(c.evLagEvents, float64(max(latest-applied, 0)))
		g(c.evLagSeconds, float64(st.BehindNanos.Load())/1e9)
		ch <- constMetric(c.evEvents, prometheus.CounterValue, float64(st.Events.Load()))
		ch <- constMetric(c.evGaps, prometheus.CounterValue, float64(st.Gaps.Load()))
		healthy := 1.0
		if eventlog.HealthState(st.Health.Load()) == eventlog.HealthMissing {
			healthy = 0
		}
		g(c.evHealthy, healthy)
	}
}

// emit sends the metrics of s.
func (c *collector) emit(s *snapshot, ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- constMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- constMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if s.hasCalls {
		for name, row := range s.methods {
			for o, n := range row {
				if n > 0 {
					counter(c.requests, n, name, proxy.Outcome(o).String())
				}
			}
		}
		for k := firstKind; k <= lastKind; k++ {
			for _, o := range kindOutcomes {
				counter(c.cacheRequests, s.kinds[k][o], k.String(), o.String())
			}
		}
		for k, h := range s.latency {
			buckets := make(map[float64]uint64, len(proxy.LatencyBuckets))
			for i, le := range proxy.LatencyBuckets {
				if i < len(h.cumulative) {
					buckets[le] = h.cumulative[i]
				}
			}
			ch <- constHistogram(c.duration, h.count, h.sum, buckets, k.class.String(), k.path.String())
		}
	}
	if s.hasStore {
		for k := firstKind; k <= lastKind; k++ {
			st, name := &s.store[k], k.String()
			gauge(c.bytes, float64(st.bytes), name)
			gauge(c.entries, float64(st.entries), name)
			counter(c.evictions, st.evicted, name)
			counter(c.admissions, st.admitted, name)
			counter(c.rejections, st.rejected, name)
			counter(c.stale, st.stale, name)
			counter(c.discarded, st.invalidatedLoads, name)
		}
	}
	for _, u := range s.upstreams {
		gauge(c.upstreamUp, b2f(u.Healthy), u.Addr)
	}
	if s.hasClients {
		gauge(c.connections, float64(s.clients))
	}
	if b := s.bus; b != nil {
		counter(c.busPublished, b.published)
		counter(c.busPublishErrors, b.publishErrors)
		counter(c.busReceived, b.received)
		counter(c.busApplied, b.applied)
		gauge(c.busSynced, b2f(b.synced))
		for r, n := range b.losses {
			counter(c.busLosses, n, r)
		}
		for i, q := range lagQuantiles {
			gauge(c.busLag, b.lag[i], strconv.FormatFloat(q, 'g', -1, 64))
			gauge(c.busWait, b.wait[i], strconv.FormatFloat(q, 'g', -1, 64))
		}
		counter(c.busAckTimeouts, b.ackTimeouts)
		counter(c.busRejoins, b.rejoins)
		gauge(c.busPeers, float64(b.alive), "alive")
		gauge(c.busPeers, float64(b.silent), "silent")
		gauge(c.busLayout, float64(b.mismatched))
	}
	if s.hasShadow {
		for k := firstKind; k <= lastKind; k++ {
			row, name := &s.shadow[k], k.String()
			for _, o := range shadowOutcomes {
				counter(c.shadowChecks, row[o], name, o.String())
			}
			counter(c.shadowMismatches, row[proxy.ShadowMismatched], name)
			counter(c.shadowSkipped, row[proxy.ShadowSkipped], name)
		}
	}
	if s.prune != nil {
		for _, r := range proxy.PruneResults() {
			counter(c.prune, s.prune[r], r.String())
		}
	}
	for _, w := range s.workers {
		counter(c.workerRuns, w.Runs, w.Name)
		counter(c.workerFailures, w.Failures, w.Name)
		last := 0.0
		if !w.LastSuccess.IsZero() {
			last = float64(w.LastSuccess.UnixNano()) / 1e9
		}
		gauge(c.workerLastSuccess, last, w.Name)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// constMetric is prometheus.NewConstMetric for a collector. A value it
// cannot represent (a label that is not valid UTF-8) becomes an invalid
// metric, which the registry reports as an error of that one series
// (the handler continues on errors); the Must forms panic, and a panic
// in a collector ends the process at the next scrape.
func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

// describe is the Describe of a collector whose descriptors are ds.
func describe(ch chan<- *prometheus.Desc, ds ...*prometheus.Desc) {
	for _, d := range ds {
		ch <- d
	}
}

// constHistogram is constMetric for a histogram.
func constHistogram(d *prometheus.Desc, count uint64, sum float64, buckets map[float64]uint64, labels ...string) prometheus.Metric {
	m, err := prometheus.NewConstHistogram(d, count, sum, buckets, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}
