package main

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/auth/sasl"
	"github.com/hmsproxy/hmsproxy/internal/testenv/kdctest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
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
		{"auth_to_local rules", kerberosConfig{Enabled: true, Principal: "p@R", Keytab: "k", AuthToLocal: "RULE:[1:$1@$0](.*@F)s/@.*//\nDEFAULT"}, wire.Framed, wire.Framed, ""},
		{"bad auth_to_local", kerberosConfig{Enabled: true, Principal: "p@R", Keytab: "k", AuthToLocal: "RULE:[1:$2]"}, wire.Framed, wire.Framed, "kerberos.auth_to_local"},
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
	ln := proxytest.Listen(t)
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
	wait.Poll(10*time.Second, 20*time.Millisecond, func() bool { nc, err = net.Dial("tcp", addr); return err == nil })
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

// TestKerberosAuthToLocal (issue 22): a principal of a trusted foreign
// realm keeps its whole name unless a kerberos.auth_to_local rule maps
// it; the proxy's own realm maps to short names; a rule that gives no
// name refuses the client rather than giving it an empty identity.
func TestKerberosAuthToLocal(t *testing.T) {
	kdc := kdctest.Start(t)
	const foreignRule = `RULE:[1:$1@$0](.*@FOREIGN\.TEST)s/@.*//`
	alice, foreignAlice := kerberosClient(t, kdc, "alice", kdctest.Alice), kerberosClient(t, kdc, "foreign-alice", kdctest.ForeignAlice)
	for _, tc := range []struct {
		name   string
		rules  string
		client *sasl.Client
		want   string // "": refused
	}{
		{"own realm, default", "", alice, "alice"},
		{"foreign realm, default", "", foreignAlice, kdctest.ForeignAlice},
		{"foreign realm, a rule for it", foreignRule + "\nDEFAULT", foreignAlice, "alice"},
		{"own realm, a rule for another", foreignRule + "\nDEFAULT", alice, "alice"},
		{"own realm, no DEFAULT (as in Hadoop)", foreignRule, alice, kdctest.Alice},
		{"a rule that gives no name", `RULE:[1:$1@$0](.*@FOREIGN\.TEST)s/.*//`, foreignAlice, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := kerberosConfig{Enabled: true, Principal: kdctest.Proxy, Keytab: kdc.KeytabPath("hmsproxy"), AuthToLocal: tc.rules}
			if err := k.validate(wire.Framed, wire.Framed); err != nil {
				t.Fatal(err)
			}
			inner := proxytest.Listen(t)
			ln, err := k.listener(inner, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			herr := tc.client.Handshake(ctx, nc, kdctest.Proxy, "")
			if tc.want == "" {
				if !errors.Is(herr, sasl.ErrRejected) || !strings.Contains(herr.Error(), "no identity") {
					t.Fatalf("handshake: %v; want refused for want of an identity", herr)
				}
				return
			}
			if herr != nil {
				t.Fatal(herr)
			}
			c, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := c.(*sasl.Conn).AuthenticatedUser(); got != tc.want {
				t.Fatalf("identity %q; want %q", got, tc.want)
			}
		})
	}
}

func kerberosClient(t *testing.T, kdc *kdctest.KDC, keytab, principal string) *sasl.Client {
	t.Helper()
	cl, err := sasl.NewClient(sasl.ClientConfig{Principal: principal, Keytab: kdc.Keytab(t, keytab), Krb5Conf: kdc.Config(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
