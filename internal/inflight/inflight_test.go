package inflight

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	b := New(100)
	ctx := context.Background()
	if err := b.Acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	if b.TryAcquire(50) {
		t.Fatal("TryAcquire(50) with 40 free succeeded; want refused")
	}
	if err := b.Acquire(ctx, 101); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Acquire(101) = %v; want ErrTooLarge", err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Acquire(ctx, 50) }()
	// The waiter is blocked until the first claim is released; Waits shows
	// it reached the blocking path, so the release below is what frees it.
	for b.Waits() == 0 {
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-got:
		t.Fatalf("Acquire(50) returned %v before anything was released", err)
	default:
	}
	b.Release(60)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if b.InUse() != 50 {
		t.Fatalf("InUse = %d; want 50", b.InUse())
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Acquire(cctx, 60); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire on a cancelled ctx = %v; want context.Canceled", err)
	}
	b.Release(50)
	if b.InUse() != 0 {
		t.Fatalf("InUse = %d after releasing all; want 0", b.InUse())
	}
}

func TestUnlimited(t *testing.T) {
	for _, b := range []*Budget{nil, New(0)} {
		if err := b.Acquire(context.Background(), 1<<40); err != nil || !b.TryAcquire(1<<40) {
			t.Fatalf("unlimited budget refused a claim: %v", err)
		}
		b.Release(1 << 40)
		b.Release(1 << 40)
	}
}
