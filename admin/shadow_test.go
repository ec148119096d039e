package admin

import (
	"context"
	"testing"

	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestShadowOnStatus: shadow validation's checks and mismatches reach
// /metrics and the status page, and agree.
func TestShadowOnStatus(t *testing.T) {
	e := startEnv(t, envOpts{shadow: true})
	sh := e.proxy.ShadowStats()
	c := e.client(t)
	for range 3 { // a miss, then two hits that match
		e.call(t, c, "get_table", getTable("demo_db0", "t1"))
	}
	waitFor(t, "two matched checks", func() bool { return sh.Count(hms.KindTable, proxy.ShadowMatched) == 2 })

	// A table dropped behind the proxy's back, with no event log: the
	// next hit is stale, and its check says so.
	direct, err := hmsclient.Dial(context.Background(), e.upAddr, wire.Buffered)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if _, err := direct.Call(context.Background(), "drop_table", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t1"), hmsreq.Bool(3, true))); err != nil {
		t.Fatal(err)
	}
	e.call(t, c, "get_table", getTable("demo_db0", "t1"))
	waitFor(t, "the mismatch", func() bool { return sh.Mismatches() == 1 })

	series, families := scrape(t, e.url)
	wantFamilies(t, families, "hmsproxy_shadow_checks_total", "hmsproxy_shadow_mismatches_total", "hmsproxy_shadow_skipped_total")
	if got := series[`hmsproxy_shadow_mismatches_total{kind="table"}`]; got != 1 {
		t.Errorf("hmsproxy_shadow_mismatches_total{kind=table} = %v; want 1", got)
	}
	if got := series[`hmsproxy_shadow_checks_total{kind="table",outcome="matched"}`]; got != 2 {
		t.Errorf("matched checks = %v; want 2", got)
	}
	st := getStatus(t, e.url)
	if st.Shadow == nil || st.Shadow.Checks != 3 || st.Shadow.Mismatches != 1 || st.Shadow.MismatchesByKind["table"] != 1 {
		t.Fatalf("status shadow = %+v; want 3 checks, 1 mismatch of kind table", st.Shadow)
	}
	if off := getStatus(t, startEnv(t, envOpts{}).url); off.Shadow != nil {
		t.Errorf("status shadow without a source = %+v; want null", off.Shadow)
	}
}
