package federation

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// TestThreeNodesTwoGroups: three federated nodes share invalidations over
// one Redis, each group on its own stream. A write in the member through
// one node is seen at once on the others (read-your-writes), and leaves
// every node's primary entries in place.
func TestThreeNodesTwoGroups(t *testing.T) {
	p, pAddr := proxytest.Demo(t, proxytest.DemoOptions{})
	f, fAddr := proxytest.Demo(t, proxytest.DemoOptions{Empty: true})
	fc := proxytest.Dial(t, fAddr, wire.Buffered)
	proxytest.Call(t, fc, "create_database", databaseArg("lake"))
	proxytest.Call(t, fc, "create_table", tableArg("lake", "t"))
	r := redistest.Start(t)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var buses []*coherence.Bus
	var stores []*cache.Store
	var clients []*hmsclient.Client
	for i := 0; i < 3; i++ {
		pg := proxytest.Group(t, upstream.Config{}, pAddr)
		fg := proxytest.Group(t, upstream.Config{}, fAddr)
		bus := func(group string) *coherence.Bus {
			b, err := coherence.New(coherence.Config{Client: r.Client(), Group: group, Heartbeat: 100 * time.Millisecond,
				Logger: proxytest.Logger(t).With("node", i, "group", group)})
			if err != nil {
				t.Fatal(err)
			}
			buses = append(buses, b)
			return b
		}
		bp, bl := bus("primary"), bus("lake")
		st := proxytest.Store(t, cache.Config{})
		stores = append(stores, st)
		rt, err := New(Config{Groups: []Member{{Name: "primary", Up: pg}, {Name: "lake", Up: fg, Databases: []string{"lake"}, Access: ReadWrite}}})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := proxy.New(proxy.Config{Logger: proxytest.Logger(t), Router: rt,
			Cache: &proxy.Caching{Store: st, Upstream: "primary", Scope: proxy.ScopeShared, Coherence: bp, Shadow: proxy.Shadow{Rate: -1}},
			Federated: []proxy.Backend{{Name: "lake", Up: fg,
				Cache: &proxy.Caching{Store: st, Upstream: "lake", Scope: proxy.ScopeShared, Coherence: bl, Shadow: proxy.Shadow{Rate: -1}}}}}, pg)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { bp.Run(ctx, srv) })
		wg.Go(func() { bl.Run(ctx, srv.FederatedCache(1)) })
		clients = append(clients, proxytest.Dial(t, proxytest.Serve(t, srv), wire.Buffered))
	}
	for i, b := range buses {
		proxytest.Eventually(t, fmt.Sprintf("bus %d in sync", i), func() bool { return b.Synced() && len(b.Peers()) == 2 })
	}

	read := func(i int) (primary, lake []byte) {
		return proxytest.Call(t, clients[i], "get_table", hmsclient.Args("demo_db0", "t0")),
			proxytest.Call(t, clients[i], "get_table", hmsclient.Args("lake", "t"))
	}
	for i := range clients {
		read(i)
		stores[i].Wait()
		read(i)
	}
	if p.CallCount("get_table") != 3 || f.CallCount("get_table") != 3 {
		t.Fatalf("warm-up: primary %d and member %d loads, want 3 each (one per node)", p.CallCount("get_table"), f.CallCount("get_table"))
	}

	if r := proxytest.Call(t, clients[0], "drop_table", hmsclient.Args("lake", "t")); resultField(t, r) != -1 {
		t.Fatalf("drop_table through node 0: %q", metaMessage(t, r))
	}
	for i := 1; i < 3; i++ {
		_, lake := read(i)
		if resultField(t, lake) == 0 {
			t.Errorf("node %d served the dropped table from its cache", i)
		}
	}
	if n := f.CallCount("get_table"); n != 5 {
		t.Errorf("member loads after the write: %d, want 5 (nodes 1 and 2 reloading)", n)
	}
	if n := p.CallCount("get_table"); n != 3 {
		t.Errorf("primary loads after the member's write: %d, want 3 (its entries untouched)", n)
	}
}
