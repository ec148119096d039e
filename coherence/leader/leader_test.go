package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
)

const (
	testTTL   = 600 * time.Millisecond
	testRenew = 100 * time.Millisecond
)

// node is one campaigning elector with its own ctx, as one proxy process.
type node struct {
	e      *Elector
	cancel context.CancelFunc
	done   chan struct{}
	terms  atomic.Int64 // onElected calls
	active atomic.Int64 // onElected calls not yet returned
}

func startNode(t *testing.T, srv *redistest.Server, id string) *node {
	t.Helper()
	return startNodeWith(t, srv, Config{NodeID: id, TTL: testTTL, Renew: testRenew})
}

// startNodeWith campaigns with cfg on srv under the test's key.
func startNodeWith(t *testing.T, srv *redistest.Server, cfg Config) *node {
	t.Helper()
	cfg.Client, cfg.Key = srv.Client(), "hmsproxy:leader:test"
	return campaign(t, cfg)
}

// campaign runs an elector of cfg until the test ends; a term lasts
// until the elector stops.
func campaign(t *testing.T, cfg Config) *node {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{e: e, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(n.done)
		e.Run(ctx, func(ctx context.Context, token int64) {
			n.terms.Add(1)
			n.active.Add(1)
			<-ctx.Done()
			n.active.Add(-1)
		})
	}()
	t.Cleanup(n.stop)
	return n
}

func (n *node) stop() { n.cancel(); <-n.done }

// crash stops the node without releasing its lease, as a killed process.
func (n *node) crash() {
	n.e.noRelease = true
	n.stop()
}

// without returns nodes but gone, in order.
func without(nodes []*node, gone *node) []*node {
	var rest []*node
	for _, n := range nodes {
		if n != gone {
			rest = append(rest, n)
		}
	}
	return rest
}

// leaders returns the nodes that believe they lead.
func leaders(nodes []*node) []*node {
	var out []*node
	for _, n := range nodes {
		if ok, _ := n.e.IsLeader(); ok {
			out = append(out, n)
		}
	}
	return out
}

// waitLeader waits for exactly one leader among nodes and returns it.
func waitLeader(t *testing.T, nodes []*node, within time.Duration) *node {
	t.Helper()
	var l []*node
	if wait.Until(within, func() bool { l = leaders(nodes); return len(l) == 1 }) {
		return l[0]
	}
	t.Fatalf("no single leader within %v; leaders now: %d", within, len(leaders(nodes)))
	return nil
}

func startNodes(t *testing.T, srv *redistest.Server) []*node {
	var nodes []*node
	for i := range 3 {
		nodes = append(nodes, startNode(t, srv, fmt.Sprintf("node%d", i)))
	}
	return nodes
}

func TestOneOfThreeLeads(t *testing.T) {
	srv := redistest.Start(t)
	// A lease longer than the other tests': this one asks that no renewal
	// ever comes late, which a 600 ms lease does not survive on a loaded
	// CI machine under the race detector (a renewal held 540 ms lapsed it).
	const ttl = 2 * time.Second
	var nodes []*node
	for i := range 3 {
		nodes = append(nodes, startNodeWith(t, srv, Config{NodeID: fmt.Sprintf("node%d", i), TTL: ttl, Renew: testRenew}))
	}
	l := waitLeader(t, nodes, 2*time.Second)
	// Over many renewals and more than a lease, never two leaders and no
	// change of leader.
	// Sampled until the leader renewed over a lease and a half: the
	// renewals it counts, not the clock, say the span held them.
	renewals := l.e.renewals.Load() + uint64((ttl+ttl/2)/testRenew)
	var got []*node
	if !wait.Until(10*ttl, func() bool {
		got = leaders(nodes)
		return len(got) != 1 || got[0] != l || l.e.renewals.Load() >= renewals
	}) {
		t.Fatalf("%d renewals in %v; want %d", l.e.renewals.Load(), 10*ttl, renewals)
	}
	if len(got) != 1 || got[0] != l {
		t.Fatalf("got %d leaders (or a new one); want the same single leader", len(got))
	}
	if n := l.terms.Load(); n != 1 {
		t.Fatalf("got %d terms on the leader; want 1", n)
	}
}

func TestCrashedLeaderReplacedWithinTTL(t *testing.T) {
	srv := redistest.Start(t)
	nodes := startNodes(t, srv)
	old := waitLeader(t, nodes, 2*time.Second)
	_, oldTok := old.e.IsLeader()
	start := time.Now()
	old.crash()
	rest := without(nodes, old)
	nl := waitLeader(t, rest, testTTL+2*testRenew+200*time.Millisecond)
	took := time.Since(start)
	_, newTok := nl.e.IsLeader()
	if newTok <= oldTok {
		t.Fatalf("new token %d; want > old token %d", newTok, oldTok)
	}
	if took > testTTL+2*testRenew+200*time.Millisecond {
		t.Fatalf("takeover took %v; want within the lease time %v plus a renew period", took, testTTL)
	}
	t.Logf("takeover after %v (ttl %v)", took, testTTL)

	// Fencing: the deposed leader's writes fail; the new leader's land.
	ctx := context.Background()
	if err := old.e.SetIfLeader(ctx, oldTok, "hmsproxy:cursor:test", "41"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed leader's SetIfLeader: got %v; want ErrNotLeader", err)
	}
	if err := nl.e.SetIfLeader(ctx, newTok, "hmsproxy:cursor:test", "42"); err != nil {
		t.Fatalf("leader's SetIfLeader: %v", err)
	}
	// A follower presenting the leader's token is refused too (node id).
	for _, n := range rest {
		if n != nl {
			if err := n.e.SetIfLeader(ctx, newTok, "hmsproxy:cursor:test", "43"); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("follower's SetIfLeader with the leader's token: got %v; want ErrNotLeader", err)
			}
		}
	}
	if v, _ := srv.Client().Get(ctx, "hmsproxy:cursor:test").Result(); v != "42" {
		t.Fatalf("cursor: got %q; want 42", v)
	}
}

func TestGracefulStopReleases(t *testing.T) {
	srv := redistest.Start(t)
	nodes := startNodes(t, srv)
	old := waitLeader(t, nodes, 2*time.Second)
	start := time.Now()
	old.stop()
	if n := old.active.Load(); n != 0 {
		t.Fatalf("onElected still running after Run returned: %d", n)
	}
	rest := without(nodes, old)
	waitLeader(t, rest, testTTL)
	// Released, so the next node only waits for its next attempt.
	if took := time.Since(start); took > 2*testRenew+200*time.Millisecond {
		t.Fatalf("takeover after release took %v; want about one renew period", took)
	}
}

func TestRedisRestartReacquires(t *testing.T) {
	srv := redistest.Start(t)
	nodes := startNodes(t, srv)
	old := waitLeader(t, nodes, 2*time.Second)
	srv.Restart() // empty: the lease and the token counter are gone
	// The old leader's renew finds no lease: its term ends, counted ...
	wait.Eventually(t, testTTL+time.Second, func() bool { return old.e.Stats().Lost != 0 }, "old leader's term not ended after a Redis restart")
	// ... and some node leads again, alone, in a new term.
	l := waitLeader(t, nodes, testTTL+2*time.Second)
	if l == old && old.terms.Load() < 2 {
		t.Fatalf("old leader kept its term across a Redis restart (terms %d)", old.terms.Load())
	}
	ctx := context.Background()
	_, tok := l.e.IsLeader()
	if err := l.e.SetIfLeader(ctx, tok, "hmsproxy:cursor:test", "1"); err != nil {
		t.Fatalf("SetIfLeader after re-election: %v", err)
	}
}

func TestRedisDownStepsDownBeforeTTL(t *testing.T) {
	srv := redistest.Start(t)
	n := startNode(t, srv, "only")
	waitLeader(t, []*node{n}, 2*time.Second)
	srv.Stop()
	stopped := time.Now()
	if !wait.Until(testTTL, func() bool { ok, _ := n.e.IsLeader(); return !ok }) {
		t.Fatalf("still leader %v after Redis went away; want stepped down within the ttl", time.Since(stopped))
	}
	wait.Eventually(t, testTTL, func() bool { return n.active.Load() == 0 }, "onElected ctx not cancelled after stepping down")
}

func TestSolo(t *testing.T) {
	var s Solo
	if ok, tok := s.IsLeader(); !ok || tok != 1 {
		t.Fatalf("Solo.IsLeader: got %v, %d; want true, 1", ok, tok)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	got := make(chan int64, 1)
	go func() {
		defer wg.Done()
		s.Run(ctx, func(ctx context.Context, token int64) { got <- token; <-ctx.Done() })
	}()
	if tok := <-got; tok != 1 {
		t.Fatalf("token: got %d; want 1", tok)
	}
	cancel()
	wg.Wait()
}

func TestConfig(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no client", Config{Key: "k"}},
		{"no key", Config{Client: c}},
		{"pipe in node id", Config{Client: c, Key: "k", NodeID: "a|b"}},
		{"renew not below ttl", Config{Client: c, Key: "k", TTL: time.Second, Renew: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); !errors.Is(err, ErrConfig) {
				t.Fatalf("got %v; want ErrConfig", err)
			}
		})
	}
	e, err := New(Config{Client: c, Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if e.cfg.TTL != 10*time.Second || e.cfg.Renew != 10*time.Second/3 || e.NodeID() == "" {
		t.Fatalf("defaults: got ttl %v renew %v node %q", e.cfg.TTL, e.cfg.Renew, e.NodeID())
	}
}

// Hand-over tests (issue 10, item 6) use a renew period long against the
// bound they assert, so a node that waited a renew period would fail them.
const (
	slowTTL   = 3 * time.Second
	slowRenew = time.Second
	// handOver is the bound on a hand-over that no renew period is in,
	// with room for a loaded machine (main's elector took 0.9s or more).
	handOver = 500 * time.Millisecond
)

func startSlowNode(t *testing.T, srv *redistest.Server, id string) *node {
	t.Helper()
	return startNodeWith(t, srv, Config{NodeID: id, TTL: slowTTL, Renew: slowRenew})
}

// waitRenewed waits until the lease was renewed a moment ago (its PTTL is
// back near the full TTL), so that the next renewal is a renew period away.
func waitRenewed(t *testing.T, srv *redistest.Server) {
	t.Helper()
	c := srv.Client()
	prev := time.Duration(0)
	wait.Eventually(t, 3*slowRenew, func() bool {
		left := c.PTTL(context.Background(), "hmsproxy:leader:test").Val()
		renewed := prev > 0 && left > prev
		prev = left
		return renewed
	}, "lease not renewed within three renew periods")
}

// TestRedisRestartHandOverWithoutGap: Redis restarts (empty) right after
// the leader renewed. The leader learns at once that its lease is gone
// (the watch subscription reconnects) and some node leads again well
// within a renew period, not a renew period after the next renewal.
func TestRedisRestartHandOverWithoutGap(t *testing.T) {
	srv := redistest.Start(t)
	nodes := []*node{startSlowNode(t, srv, "a"), startSlowNode(t, srv, "b"), startSlowNode(t, srv, "c")}
	old := waitLeader(t, nodes, 2*time.Second)
	waitRenewed(t, srv)
	srv.Restart()
	back := time.Now()
	c := srv.Client()
	// A new term, in the restarted Redis: the lease key exists again.
	if !wait.Until(slowRenew, func() bool { return c.Exists(context.Background(), "hmsproxy:leader:test").Val() != 0 }) {
		t.Fatalf("no node took the lease within %v of Redis coming back", slowRenew)
	}
	took := time.Since(back)
	l := waitLeader(t, nodes, slowRenew)
	if l == old && old.terms.Load() < 2 {
		t.Fatalf("old leader kept its term across the restart")
	}
	if took > handOver {
		t.Fatalf("lease taken %v after Redis came back; want within %v", took, handOver)
	}
	t.Logf("lease taken %v after Redis came back (renew period %v)", took, slowRenew)
}

// TestReleaseWakesFollowers: a released lease is taken at once, not at
// the followers' next try.
func TestReleaseWakesFollowers(t *testing.T) {
	srv := redistest.Start(t)
	nodes := []*node{startSlowNode(t, srv, "a"), startSlowNode(t, srv, "b")}
	old := waitLeader(t, nodes, 2*time.Second)
	// The follower's first try found the lease held: it waits now.
	for _, n := range nodes {
		if n != old {
			wait.Eventually(t, 2*time.Second, func() bool { return n.e.waits.Load() > 0 }, "the follower waits")
		}
	}
	start := time.Now()
	old.stop()
	rest := without(nodes, old)
	waitLeader(t, rest, slowTTL)
	if took := time.Since(start); took > handOver {
		t.Fatalf("takeover after release took %v; want within %v", took, handOver)
	}
	if w := rest[0].e.Stats().Wakeups; w == 0 {
		t.Fatal("follower not woken by the release")
	}
}

// TestExpiryWakesFollowers: a crashed leader's lease is taken the moment
// it expires (the follower sleeps until the lease's PTTL), not up to a
// renew period later.
func TestExpiryWakesFollowers(t *testing.T) {
	// A follower that tried once per renew period would be late by half
	// a period every time; a loaded machine (the race detector, parallel
	// test binaries) now and then delays one wake-up. The best of three
	// tells the two apart.
	var late time.Duration
	for attempt := 0; attempt < 3; attempt++ {
		if late = expiryTakeover(t); late <= 250*time.Millisecond {
			t.Logf("takeover %v after the lease expired (renew period %v)", late, slowRenew)
			return
		}
		t.Logf("attempt %d: takeover %v after the lease expired", attempt+1, late)
	}
	t.Fatalf("takeover %v after the lease expired in the best of three; want within 250ms", late)
}

// expiryTakeover crashes a leader and returns how long after its lease
// expired a follower took over.
func expiryTakeover(t *testing.T) time.Duration {
	srv := redistest.Start(t)
	first := startSlowNode(t, srv, "a")
	old := waitLeader(t, []*node{first}, 2*time.Second)
	// Out of phase with the leader's renewals by half a renew period, so
	// that a follower trying once per renew period would be late by that:
	// the phase is read on the lease, whose TTL the leader resets.
	c := srv.Client()
	wait.Eventually(t, 3*slowRenew, func() bool {
		left := c.PTTL(context.Background(), "hmsproxy:leader:test").Val()
		return left > 0 && slowTTL-left >= slowRenew/2
	}, "the lease never aged half a renew period")
	nodes := []*node{first, startSlowNode(t, srv, "b")}
	old.crash()
	expires := time.Now().Add(c.PTTL(context.Background(), "hmsproxy:leader:test").Val())
	rest := without(nodes, old)
	waitLeader(t, rest, slowTTL+slowRenew)
	return time.Since(expires)
}

// TestRedisUpLateLeadsAtOnce: nodes started while Redis is down lead as
// soon as it comes up, not at their next try a renew period later.
func TestRedisUpLateLeadsAtOnce(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	n := startSlowNode(t, srv, "a")
	// Its first try failed (a Redis error, counted); now it waits.
	wait.Eventually(t, slowRenew, func() bool { return n.e.Stats().RedisError > 0 }, "the first try fails")
	srv.Restart()
	up := time.Now()
	waitLeader(t, []*node{n}, slowTTL)
	if took := time.Since(up); took > handOver {
		t.Fatalf("led %v after Redis came up; want within %v", took, handOver)
	}
}
