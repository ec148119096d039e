package chaos

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// digits are replaced in error messages (ports, sizes, times) to group
// them.
var digits = regexp.MustCompile(`[0-9]+`)

// report judges a run and prints what it measured.
type report struct {
	st              settings
	feats           map[string]bool
	p               *proxyProc
	mon             *mon
	victim, hostile *role
	vsum            *victimSummary
	hsum            *hostileSummary
}

// shownMetrics are the proxy's counters printed after a run: what its
// bounds did.
var shownMetrics = []string{
	"hmsproxy_client_connections_shed_total", "hmsproxy_client_timeouts_total", "hmsproxy_inflight_waits_total",
	"hmsproxy_tls_handshake_failures_total", "hmsproxy_ratelimit_limited_total", "hmsproxy_cache_flush_calls_total",
	"hmsproxy_cache_flushes_total", "hmsproxy_federation_refused_writes_total", "hmsproxy_unknown_method_flushes_total",
}

func (r *report) evaluate(t *testing.T) {
	var fails []string
	failf := func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d (CHAOS_SEED=%d), quiet %v, chaos %v, up to %d behaviours at once, p99 limit %gx\n",
		r.st.seed, r.st.seed, r.st.quiet, r.st.chaos, r.st.conc, r.st.ratio)

	for _, ro := range []*role{r.victim, r.hostile} {
		if why := ro.failed(); why != "" {
			failf("%s", why)
		}
	}

	// What the hostile clients did.
	if r.hsum == nil {
		failf("the hostile clients reported nothing: %s", r.hostile.why())
	} else {
		fmt.Fprintf(&b, "\n%-18s %5s %12s  %s\n", "behaviour", "runs", "ops", "how the proxy answered")
		for _, name := range slices.Sorted(maps.Keys(r.hsum.Behaviours)) {
			tl := r.hsum.Behaviours[name]
			var notes []string
			for _, k := range slices.Sorted(maps.Keys(tl.Notes)) {
				notes = append(notes, fmt.Sprintf("%s %d", k, tl.Notes[k]))
			}
			fmt.Fprintf(&b, "%-18s %5d %12s  %s\n", name, tl.Runs, fmt.Sprintf("%d %s", tl.Ops, tl.Unit), strings.Join(notes, ", "))
			if n := tl.Notes["DROPPED the read-only group's table"]; n > 0 {
				failf("deep-drop: %d drop_table calls on the read-only group's table were served", n)
			}
			// Each cycler address may be served its rate for the
			// whole run, plus its burst.
			if most := int64(cyclerAddrs * cyclerRate * (int(r.st.chaos.Seconds()) + 2)); name == "ugi-cycling" && rateLimited(r.feats) && tl.Notes["served"] > most {
				failf("ugi-cycling: %d calls served from %d addresses allowed %d a second; want at most %d: new set_ugi names bought more",
					tl.Notes["served"], cyclerAddrs, cyclerRate, most)
			}
		}
	}

	// What the victim measured.
	if r.vsum == nil {
		failf("the victim reported nothing: %s", r.victim.why())
	} else {
		ms := func(us float64) string { return fmt.Sprintf("%.2fms", us/1000) }
		us := func(f float64) time.Duration { return time.Duration(f * float64(time.Microsecond)) }
		fmt.Fprintf(&b, "\n%-28s %22s   %30s %9s   %8s\n", "victim call", "quiet: n  p50  p99", "chaos: n  p50  p99  max", "ref p99", "limit")
		for _, k := range r.vsum.Kinds {
			q, c, rc := r.vsum.Phases["quiet"][k], r.vsum.Phases["chaos"][k], r.vsum.Phases["chaos/ref"][k]
			limit := time.Duration(r.st.ratio * float64(max(us(q.P99), us(rc.P99), p99Floor)))
			verdict := "ok"
			if us(c.Max) > victimStall {
				failf("victim: a %s call took %s under chaos; a call over %v is a stall", k, ms(c.Max), victimStall)
				verdict = "STALL"
			}
			if c.N == 0 {
				verdict = "no calls"
				failf("victim: no %s calls during the chaos", k)
			} else if us(c.P99) > limit {
				verdict = "OVER"
				failf("victim: %s p99 %s under chaos; want at most %v (%gx the larger of the quiet %s, the reference's %s and %v)",
					k, ms(c.P99), limit.Round(10*time.Microsecond), r.st.ratio, ms(q.P99), ms(rc.P99), p99Floor)
			}
			// The median too: an attack that slows the whole machine
			// (a regressed proxy burning CPU) lifts the reference's p99
			// and with it the limit, but not its p50.
			if mid := 2 * max(us(q.P50), us(rc.P50), p99Floor); c.N > 0 && us(c.P50) > mid {
				verdict = "P50 OVER"
				failf("victim: %s p50 %s under chaos; want at most %v (2x the larger of the quiet %s, the reference's %s and %v)",
					k, ms(c.P50), mid.Round(10*time.Microsecond), ms(q.P50), ms(rc.P50), p99Floor)
			}
			fmt.Fprintf(&b, "%-28s %6d %7s %7s   %6d %7s %7s %8s %9s   %8v %s\n", k, q.N, ms(q.P50), ms(q.P99),
				c.N, ms(c.P50), ms(c.P99), ms(c.Max), ms(rc.P99), limit.Round(10*time.Microsecond), verdict)
		}
		fmt.Fprintf(&b, "\nslowest chaos calls (ref: the same call to the reference, made next to it):\n")
		for _, k := range r.vsum.Kinds {
			for i, s := range r.vsum.Phases["chaos"][k].Slowest {
				if i == 2 {
					break
				}
				fmt.Fprintf(&b, "  %-28s %8s at %s (ref %s); running: %s\n", k, s.D.Round(10*time.Microsecond),
					time.UnixMilli(s.T).Format("15:04:05.000"), s.Ref.Round(10*time.Microsecond), strings.Join(r.running(s.T), ", "))
			}
		}
	}
	// Errors, grouped by call kind, phase and message: the first of
	// each group with what was running then.
	errs := r.victim.all("error")
	fmt.Fprintf(&b, "\nvictim errors: %d\n", len(errs))
	if len(errs) > 0 {
		failf("victim: %d errors (first: %s during %s: %s)", len(errs), errs[0].B, errs[0].Phase, errs[0].Err)
	}
	type group struct {
		first event
		n     int
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, e := range errs {
		k := e.B + "|" + e.Phase + "|" + digits.ReplaceAllString(e.Err, "N")
		g := byKey[k]
		if g == nil {
			g = &group{first: e}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.n++
	}
	for i, g := range groups {
		if i == 12 {
			fmt.Fprintf(&b, "  ... %d more kinds of error\n", len(groups)-i)
			break
		}
		e := g.first
		fmt.Fprintf(&b, "  %5dx from %s %s [%s] %s; running: %s\n", g.n, time.UnixMilli(e.T).Format("15:04:05.000"), e.B, e.Phase, e.Err,
			strings.Join(r.running(e.T), ", "))
	}

	// The process.
	r.mon.mu.Lock()
	limit := int64(budget + rssSlack)
	var most int64
	fmt.Fprintf(&b, "RSS: first %d MiB", r.mon.rssFirst>>20)
	for _, ph := range []string{"warm-up", "quiet", "chaos", "after"} {
		if v, ok := r.mon.rssMax[ph]; ok {
			fmt.Fprintf(&b, ", %s max %d MiB", ph, v>>20)
			most = max(most, v)
		}
	}
	fmt.Fprintf(&b, "; limit %d MiB (in-flight budget %d MiB + %d MiB)\n", limit>>20, budget>>20, rssSlack>>20)
	if most > limit {
		failf("proxy RSS reached %d MiB; want at most %d MiB", most>>20, limit>>20)
	}
	fmt.Fprintf(&b, "CPU, cores used:")
	for _, ph := range []string{"quiet", "chaos"} {
		fmt.Fprintf(&b, "  %s:", ph)
		for _, proc := range slices.Sorted(maps.Keys(r.mon.cpu[ph])) {
			fmt.Fprintf(&b, " %s %.2f", proc, r.mon.cpu[ph][proc])
		}
	}
	fmt.Fprintln(&b)
	scrapes, failed, lastErr, metrics := r.mon.scrapes, r.mon.failed, r.mon.lastErr, r.mon.metrics
	r.mon.mu.Unlock()
	if r.hsum != nil {
		scrapes += int(r.hsum.Scrapes)
		failed += int(r.hsum.ScrapeErrors)
		if r.hsum.ScrapeErr != "" {
			lastErr = r.hsum.ScrapeErr
		}
	}
	fmt.Fprintf(&b, "metrics scrapes: %d, %d failed %s\n", scrapes, failed, lastErr)
	if failed > 0 && r.p.alive() {
		failf("%d of %d metrics scrapes failed (last: %s)", failed, scrapes, lastErr)
	}
	if r.p.alive() {
		fmt.Fprintf(&b, "proxy: alive\n")
	} else {
		fmt.Fprintf(&b, "proxy: DEAD, %s\n", r.p.exit())
		failf("the proxy process died (%s); its last log lines:\n%s", r.p.exit(), r.p.log.tail(30))
	}
	fmt.Fprintf(&b, "\nproxy log, most frequent:\n  %s\n", strings.Join(r.p.log.top(12), "\n  "))
	fmt.Fprintf(&b, "\nproxy counters at the last scrape:\n")
	for _, line := range strings.Split(metrics, "\n") {
		for _, m := range shownMetrics {
			if strings.HasPrefix(line, m) {
				fmt.Fprintf(&b, "  %s\n", line)
			}
		}
	}
	t.Log("\n" + b.String())
	for _, f := range fails {
		t.Error(f)
	}
}

// running is the behaviours that ran in the two seconds up to t (Unix
// ms).
func (r *report) running(t int64) []string {
	type key struct {
		b string
		i int
	}
	starts := map[key]int64{}
	for _, e := range r.hostile.all("start") {
		starts[key{e.B, e.I}] = e.T
	}
	ends := map[key]int64{}
	for _, e := range r.hostile.all("end") {
		ends[key{e.B, e.I}] = e.T
	}
	set := map[string]bool{}
	for k, s := range starts {
		e, ok := ends[k]
		if s <= t && (!ok || e >= t-2000) {
			set[k.b] = true
		}
	}
	if len(set) == 0 {
		return []string{"none"}
	}
	return slices.Sorted(maps.Keys(set))
}
