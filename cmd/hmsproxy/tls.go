package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hmsproxy/hmsproxy/auth/certs"
)

// tlsConfig is one TLS endpoint in the config file: `tls:` (the client
// listener), `upstream.tls:` and `admin.tls:`. There are no flags for
// them; the files are reloaded when they change and on SIGHUP.
type tlsConfig struct {
	// Cert and Key are PEM files. Listener and admin: setting them turns
	// TLS on. Upstream: the proxy's client certificate, if the metastore
	// asks for one.
	Cert string `yaml:"cert" doc:"PEM certificate chain; listener and admin: setting cert and key turns TLS on; upstream: the proxy's client certificate, for metastores that ask for one" note:"TLS 1.2 at least"`
	Key  string `yaml:"key" doc:"PEM key of cert"`
	// ClientCA (listener and admin): a PEM bundle; when set, clients must
	// present a certificate it signed (mutual TLS).
	ClientCA string `yaml:"client_ca" doc:"listener and admin: PEM bundle of client CAs; when set, clients must present a certificate it signed (mutual TLS)"`
	// CA (upstream): the PEM bundle that verifies the metastores'
	// certificates; default the system roots.
	CA string `yaml:"ca" defdoc:"the system roots" doc:"upstream: PEM bundle that verifies the metastores' certificates"`
	// ServerName (upstream): the name verified in the metastores'
	// certificates; default the host of each URI.
	ServerName string `yaml:"server_name" defdoc:"the host of each URI" doc:"upstream: the name verified in the metastores' certificates"`
	// Enabled (upstream): TLS toward the metastores. Implied by ca, cert
	// or server_name; set it alone to use the system roots.
	Enabled bool `yaml:"enabled" doc:"upstream: TLS toward the metastores; implied by ca, cert or server_name; set it alone to use the system roots"`
	// ReloadInterval is how often the files are checked for changes.
	// Default 10s; negative: only on SIGHUP.
	ReloadInterval time.Duration `yaml:"reload_interval" defdoc:"10s" off:"reloaded only on SIGHUP" doc:"how often the files are checked for changes"`
}

// tlsEndpoints owns the certificate reloaders of the configured TLS
// endpoints and the SIGHUP handler that reloads them all.
type tlsEndpoints struct {
	log *slog.Logger

	mu sync.Mutex        // guards rs
	rs []*certs.Reloader // in creation order

	hup  chan os.Signal
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func newTLSEndpoints(log *slog.Logger) *tlsEndpoints {
	t := &tlsEndpoints{log: log, hup: make(chan os.Signal, 1), stop: make(chan struct{}), done: make(chan struct{})}
	signal.Notify(t.hup, syscall.SIGHUP)
	go t.watchHUP()
	return t
}

func (t *tlsEndpoints) watchHUP() {
	defer close(t.done)
	for {
		select {
		case <-t.stop:
			return
		case <-t.hup:
			for _, r := range t.reloaders() {
				r.Reload("SIGHUP") // logs its own outcome
			}
		}
	}
}

func (t *tlsEndpoints) reloaders() []*certs.Reloader {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*certs.Reloader(nil), t.rs...)
}

// CertStats is read by the admin port's metrics.
func (t *tlsEndpoints) CertStats() []certs.Stats {
	var out []certs.Stats
	for _, r := range t.reloaders() {
		out = append(out, r.Stats())
	}
	return out
}

// Close stops the reloaders and the SIGHUP handler. Safe to call twice.
func (t *tlsEndpoints) Close() {
	t.once.Do(func() {
		signal.Stop(t.hup)
		close(t.stop)
	})
	<-t.done
	for _, r := range t.reloaders() {
		r.Close()
	}
}

func (t *tlsEndpoints) add(cfg certs.Config) (*certs.Reloader, error) {
	cfg.Logger = t.log
	r, err := certs.New(cfg)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.rs = append(t.rs, r)
	t.mu.Unlock()
	return r, nil
}

// listener wraps ln in TLS when c names a certificate, and returns ln
// itself otherwise; name is "tls" or "admin.tls", for logs and metrics.
// On error the caller still owns ln.
func (t *tlsEndpoints) listener(name string, c tlsConfig, ln net.Listener) (net.Listener, error) {
	if c.CA != "" || c.ServerName != "" || c.Enabled {
		return nil, fmt.Errorf("%s: ca, server_name and enabled are upstream.tls keys; a listener takes cert, key and client_ca", name)
	}
	if c.Cert == "" && c.Key == "" {
		if c.ClientCA != "" {
			return nil, fmt.Errorf("%s: client_ca needs cert and key", name)
		}
		return ln, nil
	}
	r, err := t.add(certs.Config{Name: name, Cert: c.Cert, Key: c.Key, CA: c.ClientCA, Interval: c.ReloadInterval})
	if err != nil {
		return nil, err
	}
	if name == "admin.tls" {
		return r.HTTPListener(ln)
	}
	return r.Listener(ln)
}

// upstream is the TLS config source of upstream.Config.TLS; nil when
// upstream TLS is off.
func (t *tlsEndpoints) upstream(c tlsConfig) (func() *tls.Config, error) {
	if c.ClientCA != "" {
		return nil, errors.New("upstream.tls: client_ca is a listener key; the metastores' CA is ca")
	}
	if !c.Enabled && c.CA == "" && c.Cert == "" && c.ServerName == "" {
		return nil, nil
	}
	r, err := t.add(certs.Config{Name: "upstream.tls", Cert: c.Cert, Key: c.Key, CA: c.CA,
		ServerName: c.ServerName, Interval: c.ReloadInterval})
	if err != nil {
		return nil, err
	}
	return r.ClientConfig, nil
}
