package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/filter"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// fedYAML is a federation config over a primary and a member "lake".
func fedYAML(t *testing.T, primary, lake, extra string) settings.File {
	t.Helper()
	y := "upstream:\n  uris: [\"thrift://" + primary + "\"]\n  name: main\n" +
		"federation:\n  listing_timeout: 2s\n  federated:\n" +
		"    - name: lake\n      uris: [\"thrift://" + lake + "\"]\n      databases: [lake, \"lake_*\"]\n      access: read-write\n" + extra
	p := filepath.Join(t.TempDir(), "hmsproxy.yaml")
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HMSPROXY_CONFIG", "")
	cfg, err := load([]string{"-config", p})
	if err != nil {
		t.Fatal(err)
	}
	quiet(t, &cfg)
	cfg.Admin.Listen = ""
	return cfg
}

// TestFederationWiring runs the binary's wiring with two demo metastores
// and Redis: listings merge, a write in the member reaches it and is
// published on the member's own invalidation stream.
func TestFederationWiring(t *testing.T) {
	p, pAddr := proxytest.Demo(t, proxytest.DemoOptions{})
	f, fAddr := proxytest.Demo(t, proxytest.DemoOptions{Empty: true})
	fc := proxytest.Dial(t, fAddr, wire.Buffered)
	proxytest.Call(t, fc, "create_database", hmsreq.Args(hmsreq.Database{Name: "lake", Location: "file:/tmp/wh/lake.db"}.Field(1)))
	r := redistest.Start(t)
	proxytest.Call(t, fc, "create_table", hmsreq.Args(hmsreq.Table{DB: "lake", Name: "direct",
		SD: hmsreq.TextSD("file:/tmp/wh/lake.db/direct", hmsreq.Column{Name: "id", Type: "bigint"})}.Field(1)))
	cfg := fedYAML(t, pAddr, fAddr, "")
	cfg.Redis.URL = r.Addr
	cfg.Admin.Listen = freeAddr(t)
	cfg.EventLog.Interval = 100 * time.Millisecond
	c := runInProcess(t, cfg)

	m, err := c.Call(ctxT(t), "get_all_databases", hmsclient.Args())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	d := wire.NewDecoder(m.Body())
	if _, id := d.FieldBegin(); id != 0 {
		t.Fatalf("get_all_databases: result field %d", id)
	}
	_, n := d.ListBegin()
	for i := 0; i < n; i++ {
		got = append(got, d.String())
	}
	if want := []string{"default", "demo_db0", "demo_db1", "lake"}; !slices.Equal(got, want) {
		t.Errorf("merged databases %v, want %v", got, want)
	}

	// The member's own event-log poller: a write made directly on the
	// member reaches the member's cached entries.
	getDirect := func() int16 {
		m, err := c.Call(ctxT(t), "get_table", hmsclient.Args("lake", "direct"))
		if err != nil {
			t.Fatal(err)
		}
		f, _ := wire.ResultField(m.Body())
		return f
	}
	if getDirect() != 0 {
		t.Fatal("get_table lake.direct through the proxy failed")
	}
	proxytest.Eventually(t, "the entry cached", func() bool {
		before := f.CallCount("get_table")
		getDirect()
		return f.CallCount("get_table") == before
	})
	// The member's poller has started (its cursor is saved) before the
	// direct write, so that the write is an event it reads, not one
	// before its start (which costs a flush of everything).
	proxytest.Eventually(t, "the member's poller to start", func() bool {
		n, _ := r.Client().Exists(context.Background(), "hmsproxy:eventlog:lake").Result()
		return n == 1
	})
	proxytest.Call(t, fc, "drop_table", hmsclient.Args("lake", "direct"))
	proxytest.Eventually(t, "the member's poller to publish the drop", func() bool { return streamNames(r, "hmsproxy:inval:lake", "direct") })
	proxytest.Eventually(t, "the dropped table gone through the proxy", func() bool { return getDirect() != 0 })

	p.ResetCalls()
	f.ResetCalls()
	if _, err := c.Call(ctxT(t), "drop_table", hmsclient.Args("lake", "nope")); err != nil {
		t.Fatal(err)
	}
	if f.CallCount("drop_table") != 1 || p.CallCount("drop_table") != 0 {
		t.Fatalf("drop_table in lake reached lake %d and the primary %d times", f.CallCount("drop_table"), p.CallCount("drop_table"))
	}
	proxytest.Eventually(t, "the write on the member's own stream", func() bool { return streamNames(r, "hmsproxy:inval:lake", "nope") })
	res, err := http.Get("http://" + cfg.Admin.Listen + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if want := `hmsproxy_federation_calls_total{group="lake"} `; !strings.Contains(string(metrics), want) {
		t.Errorf("metrics lack %s", want)
	}
	if streamNames(r, "hmsproxy:inval:main", "nope") {
		t.Error("the member's write was published on the primary's stream")
	}
	for _, want := range []string{`hmsproxy_group_upstream_up{addr="` + fAddr + `",group="lake"} 1`, `hmsproxy_group_bus_synced{group="lake"} 1`,
		`hmsproxy_group_requests_total{group="lake",outcome="hit"} `, `hmsproxy_group_eventlog_applied_event_id{group="lake"} `} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// The admin surface: every group's status, and a flush of one group
	// on its own stream only.
	res, err = http.Get("http://" + cfg.Admin.Listen + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Groups []struct {
			Name     string `json:"name"`
			Healthy  *bool  `json:"healthy"`
			Bus      *struct{ Synced bool }
			EventLog *struct {
				Applied int64 `json:"applied_event_id"`
			} `json:"eventlog"`
		} `json:"groups"`
	}
	err = json.NewDecoder(res.Body).Decode(&st)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Groups) != 2 || st.Groups[0].Name != "main" || st.Groups[1].Name != "lake" {
		t.Fatalf("status groups %+v; want main, lake", st.Groups)
	}
	if g := st.Groups[1]; g.Healthy == nil || !*g.Healthy || g.Bus == nil || !g.Bus.Synced || g.EventLog == nil || g.EventLog.Applied <= 0 {
		t.Errorf("lake's status: healthy %v, bus %+v, event log %+v", g.Healthy, g.Bus, g.EventLog)
	}
	res, err = http.Post("http://"+cfg.Admin.Listen+"/cache/flush/flushme?group=lake", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("POST /cache/flush/flushme?group=lake: %d", res.StatusCode)
	}
	proxytest.Eventually(t, "the group's flush on its own stream", func() bool { return streamNames(r, "hmsproxy:inval:lake", "flushme") })
	if streamNames(r, "hmsproxy:inval:main", "flushme") {
		t.Error("a flush of lake was published on the primary's stream")
	}
}

// streamNames reports whether an entry of a Redis stream mentions what
// (the streams carry heartbeats too).
func streamNames(r *redistest.Server, key, what string) bool {
	msgs, _ := r.Client().XRange(context.Background(), key, "-", "+").Result()
	for _, m := range msgs {
		for _, v := range m.Values {
			if s, ok := v.(string); ok && strings.Contains(s, what) {
				return true
			}
		}
	}
	return false
}

// TestFederationConfigErrors: a database claimed twice, a prefixed member
// without a prefix, an unknown listing_failure stop startup with a clear
// message.
func TestFederationConfigErrors(t *testing.T) {
	_, pAddr := proxytest.Demo(t, proxytest.DemoOptions{})
	_, fAddr := proxytest.Demo(t, proxytest.DemoOptions{Empty: true})
	for _, tc := range []struct{ extra, want string }{
		{"    - name: lake2\n      uris: [\"thrift://" + fAddr + "\"]\n      databases: [lake_sales]\n", `database "lake_sales" is claimed by both group "lake2" and group "lake"`},
		{"  database_resolution: prefixed\n", `federated group "lake" has no prefix`},
		{"  listing_failure: maybe\n", "listing_failure"},
	} {
		cfg := fedYAML(t, pAddr, fAddr, "")
		if strings.HasPrefix(tc.extra, "    -") {
			cfg = fedYAML(t, pAddr, fAddr, tc.extra)
		} else {
			// keys of the federation block itself
			y := strings.Replace(tc.extra, "  ", "", 1)
			k, v, _ := strings.Cut(strings.TrimSpace(y), ": ")
			switch k {
			case "database_resolution":
				cfg.Federation.DatabaseResolution = v
			case "listing_failure":
				cfg.Federation.ListingFailure = v
			}
		}
		err := run(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config %q: run returned %v, want an error with %q", tc.extra, err, tc.want)
		}
	}
}

type capRecorder struct{ d time.Duration }

func (c *capRecorder) SetTTLCap(d time.Duration) { c.d = d }

// TestTTLCaps: the groups' health checks share the store's TTL cap: one
// group's log found (cap 0) does not lift the cap another group's
// missing log asked for.
func TestTTLCaps(t *testing.T) {
	st := &capRecorder{}
	caps := newTTLCaps(st)
	caps.For("main").SetTTLCap(0)
	caps.For("lake").SetTTLCap(30 * time.Second)
	caps.For("main").SetTTLCap(0)
	if st.d != 30*time.Second {
		t.Fatalf("cap %v after the primary's log was found with lake's missing; want 30s", st.d)
	}
	caps.For("main").SetTTLCap(10 * time.Second)
	if st.d != 10*time.Second {
		t.Fatalf("cap %v with both missing; want the shorter, 10s", st.d)
	}
	caps.For("main").SetTTLCap(0)
	caps.For("lake").SetTTLCap(0)
	if st.d != 0 {
		t.Fatalf("cap %v with every log found; want none", st.d)
	}
}

// TestFederationEventLogHealthPerGroup: each group's notification log is
// checked on its own: a member without one is reported missing on the
// admin surface, the primary's is not.
func TestFederationEventLogHealthPerGroup(t *testing.T) {
	_, pAddr := proxytest.Demo(t, proxytest.DemoOptions{})
	_, fAddr := proxytest.Demo(t, proxytest.DemoOptions{Config: demohms.Config{NoEventLog: true}})
	// The primary's log has an event (seeding writes none).
	proxytest.Call(t, proxytest.Dial(t, pAddr, wire.Buffered), "create_database",
		hmsreq.Args(hmsreq.Database{Name: "logged", Location: "file:/tmp/wh/logged.db"}.Field(1)))
	cfg := fedYAML(t, pAddr, fAddr, "")
	cfg.Admin.Listen = freeAddr(t)
	cfg.EventLog.Interval = 50 * time.Millisecond
	cfg.EventLog.HealthInterval = 50 * time.Millisecond
	runInProcess(t, cfg)
	health := func() (string, string) {
		res, err := http.Get("http://" + cfg.Admin.Listen + "/status.json")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var st struct {
			Groups []struct {
				EventLog *struct{ Health string } `json:"eventlog"`
			} `json:"groups"`
		}
		if err := json.NewDecoder(res.Body).Decode(&st); err != nil || len(st.Groups) != 2 || st.Groups[0].EventLog == nil || st.Groups[1].EventLog == nil {
			t.Fatalf("status groups: %+v, %v", st.Groups, err)
		}
		return st.Groups[0].EventLog.Health, st.Groups[1].EventLog.Health
	}
	proxytest.Eventually(t, "the member's log reported missing", func() bool { _, l := health(); return l == "missing" })
	if p, _ := health(); p == "missing" {
		t.Errorf("the primary's log reported missing: the member's verdict leaked")
	}
}

// TestFederatedPolicyInClientNames: cache.never patterns name databases
// as clients do; a renamed group's cache sees its metastore's names, so
// its policy maps them back (issue 13: renamed calls are cached).
func TestFederatedPolicyInClientNames(t *testing.T) {
	never, err := filter.Compile(nil, []string{"lk_secret.*", "sales.hidden"})
	if err != nil {
		t.Fatal(err)
	}
	fed := settings.Federation{DatabaseResolution: "prefixed"}
	fc := settings.FederatedGroup{Name: "lake", Prefix: "lk_", DatabaseNameMapping: map[string]string{"Sales": "crm"}}
	pol := clientPolicy(never, fed, fc)
	for _, tc := range []struct {
		db, table string
		want      bool
	}{
		{"secret", "t", false}, // lk_secret.t to clients
		{"open", "t", true},
		{"crm", "hidden", false}, // sales.hidden to clients
		{"crm", "shown", true},
	} {
		if got := pol.Allowed(tc.db, tc.table); got != tc.want {
			t.Errorf("the member's %s.%s: cached %v; want %v", tc.db, tc.table, got, tc.want)
		}
	}
	if clientPolicy(never, settings.Federation{}, settings.FederatedGroup{Name: "m"}) != proxy.Allower(never) {
		t.Error("a group that renames nothing should keep the policy as it is")
	}
}

// TestFederationDecodesWithConfiguredLimits guards issue 22: with
// limits.max_depth 100, a drop_table carrying a 70-deep extra field is a
// request the proxy takes, so the router must decode it with the same
// limits and apply the primary's read-only rule; it once gave up at the
// built-in depth (64) and sent the call to the primary unchecked.
func TestFederationDecodesWithConfiguredLimits(t *testing.T) {
	deep := wire.Limits{MaxDepth: 100}
	p, pAddr := proxytest.Demo(t, proxytest.DemoOptions{Config: demohms.Config{Limits: deep}})
	_, fAddr := proxytest.Demo(t, proxytest.DemoOptions{Empty: true, Config: demohms.Config{Limits: deep}})
	cfg := fedYAML(t, pAddr, fAddr, "  primary:\n    access: read-only\nlimits:\n  max_depth: 100\n")
	c := runInProcess(t, cfg)

	// An extra field the metastore skips, nested 70 deep: a metastore
	// (libthrift skips unknown fields with no depth bound) takes it.
	args := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Bool(3, false), hmsreq.Nested(9, 70))
	m, err := c.Call(ctxT(t), "drop_table", args)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := wire.ResultField(m.Body()); f <= 0 {
		t.Errorf("a deep drop_table on the read-only primary: result field %d; want a MetaException", f)
	}
	if n := p.CallCount("drop_table"); n != 0 {
		t.Errorf("a deep drop_table reached the read-only primary %d times; want 0", n)
	}
}
