package impersonate

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/auth/sasl"
	"github.com/hmsproxy/hmsproxy/internal/testenv/clocktest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/kdctest"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// fakeMetastore issues delegation tokens on GSSAPI connections (as
// hive/localhost) and accepts them on DIGEST-MD5 connections, checking
// the response with its own RFC 2831 arithmetic.
type fakeMetastore struct {
	tokenAddr, digestAddr string

	mu        sync.Mutex
	passwords map[string]string // base64 identifier -> base64 password; guarded by mu
	fetches   map[string]int    // owner -> tokens issued; guarded by mu
	serial    int               // guarded by mu
	peers     []string          // principals of token connections; guarded by mu
	accepted  atomic.Int32      // DIGEST handshakes accepted
}

func startFake(t *testing.T, kdc *kdctest.KDC) *fakeMetastore {
	t.Helper()
	f := &fakeMetastore{passwords: map[string]string{}, fetches: map[string]int{}}
	srv, err := sasl.NewServer(sasl.ServerConfig{Principal: kdctest.Metastore, Keytab: kdc.Keytab(t, "hive")})
	if err != nil {
		t.Fatal(err)
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := sasl.Listen(tln, srv, sasl.ListenerConfig{})
	t.Cleanup(func() { ln.Close() })
	f.tokenAddr = tln.Addr().String()
	serveEach(ln, func(c net.Conn) { f.serveTokens(c.(*sasl.Conn)) })
	dln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dln.Close() })
	f.digestAddr = dln.Addr().String()
	serveEach(dln, f.serveDigest)
	return f
}

// serveEach serves each connection ln accepts on a goroutine of its own,
// until ln is closed.
func serveEach(ln net.Listener, serve func(net.Conn)) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
}

func (f *fakeMetastore) serveTokens(c *sasl.Conn) {
	defer c.Close()
	f.mu.Lock()
	f.peers = append(f.peers, c.Peer().Principal)
	f.mu.Unlock()
	r, w := wire.NewReader(c, wire.Framed, wire.Limits{}), wire.NewWriter(c, wire.Framed)
	for {
		m, err := r.Read()
		if err != nil {
			return
		}
		d := wire.NewDecoder(m.Body())
		var owner string
		for {
			typ, id := d.FieldBegin()
			if typ == wire.TStop || d.Err() != nil {
				break
			}
			if id == 1 && typ == wire.TString {
				owner = d.String()
				continue
			}
			d.Skip(typ)
		}
		var e wire.Encoder
		if owner == "mallory" {
			e.B = append(e.B, wire.TStruct, 0, 1)
			e.StringField(1, "User: hmsproxy is not allowed to impersonate mallory")
			e.Stop()
		} else {
			f.mu.Lock()
			f.serial++
			f.fetches[owner]++
			id, pw := fmt.Sprintf("%s#%d", owner, f.serial), fmt.Sprintf("secret-%d", f.serial)
			f.passwords[base64.StdEncoding.EncodeToString([]byte(id))] = base64.StdEncoding.EncodeToString([]byte(pw))
			f.mu.Unlock()
			e.StringField(0, tokenString(id, pw))
		}
		e.Stop()
		hdr := wire.AppendHeader(nil, wire.Reply, m.Name(), m.SeqID)
		if w.Write(hdr, e.B) != nil {
			return
		}
	}
}

// tokenString is Token.encodeToUrlString for short fields.
func tokenString(id, pw string) string {
	var b []byte
	for _, s := range []string{id, pw, "HIVE_DELEGATION_TOKEN", ""} {
		b = append(b, byte(len(s)))
		b = append(b, s...)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func (f *fakeMetastore) forget() {
	f.mu.Lock()
	clear(f.passwords)
	f.mu.Unlock()
}

// serveDigest plays the metastore's DIGEST-MD5 server side.
func (f *fakeMetastore) serveDigest(c net.Conn) {
	defer c.Close()
	read := func() (byte, string) {
		var h [5]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			return 0, ""
		}
		b := make([]byte, int(h[1])<<24|int(h[2])<<16|int(h[3])<<8|int(h[4]))
		io.ReadFull(c, b)
		return h[0], string(b)
	}
	write := func(st byte, s string) {
		n := len(s)
		c.Write(append([]byte{st, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, s...))
	}
	if st, mech := read(); st != 1 || mech != "DIGEST-MD5" {
		write(3, "want DIGEST-MD5")
		return
	}
	read() // empty initial response
	const nonce = "bm9uY2U="
	write(2, `realm="default",nonce="`+nonce+`",qop="auth",charset=utf-8,algorithm=md5-sess`)
	_, resp := read()
	kv := map[string]string{}
	for _, p := range strings.Split(resp, ",") {
		k, v, _ := strings.Cut(p, "=")
		kv[k] = strings.Trim(v, `"`)
	}
	f.mu.Lock()
	pw, ok := f.passwords[kv["username"]]
	f.mu.Unlock()
	md := func(s string) []byte { h := md5.Sum([]byte(s)); return h[:] }
	x := md(kv["username"] + ":default:" + pw)
	ha1 := hex.EncodeToString(md(string(x) + ":" + nonce + ":" + kv["cnonce"]))
	kd := func(a2 string) string {
		return hex.EncodeToString(md(ha1 + ":" + nonce + ":" + kv["nc"] + ":" + kv["cnonce"] + ":auth:" + hex.EncodeToString(md(a2))))
	}
	if !ok || kv["digest-uri"] != "null/default" || kv["response"] != kd("AUTHENTICATE:null/default") {
		write(3, "DIGEST-MD5: digest response format violation. Mismatched response.")
		return
	}
	f.accepted.Add(1)
	write(5, "rspauth="+kd(":null/default"))
	io.Copy(io.Discard, c)
}

func newImpersonator(t *testing.T, kdc *kdctest.KDC, f *fakeMetastore, clk *clocktest.Clock) *Impersonator {
	t.Helper()
	cl, err := sasl.NewClient(sasl.ClientConfig{Principal: kdctest.Proxy, Keytab: kdc.Keytab(t, "hmsproxy"), Krb5Conf: kdc.Config(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	var d net.Dialer
	im, err := New(Config{Client: cl, Service: kdctest.Metastore, Renewer: kdctest.Proxy, TokenTTL: time.Hour, Now: clk.Now,
		// tokens come from the GSSAPI side of the fake, whatever the address
		Dial: func(ctx context.Context, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", f.tokenAddr) }})
	if err != nil {
		t.Fatal(err)
	}
	return im
}

func connectAs(t *testing.T, im *Impersonator, addr, user string) error {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = im.Handshake(ctx, nc, user)
	return err
}

func (f *fakeMetastore) fetchesOf(user string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fetches[user]
}

// TestTokens: one token per user is fetched as the proxy and reused until
// TokenTTL; a token the metastore no longer takes fails one connection and
// is replaced for the next; a refused token is ErrTokenRefused with the
// metastore's reason; user "" is the proxy itself over GSSAPI.
func TestTokens(t *testing.T) {
	kdc := kdctest.Start(t)
	f := startFake(t, kdc)
	clk := clocktest.At(time.Now())
	im := newImpersonator(t, kdc, f, clk)

	for i := 0; i < 3; i++ {
		if err := connectAs(t, im, f.digestAddr, "alice"); err != nil {
			t.Fatalf("alice, connection %d: %v", i, err)
		}
	}
	if err := connectAs(t, im, f.digestAddr, "bob"); err != nil {
		t.Fatal(err)
	}
	if a, b := f.fetchesOf("alice"), f.fetchesOf("bob"); a != 1 || b != 1 {
		t.Fatalf("tokens fetched: alice %d, bob %d; want 1 each", a, b)
	}
	if n := f.accepted.Load(); n != 4 {
		t.Fatalf("metastore accepted %d token handshakes; want 4", n)
	}

	clk.Advance(time.Hour + time.Second)
	if err := connectAs(t, im, f.digestAddr, "alice"); err != nil {
		t.Fatal(err)
	}
	if a := f.fetchesOf("alice"); a != 2 {
		t.Fatalf("after TokenTTL alice's tokens fetched: %d; want 2", a)
	}

	f.forget() // as after a metastore restart with an in-memory token store
	err := connectAs(t, im, f.digestAddr, "alice")
	if !errors.Is(err, sasl.ErrRejected) || !strings.Contains(err.Error(), "Mismatched response") {
		t.Fatalf("a forgotten token: got %v; want sasl.ErrRejected with the metastore's reason", err)
	}
	if err := connectAs(t, im, f.digestAddr, "alice"); err != nil {
		t.Fatalf("the connection after a rejected token: %v", err)
	}
	if a := f.fetchesOf("alice"); a != 3 {
		t.Fatalf("after a rejected token alice's tokens fetched: %d; want 3", a)
	}

	err = connectAs(t, im, f.digestAddr, "mallory")
	if !errors.Is(err, ErrTokenRefused) || !strings.Contains(err.Error(), "not allowed to impersonate mallory") {
		t.Fatalf("mallory: got %v; want ErrTokenRefused with the metastore's reason", err)
	}

	if err := connectAs(t, im, f.tokenAddr, ""); err != nil {
		t.Fatalf("the proxy itself over GSSAPI: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.peers {
		if p != kdctest.Proxy {
			t.Fatalf("a token connection authenticated as %q; want the proxy %s", p, kdctest.Proxy)
		}
	}
}
