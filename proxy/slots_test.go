package proxy

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/auth/certs/certstest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/limits/peers"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// silent opens n connections from ip that never send a byte, each
// tracked by s before the next is opened (so they idle in that order).
func silent(t testing.TB, s *Server, ip, addr string, n int) []net.Conn {
	t.Helper()
	var out []net.Conn
	for range n {
		before := s.Clients()
		out = append(out, proxytest.DialFrom(t, ip, addr))
		eventually(t, "the silent connection tracked", func() bool { return s.Clients() > before })
	}
	return out
}

// TestIdleSocketsDoNotHoldClientSlots guards issue 22: with max_clients
// 20, 20 sockets that never send a byte locked out every new client
// until client_idle_timeout (1h). At max_clients the longest-idle
// connection with no call in flight is closed to admit the newcomer.
func TestIdleSocketsDoNotHoldClientSlots(t *testing.T) {
	_, up := startDemo(t, wire.Buffered)
	s, addr := serve(t, Config{MaxClients: 20}, proxytest.Group(t, upstream.Config{}, up))
	idle := silent(t, s, "127.0.0.1", addr, 20)

	honest := hmsclient.New(proxytest.DialFrom(t, "127.0.0.2", addr), wire.Buffered)
	if _, err := honest.Call(ctxT(t), "get_all_databases", hmsclient.Args()); err != nil {
		t.Fatalf("a new client at max_clients: %v; want served", err)
	}
	if !wait.Closed(idle[0], 5*time.Second) {
		t.Error("the longest-idle socket is still open")
	}
	for i, nc := range idle[1:] {
		if wait.Closed(nc, time.Millisecond) {
			t.Errorf("silent socket %d closed; want only the longest-idle one", i+1)
		}
	}
	eventually(t, "20 clients", func() bool { return s.Clients() == 20 })
	if got := s.Stats().ClientsShed(ShedEvicted); got != 1 {
		t.Errorf("ClientsShed(%v) = %d; want 1", ShedEvicted, got)
	}
}

// TestTLSSilentSocketsDoNotHoldClientSlots (issue 22): sockets that
// never send their ClientHello wait in the TLS listener's handshake
// stage (limits/peers), bounded per address, and hold no client slot:
// with max_clients 20, 200 of them from one address keep no one out.
func TestTLSSilentSocketsDoNotHoldClientSlots(t *testing.T) {
	_, up := startDemo(t, wire.Buffered)
	s, err := New(Config{MaxClients: 20, Logger: testLogger(t)}, proxytest.Group(t, upstream.Config{}, up))
	if err != nil {
		t.Fatal(err)
	}
	ln, addr, roots := tlsListener(t, certstest.ECDSA)
	proxytest.ServeOn(t, s, ln)
	for range 200 {
		proxytest.DialFrom(t, "127.0.0.1", addr)
	}
	hl := ln.(*peers.Listener)
	eventually(t, "the listener to take the 200 sockets", func() bool {
		st := hl.Stats()
		return st.InProgress+int(st.RefusedPerAddress) == 200
	})
	if st := hl.Stats(); st.InProgress != peers.DefaultHandshakesPerAddress {
		t.Errorf("got %+v; want %d handshakes in progress from one address", st, peers.DefaultHandshakesPerAddress)
	}
	if n := s.Clients(); n != 0 {
		t.Errorf("%d client slots held by sockets in their TLS handshake; want 0", n)
	}

	tc := tls.Client(proxytest.DialFrom(t, "127.0.0.2", addr), roots)
	if err := tc.HandshakeContext(ctxT(t)); err != nil {
		t.Fatalf("TLS handshake of a new client: %v", err)
	}
	if _, err := hmsclient.New(tc, wire.Buffered).Call(ctxT(t), "get_all_databases", hmsclient.Args()); err != nil {
		t.Fatalf("a new TLS client: %v; want served", err)
	}
}

// holdingFake is a metastore whose calls are answered only once release
// is closed (at the latest when the test ends); arrived gets a value per
// call as it arrives.
func holdingFake(t *testing.T) (addr string, arrived <-chan struct{}, release chan struct{}) {
	release = make(chan struct{})
	calls := make(chan struct{}, 100)
	addr = proxytest.Fake(t, wire.Buffered, func(c *proxytest.FakeConn, m wire.Message) error {
		if string(m.Name()) != "getStatus" {
			calls <- struct{}{}
			<-release
		}
		c.Scratch = wire.AppendHeader(c.Scratch[:0], wire.Reply, m.Name(), m.SeqID)
		return c.W.Write(append(c.Scratch, wire.TStop))
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return addr, calls, release
}

// inFlight waits until n calls have reached the metastore.
func inFlight(t *testing.T, arrived <-chan struct{}, n int) {
	t.Helper()
	for range n {
		proxytest.Recv(t, arrived, "a call at the metastore")
	}
}

// TestBusyConnectionsNeverEvicted: a connection with a call in flight is
// never closed to make room; with none idle, the newcomer is refused, as
// before. Once the calls are answered they idle, and the next newcomer
// gets in.
func TestBusyConnectionsNeverEvicted(t *testing.T) {
	up, arrived, release := holdingFake(t)
	_, addr := serve(t, Config{MaxClients: 2}, proxytest.Group(t, upstream.Config{}, up))
	type result struct{ err error }
	done := make(chan result, 2)
	for range 2 {
		c := hmsclient.New(proxytest.DialFrom(t, "127.0.0.1", addr), wire.Buffered)
		go func() {
			_, err := c.Call(ctxT(t), "get_all_databases", hmsclient.Args())
			done <- result{err}
		}()
	}
	inFlight(t, arrived, 2)

	late := proxytest.DialFrom(t, "127.0.0.2", addr)
	if !wait.Closed(late, 5*time.Second) {
		t.Fatal("a newcomer was admitted while every connection had a call in flight")
	}
	close(release)
	for range 2 {
		if r := <-done; r.err != nil {
			t.Fatalf("a call in flight when the newcomer came: %v; want answered", r.err)
		}
	}
	honest := hmsclient.New(proxytest.DialFrom(t, "127.0.0.2", addr), wire.Buffered)
	if _, err := honest.Call(ctxT(t), "get_all_databases", hmsclient.Args()); err != nil {
		t.Fatalf("a newcomer once the calls were answered: %v; want served", err)
	}
}
