// Package clocktest is a settable clock for tests of code that takes its
// time from a Now func.
package clocktest

import (
	"sync/atomic"
	"time"
)

// Clock is a time that moves only when a test moves it. It is safe for
// concurrent use.
type Clock struct{ ns atomic.Int64 }

// At is a clock that reads t.
func At(t time.Time) *Clock {
	c := &Clock{}
	c.ns.Store(t.UnixNano())
	return c
}

// Now is the clock's time; pass it where a Now func is taken.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Advance moves the clock forward by d (back, for a negative d).
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
