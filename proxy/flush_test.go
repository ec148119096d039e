package proxy

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// TestCoalescedFlushNeverStale (issue 22, item 8): a client past its
// flush budget has its unknown-method call's flush coalesced into a
// shared one, and still no entry cached before its call is served once
// its reply has arrived. The flush hook is the seam that shows the call
// took the coalesced path, where a flush made late would serve the
// stale not-found.
func TestCoalescedFlushNeverStale(t *testing.T) {
	for _, method := range []string{"made_up_write", "flushCache"} {
		t.Run(method, func(t *testing.T) {
			demo, addr := startDemo(t, wire.Buffered)
			caching := newCaching(t, nil)
			caching.Flushes = FlushBudget{Burst: 1, Interval: 50 * time.Millisecond}
			var mu sync.Mutex // guards paths
			var paths []bool
			srv, paddr := serve(t, Config{Cache: caching}, proxytest.Group(t, upstream.Config{}, addr), func(s *Server) {
				s.cache.flushHook = func(coalesced bool) {
					mu.Lock()
					paths = append(paths, coalesced)
					mu.Unlock()
				}
			})
			eventually(t, "metastore settings read", func() bool { return srv.cache.settings().Known })
			c := dial(t, paddr, wire.Buffered)
			direct := dial(t, addr, wire.Buffered)

			// A not-found answer, cached.
			get := hmsreq.Args(hmsreq.Str(1, "late_db"))
			missing := call(t, c, "get_database", get)
			caching.Store.Wait()
			before := demo.CallCount("get_database")
			if call(t, c, "get_database", get); demo.CallCount("get_database") != before {
				t.Fatal("the not-found answer was not cached")
			}

			// The first cache-wide write spends the budget; then the
			// metastore changes (the next one's effect), and the next
			// one is past the budget.
			call(t, c, method, hmsreq.Args())
			call(t, direct, "create_database", hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, "late_db"))))
			call(t, c, method, hmsreq.Args())
			mu.Lock()
			got := append([]bool(nil), paths...)
			mu.Unlock()
			if len(got) != 2 || got[0] || !got[1] {
				t.Fatalf("flush paths %v; want at once, then coalesced", got)
			}
			if sameButSeqID(call(t, c, "get_database", get), missing) {
				t.Fatal("after the coalesced flush's call was answered, the not-found cached before it was served")
			}
		})
	}
}

// TestFlushLoopSparesOthers (issue 22, item 8): a client looping methods
// the proxy does not know, or flushCache, each of which may change
// anything, used to empty every other client's cache on every call
// (a bystander's cached p50 went from 0.1 ms to 20.6 ms). Its flushes
// now come out of a budget of its own: 100 such calls at once flush the
// group a burst's worth of times (10 by default) plus a round or two,
// each reply still after a flush that covers it. The published
// flush-everything invalidations are the count.
func TestFlushLoopSparesOthers(t *testing.T) {
	const calls = 100
	for _, method := range []string{"made_up_write", "flushCache"} {
		t.Run(method, func(t *testing.T) {
			_, addr := startDemo(t, wire.Buffered)
			caching := newCaching(t, nil)
			published := &flushCounter{}
			caching.Coherence = published
			_, paddr := startProxy(t, proxyOpts{cache: caching}, addr)
			var wg sync.WaitGroup
			errs := make(chan error, calls)
			for range calls {
				c := clientFrom(t, "127.0.0.2", paddr, wire.Buffered)
				wg.Add(1)
				go func() {
					defer wg.Done()
					m, err := c.Call(ctxT(t), method, hmsreq.Args())
					if err == nil && m.Type != wire.Reply && m.Type != wire.Exception {
						err = fmt.Errorf("%s answered with message type %d", method, m.Type)
					}
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if n := published.n.Load(); n > 10+2 {
				t.Fatalf("%d calls of %s from one client flushed the group %d times; want its burst (10) and a round or two", calls, method, n)
			}
		})
	}
}
