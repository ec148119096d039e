package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/hmsclient"
	"github.com/hmsproxy/hmsproxy/internal/kdctest"
	"github.com/hmsproxy/hmsproxy/internal/sasl"
	"github.com/hmsproxy/hmsproxy/internal/wire"
)

func TestKerberosConfigValidate(t *testing.T) {
	full := kerberosConfig{Enabled: true, Principal: "hmsproxy/h@R", Keytab: "k", UpstreamPrincipal: "hive/h@R"}
	for _, tc := range []struct {
		name         string
		k            kerberosConfig
		client, up   wire.Transport
		wantErrParts string // "" for no error
	}{
		{"off", kerberosConfig{}, wire.Buffered, wire.Buffered, ""},
		{"both sides framed", full, wire.Framed, wire.Framed, ""},
		{"client side buffered", full, wire.Buffered, wire.Framed, "needs transport: framed"},
		{"upstream buffered", full, wire.Framed, wire.Buffered, "needs upstream.transport: framed"},
		{"no keytab", kerberosConfig{Enabled: true, Principal: "p"}, wire.Framed, wire.Framed, "principal and keytab are required"},
		{"upstream only, no principal", kerberosConfig{UpstreamPrincipal: "hive/h@R"}, wire.Framed, wire.Framed, "principal and keytab are required"},
		{"_HOST upstream", kerberosConfig{Principal: "p", Keytab: "k", UpstreamPrincipal: "hive/_HOST@R"}, wire.Framed, wire.Framed, "instead of _HOST"},
		{"bad impersonation", kerberosConfig{Enabled: true, Principal: "p", Keytab: "k", Impersonation: "doas"}, wire.Framed, wire.Framed, "impersonation must be token or none"},
		{"handshake bounds", kerberosConfig{Enabled: true, Principal: "p", Keytab: "k", MaxHandshakes: 500, MaxHandshakesPerAddress: 4}, wire.Framed, wire.Framed, ""},
		{"negative handshake bound", kerberosConfig{Enabled: true, Principal: "p", Keytab: "k", MaxHandshakesPerAddress: -1}, wire.Framed, wire.Framed, "must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.k.validate(tc.client, tc.up)
			if tc.wantErrParts == "" {
				if err != nil {
					t.Fatalf("got %v; want no error", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErrParts) {
				t.Fatalf("got %v; want an error with %q", err, tc.wantErrParts)
			}
		})
	}
}

func TestKerberosPrincipalHost(t *testing.T) {
	h, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	got, err := kerberosConfig{Principal: "hmsproxy/_HOST@R"}.principal()
	if want := "hmsproxy/" + strings.ToLower(h) + "@R"; err != nil || got != want {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
}

// TestKerberosFromFile: the kerberos: keys of the config file reach run,
// whose listener then serves Kerberos clients only.
func TestKerberosFromFile(t *testing.T) {
	kdc := kdctest.Start(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "hmsproxy.yaml")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	yaml := "listen: " + addr + "\ntransport: framed\ndemo: true\nupstream:\n  transport: framed\nadmin:\n  listen: \"\"\n" +
		"kerberos:\n  enabled: true\n  principal: " + kdctest.Proxy + "\n  keytab: " + kdc.KeytabPath("hmsproxy") + "\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := load([]string{"--config", cfgPath})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Kerberos.Enabled || cfg.Kerberos.Keytab != kdc.KeytabPath("hmsproxy") {
		t.Fatalf("kerberos section not loaded: %+v", cfg.Kerberos)
	}
	cfg.Shutdown.DrainDelay = 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	cl, err := sasl.NewClient(sasl.ClientConfig{Principal: kdctest.Alice, Keytab: kdc.Keytab(t, "alice"), Krb5Conf: kdc.Config(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var nc net.Conn
	for deadline := time.Now().Add(10 * time.Second); ; {
		if nc, err = net.Dial("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
	defer hcancel()
	if err := cl.Handshake(hctx, nc, kdctest.Proxy, ""); err != nil {
		t.Fatal(err)
	}
	c := hmsclient.New(nc, wire.Framed)
	defer c.Close()
	if m, err := c.Call(ctx, "get_all_databases", []byte{wire.TStop}); err != nil || m.Type != wire.Reply {
		t.Fatalf("get_all_databases as alice: %v, type %d", err, m.Type)
	}
	// plain Thrift on the same port is not served
	plain, err := hmsclient.Dial(ctx, addr, wire.Framed)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Call(hctx, "get_all_databases", []byte{wire.TStop}); err == nil {
		t.Fatal("a client without SASL was served by a kerberos.enabled proxy")
	}
}
