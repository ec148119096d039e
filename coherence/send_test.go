package coherence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

// TestPublishSettledBySilence: a writer waiting for a peer that falls
// silent is answered when the peer's silence begins (it bypasses its
// cache from then on), not at the deadline a heartbeat timeout after the
// append, and without counting an acknowledgement timeout. Nothing but
// the waiter's timer can settle it then.
func TestPublishSettledBySilence(t *testing.T) {
	r := redistest.Start(t)
	cfg := silenceConfig(r.Client(), "silence")
	a, _, relay := runCuttable(t, r, cfg)

	relay.Cut()
	cut := time.Now()
	// Publish half a timeout into the silence, as the writer reckons it
	// (since it last heard the peer): the peer falls silent half a
	// timeout later, the deadline comes a whole timeout later.
	waitFor(t, "half a timeout of silence", func() bool {
		ps := a.bus.Peers()
		return len(ps) == 1 && time.Since(ps[0].Heard) >= cfg.HeartbeatTimeout/2
	})
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
	// A peer deliberately slow to apply: a sleep is the point.
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

// TestLaggingReaderWaitsForLivePeer: a writer whose own reader lags has
// not read its peer's heartbeats either, so the peer only looks silent;
// taken for silent, the peer, live and serving, had not applied the
// write when the writer answered. The writer waits until its reader has
// read past the moment the peer would have fallen silent.
func TestLaggingReaderWaitsForLivePeer(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	a, stall := runStallable(t, fast(c, "join"), c)
	// A peer deliberately slow to apply: a sleep is the point.
	b := run(t, fast(r.Client(), "join"), &node{applyHook: func() { time.Sleep(100 * time.Millisecond) }})
	peersKnown(t, a, b)

	stall.stall(t, "the writer's reader stalled")
	// Until the peer looks silent to the writer, whose reader reads none
	// of its heartbeats.
	waitFor(t, "the live peer silent to the writer", func() bool { return silent(a, b) })
	go func() {
		<-stall.appended // the write is on the stream: let the reader catch up
		stall.armed.Store(false)
		stall.release()
	}()
	err := a.bus.Publish(context.Background(), []cache.Entity{tbl})
	if got, _ := b.snapshot(); !slices.Contains(got, tbl) {
		t.Fatalf("publish returned (%v) before the live peer applied the write", err)
	}
}

// countAppends counts the appends of invalidation-stream entries: a seam
// for the round trips publishes cost.
type countAppends struct{ n atomic.Int64 }

func (c *countAppends) count(cmds ...redis.Cmder) {
	for _, cmd := range cmds {
		if cmd.Name() == "xadd" && strings.Contains(fmt.Sprint(cmd.Args()...), `"e":`) {
			c.n.Add(1)
		}
	}
}

// seeCmds is a Redis hook that shows each command, alone or in a
// pipeline, to a test's seam before it goes.
type seeCmds func(cmds ...redis.Cmder)

func (f seeCmds) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f seeCmds) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		f(cmd)
		return next(ctx, cmd)
	}
}
func (f seeCmds) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		f(cmds...)
		return next(ctx, cmds)
	}
}

// failCmds is a Redis hook that fails each command sent alone for which
// it returns an error, instead of sending it; pipelines go untouched.
type failCmds func(cmd redis.Cmder) error

func (f failCmds) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f failCmds) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := f(cmd); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
func (f failCmds) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestGroupCommitWhileUnacknowledged (issue 10, item 7): writes that come
// while an earlier batch waits for a peer's acknowledgement are held back
// and then cost one append, one Redis round trip, together; none of them
// is answered before the peer applied its own invalidation.
func TestGroupCommitWhileUnacknowledged(t *testing.T) {
	r := redistest.Start(t)
	cfg := Config{Client: r.Client(), Group: "held", Heartbeat: time.Second, HeartbeatTimeout: 5 * time.Second, PeerGone: time.Hour}
	const writes = 50
	// only the acknowledgement (or a heartbeat) ends the hold
	hb := newHeldBed(t, r, cfg, time.Minute)
	a, p, gate, inApply, held, appends := hb.a, hb.p, hb.gate, hb.inApply, hb.held, hb.appends
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(gate) }) })

	errs := make(chan error, writes+1)
	var answered atomic.Int64
	publish := func(e cache.Entity) {
		err := a.bus.Publish(context.Background(), []cache.Entity{e})
		answered.Add(1)
		if got, _ := p.snapshot(); err == nil && !slices.Contains(got, e) {
			err = fmt.Errorf("publish of %v answered before the peer applied it", e)
		}
		errs <- err
	}
	var wg sync.WaitGroup
	wg.Go(func() { publish(tbl) })
	<-inApply // the first batch waits for the peer, which is stuck applying it
	before := appends.n.Load()
	for i := range writes {
		wg.Go(func() {
			publish(cache.Entity{Level: cache.LevelTable, Cat: "hive", DB: "db", Table: "held" + strconv.Itoa(i)})
		})
	}
	for n := 0; n < writes; {
		select {
		case n = <-held:
		case <-time.After(10 * time.Second):
			t.Fatalf("the sender holds %d writes; want %d", n, writes)
		}
	}
	if n := answered.Load(); n != 0 {
		t.Fatalf("%d writes answered while the peer had applied none", n)
	}
	if n := appends.n.Load() - before; n != 0 {
		t.Fatalf("%d appends while the writes were held", n)
	}
	release.Do(func() { close(gate) })
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := appends.n.Load() - before; n != 1 {
		t.Fatalf("%d held writes took %d appends; want 1", writes, n)
	}
	if got, losses := p.snapshot(); len(got) != writes+1 || len(losses) != 0 {
		t.Fatalf("peer applied %d invalidations, flushed %v; want %d, none", len(got), losses, writes+1)
	}
}

// TestHeldWritesGoOut: a write held back behind a batch whose peer does
// not acknowledge is appended after Bus.hold, or with the next heartbeat,
// whichever comes first; it does not wait for the acknowledgement, nor
// for the other way out, which each case puts far away.
func TestHeldWritesGoOut(t *testing.T) {
	const within = 3 * time.Second // the other way out comes after 10s
	for _, tc := range []struct {
		name      string
		hold      time.Duration
		heartbeat time.Duration
	}{
		{"hold over", 50 * time.Millisecond, 10 * time.Second},
		{"heartbeat", time.Minute, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := redistest.Start(t)
			cfg := Config{Client: r.Client(), Group: "out", Heartbeat: tc.heartbeat, HeartbeatTimeout: 30 * time.Second, PeerGone: time.Hour}
			hb := newHeldBed(t, r, cfg, tc.hold)
			a, gate, inApply, held, appends := hb.a, hb.gate, hb.inApply, hb.held, hb.appends
			var wg sync.WaitGroup
			t.Cleanup(wg.Wait) // after the gate opens: cleanups run last first
			t.Cleanup(func() { close(gate) })

			wg.Go(func() { a.bus.Publish(context.Background(), []cache.Entity{tbl}) })
			proxytest.Recv(t, inApply, "the first batch applied by the peer")
			// A late write is held while the first batch waits. One that
			// the sender took together with a heartbeat goes out at once,
			// unheld, and proves nothing here: write another.
			var before int64
			for try := 0; ; try++ {
				before = appends.n.Load()
				wg.Go(func() {
					a.bus.Publish(context.Background(), []cache.Entity{{Level: cache.LevelTable, Cat: "hive", DB: "db", Table: fmt.Sprint("late", try)}})
				})
				if heldOrAppended(t, held, func() bool { return appends.n.Load() != before }) {
					break
				}
				if try == 5 {
					t.Fatal("every late write went out with a heartbeat, unheld")
				}
			}
			if !wait.Until(within, func() bool { return appends.n.Load() != before }) {
				t.Fatalf("the held write was not appended within %v while the first batch waits", within)
			}
		})
	}
}

// heldBed is a writer and a peer of cfg's group whose first apply is
// held: the peer tells inApply and waits until gate is closed, which is
// the test's to do. The writer holds late writes for hold while a batch
// waits, and tells held how many it holds; appends counts its appends.
type heldBed struct {
	a, p          *node
	gate, inApply chan struct{}
	held          chan int
	appends       *countAppends
}

func newHeldBed(t *testing.T, r *redistest.Server, cfg Config, hold time.Duration) *heldBed {
	t.Helper()
	hb := &heldBed{gate: make(chan struct{}), inApply: make(chan struct{}, 1), held: make(chan int, 1024), appends: &countAppends{}}
	var first sync.Once
	hb.p = run(t, cfg, &node{applyHook: func() {
		first.Do(func() { hb.inApply <- struct{}{}; <-hb.gate })
	}})
	wc := r.Client()
	wc.AddHook(seeCmds(hb.appends.count))
	cfg.Client = wc
	hb.a = runTuned(t, cfg, nil, func(b *Bus) {
		b.hold = hold
		b.onHold = func(n int) { hb.held <- n }
	})
	peersKnown(t, hb.a, hb.p)
	return hb
}

// heldOrAppended waits until the sender holds a write (true) or an
// append went out without one being held (false).
func heldOrAppended(t *testing.T, held <-chan int, appended func() bool) bool {
	t.Helper()
	for end := time.Now().Add(proxytest.Timeout); time.Now().Before(end); {
		select {
		case <-held:
			return true
		case <-time.After(2 * time.Millisecond):
			if appended() {
				select { // held before its append, if at all
				case <-held:
					return true
				default:
					return false
				}
			}
		}
	}
	t.Fatalf("a late write was neither held nor appended within %v", proxytest.Timeout)
	return false
}

// failAck fails the first acknowledgement append after it is armed.
type failAck struct {
	armed  atomic.Bool
	failed atomic.Bool
}

// refuse is its failCmds seam.
func (f *failAck) refuse(cmd redis.Cmder) error {
	if cmd.Name() == "xadd" && strings.Contains(fmt.Sprint(cmd.Args()...), ":acks") && f.armed.CompareAndSwap(true, false) {
		f.failed.Store(true)
		return errors.New("coherence test: acknowledgement append failed")
	}
	return nil
}

// TestAckRetried: the reader appends its acknowledgement itself; when
// that append fails, the acknowledgement still goes, by the acker, and
// the writer is answered on it, not at its deadline.
func TestAckRetried(t *testing.T) {
	r := redistest.Start(t)
	cfg := Config{Client: r.Client(), Group: "ackretry", Heartbeat: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second, PeerGone: time.Hour}
	fail := &failAck{}
	pc := r.Client()
	pc.AddHook(failCmds(fail.refuse))
	pcfg := cfg
	pcfg.Client = pc
	p := run(t, pcfg, nil)
	a := run(t, cfg, nil)
	peersKnown(t, a, p)

	fail.armed.Store(true)
	start := time.Now()
	if err := a.bus.Publish(context.Background(), []cache.Entity{tbl}); err != nil {
		t.Fatalf("publish: %v; want the peer's acknowledgement", err)
	}
	if !fail.failed.Load() {
		t.Fatal("no acknowledgement append failed; the test needs one to")
	}
	if took := time.Since(start); took >= cfg.HeartbeatTimeout {
		t.Fatalf("publish took %v: answered at its deadline", took)
	}
	if n := a.bus.Stats().AckTimeouts.Load(); n != 0 {
		t.Fatalf("%d acknowledgement timeouts", n)
	}
}

// TestPublishKeepsItsEntities: a writer that gives up while its request
// is still queued (its context ends) may reuse its slice of entities at
// once, as the proxy does per connection; the bus publishes what it was
// given.
func TestPublishKeepsItsEntities(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	hold := &holdPipeline{gate: make(chan struct{})}
	c.AddHook(seeCmds(hold.hold))
	a := run(t, fast(c, "keep"), nil)
	p := run(t, fast(r.Client(), "keep"), nil)
	peersKnown(t, a, p)
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(hold.gate) }) })

	hold.armed.Store(true)
	var wg sync.WaitGroup
	wg.Go(func() { a.bus.Publish(context.Background(), []cache.Entity{tbl}) })
	waitFor(t, "the sender held", hold.held.Load)
	mine := cache.Entity{Level: cache.LevelTable, Cat: "hive", DB: "db", Table: "mine"}
	ents := []cache.Entity{mine}
	ctx, cancel := context.WithCancel(context.Background())
	queued := make(chan error, 1)
	go func() { queued <- a.bus.Publish(ctx, ents) }()
	waitFor(t, "the write queued", func() bool { return len(a.bus.reqs) == 1 })
	cancel()
	if err := <-queued; !errors.Is(err, context.Canceled) {
		t.Fatalf("publish: %v; want it to give up on its context", err)
	}
	ents[0].Table = "reused" // the caller's next write
	release.Do(func() { close(hold.gate) })
	wg.Wait()
	waitFor(t, "the given-up write applied by the peer", func() bool {
		got, _ := p.snapshot()
		return slices.Contains(got, mine) || slices.Contains(got, ents[0])
	})
	if got, _ := p.snapshot(); !slices.Contains(got, mine) {
		t.Fatalf("peer applied %v; want %v, what the writer published", got, mine)
	}
}

// TestAppendCarriesEveryQueuedWrite (promise 2): an append that begins
// after a write was queued carries it, however many are queued before
// it. Otherwise peers hear the writer alive at that append while the
// write's own invalidation still waits behind it: the writer answers at
// its deadline (not published), and the peers, never having taken the
// writer for silent, still serve the old value.
func TestAppendCarriesEveryQueuedWrite(t *testing.T) {
	r := redistest.Start(t)
	cfg := Config{Client: r.Client(), Group: "uncapped", Heartbeat: 200 * time.Millisecond, HeartbeatTimeout: time.Second, PeerGone: time.Hour}
	p := run(t, cfg, nil)
	w := cache.Entity{Level: cache.LevelTable, Cat: "hive", DB: "db", Table: "the_write"}
	// The first append is held on first; any carrying w on behind.
	var armed, held atomic.Bool
	first, behind := make(chan struct{}), make(chan struct{})
	var r1, r2 sync.Once
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // cleanups run last first: the gates open, the node stops, then this
	wc := r.Client()
	wc.AddHook(seeCmds(func(cmds ...redis.Cmder) {
		for _, c := range cmds {
			if c.Name() != "xadd" {
				continue
			}
			if armed.CompareAndSwap(true, false) {
				held.Store(true)
				<-first
			} else if strings.Contains(fmt.Sprint(c.Args()...), w.Table) {
				<-behind
			}
		}
	}))
	cfg.Client = wc
	a := run(t, cfg, nil)
	t.Cleanup(func() { r1.Do(func() { close(first) }); r2.Do(func() { close(behind) }) })
	waitFor(t, "peers known", func() bool { return len(a.bus.Peers()) == 1 && len(p.bus.Peers()) == 1 && p.bus.Synced() })

	armed.Store(true)
	wg.Go(func() { a.bus.Publish(context.Background(), []cache.Entity{tbl}) })
	waitFor(t, "the sender held", held.Load)
	const queued = maxBatch + 100
	for i := range queued {
		wg.Go(func() {
			a.bus.Publish(context.Background(), []cache.Entity{{Level: cache.LevelTable, Cat: "hive", DB: "db", Table: "q" + strconv.Itoa(i)}})
		})
	}
	waitFor(t, "writes queued", func() bool { return len(a.bus.reqs) >= queued })
	res := make(chan error, 1)
	go func() { res <- a.bus.Publish(context.Background(), []cache.Entity{w}) }()
	waitFor(t, "the write queued", func() bool { return len(a.bus.reqs) >= queued+1 })
	// Half the write's wait gone before the sender moves on: the next
	// append starts after it was queued and, heard by the peer, keeps
	// the writer alive there past the write's deadline. A pause of a
	// measured length is the point: a sleep.
	time.Sleep(cfg.HeartbeatTimeout / 2)
	r1.Do(func() { close(first) })
	err := <-res
	got, _ := p.snapshot()
	if errors.Is(err, ErrNotPublished) && p.bus.Synced() && !slices.Contains(got, w) {
		t.Fatalf("the write was answered (%v) while its peer, synced, had not applied it", err)
	}
}
