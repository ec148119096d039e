// Package certstest makes throwaway certificate authorities and
// certificates for tests and benchmarks of TLS endpoints.
package certstest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Algo is a key algorithm.
type Algo int

const (
	ECDSA Algo = iota // P-256
	RSA               // 2048 bits
)

func newKey(t testing.TB, a Algo) crypto.Signer {
	t.Helper()
	var k crypto.Signer
	var err error
	if a == RSA {
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	} else {
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Authority is a CA that signs test certificates.
type Authority struct {
	Cert *x509.Certificate
	PEM  []byte
	key  crypto.Signer
}

// NewAuthority makes a self-signed CA valid for a day.
func NewAuthority(t testing.TB, name string) *Authority {
	t.Helper()
	key := newKey(t, ECDSA)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &Authority{Cert: c, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Pool is a CertPool holding the authority alone.
func (a *Authority) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(a.Cert)
	return p
}

// Issue makes a leaf certificate for servers and clients, valid for
// 127.0.0.1 and localhost until notAfter, and returns it and its key as
// PEM.
func (a *Authority) Issue(t testing.TB, algo Algo, serial int64, cn string, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t, algo)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.Cert, key.Public(), a.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// KeyPair issues an ECDSA leaf valid for an hour, parsed.
func (a *Authority) KeyPair(t testing.TB, serial int64, cn string) tls.Certificate {
	t.Helper()
	c, k := a.Issue(t, ECDSA, serial, cn, time.Now().Add(time.Hour))
	kp, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// Write replaces a file and sets its mtime gen seconds ahead, so that a
// rewrite within the same second is still seen as a change.
func Write(t testing.TB, path string, b []byte, gen int) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	mt := time.Now().Add(time.Duration(gen) * time.Second)
	if err := os.Chtimes(path, mt, mt); err != nil {
		t.Fatal(err)
	}
}

// Files are the paths of a written certificate, key and CA bundle.
type Files struct{ Cert, Key, CA string }

// WriteFiles writes tls.crt, tls.key and, when caPEM is set, ca.crt into
// dir.
func WriteFiles(t testing.TB, dir string, certPEM, keyPEM, caPEM []byte, gen int) Files {
	t.Helper()
	f := Files{Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key")}
	Write(t, f.Cert, certPEM, gen)
	Write(t, f.Key, keyPEM, gen)
	if caPEM != nil {
		f.CA = filepath.Join(dir, "ca.crt")
		Write(t, f.CA, caPEM, gen)
	}
	return f
}
