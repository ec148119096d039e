package wire

import (
	"net"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
)

// tcpPair is a connected loopback pair: near is the side under test.
func tcpPair(t *testing.T) (near, far net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	near, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	far = wait.Recv(t, accepted, 5*time.Second, "accept")
	if far == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { near.Close(); far.Close() })
	return near, far
}

func TestPeek(t *testing.T) {
	tests := []struct {
		name string
		// arrange sets the pair up and returns the connection to peek at.
		arrange func(t *testing.T) net.Conn
		want    PeekResult
	}{
		{"open, nothing sent", func(t *testing.T) net.Conn {
			near, _ := tcpPair(t)
			return near
		}, PeekEmpty},
		{"a read deadline that has passed does not count", func(t *testing.T) net.Conn {
			near, _ := tcpPair(t)
			near.SetReadDeadline(time.Now().Add(-time.Second))
			return near
		}, PeekEmpty},
		{"bytes waiting", func(t *testing.T) net.Conn {
			near, far := tcpPair(t)
			far.Write([]byte{1, 2, 3})
			wait.Eventually(t, 5*time.Second, func() bool { return Peek(near) != PeekEmpty }, "bytes never arrived")
			return near
		}, PeekPending},
		{"peer closed", func(t *testing.T) net.Conn {
			near, far := tcpPair(t)
			far.Close()
			wait.Eventually(t, 5*time.Second, func() bool { return Peek(near) != PeekEmpty }, "close never seen")
			return near
		}, PeekClosed},
		{"closed on this side", func(t *testing.T) net.Conn {
			near, _ := tcpPair(t)
			near.Close()
			return near
		}, PeekFailed},
		{"not a socket", func(t *testing.T) net.Conn {
			a, b := net.Pipe()
			t.Cleanup(func() { a.Close(); b.Close() })
			return a
		}, PeekUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc := tc.arrange(t)
			if got := Peek(nc); got != tc.want {
				t.Fatalf("got %d; want %d", got, tc.want)
			}
		})
	}
	// A peek takes nothing: the bytes are still there to read.
	near, far := tcpPair(t)
	far.Write([]byte("abc"))
	wait.Eventually(t, 5*time.Second, func() bool { return Peek(near) == PeekPending }, "bytes never arrived")
	Peek(near)
	buf := make([]byte, 3)
	near.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := near.Read(buf); n != 3 || string(buf) != "abc" {
		t.Fatalf("read after peeks: got %q, %v; want abc", buf[:n], err)
	}
}
