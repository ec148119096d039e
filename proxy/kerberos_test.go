package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	krbclient "github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/spnego"

	"github.com/hmsproxy/hmsproxy/auth/sasl"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/internal/testenv/kdctest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// krbBed is a Kerberized demo metastore (hive/localhost) behind a proxy
// that accepts Kerberos clients (hmsproxy/localhost) and authenticates to
// the metastore with its own keytab.
type krbBed struct {
	kdc     *kdctest.KDC
	demo    *demohms.Server
	addr    string // the proxy
	caching *Caching

	mu        sync.Mutex
	upstreams []string // principals the metastore authenticated, in order
	actingFor []string // users metastore connections were opened for (the delegation token's owner, with impersonation)
	refused   []error  // handshakes the proxy refused
}

func newKrbBed(t *testing.T, caching *Caching, opts ...func(*Config)) *krbBed {
	t.Helper()
	b := &krbBed{kdc: kdctest.Start(t), caching: caching}
	// the metastore
	b.demo = demohms.New(demohms.Config{Transport: wire.Framed})
	b.demo.Seed(1, 2, 2)
	dln := krbListener(t, b.kdc, kdctest.Metastore, "hive", sasl.ListenerConfig{})
	go b.demo.Serve(&peerRecorder{Listener: dln, b: b})
	t.Cleanup(func() { b.demo.Close() })

	// the proxy: toward the metastore
	cl, err := sasl.NewClient(sasl.ClientConfig{Principal: kdctest.Proxy, Keytab: b.kdc.Keytab(t, "hmsproxy"), Krb5Conf: b.kdc.Config(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	g, err := upstream.New(upstream.Config{URIs: []string{"thrift://" + dln.Addr().String()}, Transport: wire.Framed,
		HealthInterval: time.Hour, Logger: testLogger(t),
		Handshake: func(ctx context.Context, c net.Conn, user string) (net.Conn, error) {
			b.mu.Lock()
			b.actingFor = append(b.actingFor, user)
			b.mu.Unlock()
			return c, cl.Handshake(ctx, c, kdctest.Metastore, "")
		}})
	if err != nil {
		t.Fatal(err)
	}
	pcfg := Config{Transport: wire.Framed, Logger: testLogger(t), Cache: caching}
	for _, o := range opts {
		o(&pcfg)
	}
	s, err := New(pcfg, g)
	if err != nil {
		t.Fatal(err)
	}
	// toward clients
	ln := krbListener(t, b.kdc, kdctest.Proxy, "hmsproxy", sasl.ListenerConfig{OnResult: func(err error) {
		if err != nil {
			b.mu.Lock()
			b.refused = append(b.refused, err)
			b.mu.Unlock()
		}
	}})
	b.addr = ln.Addr().String()
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		g.Close()
	})
	return b
}

// krbListener is a Thrift-SASL listener on a free loopback port that
// accepts clients as principal, with the test bed's keytab of that name.
func krbListener(t testing.TB, kdc *kdctest.KDC, principal, keytab string, cfg sasl.ListenerConfig) *sasl.Listener {
	t.Helper()
	srv, err := sasl.NewServer(sasl.ServerConfig{Principal: principal, Keytab: kdc.Keytab(t, keytab)})
	if err != nil {
		t.Fatal(err)
	}
	return sasl.Listen(proxytest.Listen(t), srv, cfg)
}

// peerRecorder notes which principal each metastore connection authenticated.
type peerRecorder struct {
	net.Listener
	b *krbBed
}

func (r *peerRecorder) Accept() (net.Conn, error) {
	c, err := r.Listener.Accept()
	if err == nil {
		r.b.mu.Lock()
		r.b.upstreams = append(r.b.upstreams, c.(*sasl.Conn).Peer().Principal)
		r.b.mu.Unlock()
	}
	return c, err
}

// dial connects as the keytab's principal through the proxy.
func (b *krbBed) dial(t *testing.T, name, principal, service string) (*hmsclient.Client, error) {
	t.Helper()
	cl, err := sasl.NewClient(sasl.ClientConfig{Principal: principal, Keytab: b.kdc.Keytab(t, name), Krb5Conf: b.kdc.Config(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Handshake(ctxT(t), nc, service, ""); err != nil {
		nc.Close()
		return nil, err
	}
	c := hmsclient.New(nc, wire.Framed)
	t.Cleanup(func() { c.Close() })
	return c, nil
}

// mustDial connects as the keytab's principal with a ticket for the
// proxy's service, and fails the test if the proxy refuses it.
func (b *krbBed) mustDial(t *testing.T, name, principal string) *hmsclient.Client {
	t.Helper()
	c, err := b.dial(t, name, principal, kdctest.Proxy)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestKerberosIdentity (issue 14): the authenticated principal, not
// set_ugi, is the identity for the cache scope; the metastore sees the
// proxy's principal.
func TestKerberosIdentity(t *testing.T) {
	caching := newCaching(t, nil)
	caching.Scope = ScopeUser
	b := newKrbBed(t, caching)
	alice := b.mustDial(t, "alice", kdctest.Alice)
	bob := b.mustDial(t, "bob", kdctest.Bob)
	// twoReads reads args on first and, once the store has admitted that
	// load, on then; it returns the loads the metastore has seen.
	twoReads := func(first, then *hmsclient.Client, args []byte) int {
		call(t, first, "get_table", args)
		caching.Store.Wait()
		call(t, then, "get_table", args)
		return b.demo.CallCount("get_table")
	}
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	if n := twoReads(alice, alice, get); n != 1 {
		t.Fatalf("after alice's two reads the metastore saw %d loads; want 1", n)
	}
	call(t, bob, "get_table", get)
	if n := b.demo.CallCount("get_table"); n != 2 {
		t.Fatalf("bob was served alice's entry: %d loads; want 2", n)
	}
	// bob claims to be alice: set_ugi changes nothing under SASL, so what
	// he loads stays in his scope and alice loads again
	call(t, bob, "set_ugi", ugiArgs("alice"))
	get1 := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t1"))
	if n := twoReads(bob, alice, get1); n != 4 {
		t.Fatalf("alice was served what bob loaded after set_ugi(alice): %d loads; want 4", n)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.upstreams) == 0 {
		t.Fatal("no authenticated metastore connection")
	}
	for _, p := range b.upstreams {
		if p != kdctest.Proxy {
			t.Fatalf("metastore authenticated %q; want the proxy's principal %s", p, kdctest.Proxy)
		}
	}
}

// TestKerberosIdentityFromTicket guards issue 22: the identity that keys
// the cache scope, the upstream pool and the delegation token is the
// principal the KDC wrote into the client's ticket. A user of a trusted
// realm is not the local user of the same short name, and cannot become
// her by writing the local realm into her authenticator.
func TestKerberosIdentityFromTicket(t *testing.T) {
	caching := newCaching(t, nil)
	caching.Scope = ScopeUser
	b := newKrbBed(t, caching)
	alice := b.mustDial(t, "alice", kdctest.Alice)
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	call(t, alice, "get_table", get)
	caching.Store.Wait()
	if n := b.demo.CallCount("get_table"); n != 1 {
		t.Fatalf("alice's read: %d loads; want 1", n)
	}

	// foreign alice, forging: her ticket, an authenticator naming alice
	// of the proxy's realm
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := forgedHandshake(t, b.kdc, nc, "foreign-alice", kdctest.ForeignAlice, "alice", kdctest.Realm); err == nil {
		forged := hmsclient.New(nc, wire.Framed)
		call(t, forged, "get_table", get)
		t.Fatalf("the proxy took foreign alice's forged authenticator (the metastore saw %d loads: 1 means she was served alice's entry)",
			b.demo.CallCount("get_table"))
	} else if !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("forged handshake: %v; want refused as a mismatch", err)
	}

	// foreign alice, honest: her own identity, apart from alice's
	fa := b.mustDial(t, "foreign-alice", kdctest.ForeignAlice)
	call(t, fa, "get_table", get)
	if n := b.demo.CallCount("get_table"); n != 2 {
		t.Fatalf("foreign alice's read: %d loads; want 2 (she is not served alice's entry)", n)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	want := map[string]bool{"alice": true, kdctest.ForeignAlice: true}
	for _, u := range b.actingFor {
		if u == "" {
			continue // the proxy's own (the scope check)
		}
		if !want[u] {
			t.Fatalf("a metastore connection was opened for %q; want only alice and %s", u, kdctest.ForeignAlice)
		}
		delete(want, u)
	}
	if len(want) != 0 {
		t.Fatalf("no metastore connection for %v: pooled with another user's", want)
	}
}

// forgedHandshake runs the Thrift-SASL GSSAPI exchange on nc with the
// service ticket of the keytab's principal and an authenticator naming
// name@realm instead: the client encrypts its authenticator itself, with
// the session key it knows. It asks for no mutual authentication, so
// that the exchange is as short as the server allows.
func forgedHandshake(t *testing.T, kdc *kdctest.KDC, nc net.Conn, keytab, principal, name, realm string) error {
	t.Helper()
	holderName, holderRealm, _ := strings.Cut(principal, "@")
	holder := krbclient.NewWithKeytab(holderName, holderRealm, kdc.Keytab(t, keytab), kdc.Config(t), krbclient.DisablePAFXFAST(true))
	if err := holder.Login(); err != nil {
		t.Fatal(err)
	}
	defer holder.Destroy()
	tkt, key, err := holder.GetServiceTicket("hmsproxy/localhost")
	if err != nil {
		t.Fatal(err)
	}
	forger := krbclient.NewWithPassword(name, realm, "never used", kdc.Config(t))
	tok, err := spnego.NewKRB5TokenAPREQ(forger, tkt, key, []int{gssapi.ContextFlagInteg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	apReq, err := tok.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	defer nc.SetDeadline(time.Time{})
	send := func(status byte, payload []byte) {
		msg := append([]byte{status, 0, 0, 0, 0}, payload...)
		binary.BigEndian.PutUint32(msg[1:5], uint32(len(payload)))
		if _, err := nc.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() (byte, []byte, error) {
		hdr := make([]byte, 5)
		if _, err := io.ReadFull(nc, hdr); err != nil {
			return 0, nil, err
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
		if _, err := io.ReadFull(nc, body); err != nil {
			return 0, nil, err
		}
		if hdr[0] == 3 || hdr[0] == 4 { // BAD, ERROR
			return hdr[0], nil, fmt.Errorf("refused: %s", body)
		}
		return hdr[0], body, nil
	}
	send(1, []byte("GSSAPI"))            // START
	send(2, apReq)                       // OK
	if _, _, err := recv(); err != nil { // the security-layer offer
		return err
	}
	if err := tok.APReq.DecryptAuthenticator(key); err != nil {
		t.Fatal(err)
	}
	choice := gssapi.WrapToken{EC: 12, SndSeqNum: uint64(tok.APReq.Authenticator.SeqNumber), Payload: []byte{1, 0, 0, 0}}
	if err := choice.SetCheckSum(key, keyusage.GSSAPI_INITIATOR_SEAL); err != nil {
		t.Fatal(err)
	}
	wt, err := choice.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	send(5, wt) // COMPLETE
	_, _, err = recv()
	return err
}

// TestKerberosRefusals (issue 14): a ticket for the wrong service and a
// client without SASL are refused at the handshake with a reason; a
// Kerberos client alongside is unaffected.
func TestKerberosRefusals(t *testing.T) {
	b := newKrbBed(t, newCaching(t, nil))
	good := b.mustDial(t, "alice", kdctest.Alice)
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	call(t, good, "get_table", get)

	if _, err := b.dial(t, "bob", kdctest.Bob, kdctest.Metastore); !errors.Is(err, sasl.ErrRejected) {
		t.Fatalf("ticket for the metastore's principal: got %v; want sasl.ErrRejected", err)
	}
	// a plain Thrift client: its first bytes are not a SASL START
	plain, err := hmsclient.Dial(ctxT(t), b.addr, wire.Framed)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Call(ctxT(t), "get_table", get); err == nil {
		t.Fatal("a client without SASL was served")
	}
	call(t, good, "get_table", get) // unaffected
	b.mu.Lock()
	n := len(b.refused)
	b.mu.Unlock()
	if n < 1 {
		t.Fatalf("proxy recorded %d refused handshakes; want at least 1", n)
	}
}

// kerberosProxy serves one caching proxy (framed, in front of a framed
// demo metastore) on a plain listener and on a Kerberos listener.
func kerberosProxy(b *testing.B) (kdc *kdctest.KDC, plainAddr, krbAddr string, caching *Caching) {
	b.Helper()
	kdc = kdctest.Start(b)
	_, addr := startDemo(b, wire.Framed)
	caching = newCaching(b, nil)
	s, plainAddr := startProxy(b, proxyOpts{clientTransport: wire.Framed, up: upstream.Config{Transport: wire.Framed}, cache: caching}, addr)
	ln := krbListener(b, kdc, kdctest.Proxy, "hmsproxy", sasl.ListenerConfig{})
	go s.Serve(ln)
	return kdc, plainAddr, ln.Addr().String(), caching
}

func kerberosClient(b *testing.B, kdc *kdctest.KDC) *sasl.Client {
	b.Helper()
	cl, err := sasl.NewClient(sasl.ClientConfig{Principal: kdctest.Alice, Keytab: kdc.Keytab(b, "alice"), Krb5Conf: kdc.Config(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// BenchmarkCachedGetTableKerberos (issue 14): a cached get_table on a
// connection that authenticated with Kerberos, side by side with one on a
// plain framed connection to the same proxy and cache. With QOP auth
// nothing is wrapped after the handshake, so the ratio should be 1.
func BenchmarkCachedGetTableKerberos(b *testing.B) {
	kdc, plainAddr, krbAddr, caching := kerberosProxy(b)
	cl := kerberosClient(b, kdc)
	nc, err := net.Dial("tcp", krbAddr)
	if err != nil {
		b.Fatal(err)
	}
	if err := cl.Handshake(context.Background(), nc, kdctest.Proxy, ""); err != nil {
		b.Fatal(err)
	}
	krb := hmsclient.New(nc, wire.Framed)
	b.Cleanup(func() { krb.Close() })
	plain := dial(b, plainAddr, wire.Framed)
	args := hmsclient.Args("demo_db0", "t0")
	call(b, plain, "get_table", args)
	caching.Store.Wait()
	call(b, krb, "get_table", args)
	b.ResetTimer()
	lk, lp := timePair(b, b.N, krb, plain, "get_table", args)
	reportPair(b, "kerberos-hit", "plain-hit", lk, lp)
}

// BenchmarkNewClientConnKerberos (issue 14): what a new client connection
// costs with the Kerberos handshake (service ticket cached by the client,
// so no KDC round trip) versus without: connect, handshake, one cached
// get_table, close.
func BenchmarkNewClientConnKerberos(b *testing.B) {
	kdc, plainAddr, krbAddr, caching := kerberosProxy(b)
	cl := kerberosClient(b, kdc)
	args := hmsclient.Args("demo_db0", "t0")
	call(b, dial(b, plainAddr, wire.Framed), "get_table", args)
	caching.Store.Wait()
	b.Run("plain", func(b *testing.B) { benchConnPerCall(b, dialTCP(plainAddr), wire.Framed, "get_table", args) })
	b.Run("kerberos", func(b *testing.B) {
		benchConnPerCall(b, func(ctx context.Context) (net.Conn, error) {
			nc, err := dialTCP(krbAddr)(ctx)
			if err != nil {
				return nil, err
			}
			return nc, cl.Handshake(ctx, nc, kdctest.Proxy, "")
		}, wire.Framed, "get_table", args)
	})
}
