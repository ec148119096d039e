// Package admin serves the proxy's admin HTTP port: Prometheus metrics, a status page, health, and the cache flush and warm-up API.
//
// # Endpoints
//
//	GET  /                                         status page: one HTML document, no external assets
//	GET  /status.json                              what the status page shows, polled by it every 2s
//	GET  /metrics                                  Prometheus text exposition
//	GET  /healthz                                  200 "ok" while a metastore is healthy, else 503
//	POST /cache/flush                              everything cached for the metastore group
//	POST /cache/flush/{db}                         a database, its lists and everything in it
//	POST /cache/flush/{db}/{table}                 a table, its partitions and statistics
//	POST /cache/flush/{db}/{table}/partitions      a table's partitions, not the table object
//	POST /cache/warm                               start a warm-up: {"targets": ["db", "db.table", "db.t_*"]}
//	GET  /cache/warm                               the latest warm-up's progress
//
// POST /cache/warm answers 202 once the warm-up started (it runs in the
// background; its progress is on the status page, in hmsproxy_warmup_*
// and in the log), 409 while one runs, 400 for bad targets. Targets take
// the syntax of cache.allow.
//
// The flush endpoints are the equivalents of Trino's
// system.flush_metadata_cache(schema_name, table_name, partition_columns):
// they invalidate as a write through the proxy would, so loads in flight
// are not cached either. An optional catalog query parameter selects the
// catalog (default Config.DefaultCatalog). Names are lower-cased, as the
// metastore stores them. Each answers a small JSON object such as
// {"flushed":"hive.sales.orders","level":"table"}.
//
// # Security
//
// With Config.Token set, every /cache/ request must carry
// "Authorization: Bearer <token>" or is answered 401; /, /status.json,
// /metrics and /healthz stay open, as scrapers and probes expect.
// Flushes and refused requests are logged with the caller: remote
// address, how it authenticated (never the token) and, when the listener
// is mutual TLS (certs.Reloader.HTTPListener), its certificate's subject.
//
// # Status page
//
// The page shows upstream health, hit ratio per cache kind, the top
// methods, the invalidation bus, workers, shadow validation (hits
// re-read from the metastore: checks and mismatches), and the last 20
// admin flushes and bus losses (bus losses are noticed by polling the bus's loss
// counters every second and at every scrape). /metrics and /status.json
// are rendered from one snapshot type read from the same counters, so
// they agree.
//
// # Metrics
//
// The core packages keep plain atomic counters; the collectors here read
// them at scrape time. Families:
//
//	hmsproxy_requests_total{method,outcome}
//	hmsproxy_request_duration_seconds{method_class,path} (histogram)
//	hmsproxy_cache_requests_total{kind,outcome}
//	hmsproxy_cache_bytes{kind}, hmsproxy_cache_entries{kind}
//	hmsproxy_cache_evictions_total{kind}, hmsproxy_cache_admissions_total{kind}
//	hmsproxy_cache_rejections_total{kind}, hmsproxy_cache_stale_total{kind}
//	hmsproxy_cache_discarded_loads_total{kind}
//	hmsproxy_cache_flushes_total{level}
//	hmsproxy_upstream_up{upstream}, hmsproxy_client_connections
//	hmsproxy_bus_published_total, hmsproxy_bus_publish_errors_total
//	hmsproxy_bus_received_total, hmsproxy_bus_applied_total, hmsproxy_bus_synced
//	hmsproxy_invalidation_losses_total{reason}, hmsproxy_bus_lag_seconds{quantile}
//	hmsproxy_worker_runs_total{worker}, hmsproxy_worker_failures_total{worker}
//	hmsproxy_worker_last_success_timestamp_seconds{worker}
//	hmsproxy_shadow_checks_total{kind,outcome}, hmsproxy_shadow_mismatches_total{kind}
//	hmsproxy_shadow_skipped_total{kind}
//
// plus the Go runtime (go_*) and process (process_*) collectors.
package admin
