package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/hmsproxy/hmsproxy/proxy"
)

// ReplayRow is one method of a replay (or the total, Method "total").
type ReplayRow struct {
	Method string `json:"method"`
	// Calls replayed through the proxy; Hits of them answered from its
	// cache (hits and coalesced loads); Upstream the calls of this method
	// the proxy made to the metastore.
	Calls    int    `json:"calls"`
	Hits     uint64 `json:"hits"`
	Upstream uint64 `json:"upstream_calls"`
	// Saved is the share of metastore calls saved: 1 - Upstream/Calls.
	Saved float64 `json:"saved"`
	// Latencies in milliseconds, each way.
	DirectP50 float64 `json:"direct_p50_ms"`
	DirectP99 float64 `json:"direct_p99_ms"`
	ProxyP50  float64 `json:"proxy_p50_ms"`
	ProxyP99  float64 `json:"proxy_p99_ms"`
	// Reply bytes each way.
	DirectBytes int64 `json:"direct_bytes"`
	ProxyBytes  int64 `json:"proxy_bytes"`
	// Calls that failed (transport errors, timeouts) each way.
	DirectErrors int64 `json:"direct_errors"`
	ProxyErrors  int64 `json:"proxy_errors"`
	// Approximated: calls whose args were filled in (audit logs).
	Approximated int `json:"approximated,omitempty"`
}

// ReplayReport is a replay's result.
type ReplayReport struct {
	// Recorded is the calls in the trace, Replayed those replayed each
	// way; Skipped the others, by reason.
	Recorded int            `json:"recorded"`
	Replayed int            `json:"replayed"`
	Skipped  map[string]int `json:"skipped"`
	Speed    float64        `json:"speed"`
	Rows     []ReplayRow    `json:"methods"`
	Total    ReplayRow      `json:"total"`
	// OtherUpstream counts the proxy's metastore calls of methods no
	// client called (its checks of the metastore's settings); they count
	// against the total saved.
	OtherUpstream map[string]uint64 `json:"other_upstream_calls"`
	// Audit: the audit commands that became no call, by command.
	Unsupported map[string]int `json:"audit_unsupported,omitempty"`
}

// fill builds the rows from the two passes and the proxy's counters.
func (rep *ReplayReport) fill(direct, viaProxy *sideStats, px *replayProxy) {
	up := px.fwd.counts()
	st := px.srv.Stats()
	total := ReplayRow{Method: "total"}
	var dAll, pAll Hist
	for _, m := range methodsOf(viaProxy.calls, direct.calls) {
		dh, ph := direct.hist[m], viaProxy.hist[m]
		if dh == nil {
			dh = &Hist{}
		}
		if ph == nil {
			ph = &Hist{}
		}
		r := ReplayRow{Method: m, Calls: viaProxy.calls[m], Upstream: up[m],
			Hits:        st.Method(m, proxy.OutcomeHit) + st.Method(m, proxy.OutcomeCoalesced),
			DirectBytes: direct.bytes[m], ProxyBytes: viaProxy.bytes[m],
			DirectErrors: dh.Errors, ProxyErrors: ph.Errors,
			DirectP50: ms(dh.Percentile(50)), DirectP99: ms(dh.Percentile(99)),
			ProxyP50: ms(ph.Percentile(50)), ProxyP99: ms(ph.Percentile(99))}
		delete(up, m)
		r.Saved = saved(r.Calls, r.Upstream)
		dAll.Merge(dh)
		pAll.Merge(ph)
		total.Calls += r.Calls
		total.Hits += r.Hits
		total.Upstream += r.Upstream
		total.DirectBytes += r.DirectBytes
		total.ProxyBytes += r.ProxyBytes
		total.DirectErrors += r.DirectErrors
		total.ProxyErrors += r.ProxyErrors
		rep.Rows = append(rep.Rows, r)
	}
	rep.OtherUpstream = up
	for _, n := range up {
		total.Upstream += n
	}
	total.Saved = saved(total.Calls, total.Upstream)
	total.DirectP50, total.DirectP99 = ms(dAll.Percentile(50)), ms(dAll.Percentile(99))
	total.ProxyP50, total.ProxyP99 = ms(pAll.Percentile(50)), ms(pAll.Percentile(99))
	rep.Total = total
	rep.Replayed = total.Calls
}

// saved is 1 - upstream/calls, at least 0.
func saved(calls int, upstream uint64) float64 {
	if calls == 0 {
		return 0
	}
	return max(0, 1-float64(upstream)/float64(calls))
}

// NoteAudit adds what the audit log left out: per method, the calls
// whose args were filled in, and the commands that became no call.
func (rep *ReplayReport) NoteAudit(a *AuditTrace) {
	for i := range rep.Rows {
		rep.Rows[i].Approximated = a.Approximated[rep.Rows[i].Method]
		rep.Total.Approximated += rep.Rows[i].Approximated
	}
	rep.Unsupported = a.Unsupported
}

// Line is the report's last line.
func (rep *ReplayReport) Line() string {
	return fmt.Sprintf("replay: %d calls, %.1f%% metastore calls saved, p50 direct %s proxy %s",
		rep.Total.Calls, 100*rep.Total.Saved, fmtDur(rep.Total.DirectP50), fmtDur(rep.Total.ProxyP50))
}

func fmtDur(msv float64) string {
	return time.Duration(msv * float64(time.Millisecond)).Round(time.Microsecond).String()
}

// WriteTable writes the per-method table, what was skipped, and the line.
func (rep *ReplayReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "method\tcalls\thits\tmetastore calls\tsaved\tp50 direct ms\tp50 proxy ms\tp99 direct ms\tp99 proxy ms\tbytes direct\tbytes proxy\terrors d/p\tapprox\t")
	for _, r := range append(slices.Clone(rep.Rows), rep.Total) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f%%\t%s\t%s\t%s\t%s\t%d\t%d\t%d/%d\t%d\t\n", r.Method, r.Calls, r.Hits, r.Upstream,
			100*r.Saved, fmtMS(r.DirectP50), fmtMS(r.ProxyP50), fmtMS(r.DirectP99), fmtMS(r.ProxyP99),
			r.DirectBytes, r.ProxyBytes, r.DirectErrors, r.ProxyErrors, r.Approximated)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range methodsOf(rep.OtherUpstream) {
		fmt.Fprintf(w, "proxy's own metastore calls: %s %d\n", m, rep.OtherUpstream[m])
	}
	for _, why := range methodsOf(rep.Skipped) {
		fmt.Fprintf(w, "not replayed: %d calls: %s\n", rep.Skipped[why], why)
	}
	for _, cmd := range methodsOf(rep.Unsupported) {
		fmt.Fprintf(w, "audit: %d lines of %s became no call\n", rep.Unsupported[cmd], cmd)
	}
	_, err := fmt.Fprintln(w, rep.Line())
	return err
}

// WriteJSON writes the report as JSON.
func (rep *ReplayReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteSVG draws the p50/p99 chart of the benchmarks: a bar per method
// and side.
func (rep *ReplayReport) WriteSVG(w io.Writer) error {
	load := "as fast as possible"
	if rep.Speed > 0 {
		load = fmt.Sprintf("speed %g", rep.Speed)
	}
	r := &Report{Targets: []string{"direct", "proxy"}, Baseline: "direct"}
	for _, row := range append(slices.Clone(rep.Rows), rep.Total) {
		r.Rows = append(r.Rows,
			Row{Op: row.Method, Phase: "replay", Load: load, Target: "direct", Count: row.Calls, P50: row.DirectP50, P99: row.DirectP99},
			Row{Op: row.Method, Phase: "replay", Load: load, Target: "proxy", Count: row.Calls, P50: row.ProxyP50, P99: row.ProxyP99})
	}
	r.fillRatios()
	return r.WriteSVG(w)
}
