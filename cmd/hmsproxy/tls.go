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

	"github.com/hmsproxy/hmsproxy/auth/certs"
	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
)

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
func (t *tlsEndpoints) listener(name string, c settings.TLS, ln net.Listener) (net.Listener, error) {
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
func (t *tlsEndpoints) upstream(c settings.TLS) (func() *tls.Config, error) {
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
