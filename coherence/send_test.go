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

// TestLaggingReaderWaitsForLivePeer: a writer whose own reader lags has
// not read its peer's heartbeats either, so the peer only looks silent;
// taken for silent, the peer, live and serving, had not applied the
// write when the writer answered. The writer waits until its reader has
// read past the moment the peer would have fallen silent.
func TestLaggingReaderWaitsForLivePeer(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	stall := &stallReads{gate: make(chan struct{}), appended: make(chan struct{}, 1)}
	c.AddHook(stall)
	a := run(t, fast(c, "join"), nil)
	b := run(t, fast(r.Client(), "join"), &node{applyHook: func() { time.Sleep(100 * time.Millisecond) }})
	waitFor(t, "peers known", func() bool { return len(a.bus.Peers()) == 1 && len(b.bus.Peers()) == 1 })

	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(stall.gate) }) })
	stall.armed.Store(true)
	waitFor(t, "the writer's reader stalled", stall.stalled.Load)
	// Long enough for the peer to look silent to the writer, whose reader
	// reads none of its heartbeats.
	time.Sleep(a.bus.timeout + 2*a.bus.cfg.Heartbeat)
	go func() {
		<-stall.appended // the write is on the stream: let the reader catch up
		stall.armed.Store(false)
		release.Do(func() { close(stall.gate) })
	}()
	err := a.bus.Publish(context.Background(), []cache.Entity{tbl})
	if got, _ := b.snapshot(); !slices.Contains(got, tbl) {
		t.Fatalf("publish returned (%v) before the live peer applied the write", err)
	}
}
