// Package bench generates metastore load and reports latency per operation and target.
//
// # Targets and interleaving
//
// A run names one or more targets (thrift://host:port), typically the
// metastore itself ("direct") and an hmsproxy in front of it ("proxy"). Every
// worker holds one connection per target and alternates targets call by
// call, on the same key, rotating which target goes first; on a noisy
// machine both targets see the same noise and their ratio holds.
//
// # Phases
//
// The cold phase is the first pass over an operation's key set after an
// admin flush of the proxy (FlushURL); each key is called once per target.
// The warm phase follows a warm-up and runs for Duration with keys drawn
// uniformly or from a Zipf distribution. Without a FlushURL the cold phase
// is only as cold as the proxy happens to be.
//
// # Load
//
// Closed loop: N workers each issue the next call as soon as the last one
// returned (a sweep over Concurrency). Open loop: a fixed-rate schedule of
// intended send times; latency is measured from the intended time, so a
// slow target is charged for the queue it causes (no coordinated
// omission).
//
// # Report
//
// Per operation, phase, load level and target: count, errors, percentiles,
// mean, throughput, the p50 ratio to the baseline target and, for targets
// with a metrics URL, the share of reads the proxy answered without an
// upstream call (hits and coalesced calls over hits, misses and coalesced
// calls, from hmsproxy_requests_total). Rendered as a text table, JSON, CSV
// and an SVG chart.
//
// # Replay
//
// Replay takes calls recorded by hmsproxy (package trace), or made from a
// metastore's audit log (FromAudit), and replays them twice: straight to
// the metastore and through an in-process proxy with a given cache. Each
// recorded connection is one connection, its calls in order at their
// recorded times scaled by a speed; replies are read raw. The report
// gives per method the calls, hits, metastore calls saved (counted where
// the proxy calls its metastore) and latency each way. Writes are skipped
// unless asked for. Planning is a repeated-query workload to record.
package bench
