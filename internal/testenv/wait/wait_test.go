package wait

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = strings.TrimSpace(fmt.Sprintf(format, args...))
}

func TestUntil(t *testing.T) {
	var n atomic.Int64
	if !Until(time.Second, func() bool { return n.Add(1) >= 5 }) {
		t.Fatal("Until: got false; want true after 5 checks")
	}
	if got := n.Load(); got != 5 {
		t.Fatalf("checks: got %d; want 5", got)
	}
	start := time.Now()
	if Until(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("Until of a false condition: got true")
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("Until returned after %v; want at least its timeout 20ms", d)
	}
}

func TestPoll(t *testing.T) {
	var n atomic.Int64
	start := time.Now()
	if Poll(35*time.Millisecond, 10*time.Millisecond, func() bool { n.Add(1); return false }) {
		t.Fatal("Poll of a false condition: got true")
	}
	// Checks at 0, 10, 20, 30 and 35ms.
	if got := n.Load(); got > 5 || time.Since(start) < 35*time.Millisecond {
		t.Fatalf("Poll: %d checks in %v; want at most 5, after at least 35ms", got, time.Since(start))
	}
}

func TestEventually(t *testing.T) {
	r := &recorder{TB: t}
	Eventually(r, time.Second, func() bool { return true }, "never shown")
	if r.failed != "" {
		t.Fatalf("a true condition failed: %q", r.failed)
	}
	Eventually(r, time.Millisecond, func() bool { return false }, "queue of %d empty", 3)
	if want := "not within 1ms: queue of 3 empty"; r.failed != want {
		t.Fatalf("got %q; want %q", r.failed, want)
	}
}

func TestRecv(t *testing.T) {
	r := &recorder{TB: t}
	ch := make(chan int, 1)
	ch <- 7
	if got := Recv(r, ch, time.Second); got != 7 || r.failed != "" {
		t.Fatalf("got %d (%q); want 7", got, r.failed)
	}
	Recv(r, ch, time.Millisecond, "the reply")
	if want := "nothing received within 1ms: the reply"; r.failed != want {
		t.Fatalf("got %q; want %q", r.failed, want)
	}
	r.failed = ""
	Recv(r, ch, time.Millisecond)
	if want := "nothing received within 1ms: int"; r.failed != want {
		t.Fatalf("got %q; want %q", r.failed, want)
	}
	done := make(chan struct{})
	close(done)
	r.failed = ""
	Recv(r, done, time.Millisecond)
	if r.failed != "" {
		t.Fatalf("a closed channel failed: %q", r.failed)
	}
}

func TestClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		peer func(net.Conn) // what the other end does
		want bool
	}{
		{"closed", func(c net.Conn) { c.Close() }, true},
		{"silent", func(net.Conn) {}, false},
		{"writes", func(c net.Conn) { c.Write([]byte("x")) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			go tc.peer(b)
			if got := Closed(a, 50*time.Millisecond); got != tc.want {
				t.Fatalf("Closed = %t; want %t", got, tc.want)
			}
		})
	}
}
