package coherence

import (
	"context"
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
