// Package admin serves the proxy's admin HTTP port: Prometheus metrics, health, and the cache flush API.
//
// # Endpoints
//
//	GET  /metrics                                  Prometheus text exposition
//	GET  /healthz                                  200 "ok" while a metastore is healthy, else 503
//	POST /cache/flush                              everything cached for the metastore group
//	POST /cache/flush/{db}                         a database, its lists and everything in it
//	POST /cache/flush/{db}/{table}                 a table, its partitions and statistics
//	POST /cache/flush/{db}/{table}/partitions      a table's partitions, not the table object
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
// "Authorization: Bearer <token>" or is answered 401; /metrics and
// /healthz stay open, as scrapers and probes expect.
//
// # Metrics
//
// The core packages keep plain atomic counters; the collectors here read
// them at scrape time. Families:
//
//	hmsproxy_requests_total{method,outcome}
//	hmsproxy_cache_requests_total{kind,outcome}
//	hmsproxy_cache_bytes{kind}, hmsproxy_cache_entries{kind}
//	hmsproxy_cache_evictions_total{kind}, hmsproxy_cache_admissions_total{kind}
//	hmsproxy_cache_rejections_total{kind}, hmsproxy_cache_stale_total{kind}
//	hmsproxy_cache_discarded_loads_total{kind}
//	hmsproxy_cache_flushes_total{level}
//	hmsproxy_upstream_up{upstream}, hmsproxy_client_connections
//
// plus the Go runtime (go_*) and process (process_*) collectors.
package admin
