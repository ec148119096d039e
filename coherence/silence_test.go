package coherence

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
)

// The tests of this file force, with seams and no sleeps, the orderings in
// which a writer was answered while a peer that had not applied its
// invalidation still served its cache (promise 2; issue 10, item 5: the
// stale get_table of TestClusterReadYourWritesReal).

// written is the invalidation the writer publishes in these tests.
var written = cache.Entity{Level: cache.LevelTable, Cat: "hive", DB: "db", Table: "written"}

// silenceConfig has a heartbeat timeout long enough that a peer held in
// the middle of applying an entry still counts itself in step with the
// stream for as long as a test needs to ask it, on a loaded machine too.
func silenceConfig(c redis.UniversalClient, group string) Config {
	return Config{Client: c, Group: group, Heartbeat: 50 * time.Millisecond, HeartbeatTimeout: time.Second, PeerGone: time.Hour}
}

// TestSkippedPeerCatchesUpBeforeServing: a peer whose append was slow
// enough that the writer read past its silence is skipped, and the writer
// answers without its acknowledgement. When the peer's append lands it
// is heard again, but it must not serve its cache before its reader has
// applied everything before that append, the skipped write included. It
// did: published anew, it served the old value while its reader was still
// behind the write.
func TestSkippedPeerCatchesUpBeforeServing(t *testing.T) {
	r := redistest.Start(t)
	cfg := silenceConfig(r.Client(), "skip")
	a := run(t, cfg, nil)
	b, hold, gate := gatedPeer(t, r, cfg)
	peersKnown(t, a, b)

	hold.armed.Store(true)
	waitFor(t, "the peer's append held", hold.held.Load)
	waitFor(t, "the writer to read past the peer's silence", func() bool { return takenForSilent(a.bus, b.bus.NodeID()) })
	// Settled by the silence (nil), or on a crawling machine at the
	// deadline, when the peer's reader, held below, has fallen behind too.
	err := a.bus.Publish(context.Background(), []cache.Entity{written})
	t.Logf("publish: %v", err)
	// The peer's reader has the entry and is held applying it.
	waitFor(t, "the peer's reader at the write", gate.reached.Load)
	released := time.Now()
	hold.open()
	waitFor(t, "the peer to publish promptly again", func() bool { return b.bus.published.Load() > released.UnixNano() })
	if b.bus.Synced() {
		t.Fatal("the skipped peer serves its cache again while its reader has not applied the write the writer answered without it")
	}
	if b.bus.Stats().Rejoins.Load() == 0 {
		t.Fatal("no rejoin counted")
	}
	gate.open()
	waitFor(t, "the peer back in sync", b.bus.Synced)
	if got, _ := b.snapshot(); !slices.Contains(got, written) {
		t.Fatalf("the peer serves again without having applied %v", written)
	}
}

// TestWriterReadsPastItsEntryBeforeSkipping: a writer whose reader read
// past a peer's silence and then stalled has not read the peer's return,
// which came before the writer's own entry. Skipping the peer then left
// it serving, its reader not yet at the write: the writer may take a peer
// for silent only once its own reader has read past its own entry too.
func TestWriterReadsPastItsEntryBeforeSkipping(t *testing.T) {
	r := redistest.Start(t)
	cfg := silenceConfig(r.Client(), "past")
	a, stall := runStallable(t, cfg, r.Client())
	b, hold, _ := gatedPeer(t, r, cfg)
	peersKnown(t, a, b)

	hold.armed.Store(true)
	waitFor(t, "the peer's append held", hold.held.Load)
	waitFor(t, "the writer to read past the peer's silence", func() bool { return takenForSilent(a.bus, b.bus.NodeID()) })
	stall.stall(t, "the writer's reads stalled")
	hold.open()
	waitFor(t, "the peer serving again", b.bus.Synced)

	publishApplied(t, a, b, "the peer")
}

// publishApplied publishes written from a and fails the test if the
// publish returned while peer b, in sync, had not applied it.
func publishApplied(t *testing.T, a, b *node, peer string) {
	t.Helper()
	err := a.bus.Publish(context.Background(), []cache.Entity{written})
	if got, _ := b.snapshot(); !slices.Contains(got, written) && b.bus.Synced() {
		t.Fatalf("publish returned (%v) while %s, in sync, had not applied the write", err, peer)
	}
}

// TestSilentPeerSkippedOnceEntryRead: with a peer silent, a write is
// answered once the writer's reader has read its entry, not at the next
// confirmation of the Redis run id (which bounds how far the reader
// counts itself caught up, once per read interval: up to a second a
// write while a crashed peer is not yet gone). The confirmations fail
// here, so a writer that waited for one is answered at the deadline.
func TestSilentPeerSkippedOnceEntryRead(t *testing.T) {
	r := redistest.Start(t)
	relay := redistest.NewRelay(t, r.Addr)
	cfg := silenceConfig(r.Client(), "entry")
	ac := r.Client()
	noInfo := &failInfo{}
	ac.AddHook(failCmds(noInfo.refuse))
	cfg.Client = ac
	a := run(t, cfg, nil)
	cfg.Client = relay.Client()
	b := run(t, cfg, nil)
	peersKnown(t, a, b)

	relay.Cut()
	waitFor(t, "the writer to read past the peer's silence", func() bool { return takenForSilent(a.bus, b.bus.NodeID()) })
	noInfo.armed.Store(true)
	if err := a.bus.Publish(context.Background(), []cache.Entity{written}); err != nil {
		t.Fatalf("publish with a silent peer: %v; want it answered once the writer read its entry", err)
	}
	if n := a.bus.Stats().AckTimeouts.Load(); n != 0 {
		t.Fatalf("%d acknowledgement timeouts; the peer was silent", n)
	}
}

// failInfo fails its client's INFO while armed: the reader cannot
// confirm the Redis run id, and reads on.
type failInfo struct{ armed atomic.Bool }

// refuse is its failCmds seam.
func (f *failInfo) refuse(cmd redis.Cmder) error {
	if cmd.Name() == "info" && f.armed.Load() {
		return errors.New("test: info refused")
	}
	return nil
}

// TestReturningPeerAppliedBeforeServed: a writer that could not append
// answers after the heartbeat timeout, when its peers have stopped
// serving. When its entry lands after all, a peer must apply it (and
// flush for the silence) before it counts the writer heard again: in the
// other order it served its cache in between, the answered write not yet
// applied.
func TestReturningPeerAppliedBeforeServed(t *testing.T) {
	r := redistest.Start(t)
	cfg := silenceConfig(r.Client(), "return")
	cfg.HeartbeatTimeout = 500 * time.Millisecond
	ac, hold := holdingClient(r, cfg)
	cfg.Client = ac
	a := run(t, cfg, nil)
	t.Cleanup(hold.open)
	var mu sync.Mutex // guards servedAt
	var servedAt []string
	b := &node{}
	b.onApply = func(ents []cache.Entity) {
		if slices.Contains(ents, written) && b.bus.Synced() {
			mu.Lock()
			servedAt = append(servedAt, "applying the write")
			mu.Unlock()
		}
	}
	b.onDrop = func(reason string) {
		if reason == "peer-returned" && b.bus.Synced() {
			mu.Lock()
			servedAt = append(servedAt, "flushing for the writer's silence")
			mu.Unlock()
		}
	}
	cfg.Client = r.Client()
	run(t, cfg, b)
	peersKnown(t, a, b)

	hold.armed.Store(true)
	waitFor(t, "the writer's append held", hold.held.Load)
	waitFor(t, "the peer to notice the writer silent", func() bool { return b.bus.Stats().Loss("peer-silent") > 0 })
	if err := a.bus.Publish(context.Background(), []cache.Entity{written}); !errors.Is(err, ErrNotPublished) {
		t.Fatalf("publish held behind an append: got %v; want ErrNotPublished", err)
	}
	hold.open() // the write lands after its writer got the answer
	waitFor(t, "the peer to apply the write", func() bool { got, _ := b.snapshot(); return slices.Contains(got, written) })
	mu.Lock()
	defer mu.Unlock()
	if len(servedAt) > 0 {
		t.Fatalf("the peer served its cache while %v, after the writer's client had its answer", servedAt)
	}
}

// TestReturnedGonePeerIsWaitedFor: a peer forgotten as gone that comes
// back registers with its hello and serves once it reads that back. A
// writer that has not read the hello yet finds it in the registry and
// must wait for it like any newcomer; it skipped it as gone, answering
// while the peer served without the write.
func TestReturnedGonePeerIsWaitedFor(t *testing.T) {
	r := redistest.Start(t)
	relay := redistest.NewRelay(t, r.Addr)
	cfg := fast(r.Client(), "gone")
	cfg.HeartbeatTimeout, cfg.PeerGone = 500*time.Millisecond, time.Second
	a, stall := runStallable(t, cfg, r.Client())
	cfg.Client = relay.Client()
	gate := newApplyGate(written)
	b := run(t, cfg, &node{onApply: gate.onApply})
	t.Cleanup(gate.open)
	peersKnown(t, a, b)

	relay.Cut()
	waitFor(t, "the peer declared gone", func() bool { return a.bus.Stats().Loss("peer-gone") == 1 })
	stall.stall(t, "the writer's reads stalled")
	relay.Restore()
	waitFor(t, "the peer back in sync", b.bus.Synced)

	publishApplied(t, a, b, "the returned peer")
}

// TestGoneFlushBeforeServing: a node that forgets a silent peer as gone
// serves its cache again, but only after dropping it: what it loaded
// while the peer was silent may miss the peer's writes.
func TestGoneFlushBeforeServing(t *testing.T) {
	r := redistest.Start(t)
	relay := redistest.NewRelay(t, r.Addr)
	cfg := fast(r.Client(), "goneflush")
	cfg.PeerGone = 500 * time.Millisecond
	var servedAtFlush atomic.Bool
	b := &node{}
	b.onDrop = func(reason string) {
		if reason == "peer-gone" && b.bus.Synced() {
			servedAtFlush.Store(true)
		}
	}
	run(t, cfg, b)
	cfg.Client = relay.Client()
	run(t, cfg, nil)
	waitFor(t, "peer known", func() bool { return len(b.bus.Peers()) == 1 && b.bus.Synced() })

	relay.Cut()
	waitFor(t, "the peer declared gone", func() bool { return b.bus.Stats().Loss("peer-gone") == 1 })
	if servedAtFlush.Load() {
		t.Fatal("the node served its cache again before dropping what it may have loaded while the peer was silent")
	}
}

// takenForSilent reports whether w's reader has read past the moment the
// peer node would fall silent without hearing it.
func takenForSilent(w *Bus, node string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.peers[node]
	return p != nil && time.Unix(0, w.caughtUp.Load()).Sub(p.heard) >= w.timeout
}

// holdAppends holds its client's first append to the stream key after it
// is armed until gate is closed: a node whose heartbeat is late.
type holdAppends struct {
	key   string
	gate  chan struct{}
	once  sync.Once
	armed atomic.Bool
	held  atomic.Bool
}

// holdingClient is a client of r that holds its appends to cfg's stream
// while hold is armed.
func holdingClient(r *redistest.Server, cfg Config) (*redis.Client, *holdAppends) {
	c := r.Client()
	hold := &holdAppends{key: Key("hmsproxy", cfg.Group, "inval", false), gate: make(chan struct{})}
	c.AddHook(hold)
	return c, hold
}

// gatedPeer runs a node of cfg's group whose appends hold holds and
// whose apply of written waits at gate; both open when the test ends.
func gatedPeer(t *testing.T, r *redistest.Server, cfg Config) (*node, *holdAppends, *applyGate) {
	t.Helper()
	c, hold := holdingClient(r, cfg)
	cfg.Client = c
	gate := newApplyGate(written)
	b := run(t, cfg, &node{onApply: gate.onApply})
	t.Cleanup(gate.open)
	t.Cleanup(hold.open)
	return b, hold, gate
}

func (h *holdAppends) open() { h.once.Do(func() { close(h.gate) }) }

func (h *holdAppends) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *holdAppends) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *holdAppends) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "xadd" && len(c.Args()) > 1 && c.Args()[1] == h.key && h.armed.CompareAndSwap(true, false) {
				h.held.Store(true)
				<-h.gate
			}
		}
		return next(ctx, cmds)
	}
}

// applyGate holds a node's reader when it applies an entry carrying ent,
// until opened.
type applyGate struct {
	ent     cache.Entity
	reached atomic.Bool
	gate    chan struct{}
	once    sync.Once
}

func newApplyGate(ent cache.Entity) *applyGate {
	return &applyGate{ent: ent, gate: make(chan struct{})}
}

func (g *applyGate) onApply(ents []cache.Entity) {
	if slices.Contains(ents, g.ent) {
		g.reached.Store(true)
		<-g.gate
	}
}

func (g *applyGate) open() { g.once.Do(func() { close(g.gate) }) }
