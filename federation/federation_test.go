package federation

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// bed is a federated proxy over two demo metastores: the primary with
// demo_db0 and demo_db1, the federated group "lake" with databases lake
// and stray, of which it serves lake only.
type bed struct {
	p, f   *demohms.Server
	fAddr  string
	router *Router
	srv    *proxy.Server
	addr   string
	store  *cache.Store
}

type bedOptions struct {
	cfg    func(*Config)
	cached bool
}

func newBed(t *testing.T, o bedOptions) *bed {
	t.Helper()
	b := &bed{}
	var pAddr string
	b.p, pAddr = proxytest.Demo(t, proxytest.DemoOptions{})
	b.f, b.fAddr = proxytest.Demo(t, proxytest.DemoOptions{Empty: true})
	fc := proxytest.Dial(t, b.fAddr, wire.Buffered)
	for _, db := range []string{"lake", "stray"} {
		if r := proxytest.Call(t, fc, "create_database", databaseArg(db)); resultField(t, r) != -1 {
			t.Fatalf("create_database %s on the federated demo: result field %d", db, resultField(t, r))
		}
	}
	pg := proxytest.Group(t, upstream.Config{}, pAddr)
	fg := proxytest.Group(t, upstream.Config{}, b.fAddr)
	cfg := Config{Groups: []Member{
		{Name: "primary", Up: pg},
		{Name: "lake", Up: fg, Databases: []string{"lake", "lake_*"}},
	}, Logger: proxytest.Logger(t)}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.router = r
	pcfg := proxy.Config{Logger: proxytest.Logger(t), Router: r,
		Federated: []proxy.Backend{{Name: "lake", Up: fg}}}
	if o.cached {
		b.store = proxytest.Store(t, cache.Config{})
		pcfg.Cache = &proxy.Caching{Store: b.store, Upstream: "primary", Scope: proxy.ScopeShared, Shadow: proxy.Shadow{Rate: -1}}
		pcfg.Federated[0].Cache = &proxy.Caching{Store: b.store, Upstream: "lake", Scope: proxy.ScopeShared, Shadow: proxy.Shadow{Rate: -1}}
	}
	srv, err := proxy.New(pcfg, pg)
	if err != nil {
		t.Fatal(err)
	}
	b.srv = srv
	b.addr = proxytest.Serve(t, srv)
	b.p.ResetCalls()
	b.f.ResetCalls()
	return b
}

// databaseArg is create_database's arg: a Database of that name alone.
func databaseArg(name string) []byte { return hmsreq.Req(hmsreq.Str(1, name)) }

// tableArg is create_table's arg: a Table of that name in db, and nothing
// else.
func tableArg(db, name string) []byte { return hmsreq.Req(hmsreq.Str(1, name), hmsreq.Str(2, db)) }

// body is the result struct of a whole reply message.
func body(t *testing.T, msg []byte) []byte {
	t.Helper()
	m, err := wire.Parse(msg, wire.Limits{MaxMessage: len(msg)})
	if err != nil {
		t.Fatal(err)
	}
	if m.Type != wire.Reply {
		t.Fatalf("%s: message type %d, not a reply", m.Name(), m.Type)
	}
	return m.Body()
}

func resultField(t *testing.T, msg []byte) int16 {
	t.Helper()
	f, err := wire.ResultField(body(t, msg))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// metaMessage is the message of the MetaException at field 1 (or the
// field given) of a reply, "" when the reply is a success.
func metaMessage(t *testing.T, reply []byte) string {
	t.Helper()
	if resultField(t, reply) <= 0 {
		return ""
	}
	_, msg, err := decodeListing("get_all_databases", body(t, reply))
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func names(t *testing.T, reply []byte) []string {
	t.Helper()
	items, msg, err := decodeListing("get_all_databases", body(t, reply))
	if err != nil || msg != "" {
		t.Fatalf("listing: %v %q", err, msg)
	}
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = string(it)
	}
	return out
}

func TestRoutesByDatabase(t *testing.T) {
	b := newBed(t, bedOptions{})
	c := proxytest.Dial(t, b.addr, wire.Buffered)

	proxytest.Call(t, c, "get_database", hmsclient.Args("lake"))
	proxytest.Call(t, c, "get_database", hmsclient.Args("@hive#LAKE"))
	proxytest.Call(t, c, "get_all_tables", hmsclient.Args("lake"))
	if n := b.f.CallCount("get_database"); n != 2 {
		t.Errorf("get_database of lake reached the federated metastore %d times, want 2", n)
	}
	if n := b.f.CallCount("get_all_tables"); n != 1 {
		t.Errorf("get_all_tables of lake reached the federated metastore %d times, want 1", n)
	}
	proxytest.Call(t, c, "get_database", hmsclient.Args("demo_db0"))
	proxytest.Call(t, c, "get_table", hmsclient.Args("demo_db0", "t0"))
	proxytest.Call(t, c, "getVersion", hmsclient.Args())
	for _, m := range []string{"get_database", "get_table", "getVersion"} {
		if n := b.p.CallCount(m); n != 1 {
			t.Errorf("%s reached the primary %d times, want 1", m, n)
		}
	}
	// A database of the federated metastore it does not serve is the
	// primary's business.
	proxytest.Call(t, c, "get_database", hmsclient.Args("stray"))
	if n := b.p.CallCount("get_database"); n != 2 {
		t.Errorf("get_database of stray reached the primary %d times, want 2", n)
	}
}

func TestMergedListing(t *testing.T) {
	b := newBed(t, bedOptions{})
	c := proxytest.Dial(t, b.addr, wire.Buffered)
	want := []string{"default", "demo_db0", "demo_db1", "lake"}
	if got := names(t, proxytest.Call(t, c, "get_all_databases", hmsclient.Args())); !slices.Equal(got, want) {
		t.Errorf("get_all_databases: %v, want %v", got, want)
	}
	if got := names(t, proxytest.Call(t, c, "get_databases", hmsclient.Args("*"))); !slices.Equal(got, want) {
		t.Errorf("get_databases(*): %v, want %v", got, want)
	}
	if b.f.CallCount("get_all_databases") != 1 || b.p.CallCount("get_all_databases") != 1 {
		t.Errorf("listing asked primary %d and lake %d times, want once each", b.p.CallCount("get_all_databases"), b.f.CallCount("get_all_databases"))
	}
}

func TestListingFailsNamingGroup(t *testing.T) {
	b := newBed(t, bedOptions{cfg: func(c *Config) { c.ListingTimeout = 200 * time.Millisecond }})
	b.f.SetDelay("get_all_databases", 5*time.Second)
	c := proxytest.Dial(t, b.addr, wire.Buffered)
	msg := metaMessage(t, proxytest.CallWithin(t, 3*time.Second, c, "get_all_databases", hmsclient.Args()))
	if !strings.Contains(msg, `"lake"`) || !strings.Contains(msg, "within") {
		t.Errorf("listing with a slow group: MetaException %q, want one naming group lake and its timeout", msg)
	}
	if n := b.router.Stats(1).ListingFailures.Load(); n != 1 {
		t.Errorf("listing failures of lake: %d, want 1", n)
	}
}

func TestListingPartial(t *testing.T) {
	b := newBed(t, bedOptions{cfg: func(c *Config) { c.ListingTimeout = 200 * time.Millisecond; c.Partial = true }})
	b.f.SetDelay("get_all_databases", 5*time.Second)
	c := proxytest.Dial(t, b.addr, wire.Buffered)
	got := names(t, proxytest.CallWithin(t, 3*time.Second, c, "get_all_databases", hmsclient.Args()))
	if want := []string{"default", "demo_db0", "demo_db1"}; !slices.Equal(got, want) {
		t.Errorf("partial listing: %v, want %v", got, want)
	}
	if n := b.router.Stats(1).ListingOmitted.Load(); n != 1 {
		t.Errorf("listings without lake: %d, want 1 (never silently)", n)
	}
}

func TestReadOnlyMemberRefusesWrites(t *testing.T) {
	b := newBed(t, bedOptions{})
	c := proxytest.Dial(t, b.addr, wire.Buffered)
	for _, call := range []struct {
		method string
		args   []byte
	}{
		{"create_table", tableArg("lake", "new_t")},
		{"drop_table", hmsclient.Args("lake", "t0")},
		{"truncate_table", hmsclient.Args("@hive#lake", "t0")},
		{"create_database", databaseArg("lake_2")},
		// Issue 20: the metastore reads " LAKE\t" as lake; so must the
		// router and its access rule, or the write reaches a read-only
		// member through another spelling.
		{"drop_table", hmsclient.Args(" LAKE\t", "t0")},
		{"drop_table", hmsclient.Args("@hive#Lake ", "t0")},
	} {
		r := proxytest.Call(t, c, call.method, call.args)
		msg := metaMessage(t, r)
		if !strings.Contains(msg, `group "lake" is read-only`) {
			t.Errorf("%s on lake: %q, want a MetaException naming the read-only rule", call.method, msg)
		}
		if n := b.f.CallCount(call.method); n != 0 {
			t.Errorf("refused %s reached the federated metastore %d times", call.method, n)
		}
	}
	if n := b.router.Stats(1).Refused.Load(); n != 6 {
		t.Errorf("refused writes counted: %d, want 6", n)
	}
	// The primary stays writable.
	if r := proxytest.Call(t, c, "create_database", databaseArg("fresh")); resultField(t, r) != -1 {
		t.Errorf("create_database on the primary: %q", metaMessage(t, r))
	}
	if n := b.p.CallCount("create_database"); n != 1 {
		t.Errorf("create_database reached the primary %d times, want 1", n)
	}
}

func TestWriteOnListedDatabases(t *testing.T) {
	b := newBed(t, bedOptions{cfg: func(c *Config) {
		c.Groups[1].Access = ReadWriteListed
		c.Groups[1].WritableDatabases = []string{"lake"}
		c.Groups[1].Databases = []string{"lake", "lake_ro"}
	}})
	c := proxytest.Dial(t, b.addr, wire.Buffered)
	if r := proxytest.Call(t, c, "create_table", tableArg("lake", "t9")); metaMessage(t, r) != "" && strings.Contains(metaMessage(t, r), "refused") {
		t.Errorf("create_table in writable lake refused: %q", metaMessage(t, r))
	}
	if n := b.f.CallCount("create_table"); n != 1 {
		t.Errorf("create_table in lake reached the federated metastore %d times, want 1", n)
	}
	msg := metaMessage(t, proxytest.Call(t, c, "drop_database", hmsclient.Args("lake_ro")))
	if !strings.Contains(msg, `"lake_ro" is not in group "lake"'s writable_databases`) {
		t.Errorf("drop_database lake_ro: %q, want a refusal naming the rule", msg)
	}
	if n := b.f.CallCount("drop_database"); n != 0 {
		t.Errorf("refused drop_database reached the metastore %d times", n)
	}
}

func TestSpanningCallRefused(t *testing.T) {
	b := newBed(t, bedOptions{cfg: func(c *Config) { c.Groups[1].Access = ReadWrite }})
	c := proxytest.Dial(t, b.addr, wire.Buffered)
	// alter_table renaming demo_db0.t0 into lake.t0: the two databases
	// live in two metastores.
	var e wire.Encoder
	e.StringField(1, "demo_db0")
	e.StringField(2, "t0")
	e.FieldBegin(wire.TStruct, 3)
	e.StringField(1, "t0")
	e.StringField(2, "lake")
	e.Stop()
	e.Stop()
	msg := metaMessage(t, proxytest.Call(t, c, "alter_table", e.B))
	if !strings.Contains(msg, "cannot span groups") {
		t.Errorf("cross-group rename: %q, want a refusal", msg)
	}
	if b.p.CallCount("alter_table")+b.f.CallCount("alter_table") != 0 {
		t.Error("a cross-group rename reached a metastore")
	}
}

func TestConflictingClaimsStopStartup(t *testing.T) {
	up := proxytest.Group(t, upstream.Config{}, "127.0.0.1:1")
	_, err := New(Config{Groups: []Member{
		{Name: "primary", Up: up},
		{Name: "a", Up: up, Databases: []string{"sales", "hr"}},
		{Name: "b", Up: up, Databases: []string{"sal*"}},
	}})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `database "sales" is claimed by both group "a" and group "b"`) {
		t.Fatalf("overlapping claims: %v", err)
	}
	_, err = New(Config{Mode: Prefixed, Groups: []Member{{Name: "primary", Up: up}, {Name: "a", Up: up, Prefix: "a_"}, {Name: "b", Up: up, Prefix: "A_b_"}}})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `group "a"'s prefix "a_" starts group "b"'s prefix "A_b_"`) {
		t.Fatalf("overlapping prefixes: %v", err)
	}
	_, err = New(Config{Mode: Prefixed, Groups: []Member{{Name: "primary", Up: up}, {Name: "a", Up: up}}})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "has no prefix") {
		t.Fatalf("a member without a prefix: %v", err)
	}
}

// A federated metastore that does not answer delays no call to the
// primary: the groups have their own pools. The seam: calls to lake are
// held by the demo's delay while primary calls must finish well within it.
func TestSlowMemberDoesNotDelayPrimary(t *testing.T) {
	b := newBed(t, bedOptions{})
	b.f.SetDelay("get_database", 3*time.Second)
	for i := 0; i < 4; i++ {
		go func() {
			c, err := hmsclient.Dial(context.Background(), b.addr, wire.Buffered)
			if err != nil {
				return
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c.Call(ctx, "get_database", hmsclient.Args("lake"))
		}()
	}
	proxytest.Eventually(t, "calls held by the slow member", func() bool { return b.f.CallCount("get_database") >= 4 })
	c := proxytest.Dial(t, b.addr, wire.Buffered)
	for i := 0; i < 20; i++ {
		proxytest.CallWithin(t, time.Second, c, "get_table", hmsclient.Args("demo_db0", "t0"))
	}
}

// Each group has its own cache scope: one group's cache dropped whole
// serves none of its entries again and leaves the other's, whether a
// member's bus lost invalidations or an unknown method's answer flushed
// the primary's group.
func TestCacheScopePerGroup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		drop   func(t *testing.T, b *bed, c *hmsclient.Client)
		member bool // the member's cache is the one dropped, not the primary's
	}{
		{"member's bus lost invalidations", func(_ *testing.T, b *bed, _ *hmsclient.Client) { b.srv.FederatedCache(1).DropAll("test") }, true},
		{"unknown method on the primary", func(t *testing.T, _ *bed, c *hmsclient.Client) {
			proxytest.Call(t, c, "some_future_write", hmsclient.Args())
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t, bedOptions{cached: true})
			c := proxytest.Dial(t, b.addr, wire.Buffered)
			get := func() {
				proxytest.Call(t, c, "get_database", hmsclient.Args("lake"))
				proxytest.Call(t, c, "get_database", hmsclient.Args("demo_db0"))
				b.store.Wait() // admissions done
			}
			get()
			get()
			if b.p.CallCount("get_database") != 1 || b.f.CallCount("get_database") != 1 {
				t.Fatalf("second reads not served from the cache: primary %d, lake %d", b.p.CallCount("get_database"), b.f.CallCount("get_database"))
			}
			tc.drop(t, b, c)
			get()
			wantPrimary, wantMember := 2, 1
			if tc.member {
				wantPrimary, wantMember = 1, 2
			}
			if n := b.p.CallCount("get_database"); n != wantPrimary {
				t.Errorf("primary loads: %d, want %d", n, wantPrimary)
			}
			if n := b.f.CallCount("get_database"); n != wantMember {
				t.Errorf("member loads: %d, want %d", n, wantMember)
			}
		})
	}
}

// A member older than the client lists nothing for "@hive#": the fan-out
// sends it the bare pattern.
func TestDropDefaultCatalog(t *testing.T) {
	for _, tc := range []struct{ in, want string }{{"@hive#", "*"}, {"@HIVE#sales*", "sales*"}, {"sales*", ""}, {"@spark#x", ""}} {
		m := call(t, "get_databases", hmsclient.Args(tc.in))
		nm, ok := dropDefaultCatalog(hms.Lookup([]byte("get_databases")), m)
		if ok != (tc.want != "") {
			t.Errorf("%q: rewritten %v", tc.in, ok)
			continue
		}
		if ok {
			if got := stringField(nm.Body(), 1); got != tc.want || nm.SeqID != m.SeqID || string(nm.Name()) != "get_databases" {
				t.Errorf("%q: rewritten to %q (seqid %d), want %q", tc.in, got, nm.SeqID, tc.want)
			}
		}
	}
}

// dbName is the name of the Database in a get_database reply.
func dbName(t *testing.T, reply []byte) string {
	t.Helper()
	var got string
	hms.Walk(body(t, reply), hms.Path{0, 1}, func(typ byte, v []byte) bool {
		got = string(v)
		return true
	})
	return got
}

// In prefixed mode the member's databases are seen under its prefix:
// requests reach it with its own names, replies and listings carry the
// prefixed ones.
func TestPrefixed(t *testing.T) {
	b := newBed(t, bedOptions{cfg: func(c *Config) {
		c.Mode = Prefixed
		c.Groups[1].Databases = nil
		c.Groups[1].Prefix = "lake_"
		c.Groups[1].Access = ReadWrite
	}})
	c := proxytest.Dial(t, b.addr, wire.Buffered)
	if got := dbName(t, proxytest.Call(t, c, "get_database", hmsclient.Args("lake_stray"))); got != "lake_stray" {
		t.Errorf("get_database(lake_stray): database %q, want lake_stray", got)
	}
	if got := dbName(t, proxytest.Call(t, c, "get_database", hmsclient.Args("@hive#LAKE_lake"))); got != "lake_lake" {
		t.Errorf("get_database(@hive#LAKE_lake): database %q, want lake_lake", got)
	}
	// As the metastore reads it: blanks around the name are not part of it.
	if got := dbName(t, proxytest.Call(t, c, "get_database", hmsclient.Args(" Lake_Lake\t"))); got != "lake_lake" {
		t.Errorf("get_database(\" Lake_Lake\\t\"): database %q, want lake_lake", got)
	}
	if n := b.f.CallCount("get_database"); n != 3 {
		t.Errorf("member asked %d times, want 3", n)
	}
	if got := dbName(t, proxytest.Call(t, c, "get_database", hmsclient.Args("demo_db0"))); got != "demo_db0" {
		t.Errorf("get_database(demo_db0) through the primary: %q", got)
	}
	want := []string{"default", "demo_db0", "demo_db1", "lake_default", "lake_lake", "lake_stray"}
	if got := names(t, proxytest.Call(t, c, "get_all_databases", hmsclient.Args())); !slices.Equal(got, want) {
		t.Errorf("get_all_databases: %v, want %v", got, want)
	}
	if got := names(t, proxytest.Call(t, c, "get_databases", hmsclient.Args("lake_l*"))); !slices.Equal(got, []string{"lake_lake"}) {
		t.Errorf("get_databases(lake_l*): %v, want [lake_lake]", got)
	}
	if got := names(t, proxytest.Call(t, c, "get_databases", hmsclient.Args("demo*"))); !slices.Equal(got, []string{"demo_db0", "demo_db1"}) {
		t.Errorf("get_databases(demo*): %v", got)
	}
	// A write: created under the member's own name, read back prefixed.
	if r := proxytest.Call(t, c, "create_table", tableArg("lake_lake", "fresh")); resultField(t, r) != -1 {
		t.Fatalf("create_table in lake_lake: %q", metaMessage(t, r))
	}
	r := proxytest.Call(t, c, "get_table", hmsclient.Args("lake_lake", "fresh"))
	var db string
	hms.Walk(body(t, r), hms.Path{0, 2}, func(_ byte, v []byte) bool { db = string(v); return true })
	if db != "lake_lake" {
		t.Errorf("get_table(lake_lake.fresh): dbName %q, want lake_lake", db)
	}
	fc := proxytest.Dial(t, b.fAddr, wire.Buffered)
	if resultField(t, proxytest.Call(t, fc, "get_table", hmsclient.Args("lake", "fresh"))) != 0 {
		t.Error("the member has no table lake.fresh under its own name")
	}
}

// A member killed mid-run: listings fail naming it, calls to it fail as
// transport failures (never a made-up answer), the primary answers on.
func TestMemberKilled(t *testing.T) {
	b := newBed(t, bedOptions{})
	c := proxytest.Dial(t, b.addr, wire.Buffered)
	proxytest.Call(t, c, "get_database", hmsclient.Args("lake"))
	b.f.Close()
	msg := metaMessage(t, proxytest.Call(t, c, "get_all_databases", hmsclient.Args()))
	if !strings.Contains(msg, `federated group "lake" did not answer`) {
		t.Errorf("listing with the member dead: %q", msg)
	}
	if _, err := c.Call(proxytest.Ctx(t), "get_database", hmsclient.Args("lake")); err == nil {
		t.Error("a call to the dead member got an answer; want a transport failure")
	}
	c2 := proxytest.Dial(t, b.addr, wire.Buffered)
	if f := resultField(t, proxytest.Call(t, c2, "get_database", hmsclient.Args("demo_db0"))); f != 0 {
		t.Errorf("primary's get_database with the member dead: result field %d", f)
	}
}

// set_ugi goes to the primary; the member's calls of that session run as
// the same user (the state is replayed on the member's connections).
func TestSessionCarriedToMember(t *testing.T) {
	b := newBed(t, bedOptions{})
	c := proxytest.Dial(t, b.addr, wire.Buffered)
	var e wire.Encoder
	e.StringField(1, "alice")
	e.StringListField(2, []string{"alice", "staff"})
	e.Stop()
	proxytest.Call(t, c, "set_ugi", e.B)
	proxytest.Call(t, c, "get_database", hmsclient.Args("lake"))
	proxytest.Call(t, c, "get_database", hmsclient.Args("demo_db0"))
	for name, d := range map[string]*demohms.Server{"member": b.f, "primary": b.p} {
		var users []string
		for _, call := range d.Calls() {
			if call.Method == "get_database" {
				users = append(users, call.User)
			}
		}
		if !slices.Equal(users, []string{"alice"}) {
			t.Errorf("%s ran get_database as %q, want alice", name, users)
		}
	}
}

// database_name_mapping: a client's name for a member's database reaches
// the member as the member's name, and comes back as the client's.
func TestAliases(t *testing.T) {
	b := newBed(t, bedOptions{cfg: func(c *Config) {
		c.Groups[1].Databases = []string{"nothing_else"}
		c.Groups[1].Aliases = map[string]string{"Sales": "lake"}
	}})
	c := proxytest.Dial(t, b.addr, wire.Buffered)
	if got := dbName(t, proxytest.Call(t, c, "get_database", hmsclient.Args("sales"))); got != "sales" {
		t.Errorf("get_database(sales): database %q, want sales", got)
	}
	if n := b.f.CallCount("get_database"); n != 1 {
		t.Errorf("member asked %d times, want 1", n)
	}
	want := []string{"default", "demo_db0", "demo_db1", "sales"}
	if got := names(t, proxytest.Call(t, c, "get_all_databases", hmsclient.Args())); !slices.Equal(got, want) {
		t.Errorf("get_all_databases: %v, want %v", got, want)
	}
}
