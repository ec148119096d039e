// Package certs loads TLS certificates and CA bundles from PEM files and
// reloads them while the process runs, when the files change.
//
// A Reloader watches its files by modification time and size on a ticker
// (and on demand, for SIGHUP). A change that does not load (a half-written
// file, a key that does not match its certificate) is logged and counted,
// and the last good material stays in use: a bad rotation never takes a
// listener down. The *tls.Config values it hands out read the current
// material on every handshake, so connections made after a reload use the
// new certificate and connections already open keep theirs.
package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Config names the files of one TLS endpoint. The zero value is not
// usable: a server needs Cert and Key.
type Config struct {
	// Name labels logs and metrics: "listener", "upstream", "admin".
	Name string
	// Cert and Key are PEM files: the certificate chain (leaf first) and
	// its private key. Required for a server; for a client both or
	// neither (the client certificate for mutual TLS).
	Cert, Key string
	// CA is a PEM bundle. For a server it lists the client CAs: when set,
	// every client must present a certificate that chains to one of them
	// (mutual TLS). For a client it lists the roots that verify the
	// server. Default "": no client certificates asked for (server), the
	// system roots (client).
	CA string
	// ServerName is the name a client verifies in the server's
	// certificate. Default "": the host the caller dials, which
	// ClientConfig's user sets as tls.Config.ServerName.
	ServerName string
	// Interval is how often the files are checked for changes. Default
	// 10s; negative: only Reload checks.
	Interval time.Duration
	// Logger receives reload logs. Default: discard.
	Logger *slog.Logger
}

// ErrNoCertificate means a server was configured without a certificate
// and key.
var ErrNoCertificate = errors.New("certs: a certificate and a key are required")

// Stats are a Reloader's counters, for metrics.
type Stats struct {
	Name     string
	Reloads  uint64 // successful reloads after the first load
	Failures uint64 // changes that did not load; the old material stayed
	// HandshakeFailures counts clients whose TLS handshake on a Listener
	// failed (a wrong or missing client certificate, a plain-text client).
	HandshakeFailures uint64
	NotAfter          time.Time // expiry of the leaf certificate in use; zero if none
	Serial            *big.Int  // serial number of the leaf certificate in use; nil if none
}

// material is one consistent load of the files.
type material struct {
	cert     *tls.Certificate // nil when no Cert/Key
	pool     *x509.CertPool   // nil when no CA
	server   *tls.Config      // handed out per handshake by ServerConfig
	notAfter time.Time
	serial   *big.Int
}

// stamp identifies a version of a file cheaply.
type stamp struct {
	mod  time.Time
	size int64
	ok   bool // the file could be statted
}

// Reloader holds the current TLS material of one endpoint.
type Reloader struct {
	cfg Config
	log *slog.Logger
	cur atomic.Pointer[material]

	reloads, failures, handshakeFailures atomic.Uint64

	mu     sync.Mutex // guards stamps and serialises loads
	stamps [3]stamp   // Cert, Key, CA as of the last load attempt

	stop     chan struct{} // closed by Close: watch returns
	done     chan struct{} // closed when watch has returned (at once without one)
	stopOnce sync.Once
}

// New loads the files and starts watching them; Close stops the watch.
// An error means the files did not load: there is no old material to
// keep.
func New(cfg Config) (*Reloader, error) {
	if (cfg.Cert == "") != (cfg.Key == "") {
		return nil, fmt.Errorf("certs: %s: set both a certificate and a key, or neither", cfg.Name)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Second
	}
	r := &Reloader{cfg: cfg, log: cfg.Logger.With("tls", cfg.Name), stop: make(chan struct{}), done: make(chan struct{})}
	r.stamps = r.stat()
	m, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cur.Store(m)
	if cfg.Interval > 0 {
		go r.watch()
	} else {
		close(r.done)
	}
	return r, nil
}

// Close stops watching the files. Safe to call twice; the configs handed
// out keep serving the last material.
func (r *Reloader) Close() {
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.done
}

func (r *Reloader) watch() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.check(false, "watch")
		}
	}
}

// Reload loads the files now, changed or not (a rotation within the
// same second to a file of the same size is invisible to the watch), and
// logs by as the cause ("SIGHUP"). On error the old material stays in
// use.
func (r *Reloader) Reload(by string) error { return r.check(true, by) }

func (r *Reloader) check(force bool, by string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stat()
	if st == r.stamps && !force {
		return nil
	}
	r.stamps = st
	m, err := r.load()
	if err != nil {
		r.failures.Add(1)
		r.log.Error("TLS files did not load; keeping the previous certificate", "by", by, "err", err)
		return err
	}
	r.cur.Store(m)
	r.reloads.Add(1)
	r.log.Info("TLS files reloaded", "by", by, "cert", r.cfg.Cert, "ca", r.cfg.CA,
		"serial", serialString(m.serial), "not_after", m.notAfter)
	return nil
}

func serialString(s *big.Int) string {
	if s == nil {
		return ""
	}
	return s.Text(16)
}

func (r *Reloader) stat() [3]stamp {
	var st [3]stamp
	for i, p := range []string{r.cfg.Cert, r.cfg.Key, r.cfg.CA} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			st[i] = stamp{mod: fi.ModTime(), size: fi.Size(), ok: true}
		}
	}
	return st
}

func (r *Reloader) load() (*material, error) {
	m := &material{}
	if r.cfg.Cert != "" {
		c, err := tls.LoadX509KeyPair(r.cfg.Cert, r.cfg.Key)
		if err != nil {
			return nil, fmt.Errorf("certs: %s: load %s and %s: %w", r.cfg.Name, r.cfg.Cert, r.cfg.Key, err)
		}
		m.cert = &c
		m.notAfter, m.serial = c.Leaf.NotAfter, c.Leaf.SerialNumber
	}
	if r.cfg.CA != "" {
		b, err := os.ReadFile(r.cfg.CA)
		if err != nil {
			return nil, fmt.Errorf("certs: %s: read CA bundle: %w", r.cfg.Name, err)
		}
		m.pool = x509.NewCertPool()
		if !m.pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("certs: %s: no PEM certificate in CA bundle %s", r.cfg.Name, r.cfg.CA)
		}
	}
	if m.cert != nil {
		m.server = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*m.cert}}
		if m.pool != nil {
			m.server.ClientCAs = m.pool
			m.server.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return m, nil
}

// Stats reads the counters and the certificate in use.
func (r *Reloader) Stats() Stats {
	m := r.cur.Load()
	return Stats{Name: r.cfg.Name, Reloads: r.reloads.Load(), Failures: r.failures.Load(),
		HandshakeFailures: r.handshakeFailures.Load(),
		NotAfter:          m.notAfter, Serial: m.serial}
}

// ServerConfig returns a config for a TLS listener that uses the current
// certificate (and client CAs) on every handshake. TLS 1.2 at least.
func (r *Reloader) ServerConfig() (*tls.Config, error) {
	if r.cur.Load().cert == nil {
		return nil, fmt.Errorf("certs: %s: %w", r.cfg.Name, ErrNoCertificate)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.cur.Load().server, nil
		},
	}, nil
}

// ClientConfig returns a config for dialing a TLS server with the current
// material: the CA bundle as roots (the system roots when none), the
// client certificate when one is set, Config.ServerName as the name to
// verify (empty: the caller sets the host it dials). Call it per
// connection: crypto/tls reads RootCAs from the config, so a config kept
// across a reload would keep the old roots.
func (r *Reloader) ClientConfig() *tls.Config {
	m := r.cur.Load()
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: r.cfg.ServerName, RootCAs: m.pool}
	if m.cert != nil {
		c.Certificates = []tls.Certificate{*m.cert}
	}
	return c
}
