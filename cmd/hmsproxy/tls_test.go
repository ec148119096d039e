package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/auth/certs"
	"github.com/hmsproxy/hmsproxy/auth/certs/certstest"
	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// TestTLSBothSides wires TLS as run does: clients reach the proxy over
// mutual TLS, the proxy reaches a TLS-only metastore. A client with a
// certificate from another CA is refused with a clear error while a good
// client keeps working, and SIGHUP rotates the listener's certificate for
// new clients.
func TestTLSBothSides(t *testing.T) {
	serverCA := certstest.NewAuthority(t, "server CA")
	clientCA := certstest.NewAuthority(t, "client CA")
	rogueCA := certstest.NewAuthority(t, "rogue CA")
	log := slog.New(slog.DiscardHandler)

	// A metastore that speaks TLS only.
	hc, hk := serverCA.Issue(t, certstest.ECDSA, 50, "hms", time.Now().Add(time.Hour))
	hf := certstest.WriteFiles(t, t.TempDir(), hc, hk, serverCA.PEM, 0)
	hmsCerts, err := certs.New(certs.Config{Name: "hms", Cert: hf.Cert, Key: hf.Key, Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer hmsCerts.Close()
	hmsPlain := proxytest.Listen(t)
	hmsLn, _ := hmsCerts.Listener(hmsPlain)
	demo := demohms.New(demohms.Config{})
	demo.Seed(1, 1, 1)
	go demo.Serve(hmsLn)
	defer demo.Close()

	tlsEP := newTLSEndpoints(log)
	defer tlsEP.Close()
	upTLS, err := tlsEP.upstream(settings.TLS{CA: hf.CA})
	if err != nil {
		t.Fatal(err)
	}
	group, err := upstream.New(upstream.Config{URIs: []string{"thrift://" + hmsPlain.Addr().String()}, TLS: upTLS, HealthInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer group.Close()
	store, err := cache.New(cache.Config{MaxBytes: 1 << 20, Kinds: cache.DefaultKinds()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv, err := proxy.New(proxy.Config{Cache: &proxy.Caching{Store: store, Upstream: "hms"}}, group)
	if err != nil {
		t.Fatal(err)
	}
	pc, pk := serverCA.Issue(t, certstest.ECDSA, 1, "proxy", time.Now().Add(time.Hour))
	dir := t.TempDir()
	pf := certstest.WriteFiles(t, dir, pc, pk, clientCA.PEM, 0)
	plain := proxytest.Listen(t)
	ln, err := tlsEP.listener("tls", settings.TLS{Cert: pf.Cert, Key: pf.Key, ClientCA: pf.CA, ReloadInterval: -1}, plain)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	addr := plain.Addr().String()

	good := &tls.Config{RootCAs: serverCA.Pool(), Certificates: []tls.Certificate{clientCA.KeyPair(t, 2, "spark")}}
	connect := func(cfg *tls.Config) (*hmsclient.Client, *tls.Conn) {
		tc, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tc.Close() })
		return hmsclient.New(tc, wire.Buffered), tc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok := func(c *hmsclient.Client, what string) {
		t.Helper()
		m, err := c.Call(ctx, "get_all_databases", []byte{wire.TStop})
		if err != nil {
			t.Fatalf("%s: get_all_databases: %v", what, err)
		}
		if !upstream.Succeeded(m) {
			t.Fatalf("%s: get_all_databases did not succeed", what)
		}
	}
	alice, _ := connect(good)
	ok(alice, "good client")
	ok(alice, "good client, cached")

	before := handshakeFailures(tlsEP, "tls")
	rogueCert := rogueCA.KeyPair(t, 3, "mallory")
	mallory, _ := connect(&tls.Config{RootCAs: serverCA.Pool(),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &rogueCert, nil }})
	_, err = mallory.Call(ctx, "get_all_databases", []byte{wire.TStop})
	if err == nil || !strings.Contains(err.Error(), "unknown certificate authority") {
		t.Fatalf("client with a certificate from another CA: got %v; want a TLS alert naming an unknown certificate authority", err)
	}
	// The server counts the failure after its alert reached the client, so
	// the count may lag the client's error by a moment.
	wait.Until(10*time.Second, func() bool { return handshakeFailures(tlsEP, "tls") > before })
	if got := handshakeFailures(tlsEP, "tls"); got != before+1 {
		t.Fatalf("listener handshake failures: got %d; want %d", got, before+1)
	}
	ok(alice, "good client after the refusal")

	// Rotation by SIGHUP (the watch is off: ReloadInterval -1).
	pc2, pk2 := serverCA.Issue(t, certstest.ECDSA, 2, "proxy", time.Now().Add(time.Hour))
	certstest.WriteFiles(t, dir, pc2, pk2, clientCA.PEM, 1)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, func() bool {
		bob, tc := connect(good)
		ok(bob, "new client after SIGHUP")
		return tc.ConnectionState().PeerCertificates[0].SerialNumber.Int64() == 2
	}, "new clients after SIGHUP still get the old certificate")
	ok(alice, "client connected before the rotation")
}

func handshakeFailures(e *tlsEndpoints, name string) uint64 {
	for _, st := range e.CertStats() {
		if st.Name == name {
			return st.HandshakeFailures
		}
	}
	return 0
}

func TestTLSConfigKeys(t *testing.T) {
	body := `upstream:
  uris: ["thrift://hms:9083"]
  tls: {ca: /etc/hms-ca.pem, server_name: hms.example.com}
tls: {cert: /etc/p.crt, key: /etc/p.key, client_ca: /etc/clients.pem, reload_interval: 1m}
admin:
  tls: {cert: /etc/a.crt, key: /etc/a.key}
`
	c, err := load([]string{"-config", writeConfig(t, body)})
	if err != nil {
		t.Fatal(err)
	}
	want := settings.File{}
	want.TLS = settings.TLS{Cert: "/etc/p.crt", Key: "/etc/p.key", ClientCA: "/etc/clients.pem", ReloadInterval: time.Minute}
	want.Upstream.TLS = settings.TLS{CA: "/etc/hms-ca.pem", ServerName: "hms.example.com"}
	want.Admin.TLS = settings.TLS{Cert: "/etc/a.crt", Key: "/etc/a.key"}
	if c.TLS != want.TLS || c.Upstream.TLS != want.Upstream.TLS || c.Admin.TLS != want.Admin.TLS {
		t.Fatalf("got tls %+v, upstream.tls %+v, admin.tls %+v; want %+v, %+v, %+v",
			c.TLS, c.Upstream.TLS, c.Admin.TLS, want.TLS, want.Upstream.TLS, want.Admin.TLS)
	}
	// Keys of the other side are refused, not ignored.
	e := newTLSEndpoints(slog.New(slog.DiscardHandler))
	defer e.Close()
	if _, err := e.listener("tls", settings.TLS{CA: "/x"}, nil); err == nil {
		t.Error("listener with upstream's ca key: got no error")
	}
	if _, err := e.upstream(settings.TLS{ClientCA: "/x"}); err == nil {
		t.Error("upstream with the listener's client_ca key: got no error")
	}
	if f, err := e.upstream(settings.TLS{}); err != nil || f != nil {
		t.Errorf("upstream without TLS keys: got %v, %v; want plain TCP", f != nil, err)
	}
}
