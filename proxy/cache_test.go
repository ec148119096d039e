package proxy

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/filter"
	"github.com/hmsproxy/hmsproxy/internal/testenv/clocktest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// newClock is a settable clock for TTL and refresh-ahead tests.
func newClock() *clocktest.Clock { return clocktest.At(time.Now()) }

func newCaching(t testing.TB, clock *clocktest.Clock) *Caching {
	t.Helper()
	var cfg cache.Config
	if clock != nil {
		cfg.Now = clock.Now
	}
	st := proxytest.Store(t, cfg)
	// Shadow re-reads would add upstream calls that tests count; the
	// shadow tests turn it on.
	return &Caching{Store: st, Upstream: "test", Shadow: Shadow{Rate: -1}}
}

// cachedCorpus is one call of every cacheable read the demo metastore
// implements, legacy and _req forms.
func cachedCorpus() []req {
	const db, tbl, part = "demo_db0", "t0", "ds=2024-01-01/hr=1"
	return []req{
		{"getName", hmsreq.Args()},
		{"getVersion", hmsreq.Args()},
		{"get_all_databases", hmsreq.Args()},
		{"get_databases", hmsreq.Args(hmsreq.Str(1, "demo*"))},
		{"get_database", hmsreq.Args(hmsreq.Str(1, db))},
		{"get_database", hmsreq.Args(hmsreq.Str(1, "@hive#DEMO_DB1"))},
		{"get_database_req", hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, "hive"))},
		{"get_all_tables", hmsreq.Args(hmsreq.Str(1, db))},
		{"get_tables", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "t*"))},
		{"get_tables_by_type", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "*"), hmsreq.Str(3, "EXTERNAL_TABLE"))},
		{"get_table_meta", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "*"), hmsreq.Strings(3))},
		{"get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl))},
		{"get_table", hmsreq.Args(hmsreq.Str(1, "Demo_DB0"), hmsreq.Str(2, "T1"))},
		{"get_table_req", hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, "t2"))},
		{"get_table_objects_by_name", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Strings(2, "t1", "t0"))},
		{"get_table_objects_by_name_req", hmsreq.Req(hmsreq.Str(1, db), hmsreq.Strings(2, "t2", "t0"))},
		{"get_fields", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl))},
		{"get_schema", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl))},
		{"get_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, "2024-01-01", "1"))},
		{"get_partition_by_name", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Str(3, part))},
		{"get_partitions", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.I16(3, -1))},
		{"get_partitions_ps", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, "2024-01-01"), hmsreq.I16(4, -1))},
		{"get_partition_names", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.I16(3, -1))},
		{"get_partition_names_ps", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, "2024-01-01"), hmsreq.I16(4, 10))},
		{"get_partitions_by_names", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, part, "ds=2024-01-01/hr=2"))},
		{"get_partitions_by_names_req", hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, "ds=2024-01-01/hr=3", part))},
		// A range over a string key is not pruned locally (an int range
		// would be): it is cached whole under its text.
		{"get_partitions_by_filter", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Str(3, "ds > '2024-01-01'"), hmsreq.I16(4, -1))},
		{"get_num_partitions_by_filter", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Str(3, "ds > '2024-01-01'"))},
		{"get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "no_such_table"))},
		{"get_database", hmsreq.Args(hmsreq.Str(1, "no_such_db"))},
	}
}

// TestCacheHits: every cacheable read the demo implements is served from
// the cache the second time, with the bytes the metastore returns.
func TestCacheHits(t *testing.T) {
	demo, addr, caching, paddr := startCachingProxy(t)
	direct := dial(t, addr, wire.Buffered)
	c := dial(t, paddr, wire.Buffered)
	for _, r := range cachedCorpus() {
		t.Run(r.method, func(t *testing.T) {
			m := hms.Lookup([]byte(r.method))
			if m == nil || m.Class != hms.Read || !m.Cacheable {
				t.Fatalf("%s is not a cacheable read in the method table", r.method)
			}
			want := call(t, direct, r.method, r.args)
			before := demo.CallCount(r.method)
			first := call(t, c, r.method, r.args)
			caching.Store.Wait()
			second := call(t, c, r.method, r.args)
			if n := demo.CallCount(r.method) - before; n != 1 {
				t.Fatalf("metastore saw %d calls for two identical reads; want 1", n)
			}
			if !sameButSeqID(first, want) || !sameButSeqID(second, want) {
				t.Fatalf("cached reply differs from the metastore's\nfirst  %x\nsecond %x\nwant   %x", first, second, want)
			}
		})
	}
}

// tableParam reads one parameter of the Table in a get_table reply.
func tableParam(t testing.TB, reply []byte, key string) string {
	t.Helper()
	v, ok := proxytest.TableParam(reply, key)
	if !ok {
		t.Fatalf("no table in reply %x", reply)
	}
	return v
}

// The read-your-writes tests stamp a table of demo_db0 with a version,
// its parameter "v": alterV writes version v, versionOf reads the version
// a get_table reply carries (0 before the first alterV).
func alterV(table string, v int64) []byte {
	return alterTableArgs("demo_db0", table, testTable("demo_db0", table, map[string]string{"v": strconv.FormatInt(v, 10)}))
}

func versionOf(t testing.TB, reply []byte) int64 {
	t.Helper()
	p, ok := proxytest.TableParam(reply, "v")
	if !ok {
		t.Errorf("no table in reply %x", reply)
	}
	if p == "" {
		return 0
	}
	v, err := strconv.ParseInt(p, 10, 64)
	if err != nil {
		t.Errorf("version %q: %v", p, err)
	}
	return v
}

// TestReadYourWrites: a write through the proxy invalidates what it
// changed before its reply, including not-found entries (promise 2).
func TestReadYourWrites(t *testing.T) {
	_, _, caching, paddr := startCachingProxy(t)
	c := dial(t, paddr, wire.Buffered)
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "fresh"))

	miss := call(t, c, "get_table", get)
	caching.Store.Wait()
	if m, _ := wire.Parse(miss, wire.Limits{}); upstream.Succeeded(m) {
		t.Fatal("table exists before it was created")
	}
	call(t, c, "create_table", tableArgs("demo_db0", "fresh"))
	call(t, c, "get_table", get)
	caching.Store.Wait()
	for v := int64(1); v <= 3; v++ {
		call(t, c, "alter_table", alterV("fresh", v))
		// Read again and again on one connection: the later hits come
		// through the connection's Ref of its last hit (lookup, then
		// repeatedHit), which the next write must leave behind too.
		for i := 0; i < 4; i++ {
			if got := versionOf(t, call(t, c, "get_table", get)); got != v {
				t.Fatalf("after write %d read %d: v=%d", v, i, got)
			}
			caching.Store.Wait()
		}
	}
	// Names: a new partition shows in the cached name list at once.
	names := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "fresh"), hmsreq.I16(3, -1))
	call(t, c, "get_partition_names", names)
	caching.Store.Wait()
	call(t, c, "add_partition", partitionArgs("demo_db0", "fresh", "2025-01-01"))
	if got := call(t, c, "get_partition_names", names); !bytes.Contains(got, []byte("ds=2025-01-01")) {
		t.Fatalf("new partition missing from names after add_partition: %q", got)
	}
	// A rename invalidates the old name.
	call(t, c, "alter_table", alterTableArgs("demo_db0", "fresh", testTable("demo_db0", "renamed", nil)))
	if m, _ := wire.Parse(call(t, c, "get_table", get), wire.Limits{}); upstream.Succeeded(m) {
		t.Fatal("old name still served after rename")
	}
}

// gatedForwarder holds back the reply of every call of one method until
// that call is released: loads that read old state and are slow to come
// back. Each held call sends its own release on arrived, so a test lets
// go of exactly the load it means; two loads held on one shared channel
// are released in whichever order they happened to start waiting.
type gatedForwarder struct {
	up      Forwarder
	method  string
	arrived chan chan struct{}
}

func newGate(method string) *gatedForwarder {
	return &gatedForwarder{method: method, arrived: make(chan chan struct{})}
}

// held waits for the next call to reach the gate and returns its release.
func (g *gatedForwarder) held(t testing.TB, what string) chan struct{} {
	t.Helper()
	return proxytest.Recv(t, g.arrived, what)
}

func (g *gatedForwarder) Do(ctx context.Context, c upstream.Call, sink upstream.ReplySink) error {
	if string(c.Msg.Name()) != g.method {
		return g.up.Do(ctx, c, sink)
	}
	var cs captureSink
	if err := g.up.Do(ctx, c, &cs); err != nil {
		return err
	}
	release := make(chan struct{})
	select {
	case g.arrived <- release:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return replay(c, &cs, sink)
}

// replay answers c on sink with the reply cs captured for it.
func replay(c upstream.Call, cs *captureSink, sink upstream.ReplySink) error {
	msg := wire.AppendHeader(nil, cs.res.typ, c.Msg.Name(), c.Msg.SeqID)
	m, err := wire.Parse(append(msg, cs.res.body...), wire.Limits{})
	if err != nil {
		return err
	}
	return sink.Reply(m)
}

// TestLoadInvalidateRace: a load that began before a write's invalidation
// never lands in the cache after it (promise 3; Trino #10512).
func TestLoadInvalidateRace(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	gate := newGate("get_table")
	gate.up = proxytest.Group(t, upstream.Config{}, addr)
	caching := newCaching(t, nil)
	_, paddr := serve(t, Config{Cache: caching}, gate)

	setup := dial(t, paddr, wire.Buffered)
	call(t, setup, "create_table", tableArgs("demo_db0", "race"))
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "race"))

	// Reader A misses and its load reads v=old, then stalls.
	done := callAsync(t, paddr, "get_table", get)
	loadA := gate.held(t, "reader A's load")
	// The write happens and returns while A's load is in flight.
	call(t, setup, "alter_table", alterTableArgs("demo_db0", "race", testTable("demo_db0", "race", map[string]string{"v": "new"})))
	// Reader B starts after the write returned, while A's load is still
	// out: it must not join that load.
	doneB := callAsync(t, paddr, "get_table", get)
	var loadB chan struct{}
	select {
	case loadB = <-gate.arrived: // B's own load
	case got := <-doneB:
		t.Fatalf("reader B answered from reader A's load (v=%q) without a load of its own", tableParam(t, got, "v"))
	case <-time.After(5 * time.Second):
		t.Fatal("reader B joined reader A's load, which began before the write")
	}
	close(loadA) // A's load returns old state, after the write
	if got := tableParam(t, proxytest.Recv(t, done, "reader A's reply"), "v"); got != "" {
		t.Fatalf("reader A got v=%q; it read before the write", got)
	}
	close(loadB)
	if got := tableParam(t, proxytest.Recv(t, doneB, "reader B's reply"), "v"); got != "new" {
		t.Fatalf("reader B got v=%q; want new", got)
	}
	caching.Store.Wait()
	// A's load must not have landed in the cache: the next read is a hit
	// of B's load or a fresh load, never v=old.
	go func() {
		select {
		case release := <-gate.arrived:
			close(release)
		case <-time.After(5 * time.Second):
		}
	}()
	if got := tableParam(t, call(t, setup, "get_table", get), "v"); got != "new" {
		t.Fatalf("read after the write returned got v=%q; want new (stale fill)", got)
	}
}

// TestRefreshAhead: an entry past its refresh age is served at once and
// reloaded once in the background.
func TestRefreshAhead(t *testing.T) {
	demo, addr := startDemo(t, wire.Buffered)
	clock := newClock()
	caching := newCaching(t, clock)
	srv, paddr := startProxy(t, proxyOpts{cache: caching}, addr)
	c := dial(t, paddr, wire.Buffered)
	args := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.I16(3, -1))
	call(t, c, "get_partition_names", args)
	caching.Store.Wait()
	pol := caching.Store.Policy(hms.KindPartitionNames)
	clock.Advance(pol.RefreshAfter + time.Second)
	before := demo.CallCount("get_partition_names")
	for i := 0; i < 20; i++ {
		call(t, c, "get_partition_names", args) // all hits
	}
	refreshesSettled(t, srv)
	if n := demo.CallCount("get_partition_names") - before; n != 1 {
		t.Fatalf("refresh-ahead made %d upstream calls for 20 hits; want 1", n)
	}
	caching.Store.Wait()
	// The refreshed entry is young again: no more refreshes.
	call(t, c, "get_partition_names", args)
	if q := refreshesSettled(t, srv); q != 1 {
		t.Fatalf("refreshed entry refreshed again (%d refresh jobs)", q)
	}
	if n := demo.CallCount("get_partition_names") - before; n != 1 {
		t.Fatalf("refreshed entry refreshed again (%d calls)", n)
	}
	// Past the TTL an entry is never served.
	clock.Advance(pol.TTL + time.Second)
	call(t, c, "get_partition_names", args)
	if n := demo.CallCount("get_partition_names") - before; n != 2 {
		t.Fatalf("entry past its TTL served from cache (%d calls); want a load", n)
	}
}

// TestScopes: per-user scope keeps users apart; shared scope shares; a
// denied database is never cached.
func TestScopes(t *testing.T) {
	for _, perUser := range []bool{false, true} {
		t.Run(fmt.Sprintf("perUser=%v", perUser), func(t *testing.T) {
			demo, addr := startDemo(t, wire.Buffered)
			caching := newCaching(t, nil)
			caching.PerUser = perUser
			_, paddr := startProxy(t, proxyOpts{cache: caching}, addr)
			alice, bob := dial(t, paddr, wire.Buffered), dial(t, paddr, wire.Buffered)
			call(t, alice, "set_ugi", ugiArgs("alice"))
			call(t, bob, "set_ugi", ugiArgs("bob"))
			get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
			call(t, alice, "get_table", get)
			caching.Store.Wait()
			call(t, bob, "get_table", get)
			want := 1
			if perUser {
				want = 2
			}
			if n := demo.CallCount("get_table"); n != want {
				t.Fatalf("metastore saw %d loads; want %d", n, want)
			}
			// A batch read repeated until its memo answers it (batchmemo.go)
			// is still one user's: the memo's key holds the scope too.
			byNames := byNamesReq("get_partitions_by_names", partName(0), partName(1), partName(2))
			for range 3 {
				call(t, alice, "get_partitions_by_names", byNames)
				caching.Store.Wait()
			}
			call(t, bob, "get_partitions_by_names", byNames)
			if n := demo.CallCount("get_partitions_by_names"); n != want {
				t.Fatalf("metastore saw %d batch loads; want %d", n, want)
			}
			// A request repeated on one connection is answered without
			// being decoded (repeatedHit), but not across a change of the
			// session's scope.
			for range 3 {
				call(t, alice, "get_table", get)
			}
			call(t, alice, "setMetaConf", hmsclient.Args("hive.metastore.client.capability.check", "false"))
			call(t, alice, "get_table", get)
			if n := demo.CallCount("get_table"); n != want+1 {
				t.Fatalf("after setMetaConf: metastore saw %d loads; want %d", n, want+1)
			}
		})
	}
	// Issue 20: setMetaConf overrides change answers (capability checks,
	// direct SQL): entries are shared only between sessions with the
	// same overrides, a client-side timeout aside.
	t.Run("overrides", func(t *testing.T) {
		demo, _, caching, paddr := startCachingProxy(t)
		get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
		conf := func(kv ...string) *hmsclient.Client {
			c := dial(t, paddr, wire.Buffered)
			for i := 0; i+1 < len(kv); i += 2 {
				call(t, c, "setMetaConf", hmsclient.Args(kv[i], kv[i+1]))
			}
			return c
		}
		for i, step := range []struct {
			c     *hmsclient.Client
			loads int // the metastore's get_table loads after the read
		}{
			{conf(), 1},
			{conf("hive.metastore.client.socket.timeout", "700s"), 1}, // changes no answer
			{conf("hive.metastore.client.capability.check", "false"), 2},
			{conf("hive.metastore.client.capability.check", "false"), 2}, // the same overrides share
			{conf("hive.metastore.try.direct.sql", "false", "hive.metastore.client.capability.check", "false"), 3},
			{conf("hive.metastore.client.capability.check", "false", "hive.metastore.try.direct.sql", "false"), 3}, // in any order
			{conf("hive.metastore.client.capability.check", "true"), 4},
		} {
			call(t, step.c, "get_table", get)
			caching.Store.Wait()
			if n := demo.CallCount("get_table"); n != step.loads {
				t.Fatalf("read %d: metastore saw %d loads; want %d", i, n, step.loads)
			}
		}
	})
	t.Run("deny", func(t *testing.T) {
		demo, addr := startDemo(t, wire.Buffered)
		caching := newCaching(t, nil)
		p, err := filter.Compile(nil, []string{"demo_db1"})
		if err != nil {
			t.Fatal(err)
		}
		caching.Policy = p
		_, paddr := startProxy(t, proxyOpts{cache: caching}, addr)
		c := dial(t, paddr, wire.Buffered)
		for i := 0; i < 3; i++ {
			call(t, c, "get_table", hmsreq.Args(hmsreq.Str(1, "demo_db1"), hmsreq.Str(2, "t0")))
			caching.Store.Wait()
		}
		if n := demo.CallCount("get_table"); n != 3 {
			t.Fatalf("denied table loaded %d times for 3 reads; want 3 (never cached)", n)
		}
	})
}

// TestRandomizedReadYourWrites runs a writer and readers through one
// proxy and checks that no read returns a value older than a write that
// had already returned when the read began (promise 2).
func TestRandomizedReadYourWrites(t *testing.T) {
	_, addr, caching, paddr := startCachingProxy(t)
	setup := dial(t, paddr, wire.Buffered)
	call(t, setup, "create_table", tableArgs("demo_db0", "rw"))

	const writes, readers, readsEach = 1500, 4, 2200
	var lastV, lastParts atomic.Int64
	var stale, ops, hits atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the writer
		defer wg.Done()
		w, _ := hmsclient.Dial(ctx, paddr, wire.Buffered)
		defer w.Close()
		parts := int64(0)
		for v := int64(1); v <= writes; v++ {
			if v%5 == 0 {
				if _, err := w.Call(ctx, "add_partition", partitionArgs("demo_db0", "rw", fmt.Sprintf("p%05d", v))); err != nil {
					t.Error(err)
					return
				}
				parts++
				lastParts.Store(parts)
			} else {
				if _, err := w.Call(ctx, "alter_table", alterV("rw", v)); err != nil {
					t.Error(err)
					return
				}
				lastV.Store(v)
			}
			ops.Add(1)
		}
	}()
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "rw"))
	names := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "rw"), hmsreq.I16(3, -1))
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			c, _ := hmsclient.Dial(ctx, paddr, wire.Buffered)
			defer c.Close()
			for i := 0; i < readsEach; i++ {
				if (i+r)%2 == 0 {
					floor := lastV.Load()
					m, err := c.Call(ctx, "get_table", get)
					if err != nil {
						t.Error(err)
						return
					}
					if versionOf(t, m.Buf) < floor {
						stale.Add(1)
					}
				} else {
					floor := lastParts.Load()
					m, err := c.Call(ctx, "get_partition_names", names)
					if err != nil {
						t.Error(err)
						return
					}
					if got := int64(bytes.Count(m.Body(), []byte("ds=p"))); got < floor {
						stale.Add(1)
					}
				}
				ops.Add(1)
			}
		}(r)
	}
	wg.Wait()
	hits.Store(int64(caching.Store.Stats(hms.KindTable).Hits.Load() + caching.Store.Stats(hms.KindPartitionNames).Hits.Load()))
	t.Logf("%d operations, %d cache hits, %d stale reads", ops.Load(), hits.Load(), stale.Load())
	if ops.Load() < 10_000 {
		t.Fatalf("only %d operations ran", ops.Load())
	}
	if stale.Load() != 0 {
		t.Fatalf("%d reads returned a value older than a write that had returned", stale.Load())
	}
	if hits.Load() == 0 {
		t.Fatal("no cache hits: the test did not exercise the cache")
	}
	// And the proxy agrees with the metastore's own state at the end.
	direct := dial(t, addr, wire.Buffered)
	if !sameButSeqID(call(t, setup, "get_table", get), call(t, direct, "get_table", get)) {
		t.Fatal("final table through the proxy differs from the metastore's")
	}
}
