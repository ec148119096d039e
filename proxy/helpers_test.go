package proxy

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// The loopback pieces come from internal/testenv/proxytest, which stops below
// this package so these internal tests can import it; what needs Server
// or Caching stays here, as serve and the starters over it.
var (
	dial       = proxytest.Dial
	call       = proxytest.Call
	ctxT       = proxytest.Ctx
	testLogger = proxytest.Logger
	eventually = proxytest.Eventually
)

// startDemo runs a seeded demo metastore on loopback.
func startDemo(t testing.TB, tr wire.Transport) (*demohms.Server, string) {
	return proxytest.Demo(t, proxytest.DemoOptions{Config: demohms.Config{Transport: tr}})
}

// serve runs a proxy with cfg (its Logger defaulting to the test log) in
// front of fwd on loopback. Each of before runs on the server before it
// serves: the place to set its test hooks.
func serve(t testing.TB, cfg Config, fwd Forwarder, before ...func(*Server)) (*Server, string) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	s, err := New(cfg, fwd)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range before {
		f(s)
	}
	return s, proxytest.Serve(t, s)
}

type proxyOpts struct {
	clientTransport wire.Transport
	up              upstream.Config
	cache           *Caching
}

// startProxy runs a proxy in front of the given metastore addresses.
// With a cache, it waits (a second at most: some tests' metastores
// never answer) until the metastore's settings are read, so that tests
// of what the proxy answers itself do not race that first check.
func startProxy(t testing.TB, o proxyOpts, addrs ...string) (*Server, string) {
	t.Helper()
	g := proxytest.Group(t, o.up, addrs...)
	s, addr := serve(t, Config{Transport: o.clientTransport, Cache: o.cache}, g)
	if s.cache != nil {
		wait.Until(time.Second, func() bool { return s.cache.settings().Known })
	}
	return s, addr
}

// startCachingProxy runs a caching proxy (newCaching) in front of a
// seeded demo metastore, and returns the metastore, its address, the
// proxy's Caching and the proxy's address.
func startCachingProxy(t testing.TB) (demo *demohms.Server, addr string, caching *Caching, paddr string) {
	t.Helper()
	demo, addr = startDemo(t, wire.Buffered)
	caching = newCaching(t, nil)
	_, paddr = startProxy(t, proxyOpts{cache: caching}, addr)
	return demo, addr, caching, paddr
}

func ugiArgs(user string, groups ...string) []byte {
	return hmsreq.Args(hmsreq.Str(1, user), hmsreq.Strings(2, groups...))
}

// expectClosed asserts the server closes the connection (after at most
// one reply) without hanging.
func expectClosed(t testing.TB, c *hmsclient.Client) {
	t.Helper()
	c.Conn().SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	for {
		_, err := c.Conn().Read(buf)
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("connection not closed within 5s")
		}
		return
	}
}

// startProxyOver runs a caching proxy whose forwarder is wrap(the
// upstream group of addr): a seam for tests that watch or alter calls.
// Each of before runs on the server before it serves: the place to set
// its test hooks.
func startProxyOver(t *testing.T, caching *Caching, addr string, wrap func(Forwarder) Forwarder, before ...func(*Server)) string {
	t.Helper()
	_, paddr := serve(t, Config{Cache: caching}, wrap(proxytest.Group(t, upstream.Config{}, addr)), before...)
	return paddr
}

// sideBySide is a caching proxy over a demo metastore of its own, with
// one client through the proxy and one straight to the metastore: for
// tests that compare the proxy's replies with the metastore's.
type sideBySide struct {
	demo      *demohms.Server
	addr      string // the metastore's
	srv       *Server
	c, direct *hmsclient.Client
}

func newSideBySide(t *testing.T, caching *Caching) *sideBySide {
	t.Helper()
	b := &sideBySide{}
	b.demo, b.addr = startDemo(t, wire.Buffered)
	paddr := startProxyOver(t, caching, b.addr, func(up Forwarder) Forwarder { return up }, func(s *Server) { b.srv = s })
	b.c, b.direct = dial(t, paddr, wire.Buffered), dial(t, b.addr, wire.Buffered)
	return b
}

// refreshesSettled waits until every refresh-ahead job queued so far has
// finished, and returns how many were queued in all. A hit queues its
// refresh before its reply is written, so once a client has its replies,
// upstream calls counted after this are final: a refresh that should not
// have happened would have been counted.
func refreshesSettled(t testing.TB, s *Server) int64 {
	t.Helper()
	var q int64
	if !wait.Until(10*time.Second, func() bool {
		q = s.cache.queued.Load() // before settled: settled never passes it
		return s.cache.settled.Load() == q
	}) {
		t.Fatalf("refresh jobs not finished within 10s: %d of %d", s.cache.settled.Load(), q)
	}
	return q
}

// benchConnPerCall is what a new client connection costs: b.N times, open
// a connection (connect and any handshake, in open), make one call on it
// and close it.
func benchConnPerCall(b *testing.B, open func(ctx context.Context) (net.Conn, error), tr wire.Transport, method string, args []byte) {
	b.Helper()
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		nc, err := open(ctx)
		if err != nil {
			b.Fatal(err)
		}
		c := hmsclient.New(nc, tr)
		if _, err := c.Call(ctx, method, args); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// dialTCP opens a plain connection to addr.
func dialTCP(addr string) func(ctx context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}
