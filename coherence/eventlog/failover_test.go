package eventlog

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/coherence/leader"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/ops/worker"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

type pollNode struct {
	el     *leader.Elector
	rec    *recorder
	runner *worker.Runner
	cancel context.CancelFunc
	close  func()
	crash  func()
}

// TestLeaderFailoverResumesFromCursor: when the polling leader dies
// without releasing its lease, another node takes over within the lease
// time and carries on from the stored cursor, neither skipping nor
// replaying events.
func TestLeaderFailoverResumesFromCursor(t *testing.T) {
	r := redistest.Start(t)
	_, addr := proxytest.Demo(t, proxytest.DemoOptions{Empty: true})
	const ttl = time.Second

	start := func(i int) *pollNode {
		client := r.Client()
		el, err := leader.New(leader.Config{Client: client, Key: "hmsproxy:leader:fo", NodeID: fmt.Sprint("node", i), TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); el.Run(ctx, func(ctx context.Context, _ int64) { <-ctx.Done() }) }()
		rec := &recorder{}
		p, err := New(Config{Caller: &hmsclient.Redialer{Addr: addr},
			Cursor: &RedisCursor{Client: client, Lease: el, Key: "hmsproxy:eventlog:fo"},
			Apply:  rec.apply, Drop: rec.drop})
		if err != nil {
			t.Fatal(err)
		}
		runner, err := worker.New(worker.Config{Leadership: el, LeaderCheck: 20 * time.Millisecond},
			worker.Task{Name: "eventlog", Every: 50 * time.Millisecond, Scope: worker.LeaderOnly, Run: p.Poll})
		if err != nil {
			t.Fatal(err)
		}
		runner.Start()
		n := &pollNode{el: el, rec: rec, runner: runner, cancel: cancel}
		n.close = func() { runner.Close(); cancel(); <-done }
		// A crash: the node's Redis connection goes first, so it can
		// neither renew nor release its lease.
		n.crash = func() { client.Close(); n.close() }
		t.Cleanup(n.close)
		return n
	}
	nodes := []*pollNode{start(0), start(1)}
	leaderOf := func() *pollNode {
		var l *pollNode
		wait.Eventually(t, 5*ttl, func() bool {
			for _, n := range nodes {
				if ok, _ := n.el.IsLeader(); ok {
					l = n
					return true
				}
			}
			return false
		}, "no leader")
		return l
	}
	dbsOf := func(n *pollNode) []string {
		n.rec.mu.Lock()
		defer n.rec.mu.Unlock()
		var out []string
		for _, e := range n.rec.ents {
			out = append(out, e.DB)
		}
		return out
	}
	create := func(names ...string) {
		c := &hmsclient.Redialer{Addr: addr}
		defer c.Close()
		for _, db := range names {
			if _, err := c.Call(context.Background(), "create_database", createDBArgs(db)); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitDBs := func(n *pollNode, want []string, within time.Duration) time.Duration {
		start := time.Now()
		if !wait.Until(within, func() bool { return slices.Equal(dbsOf(n), want) }) {
			t.Fatalf("node applied %v; want %v within %v", dbsOf(n), want, within)
		}
		return time.Since(start)
	}

	first := leaderOf()
	// Wait for the first poll to store a cursor, then write.
	wait.Eventually(t, 5*time.Second, func() bool { return r.Client().Exists(context.Background(), "hmsproxy:eventlog:fo").Val() != 0 }, "cursor never stored")
	create("fo_a", "fo_b")
	waitDBs(first, []string{"fo_a", "fo_b"}, 5*time.Second)

	// The leader dies without releasing its lease.
	var other *pollNode
	for _, n := range nodes {
		if n != first {
			other = n
		}
	}
	crashed := time.Now()
	first.crash()
	create("fo_c")
	waitDBs(other, []string{"fo_c"}, ttl+2*time.Second)
	t.Logf("the other node applied the next event %v after the leader died (lease %v)", time.Since(crashed).Round(time.Millisecond), ttl)
	if drops := other.rec.drops; len(drops) != 0 {
		t.Fatalf("the new leader dropped the cache (%v): it did not resume from the stored cursor", drops)
	}
}

// busLog is what every node's cache would get from the leader's poller
// through the invalidation bus: the invalidated databases and the drops,
// with when they came.
type busLog struct {
	mu   sync.Mutex
	dbs  map[string]time.Time
	drop []time.Time
}

func (b *busLog) apply(_ context.Context, ents []cache.Entity) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range ents {
		if _, ok := b.dbs[e.DB]; !ok {
			b.dbs[e.DB] = time.Now()
		}
	}
}

func (b *busLog) dropAll(string) { b.mu.Lock(); b.drop = append(b.drop, time.Now()); b.mu.Unlock() }

// seen reports whether an invalidation covering db, or a drop, came after t.
func (b *busLog) seen(db string, t time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if at, ok := b.dbs[db]; ok && !at.Before(t) {
		return true
	}
	for _, d := range b.drop {
		if !d.Before(t) {
			return true
		}
	}
	return false
}

func (b *busLog) dropsSince(t time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, d := range b.drop {
		if !d.Before(t) {
			n++
		}
	}
	return n
}

// TestRedisRestartBeforeRenewal (issue 10, acceptance): Redis restarts,
// empty, just before the leader's renewal; once the leader's term has
// ended (it found its lease gone), a write is made directly on the
// metastore. The write reaches every node's cache (the poller's
// invalidations, or one flush) within the poll interval plus one second,
// although the renew period is three seconds; and the lost cursor costs
// at most one flush.
func TestRedisRestartBeforeRenewal(t *testing.T) {
	r := redistest.Start(t)
	_, addr := proxytest.Demo(t, proxytest.DemoOptions{Empty: true})
	const (
		ttl      = 9 * time.Second
		renew    = 3 * time.Second
		interval = 200 * time.Millisecond
	)
	bus := &busLog{dbs: map[string]time.Time{}}
	var els []*leader.Elector
	var pollers []*Poller
	for i := range 3 {
		if i == 1 {
			// The followers start out of phase with the leader's
			// renewals, as nodes do: ones that tried once per renew
			// period would next try 3/4 of one after the restart.
			wait.Eventually(t, 5*time.Second, func() bool { ok, _ := els[0].IsLeader(); return ok }, "first node never led")
			// The phase is read on the lease, whose TTL the leader resets.
			c := r.Client()
			wait.Eventually(t, 2*renew, func() bool {
				left := c.PTTL(context.Background(), "hmsproxy:leader:rr").Val()
				return left > 0 && ttl-left >= renew*3/4
			}, "the lease never aged 3/4 of a renew period")
		}
		client := r.Client()
		el, err := leader.New(leader.Config{Client: client, Key: "hmsproxy:leader:rr", NodeID: fmt.Sprint("node", i), TTL: ttl, Renew: renew})
		if err != nil {
			t.Fatal(err)
		}
		els = append(els, el)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); el.Run(ctx, func(ctx context.Context, _ int64) { <-ctx.Done() }) }()
		p, err := New(Config{Caller: &hmsclient.Redialer{Addr: addr},
			Cursor: &RedisCursor{Client: client, Lease: el, Key: "hmsproxy:eventlog:rr"},
			Apply:  bus.apply, Drop: bus.dropAll})
		if err != nil {
			t.Fatal(err)
		}
		pollers = append(pollers, p)
		// LeaderCheck as cmd/hmsproxy's workers use it.
		runner, err := worker.New(worker.Config{Leadership: el, LeaderCheck: 100 * time.Millisecond},
			worker.Task{Name: "eventlog", Every: interval, Scope: worker.LeaderOnly, Run: p.Poll})
		if err != nil {
			t.Fatal(err)
		}
		runner.Start()
		t.Cleanup(func() { runner.Close(); cancel(); <-done })
	}
	ctx := context.Background()
	c := r.Client()
	wait.Eventually(t, 5*time.Second, func() bool { return c.Exists(ctx, "hmsproxy:eventlog:rr").Val() != 0 }, "cursor never stored")
	// Just before the renewal (the lease has a little more than a renew
	// period less than its TTL left), with time for Redis to come back
	// before it, so that the renewal finds the lease gone.
	wait.Eventually(t, 3*renew, func() bool { return c.PTTL(ctx, "hmsproxy:leader:rr").Val() <= ttl-renew+300*time.Millisecond }, "renewal never near")
	polls := func() (n uint64) {
		for _, p := range pollers {
			n += p.Stats().Polls.Load()
		}
		return n
	}
	lost := func() (n uint64) {
		for _, el := range els {
			n += el.Stats().Lost
		}
		return n
	}
	restarted := time.Now()
	r.Restart()
	wait.Eventually(t, time.Until(restarted.Add(renew+time.Second)), func() bool { return lost() > 0 }, "no term ended after the restart")
	direct := &hmsclient.Redialer{Addr: addr}
	defer direct.Close()
	var e wire.Encoder
	e.FieldBegin(wire.TStruct, 1)
	e.StringField(1, "rr_after_restart")
	e.Stop()
	e.Stop()
	if _, err := direct.Call(ctx, "create_database", e.B); err != nil {
		t.Fatal(err)
	}
	wrote := time.Now()
	if !wait.Until(interval+time.Second, func() bool { return bus.seen("rr_after_restart", wrote) }) {
		t.Fatalf("write on the metastore not seen by the caches %v after it (poll interval %v, renew period %v)",
			time.Since(wrote).Round(time.Millisecond), interval, renew)
	}
	t.Logf("write on the metastore seen by the caches %v after it (poll interval %v, renew period %v; %d drops)",
		time.Since(wrote).Round(time.Millisecond), interval, renew, bus.dropsSince(restarted))
	// Three more polls, and the cursor stored again: still at most one
	// flush for the lost cursor.
	seenPolls := polls()
	wait.Eventually(t, time.Until(restarted.Add(ttl+renew)), func() bool {
		return c.Exists(ctx, "hmsproxy:eventlog:rr").Val() != 0 && polls() >= seenPolls+3
	}, "cursor not stored again after the restart")
	if n := bus.dropsSince(restarted); n > 1 {
		t.Fatalf("%d cache drops after the restart; want at most one", n)
	}
}
