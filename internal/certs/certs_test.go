package certs

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// authority is a throwaway CA for tests.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newAuthority(t testing.TB, name string) *authority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &authority{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue makes a leaf valid for 127.0.0.1 and localhost, for servers and
// clients, and returns its certificate and key as PEM.
func (a *authority) issue(t testing.TB, serial int64, cn string, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func (a *authority) keyPair(t testing.TB, serial int64, cn string) tls.Certificate {
	t.Helper()
	c, k := a.issue(t, serial, cn, time.Now().Add(time.Hour))
	kp, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// write replaces a file and moves its mtime forward, so that a rewrite
// within the same second is still a change.
func write(t testing.TB, path string, b []byte, gen int) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	mt := time.Now().Add(time.Duration(gen) * time.Second)
	if err := os.Chtimes(path, mt, mt); err != nil {
		t.Fatal(err)
	}
}

type files struct{ cert, key, ca string }

func writeFiles(t testing.TB, dir string, certPEM, keyPEM, caPEM []byte, gen int) files {
	f := files{filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), ""}
	write(t, f.cert, certPEM, gen)
	write(t, f.key, keyPEM, gen)
	if caPEM != nil {
		f.ca = filepath.Join(dir, "ca.crt")
		write(t, f.ca, caPEM, gen)
	}
	return f
}

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

func TestReloadServesNewCertificateToNewClients(t *testing.T) {
	ca := newAuthority(t, "test CA")
	dir := t.TempDir()
	c1, k1 := ca.issue(t, 101, "proxy", time.Now().Add(time.Hour))
	f := writeFiles(t, dir, c1, k1, nil, 0)
	r, err := New(Config{Name: "listener", Cert: f.cert, Key: f.key, Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	addr := echoServer(t, r)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	ccfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}

	old, err := dialTLS(t, addr, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := serial(old); got != 101 {
		t.Fatalf("serial before reload: got %d; want 101", got)
	}
	notAfter2 := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	c2, k2 := ca.issue(t, 102, "proxy", notAfter2)
	writeFiles(t, dir, c2, k2, nil, 1)
	if err := r.Reload(); err != nil {
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
	ca := newAuthority(t, "test CA")
	dir := t.TempDir()
	c1, k1 := ca.issue(t, 201, "proxy", time.Now().Add(time.Hour))
	f := writeFiles(t, dir, c1, k1, nil, 0)
	r, err := New(Config{Name: "listener", Cert: f.cert, Key: f.key, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c2, k2 := ca.issue(t, 202, "proxy", time.Now().Add(time.Hour))
	writeFiles(t, dir, c2, k2, nil, 1)
	deadline := time.Now().Add(10 * time.Second)
	for r.Stats().Serial.Int64() != 202 {
		if time.Now().After(deadline) {
			t.Fatalf("serial %d 10s after the rotation; want 202", r.Stats().Serial.Int64())
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.Close()
	r.Close() // twice is fine
}

func TestBadRotationKeepsTheOldCertificate(t *testing.T) {
	ca := newAuthority(t, "test CA")
	dir := t.TempDir()
	c1, k1 := ca.issue(t, 301, "proxy", time.Now().Add(time.Hour))
	f := writeFiles(t, dir, c1, k1, nil, 0)
	r, err := New(Config{Name: "listener", Cert: f.cert, Key: f.key, Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	addr := echoServer(t, r)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	ccfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}

	// A new certificate whose key is not written yet: the pair does not match.
	c2, _ := ca.issue(t, 302, "proxy", time.Now().Add(time.Hour))
	write(t, f.cert, c2, 1)
	if err := r.Reload(); err == nil {
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
	if err := r.Reload(); err != nil || r.Stats().Failures != 1 {
		t.Fatalf("second check of the same files: err %v, %d failures; want nil, 1", err, r.Stats().Failures)
	}
}

func TestWrongClientCertificateRefused(t *testing.T) {
	clientCA := newAuthority(t, "client CA")
	serverCA := newAuthority(t, "server CA")
	rogue := newAuthority(t, "rogue CA")
	dir := t.TempDir()
	c, k := serverCA.issue(t, 1, "proxy", time.Now().Add(time.Hour))
	f := writeFiles(t, dir, c, k, clientCA.pem, 0)
	r, err := New(Config{Name: "listener", Cert: f.cert, Key: f.key, CA: f.ca, Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	addr := echoServer(t, r)
	roots := x509.NewCertPool()
	roots.AddCert(serverCA.cert)
	good := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1",
		Certificates: []tls.Certificate{clientCA.keyPair(t, 7, "alice")}}

	ok, err := dialTLS(t, addr, good)
	if err != nil {
		t.Fatalf("client with a certificate from the client CA: %v", err)
	}
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		want  string // in the client's error, as crypto/tls words the alert
	}{
		{"other CA", []tls.Certificate{rogue.keyPair(t, 8, "mallory")}, "unknown certificate authority"},
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
	oldCA := newAuthority(t, "old CA")
	newCA := newAuthority(t, "new CA")
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	write(t, caFile, oldCA.pem, 0)
	cl, err := New(Config{Name: "upstream", CA: caFile, Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// A server whose certificate is signed by the new CA only.
	c, k := newCA.issue(t, 5, "hms", time.Now().Add(time.Hour))
	sf := writeFiles(t, t.TempDir(), c, k, nil, 0)
	srv, err := New(Config{Name: "server", Cert: sf.cert, Key: sf.key, Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	addr := echoServer(t, srv)

	cfg := cl.ClientConfig()
	cfg.ServerName = "127.0.0.1"
	if _, err := dialTLS(t, addr, cfg); err == nil || !errors.As(err, new(*tls.CertificateVerificationError)) {
		t.Fatalf("server signed by a CA not in the bundle: got %v; want a certificate verification error", err)
	}
	write(t, caFile, newCA.pem, 1)
	if err := cl.Reload(); err != nil {
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
	write(t, junk, []byte("not PEM"), 0)
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
