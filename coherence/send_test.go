package coherence

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/redistest"
)

// TestPublishSettledBySilence: a writer waiting for a peer that falls
// silent is answered when the peer's silence begins (it bypasses its
// cache from then on), not at the deadline a heartbeat timeout after the
// append, and without counting an acknowledgement timeout. Nothing but
// the waiter's timer can settle it then.
func TestPublishSettledBySilence(t *testing.T) {
	r := redistest.Start(t)
	relay := redistest.NewRelay(t, r.Addr)
	cfg := Config{Client: r.Client(), Group: "silence", Heartbeat: 50 * time.Millisecond, HeartbeatTimeout: time.Second, PeerGone: time.Hour}
	a := run(t, cfg, nil)
	cfg.Client = relay.Client()
	run(t, cfg, nil)
	waitFor(t, "peers known", func() bool { return len(a.bus.Peers()) == 1 && a.bus.Synced() })

	relay.Cut()
	cut := time.Now()
	// Publish half a timeout into the silence: the peer falls silent about
	// half a timeout later, the deadline comes a whole timeout later.
	time.Sleep(cfg.HeartbeatTimeout / 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*cfg.HeartbeatTimeout)
	defer cancel()
	if err := a.bus.Publish(ctx, []cache.Entity{tbl}); err != nil {
		t.Fatalf("publish with a silent peer: %v; want nil once the peer is silent", err)
	}
	if took := time.Since(cut); took > cfg.HeartbeatTimeout+cfg.HeartbeatTimeout/4 {
		t.Fatalf("publish answered %v after the peer was cut; want about the heartbeat timeout %v, when it fell silent", took, cfg.HeartbeatTimeout)
	}
	if n := a.bus.Stats().AckTimeouts.Load(); n != 0 {
		t.Fatalf("%d acknowledgement timeouts; the silent peer was not live", n)
	}
}

// TestConcurrentPublishReadYourWrites: with many writers publishing at
// once, so that batches of them share entries and several batches wait
// for acknowledgements together, no Publish returns before every live
// peer applied its invalidation, even while one peer lags the other, and
// the peers see no gap in the numbering.
func TestConcurrentPublishReadYourWrites(t *testing.T) {
	r := redistest.Start(t)
	a := run(t, fast(r.Client(), "cryw"), nil)
	fastPeer := run(t, fast(r.Client(), "cryw"), nil)
	slowPeer := run(t, fast(r.Client(), "cryw"), &node{applyHook: func() { time.Sleep(2 * time.Millisecond) }})
	waitFor(t, "peers known", func() bool { return len(a.bus.Peers()) == 2 })

	const writers, each = 16, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				e := cache.Entity{Level: cache.LevelTable, Cat: "hive", DB: "db", Table: fmt.Sprintf("w%d_%d", w, i)}
				if err := a.bus.Publish(context.Background(), []cache.Entity{e}); err != nil {
					errs <- err
					return
				}
				for _, p := range []*node{fastPeer, slowPeer} {
					if got, _ := p.snapshot(); !slices.Contains(got, e) {
						errs <- fmt.Errorf("publish of %v returned before a peer applied it", e)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := a.bus.Stats().AckTimeouts.Load(); n != 0 {
		t.Fatalf("%d publishes timed out waiting for live peers", n)
	}
	if n := a.bus.Stats().Batches.Load(); n >= writers*each {
		t.Fatalf("%d writes in %d entries: no batch was shared, the test shows nothing of concurrent waits", writers*each, n)
	}
	for _, p := range []*node{fastPeer, slowPeer} {
		if _, losses := p.snapshot(); len(losses) != 0 {
			t.Fatalf("a peer flushed (%v): the numbering broke", losses)
		}
	}
}
