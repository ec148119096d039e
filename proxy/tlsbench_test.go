package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/auth/certs"
	"github.com/hmsproxy/hmsproxy/auth/certs/certstest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// tlsListener is a loopback listener serving TLS with a fresh
// certificate of the given algorithm, as the proxy binary wraps its
// client listener; roots trust it.
func tlsListener(b testing.TB, algo certstest.Algo) (ln net.Listener, addr string, roots *tls.Config) {
	b.Helper()
	ca := certstest.NewAuthority(b, "bench CA")
	c, k := ca.Issue(b, algo, 2, "proxy", time.Now().Add(time.Hour))
	f := certstest.WriteFiles(b, b.TempDir(), c, k, nil, 0)
	r, err := certs.New(certs.Config{Name: "bench", Cert: f.Cert, Key: f.Key, Interval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Close)
	plain := proxytest.Listen(b)
	ln, err = r.Listener(plain)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	return ln, plain.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
}

// tlsProxy serves a caching proxy in front of addr on a TLS listener.
func tlsProxy(b testing.TB, caching *Caching, addr string, algo certstest.Algo) (string, *tls.Config) {
	b.Helper()
	s, _ := startProxy(b, proxyOpts{cache: caching}, addr)
	ln, taddr, cfg := tlsListener(b, algo)
	go s.Serve(ln)
	return taddr, cfg
}

// tlsEchoServer is echoServer behind the same TLS listener: the floor a
// cached read over TLS is measured against.
func tlsEchoServer(b testing.TB, body []byte) (string, *tls.Config) {
	b.Helper()
	ln, addr, cfg := tlsListener(b, certstest.ECDSA)
	proxytest.Echo(b, ln, body)
	return addr, cfg
}

func dialTLS(b testing.TB, addr string, cfg *tls.Config) *hmsclient.Client {
	b.Helper()
	tc, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		b.Fatal(err)
	}
	c := hmsclient.New(tc, wire.Buffered)
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkCachedGetTableTLS: a cached get_table through the proxy's TLS
// listener, side by side with a TLS echo server of the same reply bytes
// behind the same listener code (goal: at most 1.5x at p50).
func BenchmarkCachedGetTableTLS(b *testing.B) {
	_, addr := startDemo(b, wire.Buffered)
	caching := newCaching(b, nil)
	paddr, pcfg := tlsProxy(b, caching, addr, certstest.ECDSA)
	args := hmsclient.Args("demo_db0", "t0")
	direct := dial(b, addr, wire.Buffered)
	m, _ := wire.Parse(call(b, direct, "get_table", args), wire.Limits{})
	eaddr, ecfg := tlsEchoServer(b, m.Body())
	echo := dialTLS(b, eaddr, ecfg)
	proxied := dialTLS(b, paddr, pcfg)
	call(b, proxied, "get_table", args)
	caching.Store.Wait()
	b.ResetTimer()
	lp, le := timePair(b, b.N, proxied, echo, "get_table", args)
	reportPair(b, "proxy-tls-hit", "echo-tls", lp, le)
}

// BenchmarkNewClientConnTLS: what a new client connection costs: connect,
// (TLS handshake,) one cached get_table, close, with an ECDSA P-256 and
// an RSA 2048 certificate and without TLS. The difference to "plain" is
// the handshake's cost per connection; handshake-µs times the handshake
// alone (client side, TLS 1.3).
func BenchmarkNewClientConnTLS(b *testing.B) {
	_, addr := startDemo(b, wire.Buffered)
	caching := newCaching(b, nil)
	_, plainAddr := startProxy(b, proxyOpts{cache: caching}, addr)
	args := hmsclient.Args("demo_db0", "t0")
	call(b, dial(b, plainAddr, wire.Buffered), "get_table", args)
	caching.Store.Wait()
	b.Run("plain", func(b *testing.B) { benchConnPerCall(b, dialTCP(plainAddr), wire.Buffered, "get_table", args) })
	for _, tc := range []struct {
		name string
		algo certstest.Algo
	}{{"tls-ecdsa-p256", certstest.ECDSA}, {"tls-rsa-2048", certstest.RSA}} {
		b.Run(tc.name, func(b *testing.B) {
			taddr, cfg := tlsProxy(b, caching, addr, tc.algo)
			var hs time.Duration
			b.ResetTimer()
			benchConnPerCall(b, func(ctx context.Context) (net.Conn, error) {
				nc, err := dialTCP(taddr)(ctx)
				if err != nil {
					return nil, err
				}
				tc := tls.Client(nc, cfg)
				start := time.Now()
				err = tc.HandshakeContext(ctx)
				hs += time.Since(start)
				return tc, err
			}, wire.Buffered, "get_table", args)
			b.ReportMetric(float64(hs.Microseconds())/float64(b.N), "handshake-µs")
		})
	}
}
