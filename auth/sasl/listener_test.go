package sasl

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/kdctest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
)

// countingListener counts the connections the listener under a Listener
// hands it: a seam that shows whether the accept loop runs.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// serveListener runs Listen over a counting loopback listener and hands
// every connection it returns to the channel, until the test ends.
func serveListener(t *testing.T, srv *Server, cfg ListenerConfig) (*countingListener, *Listener, <-chan net.Conn) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: inner}
	l := Listen(cl, srv, cfg)
	return cl, l, proxytest.Accepted(t, l)
}

// waitUntil waits up to d for cond; false if it never held.
func waitUntil(d time.Duration, cond func() bool) bool {
	return wait.Until(d, cond)
}

// TestSilentHandshakesDelayNoOne guards issue 22: 200 silent connections
// to a Kerberos listener (64 handshakes at a time, 10 s each) made an
// honest client wait 29.5 s. The accept loop never waits on handshakes,
// and one address's silent connections hold at most its share: an
// honest client from another address is authenticated at once.
func TestSilentHandshakesDelayNoOne(t *testing.T) {
	b := newBed(t, 0)
	alice := b.client(t, "alice", kdctest.Alice)
	cl, l, conns := serveListener(t, b.server, ListenerConfig{HandshakeTimeout: 10 * time.Second, MaxHandshakes: 64})
	addr := l.Addr().String()
	for range 200 {
		proxytest.DialFrom(t, "127.0.0.1", addr)
	}
	if !waitUntil(5*time.Second, func() bool { return cl.accepted.Load() >= 200 }) {
		t.Errorf("the accept loop took %d of 200 silent connections within 5s (a handshake's deadline is 10s): it waits on handshakes", cl.accepted.Load())
	}

	nc := proxytest.DialFrom(t, "127.0.0.2", addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := alice.Handshake(ctx, nc, kdctest.Proxy, ""); err != nil {
		t.Fatalf("an honest client's handshake behind 200 silent ones: %v after %v", err, time.Since(start).Round(time.Millisecond))
	}
	select {
	case c := <-conns:
		if p := c.(*Conn).Peer(); p.Principal != kdctest.Alice {
			t.Errorf("accepted %+v; want alice", p)
		}
	case <-ctx.Done():
		t.Fatalf("the honest client's connection was not accepted within 5s")
	}
	t.Logf("honest handshake behind 200 silent connections: %v", time.Since(start).Round(time.Millisecond))
}

// TestHandshakeBounds (issue 22): one address holds at most
// MaxHandshakesPerAddress handshakes, the rest of its connections are
// closed at once; at MaxHandshakes the oldest handshake is cut so that a
// newcomer is always heard.
func TestHandshakeBounds(t *testing.T) {
	b := newBed(t, 0)
	alice := b.client(t, "alice", kdctest.Alice)

	t.Run("per address", func(t *testing.T) {
		_, l, _ := serveListener(t, b.server, ListenerConfig{MaxHandshakesPerAddress: 16})
		var conns []net.Conn
		for range 50 {
			conns = append(conns, proxytest.DialFrom(t, "127.0.0.1", l.Addr().String()))
		}
		if !waitUntil(5*time.Second, func() bool { s := l.Stats(); return s.InProgress == 16 && s.RefusedPerAddress == 34 }) {
			t.Fatalf("got %+v; want 16 in progress, 34 refused", l.Stats())
		}
		if !wait.Closed(conns[49], time.Second) || wait.Closed(conns[0], 10*time.Millisecond) {
			t.Error("want the connections past the 16th closed, the first kept")
		}
	})

	t.Run("oldest cut", func(t *testing.T) {
		_, l, conns := serveListener(t, b.server, ListenerConfig{MaxHandshakes: 4, MaxHandshakesPerAddress: 100})
		var silent []net.Conn
		for range 4 {
			silent = append(silent, proxytest.DialFrom(t, "127.0.0.1", l.Addr().String()))
			n := len(silent)
			if !waitUntil(5*time.Second, func() bool { return l.Stats().InProgress == n }) {
				t.Fatalf("got %+v; want %d in progress", l.Stats(), n)
			}
		}
		nc := proxytest.DialFrom(t, "127.0.0.2", l.Addr().String())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := alice.Handshake(ctx, nc, kdctest.Proxy, ""); err != nil {
			t.Fatalf("a newcomer at MaxHandshakes: %v", err)
		}
		select {
		case <-conns:
		case <-ctx.Done():
			t.Fatal("the newcomer's connection was not accepted")
		}
		if !wait.Closed(silent[0], time.Second) {
			t.Error("the oldest handshake was not cut")
		}
		if wait.Closed(silent[1], 10*time.Millisecond) {
			t.Error("a handshake other than the oldest was cut")
		}
		if s := l.Stats(); s.Cut != 1 {
			t.Errorf("got %+v; want 1 cut", s)
		}
	})
}

// TestAnnouncedMessageGrowsWithItsBytes (issue 22): a handshake message
// is held as its bytes arrive, not as announced, so a client announcing
// 256 KiB and sending nothing holds almost nothing while its handshake
// waits out its deadline.
func TestAnnouncedMessageGrowsWithItsBytes(t *testing.T) {
	in := append([]byte{byte(StatusStart), 0, 3, 0xff, 0xff}, "GSSAPI"...) // announces 256 KiB - 1, sends 6
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := readMessage(bytes.NewReader(in))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v; want io.ErrUnexpectedEOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<10 {
		t.Errorf("allocated %d bytes for a message of 6 bytes announced as 256 KiB", got)
	}
	st, b, err := readMessage(bytes.NewReader(append([]byte{byte(StatusStart), 0, 0, 0, 6}, "GSSAPI"...)))
	if err != nil || st != StatusStart || string(b) != "GSSAPI" {
		t.Errorf("a whole message: %v %q %v", st, b, err)
	}
}
