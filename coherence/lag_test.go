package coherence

import (
	"context"
	"sync"
	"testing"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
)

// TestLaggingWriterWaits (promise 2): a writer whose own reader fell
// behind has not heard its peers lately, but they are alive: it must not
// take them for silent and answer before they applied its invalidation,
// since they still serve their caches.
func TestLaggingWriterWaits(t *testing.T) {
	r := redistest.Start(t)
	cfg := fast(r.Client(), "lag")
	w, stall := runStallable(t, cfg, r.Client())
	var slow sync.Once
	gate := make(chan struct{})
	p := run(t, fast(r.Client(), "lag"), &node{applyHook: func() { slow.Do(func() { <-gate }) }})
	peersKnown(t, w, p)
	t.Cleanup(func() { stall.release(); close(gate) })

	// The writer reads nothing for longer than the heartbeat timeout,
	// while the peer keeps heartbeating: the peer looks silent to it.
	stall.stall(t, "the writer's reads stalled")
	waitFor(t, "the live peer silent to the writer", func() bool { return silent(w, p) })
	if !p.bus.Synced() {
		t.Fatal("the peer is not in sync; the test needs it serving")
	}
	err := w.bus.Publish(context.Background(), []cache.Entity{tbl})
	if got, _ := p.snapshot(); len(got) == 0 && p.bus.Synced() {
		t.Fatalf("publish returned (%v) while the peer, in sync, had not applied the invalidation", err)
	}
}
