package sasl

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"

	"github.com/hmsproxy/hmsproxy/internal/testenv/kdctest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/syncbuf"
)

func TestMain(m *testing.M) { os.Exit(kdctest.Main(m)) }

type bed struct {
	kdc    *kdctest.KDC
	server *Server
}

func newBed(t *testing.T, skew time.Duration) *bed {
	t.Helper()
	kdc := kdctest.Shared(t)
	srv, err := NewServer(ServerConfig{Principal: kdctest.Proxy, Keytab: kdc.Keytab(t, "hmsproxy"), MaxClockSkew: skew})
	if err != nil {
		t.Fatal(err)
	}
	return &bed{kdc: kdc, server: srv}
}

func (b *bed) client(t *testing.T, name, principal string) *Client {
	t.Helper()
	c, err := NewClient(ClientConfig{Principal: principal, Keytab: b.kdc.Keytab(t, name), Krb5Conf: b.kdc.Config(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

type result struct {
	peer Peer
	err  error
}

// run performs both ends over loopback TCP and returns the server's
// connection still open, so tests can check what follows the handshake.
func (b *bed) run(t *testing.T, c *Client, service, authz string) (clientErr error, srv result, sc, cc net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan result, 1)
	accepted := make(chan net.Conn, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		accepted <- conn
		p, err := b.server.Accept(ctx, conn)
		done <- result{p, err}
	}()
	cc, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	clientErr = c.Handshake(ctx, cc, service, authz)
	if clientErr != nil {
		cc.Close() // as a failed client would: the server is not left waiting
	}
	srv = <-done
	sc = <-accepted
	t.Cleanup(func() { sc.Close() })
	return clientErr, srv, sc, cc
}

func TestHandshake(t *testing.T) {
	b := newBed(t, 0)
	c := b.client(t, "alice", kdctest.Alice)
	cerr, srv, sc, cc := b.run(t, c, kdctest.Proxy, "")
	if cerr != nil || srv.err != nil {
		t.Fatalf("client: %v; server: %v", cerr, srv.err)
	}
	if srv.peer.Principal != kdctest.Alice || srv.peer.User != "alice" {
		t.Fatalf("got peer %+v; want alice@%s, user alice", srv.peer, kdctest.Realm)
	}
	if time.Until(srv.peer.Expires) < 30*time.Minute {
		t.Fatalf("ticket expires %v; want about an hour from now", srv.peer.Expires)
	}
	// QOP auth: the bytes after the handshake are the caller's own
	msg := []byte{0, 0, 0, 3, 'a', 'b', 'c'}
	if _, err := cc.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(sc, got); err != nil || string(got) != string(msg) {
		t.Fatalf("after handshake got %q, %v; want %q", got, err, msg)
	}
}

// TestHandshakeRefused: a ticket for a service principal that is in the
// realm but is not the proxy's (the proxy cannot read it), and GSSAPI
// impersonation through the authorization id (refused as the
// metastore's own SASL server refuses it), fail on both sides; the
// server goes on accepting the handshake that follows.
func TestHandshakeRefused(t *testing.T) {
	for _, tc := range []struct {
		name           string
		service, authz string
		wantSrv        error
		wantMsg        string // in the client's error too
		// then a handshake to the proxy succeeds: by the test-bed user
		// next ("": the refused client again) with nextAuthz
		next, nextPrincipal, nextAuthz string
	}{
		{"service not the proxy's", kdctest.Metastore, "", ErrAuthentication, "not for this service", "bob", kdctest.Bob, ""},
		// the own principal as authorization id is what Java clients may send
		{"authorization id", kdctest.Proxy, "bob", ErrAuthzID, "", "", "", kdctest.Alice},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t, 0)
			c := b.client(t, "alice", kdctest.Alice)
			cerr, srv, _, _ := b.run(t, c, tc.service, tc.authz)
			if !errors.Is(srv.err, tc.wantSrv) {
				t.Fatalf("server: got %v; want %v", srv.err, tc.wantSrv)
			}
			if !errors.Is(cerr, ErrRejected) || !strings.Contains(cerr.Error(), tc.wantMsg) {
				t.Fatalf("client: got %v; want ErrRejected saying %q", cerr, tc.wantMsg)
			}
			user := "alice"
			if tc.next != "" {
				c, user = b.client(t, tc.next, tc.nextPrincipal), tc.next
			}
			if cerr, srv, _, _ := b.run(t, c, kdctest.Proxy, tc.nextAuthz); cerr != nil || srv.err != nil || srv.peer.User != user {
				t.Fatalf("next handshake: %v, %v, %+v; want %s accepted", cerr, srv.err, srv.peer, user)
			}
		})
	}
}

// A principal the KDC does not know gets a clear client-side error.
func TestUnknownServicePrincipal(t *testing.T) {
	b := newBed(t, 0)
	c := b.client(t, "alice", kdctest.Alice)
	conn, err := net.Dial("tcp", "127.0.0.1:1") // never reached
	if err == nil {
		conn.Close()
	}
	a, bconn := net.Pipe()
	defer a.Close()
	defer bconn.Close()
	err = c.Handshake(context.Background(), a, "hive/nosuchhost@"+kdctest.Realm, "")
	if !errors.Is(err, ErrAuthentication) || !strings.Contains(err.Error(), "hive/nosuchhost") {
		t.Fatalf("got %v; want ErrAuthentication naming the principal", err)
	}
}

// A ticket past its end time (plus the allowed skew) is refused.
func TestExpiredTicket(t *testing.T) {
	b := newBed(t, time.Second)
	c := b.client(t, "short", kdctest.Short)
	tkt, key, err := c.cl.GetServiceTicket("hmsproxy/localhost")
	if err != nil {
		t.Fatal(err)
	}
	c.ticket = func(string) (messages.Ticket, types.EncryptionKey, error) { return tkt, key, nil }
	// The KDC's 2-second lifetime bounds the service ticket; we cannot read
	// its end time (encrypted for the service), and the Kerberos library
	// checks it against the wall clock with no seam: a sleep of lifetime
	// plus skew is the only way to an expired ticket.
	time.Sleep(3500 * time.Millisecond)
	cerr, srv, _, _ := b.run(t, c, kdctest.Proxy, "")
	if !errors.Is(srv.err, ErrAuthentication) || !strings.Contains(srv.err.Error(), "expired") {
		t.Fatalf("server: got %v; want ErrAuthentication (expired)", srv.err)
	}
	if !errors.Is(cerr, ErrRejected) || !strings.Contains(cerr.Error(), "expired") {
		t.Fatalf("client: got %v; want ErrRejected saying expired", cerr)
	}
	// a fresh ticket for the same principal works
	c.ticket = c.cl.GetServiceTicket
	if cerr, srv, _, _ := b.run(t, c, kdctest.Proxy, ""); cerr != nil || srv.err != nil {
		t.Fatalf("fresh ticket: client %v, server %v", cerr, srv.err)
	}
}

// Delegation-token (DIGEST-MD5) and PLAIN clients get BAD with a reason.
func TestOtherMechanismRefused(t *testing.T) {
	b := newBed(t, 0)
	a, c := net.Pipe()
	defer a.Close()
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		_, err := b.server.Accept(context.Background(), a)
		done <- err
	}()
	if err := writeMessage(c, StatusStart, []byte("DIGEST-MD5")); err != nil {
		t.Fatal(err)
	}
	st, msg, err := readMessage(c)
	if err != nil || st != StatusBad || !strings.Contains(string(msg), "only GSSAPI") {
		t.Fatalf("got %v %q %v; want BAD saying only GSSAPI", st, msg, err)
	}
	if err := <-done; !errors.Is(err, ErrMechanism) {
		t.Fatalf("server: got %v; want ErrMechanism", err)
	}
}

// A client that stalls mid-handshake is cut off by the context.
func TestAcceptHonoursContext(t *testing.T) {
	b := newBed(t, 0)
	a, c := net.Pipe()
	defer a.Close()
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.server.Accept(ctx, a)
		done <- err
	}()
	if err := writeMessage(c, StatusStart, []byte(Mechanism)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v; want context.Canceled", err)
	}
}

// forger presents holder's service ticket and session key, which are
// holder's to present, with an authenticator naming who: the client
// encrypts its authenticator itself, with the session key it knows, so
// it can write any name and realm there. gokrb5 builds that
// authenticator from the credentials of the client it is given, here
// one that never logs in.
func (b *bed) forger(t *testing.T, holder *Client, who string) *Client {
	t.Helper()
	name, realm, err := ParsePrincipal(who)
	if err != nil {
		t.Fatal(err)
	}
	cl := client.NewWithPassword(name.PrincipalNameString(), realm, "never used", b.kdc.Config(t), client.DisablePAFXFAST(true))
	return &Client{cl: cl, ticket: holder.cl.GetServiceTicket}
}

// TestAuthenticatorCannotNameAnotherPrincipal guards issue 22: who a
// client is comes from its service ticket, which only the KDC can write,
// never from its authenticator, which the client writes. An
// authenticator naming another principal or realm than the ticket is
// refused (RFC 4120 §3.2.3), and the client never gets that identity.
func TestAuthenticatorCannotNameAnotherPrincipal(t *testing.T) {
	b := newBed(t, 0)
	alice := b.client(t, "alice", kdctest.Alice)
	foreignAlice := b.client(t, "foreign-alice", kdctest.ForeignAlice)
	for _, tc := range []struct {
		name   string
		holder *Client
		claims string
	}{
		// a user of a trusted realm presents herself as the local user
		// of the same short name
		{"foreign user claims the local realm", foreignAlice, kdctest.Alice},
		{"local user claims a foreign realm", alice, kdctest.ForeignAlice},
		{"another name", alice, kdctest.Bob},
		{"another name and realm", foreignAlice, kdctest.Bob},
		{"a service principal", alice, kdctest.Metastore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cerr, srv, _, _ := b.run(t, b.forger(t, tc.holder, tc.claims), kdctest.Proxy, "")
			if srv.err == nil {
				t.Fatalf("accepted as %+v; want the handshake refused", srv.peer)
			}
			if !errors.Is(srv.err, ErrPrincipalMismatch) || !errors.Is(srv.err, ErrAuthentication) {
				t.Fatalf("server: got %v; want ErrPrincipalMismatch (an ErrAuthentication)", srv.err)
			}
			if srv.peer != (Peer{}) {
				t.Fatalf("refused, yet the peer is %+v", srv.peer)
			}
			if !errors.Is(cerr, ErrRejected) || !strings.Contains(cerr.Error(), "does not match") {
				t.Fatalf("client: got %v; want ErrRejected saying the names do not match", cerr)
			}
		})
	}
	// the same tickets, honestly presented
	for _, tc := range []struct {
		c               *Client
		principal, user string
	}{
		{alice, kdctest.Alice, "alice"},
		{foreignAlice, kdctest.ForeignAlice, kdctest.ForeignAlice},
	} {
		cerr, srv, _, _ := b.run(t, tc.c, kdctest.Proxy, "")
		if cerr != nil || srv.err != nil {
			t.Fatalf("%s: client %v, server %v", tc.principal, cerr, srv.err)
		}
		if srv.peer.Principal != tc.principal || srv.peer.User != tc.user {
			t.Fatalf("got peer %+v; want principal %s, user %s", srv.peer, tc.principal, tc.user)
		}
	}
}

// TestListenerCountsMismatch: a forged authenticator refused by a
// Listener is logged and counted under its own result, and the listener
// goes on to accept the next client.
func TestListenerCountsMismatch(t *testing.T) {
	b := newBed(t, 0)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logBuf syncbuf.Buffer
	l := Listen(inner, b.server, ListenerConfig{Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := func(c *Client) error {
		nc, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		return c.Handshake(ctx, nc, kdctest.Proxy, "")
	}
	foreignAlice := b.client(t, "foreign-alice", kdctest.ForeignAlice)
	if err := dial(b.forger(t, foreignAlice, kdctest.Alice)); !errors.Is(err, ErrRejected) {
		t.Fatalf("forged client: %v; want ErrRejected", err)
	}
	if err := dial(b.client(t, "alice", kdctest.Alice)); err != nil {
		t.Fatalf("honest client after it: %v", err)
	}
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if u := c.(*Conn).AuthenticatedUser(); u != "alice" {
		t.Fatalf("accepted %q; want alice", u)
	}
	l.Close() // waits for the handshakes, and so for their log lines
	st := l.Results()
	if m, a := st.Handshakes[ResultMismatch].Load(), st.Handshakes[ResultAccepted].Load(); m != 1 || a != 1 {
		t.Fatalf("counted %d mismatched, %d accepted; want 1 and 1", m, a)
	}
	if log := logBuf.String(); !strings.Contains(log, "result=mismatch") || !strings.Contains(log, kdctest.ForeignAlice) {
		t.Fatalf("log %q; want the refusal with result=mismatch naming the ticket's principal", log)
	}
}
