package cache

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/internal/redistest"
)

// node is one bus end with what it received.
type node struct {
	bus    *Bus
	mu     sync.Mutex
	got    []Entity
	losses []string
}

func (n *node) apply(ents []Entity) {
	n.mu.Lock()
	n.got = append(n.got, ents...)
	n.mu.Unlock()
}

func (n *node) lost(reason string) {
	n.mu.Lock()
	n.losses = append(n.losses, reason)
	n.mu.Unlock()
}

func (n *node) snapshot() ([]Entity, []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.got), slices.Clone(n.losses)
}

func startNodes(t *testing.T, r *redistest.Server, count int) []*node {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	nodes := make([]*node, count)
	for i := range nodes {
		b, err := NewBus(BusConfig{Client: r.Client(), Upstream: "u1", Block: 200 * time.Millisecond, Heartbeat: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		n := &node{bus: b}
		nodes[i] = n
		wg.Add(1)
		go func() { defer wg.Done(); b.Run(ctx, n.apply, n.lost) }()
	}
	waitFor(t, "nodes synced", func() bool {
		for _, n := range nodes {
			if !n.bus.Synced() {
				return false
			}
		}
		return true
	})
	return nodes
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBusDelivers(t *testing.T) {
	r := redistest.Start(t)
	nodes := startNodes(t, r, 3)
	want := []Entity{{Level: LevelTable, Cat: "hive", DB: "db", Table: "t"}, {Level: LevelAll}}
	if err := nodes[0].bus.Publish(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes[1:] {
		waitFor(t, "delivery", func() bool { got, _ := n.snapshot(); return len(got) == 2 })
		if got, _ := n.snapshot(); !slices.Equal(got, want) {
			t.Fatalf("node %d got %v; want %v", i+1, got, want)
		}
	}
	if got, _ := nodes[0].snapshot(); len(got) != 0 {
		t.Fatalf("publisher applied its own message: %v", got)
	}
}

// TestBusLagPercentiles publishes 1,000 invalidations and measures how
// long each took to reach the other nodes (goal p99 <= 20ms).
func TestBusLagPercentiles(t *testing.T) {
	r := redistest.Start(t)
	nodes := startNodes(t, r, 3)
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		if err := nodes[0].bus.Publish(ctx, []Entity{{Level: LevelTable, Cat: "hive", DB: "db", Table: "t"}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes[1:] {
		waitFor(t, "all delivered", func() bool { got, _ := n.snapshot(); return len(got) == 1000 })
	}
	lags := append(nodes[1].bus.Stats().Lags(), nodes[2].bus.Stats().Lags()...)
	slices.Sort(lags)
	p50, p99 := lags[len(lags)/2], lags[len(lags)*99/100]
	t.Logf("propagation lag over %d deliveries: p50 %v p99 %v max %v", len(lags), p50, p99, lags[len(lags)-1])
	if p99 > 200*time.Millisecond {
		t.Fatalf("p99 lag %v is far beyond the 20ms goal", p99)
	}
}

// TestBusRedisRestart: a node that lost Redis flushes, stops claiming to
// be in sync while it is down, and flushes again when it is back.
func TestBusRedisRestart(t *testing.T) {
	r := redistest.Start(t)
	nodes := startNodes(t, r, 2)
	r.Stop()
	waitFor(t, "nodes notice", func() bool { return !nodes[0].bus.Synced() && !nodes[1].bus.Synced() })
	r.Restart()
	waitFor(t, "resync", func() bool { return nodes[0].bus.Synced() && nodes[1].bus.Synced() })
	for i, n := range nodes {
		_, losses := n.snapshot()
		if len(losses) < 2 {
			t.Fatalf("node %d flushed %d times over an outage; want at least 2 (on loss and on return)", i, len(losses))
		}
	}
	// And it delivers again.
	nodes[0].bus.Publish(context.Background(), []Entity{{Level: LevelDatabase, Cat: "hive", DB: "x"}})
	waitFor(t, "delivery after restart", func() bool { got, _ := nodes[1].snapshot(); return len(got) == 1 })
}

// TestBusGap: a missing sequence number (a trimmed or lost entry) makes
// the reader flush.
func TestBusGap(t *testing.T) {
	r := redistest.Start(t)
	nodes := startNodes(t, r, 1)
	c := r.Client()
	add := func(seq uint64) {
		body, _ := json.Marshal(busMsg{Node: "other", Seq: seq, Time: time.Now().UnixNano(), Ents: []Entity{{Level: LevelTable, DB: "d", Table: "t"}}})
		if err := c.XAdd(context.Background(), &redis.XAddArgs{Stream: "hmsproxy:inval:u1", Values: []any{"m", body}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	add(1)
	add(2)
	waitFor(t, "two applied", func() bool { got, _ := nodes[0].snapshot(); return len(got) == 2 })
	before := nodes[0].bus.Stats().Loss("gap")
	add(5)
	waitFor(t, "gap flush", func() bool { return nodes[0].bus.Stats().Loss("gap") == before+1 })
}

// startOne runs one bus node on upstream u and waits for it to sync.
func startOne(t *testing.T, r *redistest.Server, u string) *node {
	t.Helper()
	b, err := NewBus(BusConfig{Client: r.Client(), Upstream: u, Block: 100 * time.Millisecond, Heartbeat: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{bus: b}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx, n.apply, n.lost) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "synced", b.Synced)
	return n
}

// TestBusTrimmed: entries trimmed away before a node read them make it
// flush, even when no later number reveals a gap.
func TestBusTrimmed(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	ctx := context.Background()
	for i := 0; i < 3; i++ { // history before the node starts
		c.XAdd(ctx, &redis.XAddArgs{Stream: "hmsproxy:inval:u2", Values: []any{"m", "{}"}})
	}
	n := startOne(t, r, "u2")
	// Five entries appended and trimmed in one transaction: the node can
	// only ever read the last one.
	pipe := c.TxPipeline()
	for i := uint64(1); i <= 5; i++ {
		body, _ := json.Marshal(busMsg{Node: "newcomer", Seq: i, Time: time.Now().UnixNano(), Ents: []Entity{{Level: LevelAll}}})
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: "hmsproxy:inval:u2", Values: []any{"m", body}})
	}
	pipe.XTrimMaxLen(ctx, "hmsproxy:inval:u2", 1)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "trim flush", func() bool { return n.bus.Stats().Loss("trimmed") > 0 })
}

// TestBusStreamReset: a Redis that lost its data without dropping the
// node's connection is noticed from the stream's own entry count.
func TestBusStreamReset(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		c.XAdd(ctx, &redis.XAddArgs{Stream: "hmsproxy:inval:u3", Values: []any{"m", "{}"}})
	}
	n := startOne(t, r, "u3")
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(busMsg{Node: "x", Seq: 1, Time: time.Now().UnixNano()})
	c.XAdd(ctx, &redis.XAddArgs{Stream: "hmsproxy:inval:u3", Values: []any{"m", body}})
	waitFor(t, "reset flush", func() bool { return n.bus.Stats().Loss("redis-reset") > 0 })
	waitFor(t, "resync", n.bus.Synced)
}
