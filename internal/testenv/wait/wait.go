// Package wait waits in tests for a condition or a value, so that a test
// waits as long as it must and no longer instead of sleeping.
//
// It imports only the standard library, so the tests of every package of
// the module, down to thrift/wire and filter, can use it. It offers no
// "never" helper: a test that proves nothing happened needs a seam that
// shows it could have happened (a hook, a counter, a channel), not a
// wait that ends in silence.
package wait

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
)

// poll bounds the pause between two checks of a condition: checks start
// 100µs apart and back off to this, so a fast condition is seen at once
// and a slow one costs little CPU on a small machine.
const poll = 10 * time.Millisecond

// Until checks cond until it returns true or timeout has passed, and
// reports whether it returned true. It suits goroutines other than the
// test's own, which must not call t.Fatal, and loops with their own
// failure message.
func Until(timeout time.Duration, cond func() bool) bool {
	return until(timeout, 100*time.Microsecond, poll, cond)
}

// Poll is Until for a condition that costs something to check (a call
// to a real metastore): it checks at most once per every.
func Poll(timeout, every time.Duration, cond func() bool) bool {
	return until(timeout, every, every, cond)
}

// until checks cond with pauses that double from first up to most.
func until(timeout, first, most time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	deadline := time.Now().Add(timeout)
	d := min(first, timeout)
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		<-t.C
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		d = min(2*d, most, left)
		t.Reset(d)
	}
}

// Eventually checks cond until it returns true; after timeout it fails
// the test with msg (a format and its arguments, or nothing). Call it
// from the test's goroutine.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msg ...any) {
	t.Helper()
	if !Until(timeout, cond) {
		t.Fatalf("not within %v: %s", timeout, describe(msg, "condition"))
	}
}

// Recv returns the next value from ch; after timeout it fails the test
// with msg. A closed channel yields its zero value at once, so Recv also
// waits for a close. Call it from the test's goroutine.
func Recv[T any](t testing.TB, ch <-chan T, timeout time.Duration, msg ...any) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		var zero T
		t.Fatalf("nothing received within %v: %s", timeout, describe(msg, fmt.Sprintf("%T", zero)))
		return zero
	}
}

// Closed waits up to timeout for the peer to close nc and reports
// whether it did (EOF, or a reset). It reads at most one byte: a byte
// that arrives, or the timeout, means nc is still open.
func Closed(nc net.Conn, timeout time.Duration) bool {
	nc.SetReadDeadline(time.Now().Add(timeout))
	var b [1]byte
	_, err := nc.Read(b[:])
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// describe formats msg: a format string and its arguments, or values
// printed with fmt.Sprint; what when msg is empty.
func describe(msg []any, what string) string {
	if len(msg) == 0 {
		return what
	}
	if f, ok := msg[0].(string); ok {
		return fmt.Sprintf(f, msg[1:]...)
	}
	return fmt.Sprint(msg...)
}
