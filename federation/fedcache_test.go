package federation

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/federation/dbname"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// renamedBed is a cached federated proxy in prefixed mode: the primary
// seeded {2, 3, 20}, the member "lake" (prefix lake_, read-write) seeded
// {1, 2, 5}, so that the member's demo_db0.t0 (seen as
// lake_demo_db0.t0) differs from the primary's.
type renamedBed struct {
	p, f   *demohms.Server
	fAddr  string
	srv    *proxy.Server
	addr   string
	store  *cache.Store
	router *Router
}

func newRenamedBed(t testing.TB, aliases map[string]string) *renamedBed {
	t.Helper()
	b := &renamedBed{}
	var pAddr string
	b.p, pAddr = proxytest.Demo(t, proxytest.DemoOptions{})
	b.f, b.fAddr = proxytest.Demo(t, proxytest.DemoOptions{Seed: [3]int{1, 2, 5}})
	pg := proxytest.Group(t, upstream.Config{}, pAddr)
	fg := proxytest.Group(t, upstream.Config{}, b.fAddr)
	cfg := Config{Mode: Prefixed, Groups: []Member{
		{Name: "primary", Up: pg},
		{Name: "lake", Up: fg, Prefix: "lake_", Access: ReadWrite, Aliases: aliases},
	}}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.router = r
	b.store = proxytest.Store(t, cache.Config{})
	pcfg := proxy.Config{Router: r,
		Cache: &proxy.Caching{Store: b.store, Upstream: "primary", Scope: proxy.ScopeShared, Shadow: proxy.Shadow{Rate: -1}},
		Federated: []proxy.Backend{{Name: "lake", Up: fg,
			Cache: &proxy.Caching{Store: b.store, Upstream: "lake", Scope: proxy.ScopeShared, Shadow: proxy.Shadow{Rate: -1}}}}}
	srv, err := proxy.New(pcfg, pg)
	if err != nil {
		t.Fatal(err)
	}
	b.srv = srv
	b.addr = proxytest.Serve(t, srv)
	// Until each group's settings are read the proxy answers nothing
	// itself (no prunes): the tests below are about what it does after.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.SettingsRead(ctx); err != nil {
		t.Fatal(err)
	}
	return b
}

// member is what the proxy should answer for a call naming the member's
// databases under the client's names: the member's own reply to the
// request in its names, rewritten.
func (b *renamedBed) member(t *testing.T, method string, local []byte) []byte {
	t.Helper()
	fc := proxytest.Dial(t, b.fAddr, wire.Buffered)
	raw := body(t, proxytest.Call(t, fc, method, local))
	out, err := dbname.Reply(nil, hms.Lookup([]byte(method)), wire.Reply, raw, func(db string) string {
		if db == "lake" { // the alias of TestRenamedCacheAliases
			return "sales"
		}
		return "lake_" + db
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Issue 13: a renamed call (prefixed mode) is cached by its group. The
// second call is a hit (the member sees one call), and miss, hit and
// the member's own answer rewritten are the same bytes, for single
// entries, batches answered per entry and prunes answered locally.
func TestRenamedCacheTransparent(t *testing.T) {
	b := newRenamedBed(t, nil)
	c := proxytest.Dial(t, b.addr, wire.Buffered)
	p0, p3 := "ds=2024-01-01/hr=0", "ds=2024-01-01/hr=3"
	for _, tc := range []struct {
		method        string
		client, local []byte
		unnamed       bool // the reply carries no database name
	}{
		{"get_database", hmsclient.Args("lake_demo_db0"), hmsclient.Args("demo_db0"), false},
		{"get_table", hmsclient.Args("lake_demo_db0", "t0"), hmsclient.Args("demo_db0", "t0"), false},
		{"get_all_tables", hmsclient.Args("lake_demo_db0"), hmsclient.Args("demo_db0"), true},
		{"get_partition_names", hmsreq.Args(hmsreq.Str(1, "lake_demo_db0"), hmsreq.Str(2, "t0"), hmsreq.I16(3, -1)),
			hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.I16(3, -1)), true},
		{"get_partitions_by_names", hmsreq.Args(hmsreq.Str(1, "lake_demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Strings(3, p0, p3)),
			hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Strings(3, p0, p3)), false},
		{"get_table_objects_by_name", hmsreq.Args(hmsreq.Str(1, "lake_demo_db0"), hmsreq.Strings(2, "t1")),
			hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Strings(2, "t1")), false},
		{"get_partitions_by_filter", hmsreq.Args(hmsreq.Str(1, "lake_demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Str(3, "hr = 3 or hr = 7"), hmsreq.I16(4, -1)),
			hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Str(3, "hr = 3 or hr = 7"), hmsreq.I16(4, -1)), false},
	} {
		t.Run(tc.method, func(t *testing.T) {
			want := b.member(t, tc.method, tc.local)
			if !tc.unnamed && !bytes.Contains(want, []byte("lake_demo_db0")) {
				t.Fatalf("the member's reply names no lake_demo_db0: the test proves nothing")
			}
			miss := body(t, proxytest.Call(t, c, tc.method, tc.client))
			b.store.Wait()
			b.f.ResetCalls()
			hit := body(t, proxytest.Call(t, c, tc.method, tc.client))
			// The proxy's own checks of the member's settings
			// (get_config_value, getVersion, get_catalogs) run on their
			// own clock; any other call was the client's.
			var calls []demohms.Call
			for _, c := range b.f.Calls() {
				if c.Method != "get_config_value" && c.Method != "getVersion" && c.Method != "get_catalogs" {
					calls = append(calls, c)
				}
			}
			if len(calls) != 0 {
				t.Errorf("second call reached the member (%v): not cached", calls)
			}
			if tc.method == "get_partitions_by_filter" && b.srv.FederatedCache(1).PruneStats().Local.Load() == 0 {
				t.Errorf("get_partitions_by_filter was not answered by a local prune")
			}
			if !bytes.Equal(miss, want) {
				t.Errorf("miss differs from the member's reply rewritten:\n got %q\nwant %q", miss, want)
			}
			if !bytes.Equal(hit, want) {
				t.Errorf("hit differs from the member's reply rewritten:\n got %q\nwant %q", hit, want)
			}
		})
	}
	// The primary's table of the same local name was never loaded for
	// the member: scopes stayed apart.
	if n := b.p.CallCount("get_table"); n != 0 {
		t.Errorf("the primary was asked get_table %d times for the member's calls", n)
	}
}

// database_name_mapping aliases are renamed too, and cached alike.
func TestRenamedCacheAliases(t *testing.T) {
	b := newRenamedBed(t, map[string]string{"sales": "demo_db0"})
	c := proxytest.Dial(t, b.addr, wire.Buffered)
	want, err := dbname.Reply(nil, hms.Lookup([]byte("get_table")), wire.Reply,
		body(t, proxytest.Call(t, proxytest.Dial(t, b.fAddr, wire.Buffered), "get_table", hmsclient.Args("demo_db0", "t0"))),
		func(db string) string { return map[string]string{"demo_db0": "sales"}[db] })
	if err != nil {
		t.Fatal(err)
	}
	miss := body(t, proxytest.Call(t, c, "get_table", hmsclient.Args("sales", "t0")))
	b.store.Wait()
	b.f.ResetCalls()
	hit := body(t, proxytest.Call(t, c, "get_table", hmsclient.Args("sales", "t0")))
	if n := b.f.CallCount("get_table"); n != 0 {
		t.Errorf("aliased get_table hit the member %d times: not cached", n)
	}
	if !bytes.Equal(miss, want) || !bytes.Equal(hit, want) {
		t.Errorf("aliased get_table: miss %q, hit %q; want %q", miss, hit, want)
	}
}

// tableNames lists a get_all_tables reply.
func tableNames(t *testing.T, reply []byte) []string {
	t.Helper()
	var out []string
	hms.Walk(body(t, reply), hms.Path{0, hms.Each}, func(typ byte, v []byte) bool {
		out = append(out, string(v))
		return true
	})
	slices.Sort(out)
	return out
}

// A renamed write invalidates the group's entries of the renamed reads:
// a table created through the proxy under the prefixed name, or on the
// member itself (seen by the group's event-log poller), is listed by the
// next read.
func TestRenamedCacheInvalidation(t *testing.T) {
	b := newRenamedBed(t, nil)
	gc := b.srv.FederatedCache(1)
	caller := &hmsclient.Redialer{Addr: b.fAddr}
	t.Cleanup(func() { caller.Close() })
	poller, err := eventlog.New(eventlog.Config{Caller: caller, Cursor: &eventlog.MemCursor{},
		Apply: func(ctx context.Context, ents []cache.Entity) { gc.Flush(ctx, ents) },
		Drop:  func(string) { gc.DropAll("test") }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := proxytest.Ctx(t)
	if err := poller.Poll(ctx); err != nil { // the cursor starts at the log's head
		t.Fatal(err)
	}
	c := proxytest.Dial(t, b.addr, wire.Buffered)
	list := func() []string {
		return tableNames(t, proxytest.Call(t, c, "get_all_tables", hmsclient.Args("lake_demo_db0")))
	}
	cached := func(what string) {
		t.Helper()
		list()
		b.store.Wait()
		b.f.ResetCalls()
		list()
		if n := b.f.CallCount("get_all_tables"); n != 0 {
			t.Fatalf("%s: get_all_tables not served from the cache (%d member calls); the check below would prove nothing", what, n)
		}
	}

	cached("before the proxy's write")
	if r := proxytest.Call(t, c, "create_table", tableArg("lake_demo_db0", "via_proxy")); resultField(t, r) != -1 {
		t.Fatalf("create_table through the proxy: %q", metaMessage(t, r))
	}
	if got := list(); !slices.Contains(got, "via_proxy") {
		t.Errorf("after create_table through the proxy: %v, want via_proxy listed", got)
	}

	cached("before the member's own write")
	fc := proxytest.Dial(t, b.fAddr, wire.Buffered)
	if r := proxytest.Call(t, fc, "create_table", tableArg("demo_db0", "on_member")); resultField(t, r) != -1 {
		t.Fatalf("create_table on the member: %q", metaMessage(t, r))
	}
	if got := list(); slices.Contains(got, "on_member") {
		t.Fatalf("listed on_member before the poll: the entry was not cached, the check below proves nothing")
	}
	if err := poller.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := list(); !slices.Contains(got, "on_member") {
		t.Errorf("after one event-log poll of the member: %v, want on_member listed", got)
	}
	if got := strings.Join(list(), ","); strings.Contains(got, "lake_") {
		t.Errorf("table names rewritten as databases: %s", got)
	}
}

// Listings that ask every group are cached as each group's part, in the
// group's own cache: a second listing asks no metastore; a database
// created in one group (through the proxy, or on the member and seen as
// its event log would report it) drops that group's part alone, and the
// next listing shows it.
func TestFanOutPartsCached(t *testing.T) {
	b := newBed(t, bedOptions{cached: true, cfg: func(c *Config) { c.Groups[1].Access = ReadWrite }})
	c := proxytest.Dial(t, b.addr, wire.Buffered)
	list := func() []string { return names(t, proxytest.Call(t, c, "get_all_databases", hmsclient.Args())) }
	asked := func() (int, int) { return b.p.CallCount("get_all_databases"), b.f.CallCount("get_all_databases") }
	list()
	b.store.Wait()
	b.p.ResetCalls()
	b.f.ResetCalls()
	if got := list(); !slices.Equal(got, []string{"default", "demo_db0", "demo_db1", "lake"}) {
		t.Fatalf("merged listing from the cache: %v", got)
	}
	if p, f := asked(); p != 0 || f != 0 {
		t.Fatalf("second listing asked the primary %d and the member %d times; want both parts from the cache", p, f)
	}

	if r := proxytest.Call(t, c, "create_database", databaseArg("lake_new")); resultField(t, r) != -1 {
		t.Fatalf("create_database lake_new through the proxy: %q", metaMessage(t, r))
	}
	if got := list(); !slices.Contains(got, "lake_new") {
		t.Errorf("after create_database lake_new through the proxy: %v", got)
	}
	if p, f := asked(); p != 0 || f != 1 {
		t.Errorf("after the member's write the listing asked the primary %d and the member %d times; want 0 and 1", p, f)
	}

	b.store.Wait()
	fc := proxytest.Dial(t, b.fAddr, wire.Buffered)
	if r := proxytest.Call(t, fc, "create_database", databaseArg("lake_direct")); resultField(t, r) != -1 {
		t.Fatalf("create_database on the member: %q", metaMessage(t, r))
	}
	if got := list(); slices.Contains(got, "lake_direct") {
		t.Fatalf("lake_direct listed before any invalidation: the member's part was not cached, the check below proves nothing")
	}
	// What the member's event-log poller applies for a CREATE_DATABASE.
	b.srv.FederatedCache(1).Flush(proxytest.Ctx(t), []cache.Entity{{Level: cache.LevelDatabase, Cat: "hive", DB: "lake_direct"}})
	if got := list(); !slices.Contains(got, "lake_direct") {
		t.Errorf("after the member's invalidation of lake_direct: %v", got)
	}
}
