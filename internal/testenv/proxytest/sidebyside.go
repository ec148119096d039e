package proxytest

import (
	"context"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
)

// SideBySide times n calls on each of two sides, a and c, alternating
// them and which side goes first, so that both see the same machine and
// load: the way this project measures a ratio in one run. call(i) makes
// call i of a side. It returns each side's latencies in call order, and
// stops at the first error.
func SideBySide(n int, a, c func(i int) error) (la, lc []time.Duration, err error) {
	la, lc = make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		for k := 0; k < 2; k++ {
			call, out := a, &la
			if (i+k)%2 == 1 {
				call, out = c, &lc
			}
			start := time.Now()
			if err := call(i); err != nil {
				return la, lc, err
			}
			*out = append(*out, time.Since(start))
		}
	}
	return la, lc, nil
}

// SideBySideCalls is SideBySide of the same call, method with args, on
// two clients; the test fails on an error.
func SideBySideCalls(t testing.TB, n int, a, c *hmsclient.Client, method string, args []byte) (la, lc []time.Duration) {
	t.Helper()
	ctx := context.Background()
	on := func(cl *hmsclient.Client) func(int) error {
		return func(int) error { _, err := cl.Call(ctx, method, args); return err }
	}
	la, lc, err := SideBySide(n, on(a), on(c))
	if err != nil {
		t.Fatal(err)
	}
	return la, lc
}
