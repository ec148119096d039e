package coherence

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
)

// TestBusOnCluster (issue 15, item 1): three nodes on a Redis Cluster of
// three primaries deliver to each other with acknowledgements, which
// needs every key of the group in one hash slot (XREAD over two streams,
// the transactions).
func TestBusOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	var nodes []*node
	for range 3 {
		nodes = append(nodes, run(t, fast(cl.Client(), "thrift://hms-a:9083,thrift://hms-b:9083"), nil))
	}
	for _, n := range nodes {
		waitFor(t, "peers known", func() bool { return len(n.bus.Peers()) == 2 && n.bus.Synced() })
	}
	for i, w := range nodes {
		want := []cache.Entity{{Level: cache.LevelTable, Cat: "hive", DB: "db", Table: string(rune('a' + i))}}
		if err := w.bus.Publish(context.Background(), want); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		for j, n := range nodes {
			if got, _ := n.snapshot(); j != i && !slices.Contains(got, want[0]) {
				t.Fatalf("node %d had not applied node %d's invalidation when its publish returned", j, i)
			}
		}
	}
	c := cl.Client()
	ctx := context.Background()
	b := nodes[0].bus
	slot := -1
	for _, k := range []string{b.key, b.ackKey, b.peerKey} {
		if n, err := c.Exists(ctx, k).Result(); err != nil || n != 1 {
			t.Fatalf("key %s: exists %d, %v", k, n, err)
		}
		s, err := c.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if slot >= 0 && int(s) != slot {
			t.Fatalf("key %s in slot %d, another of the group's in %d", k, s, slot)
		}
		slot = int(s)
	}
	for _, n := range nodes {
		if _, losses := n.snapshot(); len(losses) != 0 {
			t.Fatalf("a node flushed for %v", losses)
		}
	}
}

// TestBusSentinelLostTail (issue 15, item 1): a Sentinel failover that
// loses the tail of the stream (the replica lagged when the primary died)
// makes a reader that had not read that tail flush. The failover here is
// quicker than the heartbeat timeout, so no peer looks silent, and the
// reader's connection moves to the new primary without an error: only
// the writer's numbering shows what was lost.
func TestBusSentinelLostTail(t *testing.T) {
	var relay *redistest.Relay
	s := redistest.StartSentinel(t, time.Second, func(primary string) string {
		relay = redistest.NewRelay(t, primary)
		return relay.Addr
	})
	cfg := fast(s.Client(), "tail")
	cfg.HeartbeatTimeout = 20 * time.Second
	cfg.Logger = proxytest.Logger(t).With("node", "A")
	a := run(t, cfg, nil)
	cfg.Logger = proxytest.Logger(t).With("node", "B")
	b, stall := runStallable(t, cfg, s.Client())
	peersKnown(t, a, b)

	// B reads nothing more; the replica hears nothing more; A writes.
	stall.stall(t, "B's reads stalled")
	relay.Cut()
	lost := cache.Entity{Level: cache.LevelTable, Cat: "hive", DB: "db", Table: "lost"}
	ctx := context.Background()
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := a.bus.Publish(pctx, []cache.Entity{lost})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish while B is stalled: %v; want it waiting for B", err)
	}
	has := func(addr string) bool {
		rc := redis.NewClient(&redis.Options{Addr: addr})
		defer rc.Close()
		ents, err := rc.XRange(ctx, "hmsproxy:inval:tail", "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if m, _ := decode(e.Values["m"].(string)); slices.Contains(m.Ents, lost) {
				return true
			}
		}
		return false
	}
	if !has(s.Primary.Addr) {
		t.Fatal("the entry is not on the primary")
	}
	killed := time.Now()
	s.Primary.Stop()
	promoted := s.WaitFailover(killed, 30*time.Second)
	if has(s.Replica.Addr) {
		t.Fatal("the promoted replica has the entry: the test needs it lost")
	}

	_, before := b.snapshot()
	stall.release()
	stall.armed.Store(false)
	if !wait.Until(30*time.Second, func() bool { _, l := b.snapshot(); return len(l) > len(before) }) {
		st := a.bus.Stats()
		t.Fatalf("B did not flush within 30s; A: published %d, publish errors %d, synced %v; B received %d",
			st.Published.Load(), st.PublishErrors.Load(), a.bus.Synced(), b.bus.Stats().Received.Load())
	}
	flushed := time.Since(killed)
	if got, _ := b.snapshot(); slices.Contains(got, lost) {
		t.Fatal("B applied the lost entry: the test needs it lost")
	}
	waitFor(t, "A and B in sync after the failover", func() bool { return a.bus.Synced() && b.bus.Synced() })
	_, after := b.snapshot()
	t.Logf("primary killed; sentinels promoted the replica after %v; B flushed %v after the kill (for %v); both in sync %v after",
		promoted.Round(time.Millisecond), flushed.Round(time.Millisecond), after[len(before):], time.Since(killed).Round(time.Millisecond))
}
