package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
)

// TestShadowReal: against a real metastore, checks of fresh entries (a
// table, and a partition of a by-names batch) match byte for byte, so
// shadow validation raises no false alarms; and a table altered directly
// on the metastore, with no event log running, is found on its next hit,
// counted and dropped (issue 10, item 10).
func TestShadowReal(t *testing.T) {
	eachVersion(t, func(t *testing.T, v string) {
		ms := start(t, v)
		n := startProxy(t, ms, nodeOpts{shadow: &proxy.Shadow{Rate: 1, MaxPerSecond: 1000, Grace: -1}})
		sh := n.srv.ShadowStats()
		direct, c := dial(t, ms.addr), dial(t, n.addr)
		db := "e2e_sh_" + strings.ReplaceAll(v, ".", "")
		clDatabase(t, direct, db)
		clMustOK(t, "create_table", call(t, direct, "create_table", hmsreq.Args(clTable(db, "t", nil).Field(1))))
		tblLoc := "file:///tmp/hmsproxy-e2e/" + db + "/t"
		clMustOK(t, "add_partitions", call(t, direct, "add_partitions", hmsreq.Args(hmsreq.Partitions(1,
			corpusPartition(db, "t", tblLoc, "2024-01-01"), corpusPartition(db, "t", tblLoc, "2024-01-02")))))
		// 4.0.1 has dropped get_table; its clients send get_table_req.
		getMethod, get := "get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "t"))
		if v == "4.0" {
			getMethod = "get_table_req"
			get = hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, "t"))
		}
		byNames := hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "t"), hmsreq.Strings(3, "ds=2024-01-01", "ds=2024-01-02"))
		waitChecks := func(want uint64) {
			t.Helper()
			if !wait.Until(30*time.Second, func() bool { return sh.Checks()+sumFailed(sh) >= want }) {
				t.Fatalf("%d shadow checks after 30s; want %d", sh.Checks(), want)
			}
		}
		for _, r := range []struct {
			method string
			args   []byte
		}{{getMethod, get}, {"get_partitions_by_names", byNames}} {
			call(t, c, r.method, r.args) // a miss
			n.store.Wait()
			call(t, c, r.method, r.args) // a hit, checked
		}
		waitChecks(2)
		if got := sh.Count(hms.KindTable, proxy.ShadowMatched) + sh.Count(hms.KindPartitions, proxy.ShadowMatched); got != 2 || sh.Mismatches() != 0 {
			t.Fatalf("fresh entries: %d matched, %d mismatched, %d failed; want 2 matched", got, sh.Mismatches(), sumFailed(sh))
		}

		alter := hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "t"), clTable(db, "t", map[string]string{"v": "behind"}).Field(3))
		clMustOK(t, "alter_table", call(t, direct, "alter_table", alter))
		if got := clParam(call(t, c, getMethod, get), "v"); got != "" {
			t.Fatalf("served v=%q; the stale entry should be served once", got)
		}
		if !wait.Until(30*time.Second, func() bool { return sh.Mismatches() != 0 }) {
			t.Fatalf("stale table not found: %d checks, %d failed", sh.Checks(), sumFailed(sh))
		}
		if got := sh.Count(hms.KindTable, proxy.ShadowMismatched); got != 1 {
			t.Fatalf("table mismatches %d; want 1", got)
		}
		if got := clParam(call(t, c, getMethod, get), "v"); got != "behind" {
			t.Fatalf("after the mismatch served v=%q; want behind (entry dropped)", got)
		}
	})
}

func sumFailed(sh *proxy.ShadowStats) uint64 {
	var n uint64
	for k := range hms.Kind(cache.NumKinds) {
		n += sh.Count(k, proxy.ShadowFailed)
	}
	return n
}
