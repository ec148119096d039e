package coherence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
)

// node is one bus end with what it received; it implements Cache.
type node struct {
	bus *Bus
	// applyHook, if set, runs before an invalidation is recorded: a test
	// slows a peer down with it.
	applyHook func()
	// onApply and onDrop, if set, see each invalidation before it is
	// recorded and each flush: a test holds the reader there, or asks
	// the bus what it claims at that moment.
	onApply func(ents []cache.Entity)
	onDrop  func(reason string)
	mu      sync.Mutex // guards got, losses
	got     []cache.Entity
	losses  []string
}

func (n *node) ApplyRemote(ents []cache.Entity) {
	if n.applyHook != nil {
		n.applyHook()
	}
	if n.onApply != nil {
		n.onApply(ents)
	}
	n.mu.Lock()
	n.got = append(n.got, ents...)
	n.mu.Unlock()
}

func (n *node) DropAll(reason string) {
	if n.onDrop != nil {
		n.onDrop(reason)
	}
	n.mu.Lock()
	n.losses = append(n.losses, reason)
	n.mu.Unlock()
}

func (n *node) snapshot() ([]cache.Entity, []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.got), slices.Clone(n.losses)
}

// fast is a config with short timings for tests.
func fast(c redis.UniversalClient, group string) Config {
	return Config{Client: c, Group: group, Heartbeat: 50 * time.Millisecond, HeartbeatTimeout: 200 * time.Millisecond, PeerGone: time.Hour}
}

// run starts a node with cfg and waits until it is in sync.
func run(t *testing.T, cfg Config, n *node) *node {
	t.Helper()
	return runTuned(t, cfg, n, nil)
}

// silent reports whether w takes its peer p for silent: not heard for a
// heartbeat timeout, by w's own reckoning.
func silent(w, p *node) bool {
	for _, peer := range w.bus.Peers() {
		if peer.Node == p.bus.NodeID() {
			return peer.Silent
		}
	}
	return false
}

// peersKnown waits until each of nodes knows all the others as peers.
func peersKnown(t *testing.T, nodes ...*node) {
	t.Helper()
	waitFor(t, "peers known", func() bool {
		for _, n := range nodes {
			if len(n.bus.Peers()) != len(nodes)-1 {
				return false
			}
		}
		return true
	})
}

// runTuned is run with the bus adjusted by tune, if any, before it starts.
func runTuned(t *testing.T, cfg Config, n *node, tune func(*Bus)) *node {
	t.Helper()
	if n == nil {
		n = &node{}
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(b)
	}
	n.bus = b
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx, n) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "synced", b.Synced)
	return n
}

func startNodes(t *testing.T, r *redistest.Server, count int) []*node {
	t.Helper()
	nodes := make([]*node, count)
	for i := range nodes {
		nodes[i] = run(t, fast(r.Client(), "u1"), nil)
	}
	for _, n := range nodes { // every node has heard every other
		waitFor(t, "peers known", func() bool { return len(n.bus.Peers()) == count-1 && n.bus.Synced() })
	}
	return nodes
}

var waitFor = proxytest.Eventually

var tbl = cache.Entity{Level: cache.LevelTable, Cat: "hive", DB: "db", Table: "t"}

func TestBusDelivers(t *testing.T) {
	r := redistest.Start(t)
	nodes := startNodes(t, r, 3)
	want := []cache.Entity{tbl, {Level: cache.LevelAll}}
	if err := nodes[0].bus.Publish(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes[1:] {
		if got, _ := n.snapshot(); !slices.Equal(got, want) {
			t.Fatalf("node %d got %v when Publish returned; want %v", i+1, got, want)
		}
	}
	if got, _ := nodes[0].snapshot(); len(got) != 0 {
		t.Fatalf("publisher applied its own message: %v", got)
	}
}

// TestPublishWaitsForPeers (issue 10, item 5): Publish returns only once
// every live peer has applied the invalidation, even a slow one.
func TestPublishWaitsForPeers(t *testing.T) {
	r := redistest.Start(t)
	a := run(t, fast(r.Client(), "ryw"), nil)
	// The peer holds each invalidation until the test lets it go: while it
	// holds one, the publish must not have returned.
	applying, proceed := make(chan struct{}, 1), make(chan struct{})
	b := run(t, fast(r.Client(), "ryw"), &node{applyHook: func() { applying <- struct{}{}; <-proceed }})
	t.Cleanup(func() { close(proceed) }) // before b stops
	peersKnown(t, a, b)
	for i := range 5 {
		done := make(chan error, 1)
		go func() { done <- a.bus.Publish(context.Background(), []cache.Entity{tbl}) }()
		wait.Recv(t, applying, 5*time.Second, "the peer starts applying")
		select {
		case err := <-done:
			t.Fatalf("publish %d returned (%v) while the peer was still applying it", i+1, err)
		default:
		}
		proceed <- struct{}{}
		if err := wait.Recv(t, done, 5*time.Second, "publish returns"); err != nil {
			t.Fatal(err)
		}
		if got, _ := b.snapshot(); len(got) != i+1 {
			t.Fatalf("after publish %d returned the peer had applied %d invalidations; want %d", i+1, len(got), i+1)
		}
	}
	if n := a.bus.Stats().AckTimeouts.Load(); n != 0 {
		t.Fatalf("%d publishes timed out waiting for a live peer", n)
	}
}

// TestNewNodeIsWaitedFor: a node that joined is waited for by a writer
// that has not read its hello yet (the registry read with the append).
func TestNewNodeIsWaitedFor(t *testing.T) {
	r := redistest.Start(t)
	cfg := fast(r.Client(), "join")
	cfg.HeartbeatTimeout = time.Second
	a, stall := runStallable(t, cfg, r.Client())
	stall.stall(t, "the writer's reads stalled") // the writer reads nothing more for now
	cfg.Client = r.Client()
	// A peer deliberately slow to apply: a sleep is the point.
	b := run(t, cfg, &node{applyHook: func() { time.Sleep(30 * time.Millisecond) }})
	if len(a.bus.Peers()) != 0 {
		t.Fatal("the writer heard the newcomer; the test needs it not to")
	}
	done := make(chan error, 1)
	go func() { done <- a.bus.Publish(context.Background(), []cache.Entity{tbl}) }()
	proxytest.Recv(t, stall.appended, "the invalidation appended")
	select {
	case err := <-done:
		t.Fatalf("publish returned (%v) before the newcomer applied it", err)
	default:
	}
	stall.release() // now it may read the acknowledgement
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, _ := b.snapshot(); len(got) != 1 {
		t.Fatalf("the newcomer had applied %d invalidations when the writer's publish returned; want 1", len(got))
	}
}

// stallReads blocks its client's stream reads while armed, until gate is
// closed (a writer that has not read a newcomer's hello), and tells when
// an invalidation was appended: an entry that carries entities, whether
// or not a heartbeat shared its append.
type stallReads struct {
	gate     chan struct{}
	open     sync.Once // closes gate
	armed    atomic.Bool
	stalled  atomic.Bool
	appended chan struct{}
}

// runCuttable starts two nodes with cfg: a on cfg.Client, and cut, whose
// connection to r runs through a relay the test can cut. It returns once
// a knows cut and serves its cache.
func runCuttable(t *testing.T, r *redistest.Server, cfg Config) (a, cut *node, relay *redistest.Relay) {
	t.Helper()
	relay = redistest.NewRelay(t, r.Addr)
	a = run(t, cfg, nil)
	cfg.Client = relay.Client()
	cut = run(t, cfg, nil)
	waitFor(t, "peers known", func() bool { return len(a.bus.Peers()) == 1 && a.bus.Synced() })
	return a, cut, relay
}

// runStallable starts a node with cfg on c, whose stream reads the
// returned stallReads holds once armed. The reads are released when the
// test ends, before the node's stop, which would wait for a held read.
func runStallable(t *testing.T, cfg Config, c *redis.Client) (*node, *stallReads) {
	t.Helper()
	s := &stallReads{gate: make(chan struct{}), appended: make(chan struct{}, 1)}
	c.AddHook(s)
	cfg.Client = c
	n := run(t, cfg, nil)
	t.Cleanup(s.release)
	return n, s
}

// stall holds the client's stream reads from now on and waits until one
// is held.
func (s *stallReads) stall(t *testing.T, what string) {
	t.Helper()
	s.armed.Store(true)
	waitFor(t, what, s.stalled.Load)
}

// release lets the held reads go, and those after them; it may be called
// again.
func (s *stallReads) release() { s.open.Do(func() { close(s.gate) }) }

func (s *stallReads) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *stallReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "xread" && s.armed.Load() {
			s.stalled.Store(true)
			<-s.gate
		}
		return next(ctx, cmd)
	}
}
func (s *stallReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			args := c.Args()
			if c.Name() != "xadd" || len(args) < 2 || args[1] != "hmsproxy:inval:join" || !s.armed.Load() {
				continue
			}
			raw, _ := args[len(args)-1].(string)
			if m, derr := decode(raw); derr == nil && len(m.Ents) > 0 {
				select {
				case s.appended <- struct{}{}:
				default:
				}
			}
		}
		return err
	}
}

// TestBusLagPercentiles publishes 1,000 invalidations and measures how
// long each took to reach the other nodes, and how long publishes held
// their writer.
func TestBusLagPercentiles(t *testing.T) {
	r := redistest.Start(t)
	nodes := startNodes(t, r, 3)
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		if err := nodes[0].bus.Publish(ctx, []cache.Entity{tbl}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes[1:] {
		waitFor(t, "all delivered", func() bool { got, _ := n.snapshot(); return len(got) == 1000 })
	}
	lags := append(nodes[1].bus.Stats().Lags(), nodes[2].bus.Stats().Lags()...)
	slices.Sort(lags)
	waits := nodes[0].bus.Stats().PublishWaits()
	slices.Sort(waits)
	t.Logf("propagation lag over %d deliveries: p50 %v p99 %v max %v; publish held the writer p50 %v p99 %v",
		len(lags), lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1], waits[len(waits)/2], waits[len(waits)*99/100])
}

// TestGroupCommit (issue 10, item 7): publishes queued while an append is
// on its way share the next entry, in order and without a gap.
func TestGroupCommit(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	hold := &holdPipeline{gate: make(chan struct{})}
	c.AddHook(seeCmds(hold.hold))
	a := run(t, fast(c, "gc"), nil)
	b := run(t, fast(r.Client(), "gc"), nil)
	waitFor(t, "peers known", func() bool { return len(a.bus.Peers()) == 1 })

	// Hold the sender in one append, queue the publishes behind it.
	applied := b.bus.Stats().Applied.Load()
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(hold.gate) }) })
	hold.armed.Store(true)
	const writes = 100
	var wg sync.WaitGroup
	errs := make(chan error, writes+1)
	wg.Go(func() { errs <- a.bus.Publish(context.Background(), []cache.Entity{tbl}) })
	waitFor(t, "the sender held", hold.held.Load)
	for i := range writes {
		wg.Go(func() {
			errs <- a.bus.Publish(context.Background(), []cache.Entity{{Level: cache.LevelTable, Cat: "hive", DB: "db", Table: strconv.Itoa(i)}})
		})
	}
	waitFor(t, "publishes queued", func() bool { return len(a.bus.reqs) >= writes })
	release.Do(func() { close(hold.gate) })
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, losses := b.snapshot()
	if len(got) != writes+1 {
		t.Fatalf("peer applied %d invalidations; want %d", len(got), writes+1)
	}
	if n := b.bus.Stats().Applied.Load() - applied; n > 2 {
		t.Fatalf("%d concurrent publishes arrived in %d entries; want them merged into at most 2", writes, n)
	}
	if len(losses) != 0 {
		t.Fatalf("peer flushed (%v): group commit broke the numbering", losses)
	}
}

// holdPipeline blocks the first append after it is armed until gate is
// closed: a seam to make publishes pile up behind one append.
type holdPipeline struct {
	gate  chan struct{}
	armed atomic.Bool
	held  atomic.Bool
}

func (h *holdPipeline) hold(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if c.Name() == "xadd" && h.armed.CompareAndSwap(true, false) {
			h.held.Store(true)
			<-h.gate
		}
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
	before, _ := nodes[1].snapshot()
	if err := nodes[0].bus.Publish(context.Background(), []cache.Entity{{Level: cache.LevelDatabase, Cat: "hive", DB: "x"}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := nodes[1].snapshot(); len(got) != len(before)+1 {
		t.Fatal("no delivery after restart")
	}
}

func addRaw(t *testing.T, c *redis.Client, stream string, m message) {
	t.Helper()
	body, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.XAdd(context.Background(), &redis.XAddArgs{Stream: stream, Values: []any{"m", body}}).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestBusGap: a missing sequence number (a trimmed or lost entry) makes
// the reader flush.
func TestBusGap(t *testing.T) {
	r := redistest.Start(t)
	n := run(t, fast(r.Client(), "u1"), nil)
	c := r.Client()
	add := func(seq uint64) {
		addRaw(t, c, "hmsproxy:inval:u1", message{Node: "other", Seq: seq, Time: time.Now().UnixNano(), Ents: []cache.Entity{tbl}})
	}
	add(1)
	add(2)
	waitFor(t, "two applied", func() bool { got, _ := n.snapshot(); return len(got) == 2 })
	before := n.bus.Stats().Loss("gap")
	add(5)
	waitFor(t, "gap flush", func() bool { return n.bus.Stats().Loss("gap") == before+1 })
}

// TestBusTrimmed: entries trimmed away before a node read them make it
// flush, even when no later number reveals a gap.
func TestBusTrimmed(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	ctx := context.Background()
	for i := 0; i < 3; i++ { // history before the node starts
		addRaw(t, c, "hmsproxy:inval:u2", message{Node: "old", Seq: uint64(i + 1), Time: time.Now().UnixNano()})
	}
	cfg := fast(r.Client(), "u2")
	cfg.Heartbeat, cfg.HeartbeatTimeout, cfg.PeerGone = time.Hour, 2*time.Hour, 3*time.Hour
	n := run(t, cfg, nil)
	// Five entries appended and trimmed in one transaction: the node can
	// only ever read the last one.
	pipe := c.TxPipeline()
	for i := uint64(1); i <= 5; i++ {
		body, _ := message{Node: "newcomer", Seq: i, Time: time.Now().UnixNano(), Ents: []cache.Entity{{Level: cache.LevelAll}}}.encode()
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
		addRaw(t, c, "hmsproxy:inval:u3", message{Node: "old", Seq: uint64(i + 1), Time: time.Now().UnixNano()})
	}
	cfg := fast(r.Client(), "u3")
	cfg.Heartbeat, cfg.HeartbeatTimeout, cfg.PeerGone = time.Hour, 2*time.Hour, 3*time.Hour
	n := run(t, cfg, nil)
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	addRaw(t, c, "hmsproxy:inval:u3", message{Node: "x", Seq: 1, Time: time.Now().UnixNano()})
	waitFor(t, "reset flush", func() bool { return n.bus.Stats().Loss("redis-reset") > 0 })
	waitFor(t, "resync", n.bus.Synced)
}

// TestRunReturnsCause (issue 11, item 6): Run says why it stopped, and
// refuses to run twice.
func TestRunReturnsCause(t *testing.T) {
	r := redistest.Start(t)
	b, err := New(fast(r.Client(), "run"))
	if err != nil {
		t.Fatal(err)
	}
	cause := errors.New("test over")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, &node{}) }()
	waitFor(t, "synced", b.Synced)
	if err := b.Run(ctx, &node{}); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Run: got %v; want ErrRunning", err)
	}
	cancel(cause)
	if err := <-done; !errors.Is(err, cause) {
		t.Fatalf("Run returned %v; want the context's cause", err)
	}
	if err := b.Publish(context.Background(), nil); !errors.Is(err, ErrStopped) {
		t.Fatalf("Publish after Run: got %v; want ErrStopped", err)
	}
}

// TestGroupNameNormalised (issue 10, item 3): nodes that list the same
// metastores in another order or spelling share one group name and
// layout; another metastore makes another layout.
func TestGroupNameNormalised(t *testing.T) {
	a := []string{"thrift://HMS-1.example.com:9083", "hms-2.example.com:9083"}
	b := []string{" thrift://hms-2.EXAMPLE.com:9083/", "THRIFT://hms-1.example.com", "thrift://hms-1.example.com:9083"}
	if GroupName(a) != GroupName(b) {
		t.Fatalf("group names differ: %q and %q", GroupName(a), GroupName(b))
	}
	if want := "thrift://hms-1.example.com:9083,thrift://hms-2.example.com:9083"; GroupName(a) != want {
		t.Fatalf("got %q; want %q", GroupName(a), want)
	}
	if Layout(a) != Layout(b) {
		t.Fatal("layouts differ for one group")
	}
	if Layout(a) == Layout([]string{"thrift://hms-1.example.com:9083", "thrift://hms-3.example.com:9083"}) {
		t.Fatal("layouts equal for different groups")
	}
}

// TestLayoutAlarm (issue 10, item 3): a peer on this group's stream that
// announces another layout raises the alarm; one with the same does not.
func TestLayoutAlarm(t *testing.T) {
	r := redistest.Start(t)
	cfg := fast(r.Client(), "shared")
	cfg.Layout = Layout([]string{"thrift://a:9083"})
	a := run(t, cfg, nil)
	cfg.Client = r.Client()
	same := run(t, cfg, nil)
	waitFor(t, "peer heard", func() bool { return len(a.bus.Peers()) == 1 })
	if n := a.bus.Stats().LayoutAlarms.Load(); n != 0 {
		t.Fatalf("%d alarms for a peer with the same layout", n)
	}
	cfg.Client, cfg.Layout = r.Client(), Layout([]string{"thrift://b:9083"})
	other := run(t, cfg, nil)
	waitFor(t, "alarm", func() bool { return a.bus.Stats().LayoutAlarms.Load() == 1 })
	for _, p := range a.bus.Peers() {
		if p.LayoutMismatch != (p.Node == other.bus.NodeID()) {
			t.Fatalf("peer %s: mismatch %v", p.Node, p.LayoutMismatch)
		}
	}
	// The other node with the first layout reads the newcomer on its own.
	waitFor(t, "the other node's alarm", func() bool { return same.bus.Stats().LayoutAlarms.Load() == 1 })
}

// TestPeerSilent (issue 10, item 4): a peer cut from Redis stops the
// others' caches within the heartbeat timeout; when it is heard again
// they flush and serve again. The cut node itself stops too, and its
// publishes are answered within the timeout.
func TestPeerSilent(t *testing.T) {
	r := redistest.Start(t)
	a, cut, relay := runCuttable(t, r, fast(r.Client(), "p"))

	relay.Cut()
	at := time.Now()
	err := cut.bus.Publish(context.Background(), []cache.Entity{tbl})
	took := time.Since(at)
	if !errors.Is(err, ErrNotPublished) {
		t.Fatalf("publish from the cut node: got %v; want ErrNotPublished", err)
	}
	if timeout := cut.bus.cfg.HeartbeatTimeout; took > timeout+50*time.Millisecond {
		t.Fatalf("publish from the cut node held its writer %v; want at most the timeout %v", took, timeout)
	}
	// By the time the writer got its answer, the peer bypasses.
	if a.bus.Synced() {
		t.Fatal("peer still serves its cache when the cut node answered its writer")
	}
	if cut.bus.Synced() {
		t.Fatal("cut node still serves its cache")
	}
	waitFor(t, "silent noticed", func() bool { return a.bus.Stats().Loss("peer-silent") == 1 })

	relay.Restore()
	waitFor(t, "back in sync", func() bool { return a.bus.Synced() && cut.bus.Synced() })
	if a.bus.Stats().Loss("peer-returned") == 0 && a.bus.Stats().Loss("gap") == 0 {
		t.Fatal("the peer did not flush when the silent node came back")
	}
}

// TestPeerGone: a peer silent for PeerGone is forgotten, with a flush, and
// the cache is served again; a peer that stops cleanly is forgotten at
// once, without a flush.
func TestPeerGone(t *testing.T) {
	r := redistest.Start(t)
	cfg := fast(r.Client(), "g")
	cfg.PeerGone = 500 * time.Millisecond
	a, _, relay := runCuttable(t, r, cfg)
	relay.Cut()
	waitFor(t, "bypass", func() bool { return !a.bus.Synced() })
	waitFor(t, "gone", func() bool { return a.bus.Stats().Loss("peer-gone") == 1 })
	waitFor(t, "serving again", a.bus.Synced)
	if n := len(a.bus.Peers()); n != 0 {
		t.Fatalf("%d peers after the silent one was declared gone", n)
	}

	// A clean stop.
	b, err := New(fast(r.Client(), "g"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx, &node{}) }()
	waitFor(t, "peer known", func() bool { return len(a.bus.Peers()) == 1 })
	cancel()
	<-done
	waitFor(t, "peer left", func() bool { return len(a.bus.Peers()) == 0 })
	if !a.bus.Synced() {
		t.Fatal("a clean stop made the peer bypass its cache")
	}
}

// leaving is a config whose peers tell a clean leave from a silence
// even on a loaded machine: a heartbeat timeout of ten heartbeats.
func leaving(c redis.UniversalClient, group string) Config {
	return Config{Client: c, Group: group, Heartbeat: 100 * time.Millisecond, HeartbeatTimeout: time.Second, PeerGone: time.Hour}
}

// stopsWithGoodbye runs a node b beside a peer a, stops it after arm
// (which may make it leave without a goodbye), and reports whether a then
// forgot b cleanly (true) or took it for silent (false).
func stopsWithGoodbye(t *testing.T, r *redistest.Server, cfg Config, arm func(b *Bus)) bool {
	t.Helper()
	a := run(t, cfg, nil)
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx, &node{}) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "peer known", func() bool { return len(a.bus.Peers()) == 1 && a.bus.Synced() })
	arm(b)
	cancel()
	<-done
	var clean bool
	waitFor(t, "the peer to leave or fall silent", func() bool {
		clean = len(a.bus.Peers()) == 0
		return clean || a.bus.Stats().Loss("peer-silent") == 1
	})
	if clean && a.bus.Stats().Loss("peer-silent") != 0 {
		t.Fatal("a peer that left cleanly was also taken for silent")
	}
	return clean
}

// TestAbandonLeavesSilently: a node that may have let writes through
// unpublished (Abandon) leaves without a goodbye, so its peer bypasses
// its cache; without Abandon the same stop is a clean one the peer
// forgets at once, still serving.
func TestAbandonLeavesSilently(t *testing.T) {
	for _, abandon := range []bool{false, true} {
		t.Run(fmt.Sprintf("abandon=%v", abandon), func(t *testing.T) {
			r := redistest.Start(t)
			clean := stopsWithGoodbye(t, r, leaving(r.Client(), "ab"), func(b *Bus) {
				if abandon {
					b.Abandon()
				}
			})
			if clean == abandon {
				t.Fatalf("abandon=%v: peer forgot the node cleanly: %v", abandon, clean)
			}
		})
	}
}

// TestLatePublishLeavesSilently: a write that comes after the stopping
// sender's last drain is carried by nothing, so the node leaves without a
// goodbye and the writer is answered only once the peers stopped hearing
// it, as for a failed append.
func TestLatePublishLeavesSilently(t *testing.T) {
	r := redistest.Start(t)
	cfg := leaving(r.Client(), "late")
	res := make(chan error, 1)
	var took time.Duration
	clean := stopsWithGoodbye(t, r, cfg, func(b *Bus) {
		b.onClosing = func() {
			go func() {
				at := time.Now()
				err := b.Publish(context.Background(), []cache.Entity{tbl})
				took = time.Since(at)
				res <- err
			}()
			waitFor(t, "the late publish to be seen", b.abandoned.Load)
		}
	})
	if clean {
		t.Fatal("the node said goodbye though a write came after its last drain")
	}
	err := <-res
	if !errors.Is(err, ErrNotPublished) || !errors.Is(err, ErrStopped) {
		t.Fatalf("late publish: got %v; want ErrNotPublished and ErrStopped", err)
	}
	if took < cfg.HeartbeatTimeout {
		t.Fatalf("late publish answered after %v, before the peers stop hearing the node (%v)", took, cfg.HeartbeatTimeout)
	}
}
