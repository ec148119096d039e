package eventlog

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/demohms"
	"github.com/hmsproxy/hmsproxy/internal/hmsclient"
	"github.com/hmsproxy/hmsproxy/internal/leader"
	"github.com/hmsproxy/hmsproxy/internal/redistest"
	"github.com/hmsproxy/hmsproxy/internal/wire"
	"github.com/hmsproxy/hmsproxy/internal/worker"
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
	d := demohms.New(demohms.Config{})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go d.Serve(ln)
	defer d.Close()
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
		p, err := New(Config{Caller: &hmsclient.Redialer{Addr: ln.Addr().String()},
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
		deadline := time.Now().Add(5 * ttl)
		for time.Now().Before(deadline) {
			for _, n := range nodes {
				if ok, _ := n.el.IsLeader(); ok {
					return n
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatal("no leader")
		return nil
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
		c := &hmsclient.Redialer{Addr: ln.Addr().String()}
		defer c.Close()
		for _, db := range names {
			var e wire.Encoder
			e.FieldBegin(wire.TStruct, 1)
			e.StringField(1, db)
			e.Stop()
			e.Stop()
			if _, err := c.Call(context.Background(), "create_database", e.B); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitDBs := func(n *pollNode, want []string, within time.Duration) time.Duration {
		start := time.Now()
		for !slices.Equal(dbsOf(n), want) {
			if time.Since(start) > within {
				t.Fatalf("node applied %v; want %v within %v", dbsOf(n), want, within)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(start)
	}

	first := leaderOf()
	// Wait for the first poll to store a cursor, then write.
	deadline := time.Now().Add(5 * time.Second)
	for r.Client().Exists(context.Background(), "hmsproxy:eventlog:fo").Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("cursor never stored")
		}
		time.Sleep(5 * time.Millisecond)
	}
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
