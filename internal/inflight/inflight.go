// Package inflight bounds the bytes that calls in flight hold across every
// connection of a process: requests being read and replies being held.
//
// One Budget is shared by the client side and the upstream side, so that
// many large requests and many large replies together cannot grow memory
// past what the operator configured. Acquire blocks (back-pressure) rather
// than failing while the bytes would fit once others are released; only a
// single claim larger than the whole budget fails at once.
package inflight

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// ErrTooLarge is returned for a claim that can never fit the budget.
var ErrTooLarge = errors.New("inflight: claim larger than the whole budget")

// Budget is a byte budget shared by all connections. The zero value and a
// nil *Budget are unlimited.
type Budget struct {
	max   int64
	sem   *semaphore.Weighted
	inUse atomic.Int64
	// waits counts Acquire calls that had to wait: the back-pressure an
	// operator sees as a metric.
	waits atomic.Uint64
}

// New returns a budget of max bytes; max <= 0 is unlimited.
func New(max int64) *Budget {
	if max <= 0 {
		return &Budget{}
	}
	return &Budget{max: max, sem: semaphore.NewWeighted(max)}
}

// Max is the configured budget, 0 when unlimited.
func (b *Budget) Max() int64 {
	if b == nil {
		return 0
	}
	return b.max
}

// Acquire claims n bytes, waiting until they fit or ctx ends.
func (b *Budget) Acquire(ctx context.Context, n int64) error {
	if b == nil || n <= 0 {
		return nil
	}
	if b.sem == nil {
		b.inUse.Add(n)
		return nil
	}
	if n > b.max {
		return fmt.Errorf("%w: %d bytes, budget %d", ErrTooLarge, n, b.max)
	}
	if !b.sem.TryAcquire(n) {
		b.waits.Add(1)
		if err := b.sem.Acquire(ctx, n); err != nil {
			return fmt.Errorf("inflight: waiting for %d bytes: %w", n, err)
		}
	}
	b.inUse.Add(n)
	return nil
}

// TryAcquire claims n bytes if they fit now.
func (b *Budget) TryAcquire(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	if b.sem == nil {
		b.inUse.Add(n)
		return true
	}
	if n > b.max || !b.sem.TryAcquire(n) {
		return false
	}
	b.inUse.Add(n)
	return true
}

// Release returns n bytes claimed earlier.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.inUse.Add(-n)
	if b.sem != nil {
		b.sem.Release(n)
	}
}

// InUse is the bytes claimed now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	return b.inUse.Load()
}

// Waits is how many claims had to wait for others to release.
func (b *Budget) Waits() uint64 {
	if b == nil {
		return 0
	}
	return b.waits.Load()
}
