package certs

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/auth/certs/certstest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
)

// echoServer serves lines back on a TLS listener from r until the test
// ends.
func echoServer(t *testing.T, r *Reloader) string {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := r.Listener(inner)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return inner.Addr().String()
}

// dialTLS connects, completes a round trip and returns the connection.
func dialTLS(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	if err := roundTrip(c); err != nil {
		c.Close()
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

func roundTrip(c net.Conn) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("echo: got " + line)
	}
	return nil
}

func serial(c *tls.Conn) int64 {
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// serveIssued writes into dir a certificate of ca with serial, and
// serves it with an echo server through a reloader that reloads only
// when told; ccfg is a client config that trusts ca. The reloader
// closes when the test ends.
func serveIssued(t *testing.T, ca *certstest.Authority, dir string, serial int64) (r *Reloader, f certstest.Files, addr string, ccfg *tls.Config) {
	t.Helper()
	c, k := ca.Issue(t, certstest.ECDSA, serial, "proxy", time.Now().Add(time.Hour))
	f = certstest.WriteFiles(t, dir, c, k, nil, 0)
	r, err := New(Config{Name: "listener", Cert: f.Cert, Key: f.Key, Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	addr = echoServer(t, r)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	return r, f, addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
}

func TestReloadServesNewCertificateToNewClients(t *testing.T) {
	ca := certstest.NewAuthority(t, "test CA")
	dir := t.TempDir()
	r, _, addr, ccfg := serveIssued(t, ca, dir, 101)

	old, err := dialTLS(t, addr, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := serial(old); got != 101 {
		t.Fatalf("serial before reload: got %d; want 101", got)
	}
	notAfter2 := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	c2, k2 := ca.Issue(t, certstest.ECDSA, 102, "proxy", notAfter2)
	certstest.WriteFiles(t, dir, c2, k2, nil, 1)
	if err := r.Reload("test"); err != nil {
		t.Fatal(err)
	}
	fresh, err := dialTLS(t, addr, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := serial(fresh); got != 102 {
		t.Fatalf("serial after reload: got %d; want 102", got)
	}
	if err := roundTrip(old); err != nil {
		t.Fatalf("a connection opened before the reload: %v", err)
	}
	st := r.Stats()
	if st.Reloads != 1 || st.Failures != 0 || !st.NotAfter.Equal(notAfter2) || st.Serial.Int64() != 102 {
		t.Fatalf("stats: got %+v; want 1 reload, 0 failures, expiry %v, serial 102", st, notAfter2)
	}
}

// TestWatchReloadsOnItsOwn checks the ticker, not Reload: the rotation
// is picked up with nothing but time passing.
func TestWatchReloadsOnItsOwn(t *testing.T) {
	ca := certstest.NewAuthority(t, "test CA")
	dir := t.TempDir()
	c1, k1 := ca.Issue(t, certstest.ECDSA, 201, "proxy", time.Now().Add(time.Hour))
	f := certstest.WriteFiles(t, dir, c1, k1, nil, 0)
	r, err := New(Config{Name: "listener", Cert: f.Cert, Key: f.Key, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c2, k2 := ca.Issue(t, certstest.ECDSA, 202, "proxy", time.Now().Add(time.Hour))
	certstest.WriteFiles(t, dir, c2, k2, nil, 1)
	if !wait.Until(10*time.Second, func() bool { return r.Stats().Serial.Int64() == 202 }) {
		t.Fatalf("serial %d 10s after the rotation; want 202", r.Stats().Serial.Int64())
	}
	r.Close()
	r.Close() // twice is fine
}

func TestBadRotationKeepsTheOldCertificate(t *testing.T) {
	ca := certstest.NewAuthority(t, "test CA")
	dir := t.TempDir()
	r, f, addr, ccfg := serveIssued(t, ca, dir, 301)

	// A new certificate whose key is not written yet: the pair does not match.
	c2, _ := ca.Issue(t, certstest.ECDSA, 302, "proxy", time.Now().Add(time.Hour))
	certstest.Write(t, f.Cert, c2, 1)
	if err := r.Reload("test"); err == nil {
		t.Fatal("reload of a certificate with the old key: got no error")
	}
	if st := r.Stats(); st.Failures != 1 || st.Reloads != 0 || st.Serial.Int64() != 301 {
		t.Fatalf("stats: got %+v; want 1 failure, serial 301", st)
	}
	c, err := dialTLS(t, addr, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := serial(c); got != 301 {
		t.Fatalf("after a bad rotation: got serial %d; want 301", got)
	}
	// Unchanged files are not reloaded (or failed) again.
	if err := r.check(false, "watch"); err != nil || r.Stats().Failures != 1 {
		t.Fatalf("second check of the same files: err %v, %d failures; want nil, 1", err, r.Stats().Failures)
	}
}

func TestWrongClientCertificateRefused(t *testing.T) {
	clientCA := certstest.NewAuthority(t, "client CA")
	serverCA := certstest.NewAuthority(t, "server CA")
	rogue := certstest.NewAuthority(t, "rogue CA")
	dir := t.TempDir()
	c, k := serverCA.Issue(t, certstest.ECDSA, 1, "proxy", time.Now().Add(time.Hour))
	f := certstest.WriteFiles(t, dir, c, k, clientCA.PEM, 0)
	r, err := New(Config{Name: "listener", Cert: f.Cert, Key: f.Key, CA: f.CA, Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	addr := echoServer(t, r)
	roots := x509.NewCertPool()
	roots.AddCert(serverCA.Cert)
	good := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1",
		Certificates: []tls.Certificate{clientCA.KeyPair(t, 7, "alice")}}

	ok, err := dialTLS(t, addr, good)
	if err != nil {
		t.Fatalf("client with a certificate from the client CA: %v", err)
	}
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		want  string // in the client's error, as crypto/tls words the alert
	}{
		{"other CA", []tls.Certificate{rogue.KeyPair(t, 8, "mallory")}, "unknown certificate authority"},
		{"none", nil, "certificate required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := r.Stats().HandshakeFailures
			// GetClientCertificate, because crypto/tls would not send a
			// certificate the server's CertificateRequest does not name.
			bad := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1",
				GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
					if len(tc.certs) == 0 {
						return &tls.Certificate{}, nil
					}
					return &tc.certs[0], nil
				}}
			_, err := dialTLS(t, addr, bad)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want an error saying %q", err, tc.want)
			}
			// The server counts the failure when its side of the handshake
			// ends, which may be just after the client saw the alert.
			wait.Until(5*time.Second, func() bool { return r.Stats().HandshakeFailures != before })
			if got := r.Stats().HandshakeFailures; got != before+1 {
				t.Fatalf("handshake failures: got %d; want %d", got, before+1)
			}
		})
	}
	// The good client, connected all along, and a new one are unaffected.
	if err := roundTrip(ok); err != nil {
		t.Fatalf("the client with the right certificate, after the refusals: %v", err)
	}
	if _, err := dialTLS(t, addr, good); err != nil {
		t.Fatalf("a new client with the right certificate: %v", err)
	}
}

func TestClientConfigFollowsRotatedCA(t *testing.T) {
	oldCA := certstest.NewAuthority(t, "old CA")
	newCA := certstest.NewAuthority(t, "new CA")
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	certstest.Write(t, caFile, oldCA.PEM, 0)
	cl, err := New(Config{Name: "upstream", CA: caFile, Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// A server whose certificate is signed by the new CA only.
	c, k := newCA.Issue(t, certstest.ECDSA, 5, "hms", time.Now().Add(time.Hour))
	sf := certstest.WriteFiles(t, t.TempDir(), c, k, nil, 0)
	srv, err := New(Config{Name: "server", Cert: sf.Cert, Key: sf.Key, Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	addr := echoServer(t, srv)

	cfg := cl.ClientConfig()
	cfg.ServerName = "127.0.0.1"
	if _, err := dialTLS(t, addr, cfg); err == nil || !errors.As(err, new(*tls.CertificateVerificationError)) {
		t.Fatalf("server signed by a CA not in the bundle: got %v; want a certificate verification error", err)
	}
	certstest.Write(t, caFile, newCA.PEM, 1)
	if err := cl.Reload("test"); err != nil {
		t.Fatal(err)
	}
	cfg = cl.ClientConfig()
	cfg.ServerName = "127.0.0.1"
	if _, err := dialTLS(t, addr, cfg); err != nil {
		t.Fatalf("after the CA bundle was rotated: %v", err)
	}
	cfg = cl.ClientConfig()
	cfg.ServerName = "hms.example.com"
	if _, err := dialTLS(t, addr, cfg); err == nil {
		t.Fatal("a server name the certificate does not carry: got no error")
	}
}

func TestNewRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk")
	certstest.Write(t, junk, []byte("not PEM"), 0)
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"cert without key", Config{Cert: junk}},
		{"unparsable pair", Config{Cert: junk, Key: junk}},
		{"missing file", Config{Cert: filepath.Join(dir, "nope"), Key: junk}},
		{"CA without certificates", Config{CA: junk}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Interval = -1
			if r, err := New(tc.cfg); err == nil {
				r.Close()
				t.Fatal("got no error")
			}
		})
	}
	r, err := New(Config{CA: "", Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ServerConfig(); !errors.Is(err, ErrNoCertificate) {
		t.Fatalf("server config without a certificate: got %v; want ErrNoCertificate", err)
	}
}

// TestClientCertificateRotates: a client Reloader presents its current
// certificate to a server that asks for one, before and after rotation.
func TestClientCertificateRotates(t *testing.T) {
	ca := certstest.NewAuthority(t, "CA")
	sc, sk := ca.Issue(t, certstest.ECDSA, 1, "hms", time.Now().Add(time.Hour))
	sf := certstest.WriteFiles(t, t.TempDir(), sc, sk, ca.PEM, 0)
	srv, err := New(Config{Name: "server", Cert: sf.Cert, Key: sf.Key, CA: sf.CA, Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	scfg, _ := srv.ServerConfig()
	seen := make(chan int64, 2)
	go func() {
		for {
			c, err := inner.Accept()
			if err != nil {
				return
			}
			tc := tls.Server(c, scfg)
			if tc.Handshake() == nil {
				seen <- tc.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
			} else {
				seen <- 0
			}
			tc.Close()
		}
	}()

	dir := t.TempDir()
	cc, ck := ca.Issue(t, certstest.ECDSA, 11, "proxy", time.Now().Add(time.Hour))
	cf := certstest.WriteFiles(t, dir, cc, ck, ca.PEM, 0)
	cl, err := New(Config{Name: "upstream", Cert: cf.Cert, Key: cf.Key, CA: cf.CA, ServerName: "localhost", Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i, want := range []int64{11, 12} {
		if i == 1 {
			cc, ck = ca.Issue(t, certstest.ECDSA, 12, "proxy", time.Now().Add(time.Hour))
			certstest.WriteFiles(t, dir, cc, ck, ca.PEM, 1)
			if err := cl.Reload("test"); err != nil {
				t.Fatal(err)
			}
		}
		c, err := tls.Dial("tcp", inner.Addr().String(), cl.ClientConfig())
		if err != nil {
			t.Fatal(err)
		}
		c.Read(make([]byte, 1)) // the server's verdict arrives after the client's handshake (TLS 1.3)
		c.Close()
		if got := <-seen; got != want {
			t.Fatalf("server saw client certificate serial %d; want %d", got, want)
		}
	}
}
