package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/auth/sasl"
	"github.com/hmsproxy/hmsproxy/internal/testenv/kdctest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/limits/ratelimit"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// TestRateLimitedUser (issue 14): a client over the rate limit gets a
// MetaException that says so, cache hits included; the connection stays
// open, and other clients and other classes are not affected. Without
// an authenticated identity a client is its address (issue 22).
func TestRateLimitedUser(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	lim := readLimiter(t, 2)
	_, paddr := serve(t, Config{Cache: newCaching(t, nil), Limiter: lim}, proxytest.Group(t, upstream.Config{}, addr))

	bob, alice := userConn(t, paddr, "bob"), clientFrom(t, "127.0.0.2", paddr, wire.Buffered)
	call(t, alice, "set_ugi", ugiArgs("alice"))
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	for i := 0; i < 2; i++ {
		if f := resultField(t, call(t, bob, "get_table", get)); f != 0 {
			t.Fatalf("bob's read %d answered field %d; want success (within the burst)", i+1, f)
		}
	}
	over := call(t, bob, "get_table", get) // would be a cache hit
	if f := resultField(t, over); f != 1 {
		t.Fatalf("bob's third read answered field %d; want 1 (MetaException)", f)
	}
	if !strings.Contains(string(over), `rate limit exceeded for client address 127.0.0.1`) {
		t.Fatalf("refusal %q does not say why", over)
	}
	// get_table_objects_by_name declares no MetaException in 2.3.
	objs := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Strings(2, "t0"))
	if m, err := wire.Parse(call(t, bob, "get_table_objects_by_name", objs), wire.Limits{}); err != nil || m.Type != wire.Exception {
		t.Fatalf("refused get_table_objects_by_name: type %d, %v; want a TApplicationException", m.Type, err)
	}
	// Same connection, another class: answered.
	if m, err := wire.Parse(call(t, bob, "getStatus", hmsreq.Args()), wire.Limits{}); err != nil || m.Type != wire.Reply {
		t.Fatalf("bob's getStatus after the refusals: %v; want a reply on the same connection", err)
	}
	if f := resultField(t, call(t, alice, "get_table", get)); f != 0 {
		t.Fatalf("alice's read answered field %d; bob's limit spilled over", f)
	}
	if n := lim.Stats().Limited[ratelimit.ClassRead].Load(); n != 2 {
		t.Fatalf("limited reads counted %d; want 2", n)
	}
}

// TestBackgroundNotRateLimited guards issue 12: the warm-up's in-process
// connections load as a user whose per-user limit does not apply to
// them (they are bounded by their concurrency); the same user on a
// client connection is limited.
func TestBackgroundNotRateLimited(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	lim := readLimiter(t, 2)
	srv, paddr := serve(t, Config{Cache: newCaching(t, nil), Limiter: lim}, proxytest.Group(t, upstream.Config{}, addr))
	nc, err := srv.DialBackground()
	if err != nil {
		t.Fatal(err)
	}
	bg := hmsclient.New(nc, wire.Buffered)
	t.Cleanup(func() { bg.Close() })
	call(t, bg, "set_ugi", ugiArgs("hive"))
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	for i := 0; i < 5; i++ {
		if f := resultField(t, call(t, bg, "get_table", get)); f != 0 {
			t.Fatalf("background read %d answered field %d; want success (not limited)", i+1, f)
		}
	}
	client := userConn(t, paddr, "hive")
	for i := 0; i < 2; i++ {
		call(t, client, "get_table", get)
	}
	if f := resultField(t, call(t, client, "get_table", get)); f != 1 {
		t.Fatalf("the same user's third client read answered field %d; want 1 (limited)", f)
	}
}

// readLimiter limits reads to a burst of n, with next to no refill.
func readLimiter(t *testing.T, n int) *ratelimit.Limiter {
	t.Helper()
	var lims ratelimit.Limits
	lims[ratelimit.ClassRead] = ratelimit.Limit{Rate: 0.001, Burst: n}
	lim, err := ratelimit.New(ratelimit.Config{Default: lims})
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// clientFrom is a client of addr from the loopback address src
// (dialFrom), so a test can be several client hosts.
func clientFrom(t testing.TB, src, addr string, tr wire.Transport) *hmsclient.Client {
	t.Helper()
	c := hmsclient.New(proxytest.DialFrom(t, src, addr), tr)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRateLimitSetUGICycling guards issue 22: a set_ugi name is a claim,
// so a client that claims a new name on each connection is still
// limited: without an authenticated identity its calls are charged to
// its source address.
func TestRateLimitSetUGICycling(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	lim := readLimiter(t, 2)
	_, paddr := serve(t, Config{Cache: newCaching(t, nil), Limiter: lim}, proxytest.Group(t, upstream.Config{}, addr))
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	for i := range 4 {
		c := userConn(t, paddr, fmt.Sprintf("user%d", i))
		want := int16(0)
		if i >= 2 {
			want = 1 // the address's burst is spent
		}
		if f := resultField(t, call(t, c, "get_table", get)); f != want {
			t.Fatalf("read as user%d on a new connection answered field %d; want %d", i, f, want)
		}
	}
	// and no name at all is the same address
	if f := resultField(t, call(t, dial(t, paddr, wire.Buffered), "get_table", get)); f != 1 {
		t.Fatalf("read without set_ugi answered field %d; want 1 (limited)", f)
	}
	// another host is not affected
	if f := resultField(t, call(t, clientFrom(t, "127.0.0.2", paddr, wire.Buffered), "get_table", get)); f != 0 {
		t.Fatalf("read from another address answered field %d; want 0: one address's limit spilled over", f)
	}
}

// TestRateLimitClaimSpendsOwnBucket guards issue 22: claiming to be bob
// spends the claimer's bucket, never bob's, whether bob is a set_ugi
// client of another address or a Kerberos-authenticated bob (even at the
// claimer's address).
func TestRateLimitClaimSpendsOwnBucket(t *testing.T) {
	kdc := kdctest.Start(t)
	_, addr := startDemo(t, wire.Framed)
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	reads := func(t *testing.T, who string, cs ...*hmsclient.Client) {
		t.Helper()
		for i, c := range cs {
			want := int16(0)
			if i == 2 {
				want = 1 // past the burst of 2
			}
			if f := resultField(t, call(t, c, "get_table", get)); f != want {
				t.Fatalf("%s's read %d answered field %d; want %d", who, i+1, f, want)
			}
		}
	}
	// setup serves a proxy limiting reads to a burst of 2, on a plain
	// listener and on a Kerberos one (as two nodes sharing their buckets
	// through Redis would), where mallory, at 127.0.0.2, has spent her
	// burst claiming to be bob.
	setup := func(t *testing.T) (plainAddr, krbAddr string) {
		s, plainAddr := serve(t, Config{Transport: wire.Framed, Cache: newCaching(t, nil), Limiter: readLimiter(t, 2)},
			proxytest.Group(t, upstream.Config{Transport: wire.Framed}, addr))
		krbAddr = proxytest.ServeOn(t, s, krbListener(t, kdc, kdctest.Proxy, "hmsproxy", sasl.ListenerConfig{}))
		mallory := clientFrom(t, "127.0.0.2", plainAddr, wire.Framed)
		call(t, mallory, "set_ugi", ugiArgs("bob"))
		reads(t, "mallory (as bob)", mallory, mallory, mallory)
		return plainAddr, krbAddr
	}
	t.Run("bob at another address", func(t *testing.T) {
		plainAddr, _ := setup(t)
		bob := dial(t, plainAddr, wire.Framed)
		call(t, bob, "set_ugi", ugiArgs("bob"))
		reads(t, "bob at 127.0.0.1", bob, bob, bob)
	})
	t.Run("authenticated bob", func(t *testing.T) {
		_, krbAddr := setup(t)
		cl, err := sasl.NewClient(sasl.ClientConfig{Principal: kdctest.Bob, Keytab: kdc.Keytab(t, "bob"), Krb5Conf: kdc.Config(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		krbBob := func() *hmsclient.Client {
			c := clientFrom(t, "127.0.0.2", krbAddr, wire.Framed)
			if err := cl.Handshake(ctxT(t), c.Conn(), kdctest.Proxy, ""); err != nil {
				t.Fatal(err)
			}
			return c
		}
		// his connections share his bucket
		k1, k2 := krbBob(), krbBob()
		reads(t, "authenticated bob", k1, k2, k1)
	})
}
