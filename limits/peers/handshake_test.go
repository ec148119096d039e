package peers

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
)

// hello is a handshake that passes once the client writes one byte.
func hello(ctx context.Context, nc net.Conn) (net.Conn, error) {
	stop := context.AfterFunc(ctx, func() { nc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	var b [1]byte
	if _, err := io.ReadFull(nc, b[:]); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return nc, nil
}

func waitUntil(d time.Duration, cond func() bool) bool {
	return wait.Until(d, cond)
}

func handshaking(t *testing.T, cfg HandshakeConfig) (*Listener, <-chan net.Conn) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Handshaking(inner, hello, cfg)
	return l, proxytest.Accepted(t, l)
}

// TestHandshakingBounds (issue 22): handshakes run off the accept loop;
// one host holds at most PerAddress of them, its further connections
// closed at once; at Max the oldest is cut; a client of another host is
// heard at once whatever the silent ones do.
func TestHandshakingBounds(t *testing.T) {
	for _, tc := range []struct {
		name            string
		cfg             HandshakeConfig
		silent          int
		wantInProgress  int
		wantRefused     uint64
		wantCut         uint64
		firstCut, lastN bool // the first silent connection closed; the last one closed
	}{
		{"per address", HandshakeConfig{Max: 100, PerAddress: 4}, 10, 4, 6, 0, false, true},
		{"oldest cut", HandshakeConfig{Max: 4, PerAddress: 100}, 6, 4, 0, 2, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, accepted := handshaking(t, tc.cfg)
			// Every silent connection is in progress, refused or cut.
			seen := func() int { s := l.Stats(); return s.InProgress + int(s.RefusedPerAddress) + int(s.Cut) }
			var silent []net.Conn
			for i := range tc.silent {
				silent = append(silent, proxytest.DialFrom(t, "127.0.0.1", l.Addr().String()))
				// One at a time, so that the oldest is known.
				if !waitUntil(5*time.Second, func() bool { return seen() == i+1 }) {
					t.Fatalf("the accept loop took %d of %d connections: it waits on handshakes", seen(), i+1)
				}
			}
			if !waitUntil(5*time.Second, func() bool {
				s := l.Stats()
				return s.InProgress == tc.wantInProgress && s.RefusedPerAddress == tc.wantRefused && s.Cut == tc.wantCut
			}) {
				t.Fatalf("got %+v; want %d in progress, %d refused, %d cut", l.Stats(), tc.wantInProgress, tc.wantRefused, tc.wantCut)
			}
			if got := wait.Closed(silent[0], 100*time.Millisecond); got != tc.firstCut {
				t.Errorf("first silent connection closed: %v; want %v", got, tc.firstCut)
			}
			if got := wait.Closed(silent[len(silent)-1], 100*time.Millisecond); got != tc.lastN {
				t.Errorf("last silent connection closed: %v; want %v", got, tc.lastN)
			}
			nc := proxytest.DialFrom(t, "127.0.0.2", l.Addr().String())
			if _, err := nc.Write([]byte{1}); err != nil {
				t.Fatal(err)
			}
			select {
			case c := <-accepted:
				if c.RemoteAddr().String() != nc.LocalAddr().String() {
					t.Errorf("accepted %v; want the honest client %v", c.RemoteAddr(), nc.LocalAddr())
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the honest client was not accepted")
			}
		})
	}
}

// TestHandshakingDeadline: a handshake that does not finish in time is
// cut, and its connection closed.
func TestHandshakingDeadline(t *testing.T) {
	var results = make(chan error, 1)
	l, _ := handshaking(t, HandshakeConfig{Timeout: 50 * time.Millisecond, OnResult: func(err error) { results <- err }})
	nc := proxytest.DialFrom(t, "127.0.0.1", l.Addr().String())
	select {
	case err := <-results:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("got %v; want the deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a silent handshake outlived its deadline")
	}
	if !wait.Closed(nc, time.Second) {
		t.Error("the connection of a handshake past its deadline is open")
	}
	if s := l.Stats(); s.InProgress != 0 {
		t.Errorf("got %+v; want none in progress", s)
	}
}
