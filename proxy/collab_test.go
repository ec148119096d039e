package proxy

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// fakeCoherence is a hand-written Coherence that records what is
// published.
type fakeCoherence struct {
	synced    atomic.Bool
	abandoned atomic.Bool
	published chan []cache.Entity
}

func (f *fakeCoherence) Publish(ctx context.Context, ents []cache.Entity) error {
	f.published <- slices.Clone(ents)
	return nil
}

func (f *fakeCoherence) Synced() bool { return f.synced.Load() }

func (f *fakeCoherence) Abandon() { f.abandoned.Store(true) }

// fakeWrites is a hand-written WriteObserver.
type fakeWrites struct{ seen chan wrote }

type wrote struct {
	method string
	ents   []cache.Entity
	ok     bool
}

func (f *fakeWrites) Wrote(method string, ents []cache.Entity, ok bool) {
	f.seen <- wrote{method, slices.Clone(ents), ok}
}

// TestCollaborators: the Coherence and WriteObserver given to New are the
// ones used: a write publishes what it changed and is reported to the
// observer; a node that is not synced reads from the metastore.
func TestCollaborators(t *testing.T) {
	demo, addr := startDemo(t, wire.Buffered)
	caching := newCaching(t, nil)
	coh := &fakeCoherence{published: make(chan []cache.Entity, 4)}
	coh.synced.Store(true)
	writes := &fakeWrites{seen: make(chan wrote, 4)}
	caching.Coherence, caching.Writes = coh, writes
	_, paddr := startProxy(t, proxyOpts{cache: caching}, addr)
	c := dial(t, paddr, wire.Buffered)

	call(t, c, "create_table", tableArgs("demo_db0", "collab"))
	var ents []cache.Entity
	select {
	case ents = <-coh.published: // before the reply: the channel has room
	default:
		t.Fatal("the write published nothing")
	}
	want := cache.Entity{Level: cache.LevelTable, Cat: "hive", DB: "demo_db0", Table: "collab"}
	if !slices.Contains(ents, want) {
		t.Fatalf("published %+v; want it to hold %+v", ents, want)
	}
	// The observer is told after the reply is written: wait for it.
	select {
	case w := <-writes.seen:
		if w.method != "create_table" || !w.ok || !slices.Contains(w.ents, want) {
			t.Errorf("observer saw %+v; want create_table, ok, holding %+v", w, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the observer was not told of the write")
	}

	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "collab"))
	loads := func() int { return demo.CallCount("get_table") }
	call(t, c, "get_table", get)
	caching.Store.Wait()
	before := loads()
	call(t, c, "get_table", get)
	if loads() != before {
		t.Fatal("a synced node did not serve the cached entry")
	}
	coh.synced.Store(false)
	call(t, c, "get_table", get)
	if loads() != before+1 {
		t.Fatal("a node that may have missed invalidations served from its cache")
	}
}
