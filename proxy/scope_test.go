package proxy

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// startSecretDemo runs a demo metastore that behaves as one with a filter
// hook: tables named secret_* are hidden from everyone but admin. conf
// is what get_config_value reports.
func startSecretDemo(t *testing.T, conf map[string]string) (*demohms.Server, string) {
	t.Helper()
	d, addr := proxytest.Demo(t, proxytest.DemoOptions{Seed: [3]int{1, 2, 3}, Config: demohms.Config{Conf: conf,
		Hidden: func(user, db, table string) bool { return user != "admin" && strings.HasPrefix(table, "secret_") }}})
	admin := dial(t, addr, wire.Buffered)
	call(t, admin, "set_ugi", ugiArgs("admin"))
	call(t, admin, "create_table", tableArgs("demo_db0", "secret_pay"))
	return d, addr
}

// userConn dials addr and sets the connection's user.
func userConn(t *testing.T, addr, user string) *hmsclient.Client {
	c := dial(t, addr, wire.Buffered)
	call(t, c, "set_ugi", ugiArgs(user))
	return c
}

// replyBody is a reply without its header (seqids differ per client).
func replyBody(t *testing.T, msg []byte) []byte {
	t.Helper()
	m, err := wire.Parse(msg, wire.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{m.Type}, m.Body()...)
}

// secretReads are the reads a filter hook answers per user.
var secretReads = []req{
	{"get_table", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "secret_pay"))},
	{"get_table_req", hmsreq.Req(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "secret_pay"))},
	{"get_all_tables", hmsreq.Args(hmsreq.Str(1, "demo_db0"))},
	{"get_tables", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "secret*|t0"))},
	{"get_table_objects_by_name", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Strings(2, "t0", "secret_pay"))},
	{"get_table_objects_by_name_req", hmsreq.Req(hmsreq.Str(1, "demo_db0"), hmsreq.Strings(2, "secret_pay", "t1"))},
}

// TestScopeFilterHook (issue 14): behind a metastore with a filter hook,
// bob never sees through the proxy what he does not see directly, even
// after admin's replies were cached, nor does admin get bob's negative
// entries; under a forced shared scope he would (the seam that shows the
// test can fail).
func TestScopeFilterHook(t *testing.T) {
	conf := map[string]string{"hive.metastore.filter.hook": "io.example.SecretHook"}
	for _, tc := range []struct {
		name string
		mode ScopeMode
		leak bool
	}{
		{"auto", ScopeAuto, false},
		{"user", ScopeUser, false},
		{"shared", ScopeShared, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := startSecretDemo(t, conf)
			caching := newCaching(t, nil)
			caching.Scope = tc.mode
			srv, paddr := startProxy(t, proxyOpts{cache: caching}, addr)
			adminP, bobP := userConn(t, paddr, "admin"), userConn(t, paddr, "bob")
			adminD, bobD := userConn(t, addr, "admin"), userConn(t, addr, "bob")

			// admin fills the cache, then bob reads.
			leaks := 0
			for _, r := range secretReads {
				a := call(t, adminP, r.method, r.args)
				caching.Store.Wait()
				if !bytes.Equal(replyBody(t, a), replyBody(t, call(t, adminD, r.method, r.args))) {
					t.Fatalf("%s: admin's reply through the proxy differs from direct", r.method)
				}
				got, want := replyBody(t, call(t, bobP, r.method, r.args)), replyBody(t, call(t, bobD, r.method, r.args))
				if !bytes.Equal(got, want) {
					leaks++
					if !tc.leak {
						t.Errorf("%s: bob got through the proxy what he does not get directly (%q; want %q)", r.method, got, want)
					}
				}
			}
			if tc.leak && leaks == 0 {
				t.Fatal("shared scope served bob nothing of admin's: the test cannot tell scopes apart")
			}
			st, _ := srv.CacheScope()
			if st.PerUser == tc.leak || !st.Decided {
				t.Fatalf("scope status %+v; want per-user %v", st, !tc.leak)
			}
			if tc.mode == ScopeAuto && !strings.Contains(st.Reason, "io.example.SecretHook") {
				t.Fatalf("reason %q does not name the filter hook", st.Reason)
			}
		})
	}
}

// TestScopeNegativeNotShared (issue 14): a restricted user's not-found is
// never served to admin.
func TestScopeNegativeNotShared(t *testing.T) {
	_, addr := startSecretDemo(t, map[string]string{"metastore.filter.hook": "io.example.SecretHook"})
	caching := newCaching(t, nil)
	_, paddr := startProxy(t, proxyOpts{cache: caching}, addr)
	bob, admin := userConn(t, paddr, "bob"), userConn(t, paddr, "admin")
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "secret_pay"))
	if f := resultField(t, call(t, bob, "get_table", get)); f != 2 {
		t.Fatalf("bob's get_table answered field %d; want 2 (NoSuchObjectException)", f)
	}
	caching.Store.Wait()
	if f := resultField(t, call(t, admin, "get_table", get)); f != 0 {
		t.Fatalf("admin's get_table answered field %d; want 0: bob's not-found was served to admin", f)
	}
}

func resultField(t *testing.T, msg []byte) int16 {
	t.Helper()
	m, err := wire.Parse(msg, wire.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := wire.ResultField(m.Body())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestScopeAutoDecides: what auto decides from what the metastore says.
func TestScopeAutoDecides(t *testing.T) {
	for _, tc := range []struct {
		name    string
		conf    map[string]string
		fail    bool // get_config_value fails outright
		echo    bool // get_config_value answers with the default sent (2.3, an unset key)
		refuse  bool // get_config_value answers ConfigValSecurityException
		perUser bool
	}{
		{"defaults", nil, false, false, false, false},
		{"default hook named", map[string]string{"metastore.filter.hook": DefaultFilterHook}, false, false, false, false},
		{"unset keys", nil, false, true, false, false},
		{"filter hook", map[string]string{"metastore.filter.hook": "org.apache.ranger.RangerHiveMetastoreFilterHook"}, false, false, false, true},
		{"pre-event listener", map[string]string{"hive.metastore.pre.event.listeners": "org.apache.hadoop.hive.ql.security.authorization.plugin.metastore.HiveMetaStoreAuthorizer"}, false, false, false, true},
		{"unreachable", nil, true, false, false, true},
		{"refused", nil, false, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			demo := demohms.New(demohms.Config{Conf: tc.conf})
			demo.Seed(1, 1, 1)
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			go demo.Serve(ln)
			t.Cleanup(func() { demo.Close() })
			caching := newCaching(t, nil)
			wrap := func(f Forwarder) Forwarder { return f }
			if tc.fail || tc.echo || tc.refuse {
				wrap = func(f Forwarder) Forwarder {
					return &confForwarder{up: f, fail: tc.fail, echo: tc.echo, refuse: tc.refuse}
				}
			}
			paddr := startProxyOver(t, caching, ln.Addr().String(), wrap)
			alice, bob := userConn(t, paddr, "alice"), userConn(t, paddr, "bob")
			get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
			call(t, alice, "get_table", get)
			caching.Store.Wait()
			call(t, bob, "get_table", get)
			want := 1
			if tc.perUser {
				want = 2
			}
			if n := demo.CallCount("get_table"); n != want {
				t.Fatalf("metastore saw %d loads for two users; want %d", n, want)
			}
		})
	}
}

// confForwarder answers get_config_value itself: with an error when
// fail is set, with the caller's default when echo is set (a key the
// server does not know), else with hook as the filter hook. With others
// set, keys but the filter hook go to the metastore.
type confForwarder struct {
	up     Forwarder
	fail   bool
	echo   bool
	refuse bool // answer with ConfigValSecurityException
	others bool
	mu     sync.Mutex // guards hook
	hook   string
}

var errConfDown = errors.New("test: metastore unreachable")

func (f *confForwarder) setHook(h string) {
	f.mu.Lock()
	f.hook = h
	f.mu.Unlock()
}

func (f *confForwarder) Do(ctx context.Context, c upstream.Call, sink upstream.ReplySink) error {
	if string(c.Msg.Name()) != "get_config_value" {
		return f.up.Do(ctx, c, sink)
	}
	if f.fail {
		return errConfDown
	}
	d := wire.NewDecoder(c.Msg.Body())
	d.FieldBegin()
	key := d.String()
	if f.others && !strings.Contains(key, "filter.hook") {
		return f.up.Do(ctx, c, sink)
	}
	d.FieldBegin()
	def := d.String()
	f.mu.Lock()
	v := ""
	switch {
	case f.echo:
		v = def
	case strings.Contains(key, "filter.hook"):
		v = f.hook
	}
	f.mu.Unlock()
	e := wire.Encoder{B: wire.AppendHeader(nil, wire.Reply, c.Msg.Name(), c.Msg.SeqID)}
	if f.refuse {
		e.FieldBegin(wire.TStruct, 1)
		e.StringField(1, "For security reasons, the config key "+key+" cannot be accessed")
		e.Stop()
	} else {
		e.StringField(0, v)
	}
	e.Stop()
	m, err := wire.Parse(e.B, wire.Limits{})
	if err != nil {
		return err
	}
	return sink.Reply(m)
}

// TestScopeChangeFlushes: when the metastore gains a filter hook at run
// time, what was cached shared is dropped and reads are keyed by user.
func TestScopeChangeFlushes(t *testing.T) {
	demo, addr := startDemo(t, wire.Buffered)
	caching := newCaching(t, nil)
	caching.ScopeInterval = 5 * time.Millisecond
	cf := &confForwarder{}
	paddr := startProxyOver(t, caching, addr, func(f Forwarder) Forwarder { cf.up = f; return cf })
	alice := userConn(t, paddr, "alice")
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	call(t, alice, "get_table", get)
	caching.Store.Wait()
	call(t, alice, "get_table", get)
	if n := demo.CallCount("get_table"); n != 1 {
		t.Fatalf("shared scope: %d loads for two reads; want 1", n)
	}
	cf.setHook("io.example.SecretHook")
	// The next check sees the hook and drops the shared entry.
	wait.Until(10*time.Second, func() bool { return caching.Store.Stats(hms.KindTable).Entries.Load() == 0 })
	if e := caching.Store.Stats(hms.KindTable).Entries.Load(); e != 0 {
		t.Fatalf("%d table entries left 10s after the scope changed; want 0 (flushed)", e)
	}
	call(t, alice, "get_table", get)
	if n := demo.CallCount("get_table"); n != 2 {
		t.Fatalf("%d loads after the scope changed; want 2 (the shared entry is gone)", n)
	}
}

// TestScopeFlightsPerUser (issue 14): keyed by identity, a load in flight
// is never joined by another user, so no caller gets another user's reply
// or exception.
func TestScopeFlightsPerUser(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	caching := newCaching(t, nil)
	caching.Scope = ScopeUser
	gate := newGate("get_table")
	paddr := startProxyOver(t, caching, addr, func(f Forwarder) Forwarder { gate.up = f; return gate })
	alice, bob := userConn(t, paddr, "alice"), userConn(t, paddr, "bob")
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	done := make(chan struct{}, 2)
	go func() { alice.Call(ctxT(t), "get_table", get); done <- struct{}{} }()
	loadAlice := gate.held(t, "alice's load") // upstream and held
	go func() { bob.Call(ctxT(t), "get_table", get); done <- struct{}{} }()
	var loadBob chan struct{}
	select {
	case loadBob = <-gate.arrived: // bob's own load
	case <-time.After(10 * time.Second):
		t.Fatal("bob's read made no load of its own: it joined alice's flight")
	}
	close(loadAlice)
	close(loadBob)
	proxytest.Recv(t, done, "the first reply")
	proxytest.Recv(t, done, "the second reply")
}

// TestScopeRefreshAsEntryUser (issue 14): keyed by identity, refresh-ahead
// reloads an entry under the identity it belongs to, so a refreshed entry
// holds what its user sees.
func TestScopeRefreshAsEntryUser(t *testing.T) {
	demo, addr := startSecretDemo(t, map[string]string{"hive.metastore.filter.hook": "io.example.SecretHook"})
	clock := newClock()
	caching := newCaching(t, clock)
	srv, paddr := startProxy(t, proxyOpts{cache: caching}, addr)
	bob, admin := userConn(t, paddr, "bob"), userConn(t, paddr, "admin")
	list := hmsreq.Args(hmsreq.Str(1, "demo_db0"))
	call(t, bob, "get_all_tables", list)
	call(t, admin, "get_all_tables", list)
	caching.Store.Wait()
	clock.Advance(caching.Store.Policy(hms.KindTableNames).RefreshAfter + time.Second)
	before := len(demo.Calls())
	call(t, bob, "get_all_tables", list) // a hit past its refresh age
	var refresh []demohms.Call
	wait.Until(5*time.Second, func() bool {
		for _, c := range demo.Calls()[before:] {
			if c.Method == "get_all_tables" {
				refresh = append(refresh, c)
			}
		}
		return len(refresh) > 0
	})
	if len(refresh) != 1 || refresh[0].User != "bob" {
		t.Fatalf("refresh loads %+v; want one, as bob", refresh)
	}
	// The metastore records the load when it reads it; the refresh admits
	// the reply after. Read once it has, or the read below checks the
	// entry from before the refresh.
	refreshesSettled(t, srv)
	caching.Store.Wait()
	got := call(t, bob, "get_all_tables", list)
	if strings.Contains(string(got), "secret_pay") {
		t.Fatal("bob's refreshed entry lists admin's secret table")
	}
}
