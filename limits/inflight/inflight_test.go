package inflight

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
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
	wait.Eventually(t, 5*time.Second, func() bool { return b.Waits() > 0 }, "Acquire(50) blocks")
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

// TestFinisher (issue 22): readers claim bytes as they arrive, so two
// partial messages can each hold part of the budget and wait for more.
// The oldest waiting reader then finishes on the reserve, and once it is
// done (and its bytes go) the next one does: none waits for good.
func TestFinisher(t *testing.T) {
	b := NewReserving(100, 60) // 40 shared, 60 reserved
	ctx := context.Background()
	var a, c Claimant
	if !b.TryGrow(&a, 20) || !b.TryGrow(&c, 20) {
		t.Fatal("claims within the shared part refused")
	}
	if b.TryGrow(&c, 1) {
		t.Fatal("a claim past the shared part succeeded; want it kept for the finisher")
	}
	// a waits first: it becomes the finisher and takes the reserve.
	if err := b.Grow(ctx, &a, 50); err != nil {
		t.Fatal(err)
	}
	if b.InUse() != 90 || b.Waits() != 1 {
		t.Fatalf("in use %d, waits %d; want 90, 1", b.InUse(), b.Waits())
	}
	// c must wait until a's message is read and its bytes released.
	got := make(chan error, 1)
	go func() { got <- b.Grow(ctx, &c, 30) }()
	wait.Eventually(t, 5*time.Second, func() bool { return b.Waits() >= 2 }, "Grow of c blocks")
	b.Finished(&a)
	select {
	case err := <-got:
		t.Fatalf("c's claim returned %v while a's bytes are still claimed", err)
	default:
	}
	if b.TryAcquire(1) {
		t.Fatal("a claim went before the waiting finisher")
	}
	b.Release(70) // a's call is over
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if b.InUse() != 50 {
		t.Fatalf("in use %d; want c's 50", b.InUse())
	}
	b.Finished(&c)
	b.Release(50)
	if !b.TryAcquire(40) || b.TryAcquire(1) {
		t.Fatal("with no finisher, claims that are not a reader's take the shared part only")
	}
}

// TestGrowGivesUp: a claim whose context ends leaves the queue, and the
// claims behind it go on.
func TestGrowGivesUp(t *testing.T) {
	b := New(100)
	ctx := context.Background()
	if err := b.Acquire(ctx, 80); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	big := make(chan error, 1)
	go func() { big <- b.Acquire(cctx, 50) }()
	wait.Eventually(t, 5*time.Second, func() bool { return b.Waits() >= 1 }, "the big Acquire blocks")
	small := make(chan error, 1)
	go func() { small <- b.Acquire(ctx, 10) }() // fits, but waits behind the head
	wait.Eventually(t, 5*time.Second, func() bool { return b.Waits() >= 2 }, "the small Acquire blocks")
	cancel()
	if err := <-big; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v; want context.Canceled", err)
	}
	if err := <-small; err != nil {
		t.Fatal(err)
	}
	if b.InUse() != 90 {
		t.Fatalf("in use %d; want 90", b.InUse())
	}
}
