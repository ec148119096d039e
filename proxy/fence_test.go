package proxy

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/testenv/clocktest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// TestRemoteInvalidationFencesLoads (promise 3 under promise 2; issue 10,
// item 5): a load that read the old state before a write, and comes back
// after the peer applied that write's invalidation from the bus (and so
// acknowledged it), never lands in the cache: not a miss's load, not a
// refresh-ahead reload, not a by-names batch's load. Otherwise the peer
// serves the old state after the writer's answer. The write goes to the
// metastore directly, as another node's would.
func TestRemoteInvalidationFencesLoads(t *testing.T) {
	const db, tbl = "demo_db0", "fence"
	get := hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl))
	byNames := hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, "ds=2025-01-01"))
	alter := func(v string) []byte {
		return alterTableArgs(db, tbl, testTable(db, tbl, map[string]string{"v": v}))
	}
	tableEnt := []cache.Entity{{Level: cache.LevelTable, Cat: "hive", DB: db, Table: tbl}}
	partsEnt := []cache.Entity{{Level: cache.LevelPartitions, Cat: "hive", DB: db, Table: tbl}}
	for _, tc := range []struct {
		name   string
		method string // the load held after reading the old state
		// load starts the load and returns once it is under way; write
		// changes the metastore; check reads through the proxy after
		// the held load ended and fails on the old state.
		load  func(t *testing.T, c *env) <-chan []byte
		write func(t *testing.T, c *env)
		ents  []cache.Entity
		check func(t *testing.T, c *env)
	}{{
		name: "miss", method: "get_table",
		load: func(t *testing.T, c *env) <-chan []byte {
			return callAsync(t, c.paddr, "get_table", get)
		},
		write: func(t *testing.T, c *env) { call(t, c.direct, "alter_table", alter("new")) },
		ents:  tableEnt,
		check: func(t *testing.T, c *env) {
			if got := tableParam(t, call(t, dial(t, c.paddr, wire.Buffered), "get_table", get), "v"); got != "new" {
				t.Fatalf("read after the invalidation got v=%q; want new (a load from before it was cached)", got)
			}
		},
	}, {
		name: "refresh-ahead", method: "get_table",
		load: func(t *testing.T, c *env) <-chan []byte {
			call(t, dial(t, c.paddr, wire.Buffered), "get_table", get) // cached
			c.caching.Store.Wait()
			c.clock.Advance(c.caching.Store.Policy(3).RefreshAfter + time.Second) // hms.KindTable
			c.gate.armed.Store(true)
			return callAsync(t, c.paddr, "get_table", get) // a hit, reloaded in the background
		},
		write: func(t *testing.T, c *env) { call(t, c.direct, "alter_table", alter("new")) },
		ents:  tableEnt,
		check: func(t *testing.T, c *env) {
			refreshesSettled(t, c.srv)
			c.caching.Store.Wait()
			if got := tableParam(t, call(t, dial(t, c.paddr, wire.Buffered), "get_table", get), "v"); got != "new" {
				t.Fatalf("read after the invalidation got v=%q; want new (a refresh from before it was cached)", got)
			}
		},
	}, {
		name: "batch", method: "get_partitions_by_names",
		load: func(t *testing.T, c *env) <-chan []byte {
			return callAsync(t, c.paddr, "get_partitions_by_names", byNames)
		},
		write: func(t *testing.T, c *env) {
			call(t, c.direct, "drop_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, "2025-01-01"), hmsreq.Bool(4, false)))
		},
		ents: partsEnt,
		check: func(t *testing.T, c *env) {
			if got := call(t, dial(t, c.paddr, wire.Buffered), "get_partitions_by_names", byNames); bytes.Contains(got, []byte("2025-01-01")) {
				t.Fatal("read after the invalidation returned the dropped partition (a batch load from before it was cached)")
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := startDemo(t, wire.Buffered)
			c := &env{clock: newClock(), direct: dial(t, addr, wire.Buffered)}
			c.caching = newCaching(t, c.clock)
			c.gate = &holdOne{method: tc.method, arrived: make(chan struct{}), release: make(chan struct{})}
			c.srv, c.paddr = serve(t, Config{Cache: c.caching}, c.gate.wrap(proxytest.Group(t, upstream.Config{}, addr)))
			call(t, c.direct, "create_table", hmsreq.Args(testTable(db, tbl, map[string]string{"v": "old"}).Field(1)))
			call(t, c.direct, "add_partition", partitionArgs(db, tbl, "2025-01-01"))

			if tc.name != "refresh-ahead" {
				c.gate.armed.Store(true)
			}
			done := tc.load(t, c)
			proxytest.Recv(t, c.gate.arrived, "the load at the metastore") // it read the old state and is held
			tc.write(t, c)
			c.srv.ApplyRemote(tc.ents) // as the bus does, before it acknowledges
			close(c.gate.release)
			<-done
			c.caching.Store.Wait() // an admission, had there been one, is visible
			tc.check(t, c)
		})
	}
}

// env is one case's proxy, its metastore and its seams.
type env struct {
	clock   *clocktest.Clock
	caching *Caching
	gate    *holdOne
	srv     *Server
	paddr   string
	direct  *hmsclient.Client
}

// holdOne holds the first reply of method after it is armed until
// release is closed: a load that read the old state and comes back late.
type holdOne struct {
	method  string
	armed   atomic.Bool
	arrived chan struct{}
	release chan struct{}
}

func (h *holdOne) wrap(up Forwarder) Forwarder {
	return &gatedOnce{h: h, up: up}
}

type gatedOnce struct {
	h  *holdOne
	up Forwarder
}

func (g *gatedOnce) Do(ctx context.Context, c upstream.Call, sink upstream.ReplySink) error {
	if string(c.Msg.Name()) != g.h.method || !g.h.armed.CompareAndSwap(true, false) {
		return g.up.Do(ctx, c, sink)
	}
	var cs captureSink
	if err := g.up.Do(ctx, c, &cs); err != nil {
		return err
	}
	close(g.h.arrived)
	select {
	case <-g.h.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return replay(c, &cs, sink)
}
