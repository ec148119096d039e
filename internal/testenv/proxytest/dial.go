package proxytest

import (
	"net"
	"testing"
	"time"
)

// DialFrom connects to addr from the loopback address ip. On Linux every
// 127.0.0.x is this host and each is a distinct source address, which is
// what per-address limits and hostile-client tests need.
func DialFrom(t testing.TB, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// Accepted hands every connection l accepts to the returned channel until
// l is closed, which happens when the test ends (and the loop is waited
// for).
func Accepted(t testing.TB, l net.Listener) <-chan net.Conn {
	out := make(chan net.Conn, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			out <- c
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return out
}
