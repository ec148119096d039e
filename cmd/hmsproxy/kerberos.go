package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"

	"github.com/hmsproxy/hmsproxy/auth/authtolocal"
	"github.com/hmsproxy/hmsproxy/auth/impersonate"
	"github.com/hmsproxy/hmsproxy/auth/sasl"
	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// kerberosConfig is the kerberos section as hmsproxy wires it: the
// listener, the keytab and the handshake toward the metastores.
type kerberosConfig settings.Kerberos

// validate checks the section against the transports it needs.
func (k kerberosConfig) validate(client, upstream wire.Transport) error {
	if !settings.Kerberos(k).Used() {
		return nil
	}
	if k.Principal == "" || k.Keytab == "" {
		return errors.New("kerberos: principal and keytab are required with kerberos.enabled or kerberos.upstream_principal")
	}
	if k.Enabled && client != wire.Framed {
		return errors.New("kerberos: kerberos.enabled needs transport: framed (after the SASL handshake every message is length-prefixed)")
	}
	if strings.Contains(k.UpstreamPrincipal, "_HOST") {
		return errors.New("kerberos: write the metastore's host into kerberos.upstream_principal instead of _HOST")
	}
	switch k.Impersonation {
	case "", "token", "none":
	default:
		return fmt.Errorf("kerberos: impersonation must be token or none, got %q", k.Impersonation)
	}
	if _, err := authtolocal.Parse(k.AuthToLocal, realmOf(k.Principal)); err != nil {
		return fmt.Errorf("kerberos: kerberos.auth_to_local: %w", err)
	}
	if k.MaxHandshakes < 0 || k.MaxHandshakesPerAddress < 0 || k.HandshakeTimeout < 0 {
		return errors.New("kerberos: handshake_timeout, max_handshakes and max_handshakes_per_address must not be negative (0: the default)")
	}
	if k.UpstreamPrincipal != "" && upstream != wire.Framed {
		return errors.New("kerberos: kerberos.upstream_principal needs upstream.transport: framed (after the SASL handshake every message is length-prefixed)")
	}
	return nil
}

// principal is Principal with _HOST replaced by this machine's name.
func (k kerberosConfig) principal() (string, error) {
	if !strings.Contains(k.Principal, "_HOST") {
		return k.Principal, nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("kerberos: _HOST in kerberos.principal: %w", err)
	}
	return strings.ReplaceAll(k.Principal, "_HOST", strings.ToLower(h)), nil
}

// realmOf is the realm of a principal, "" without one.
func realmOf(principal string) string {
	_, realm, _ := strings.Cut(principal, "@")
	return realm
}

func (k kerberosConfig) keytab() (*keytab.Keytab, error) {
	kt, err := keytab.Load(k.Keytab)
	if err != nil {
		return nil, fmt.Errorf("kerberos: keytab %s: %w", k.Keytab, err)
	}
	return kt, nil
}

func (k kerberosConfig) krb5Conf() (*config.Config, error) {
	path := k.Krb5Conf
	if path == "" {
		path = os.Getenv("KRB5_CONFIG")
	}
	if path == "" {
		path = "/etc/krb5.conf"
	}
	c, err := config.Load(path)
	if err != nil {
		return nil, fmt.Errorf("kerberos: krb5.conf %s: %w", path, err)
	}
	return c, nil
}

// listener wraps ln so that clients authenticate first; ln itself when
// kerberos.enabled is off.
func (k kerberosConfig) listener(ln net.Listener, log *slog.Logger) (net.Listener, error) {
	if !k.Enabled {
		return ln, nil
	}
	kt, err := k.keytab()
	if err != nil {
		return nil, err
	}
	p, err := k.principal()
	if err != nil {
		return nil, err
	}
	rules, err := authtolocal.Parse(k.AuthToLocal, realmOf(p))
	if err != nil {
		return nil, fmt.Errorf("kerberos: kerberos.auth_to_local: %w", err)
	}
	srv, err := sasl.NewServer(sasl.ServerConfig{Principal: p, Keytab: kt, MaxClockSkew: k.MaxClockSkew,
		ShortName: rules.ShortName})
	if err != nil {
		return nil, fmt.Errorf("kerberos: %w", err)
	}
	return sasl.Listen(ln, srv, sasl.ListenerConfig{HandshakeTimeout: k.HandshakeTimeout, MaxHandshakes: k.MaxHandshakes,
		MaxHandshakesPerAddress: k.MaxHandshakesPerAddress, Logger: log}), nil
}

// upstreamHandshake logs in to the KDC and returns the hook that
// authenticates each metastore connection, and the client to close at
// exit; nil, nil when kerberos.upstream_principal is empty. With
// impersonation "token" a connection for an authenticated user carries
// that user's delegation token (auth/impersonate): Hive's SASL server
// refuses a GSSAPI authorization id other than the authenticated
// principal, so that is the one way to act for a user. upTLS, if set,
// secures the connections the tokens are fetched on.
func (k kerberosConfig) upstreamHandshake(upTLS func() *tls.Config, dialTimeout time.Duration,
	log *slog.Logger) (func(context.Context, net.Conn, string) (net.Conn, error), *sasl.Client, error) {
	if k.UpstreamPrincipal == "" {
		return nil, nil, nil
	}
	kt, err := k.keytab()
	if err != nil {
		return nil, nil, err
	}
	conf, err := k.krb5Conf()
	if err != nil {
		return nil, nil, err
	}
	p, err := k.principal()
	if err != nil {
		return nil, nil, err
	}
	cl, err := sasl.NewClient(sasl.ClientConfig{Principal: p, Keytab: kt, Krb5Conf: conf})
	if err != nil {
		return nil, nil, fmt.Errorf("kerberos: %w", err)
	}
	service := k.UpstreamPrincipal
	if k.Impersonation == "none" {
		return func(ctx context.Context, c net.Conn, _ string) (net.Conn, error) {
			return c, cl.Handshake(ctx, c, service, "")
		}, cl, nil
	}
	if dialTimeout <= 0 {
		dialTimeout = 5 * time.Second
	}
	im, err := impersonate.New(impersonate.Config{Client: cl, Service: service, Renewer: p,
		TokenTTL: k.TokenTTL, Logger: log,
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: dialTimeout}
			nc, err := d.DialContext(ctx, "tcp", addr)
			if err != nil || upTLS == nil {
				return nc, err
			}
			cfg := upTLS()
			if cfg.ServerName == "" {
				cfg.ServerName, _, _ = net.SplitHostPort(addr)
			}
			tc := tls.Client(nc, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				nc.Close()
				return nil, err
			}
			return tc, nil
		}})
	if err != nil {
		cl.Close()
		return nil, nil, fmt.Errorf("kerberos: %w", err)
	}
	return im.Handshake, cl, nil
}
