package eventlog

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

func TestEntities(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"tableObjBeforeJson":"{\"1\":{\"str\":\"Old\"},\"2\":{\"str\":\"db\"}}","tableObjAfterJson":"{\"1\":{\"str\":\"new\"},\"2\":{\"str\":\"db2\"}}"}`))
	zw.Close()
	tbl := func(db, t string) cache.Entity {
		return cache.Entity{Level: cache.LevelTable, Cat: "hive", DB: db, Table: t}
	}
	cases := []struct {
		name string
		ev   Event
		want []cache.Entity
	}{
		{"create table", Event{Type: "CREATE_TABLE", DB: "DB", Table: "T"}, []cache.Entity{tbl("db", "t")}},
		{"add partition", Event{Type: "ADD_PARTITION", DB: "db", Table: "t"}, []cache.Entity{{Level: cache.LevelPartitions, Cat: "hive", DB: "db", Table: "t", Added: true}}},
		// Only an add is narrowed: a drop or an alter changes partitions that exist.
		{"drop partition", Event{Type: "DROP_PARTITION", DB: "db", Table: "t"}, []cache.Entity{{Level: cache.LevelPartitions, Cat: "hive", DB: "db", Table: "t"}}},
		{"alter partition", Event{Type: "ALTER_PARTITION", DB: "db", Table: "t"}, []cache.Entity{{Level: cache.LevelPartitions, Cat: "hive", DB: "db", Table: "t"}}},
		{"drop database", Event{Type: "DROP_DATABASE", DB: "db"}, []cache.Entity{{Level: cache.LevelDatabase, Cat: "hive", DB: "db"}}},
		{"catalog from event", Event{Type: "DROP_DATABASE", Cat: "Spark", DB: "db"}, []cache.Entity{{Level: cache.LevelDatabase, Cat: "spark", DB: "db"}}},
		{"function", Event{Type: "CREATE_FUNCTION", DB: "db"}, []cache.Entity{{Level: cache.LevelFunction, Cat: "hive", DB: "db"}}},
		{"open txn", Event{Type: "OPEN_TXN"}, nil},
		{"rename, json", Event{Type: "ALTER_TABLE", DB: "db", Table: "old", Format: "json-0.2",
			Message: `{"tableObjBeforeJson":"{\"1\":{\"str\":\"old\"},\"2\":{\"str\":\"db\"}}","tableObjAfterJson":"{\"1\":{\"str\":\"new\"},\"2\":{\"str\":\"db\"}}"}`},
			[]cache.Entity{tbl("db", "old"), tbl("db", "old"), tbl("db", "new")}},
		{"rename, gzip json", Event{Type: "ALTER_TABLE", DB: "db", Table: "old", Format: "gzip(json-2.0)", Message: base64.StdEncoding.EncodeToString(gz.Bytes())},
			[]cache.Entity{tbl("db", "old"), tbl("db", "old"), tbl("db2", "new")}},
		{"commit 4.0", Event{Type: "COMMIT_TXN", Message: `{"databases":["db","db"],"tables":["a","b"]}`}, []cache.Entity{tbl("db", "a"), tbl("db", "b")}},
		{"commit 3.1", Event{Type: "COMMIT_TXN", Message: `{"txnid":5}`}, nil},
		{"unknown with table", Event{Type: "SOMETHING_NEW", DB: "db", Table: "t"}, []cache.Entity{tbl("db", "t")}},
		{"unknown, nothing named", Event{Type: "SOMETHING_NEW"}, []cache.Entity{{Level: cache.LevelAll}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Entities(tc.ev, "hive"); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v; want %v", got, tc.want)
			}
		})
	}
}

type recorder struct {
	mu    sync.Mutex
	ents  []cache.Entity
	drops []string
}

func (r *recorder) apply(_ context.Context, e []cache.Entity) {
	r.mu.Lock()
	r.ents = append(r.ents, e...)
	r.mu.Unlock()
}
func (r *recorder) drop(why string) { r.mu.Lock(); r.drops = append(r.drops, why); r.mu.Unlock() }

// TestPollDemo: writes made directly on the metastore come out of the
// poller as invalidations, in order, with the cursor kept.
func TestPollDemo(t *testing.T) {
	_, addr := proxytest.Demo(t, proxytest.DemoOptions{Seed: [3]int{1, 2, 5}})
	direct := &hmsclient.Redialer{Addr: addr}
	defer direct.Close()
	rec := &recorder{}
	cur := &MemCursor{}
	p, err := New(Config{Caller: &hmsclient.Redialer{Addr: addr}, Cursor: cur, Apply: rec.apply, Drop: rec.drop, Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if len(rec.drops) != 1 {
		t.Fatalf("first poll drops %v; want one drop (no cursor yet)", rec.drops)
	}
	// Three writes behind the proxy's back.
	for _, db := range []string{"ev_a", "ev_b", "ev_c"} {
		if _, err := direct.Call(ctx, "create_database", createDBArgs(db)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	var dbs []string
	for _, e := range rec.ents {
		dbs = append(dbs, e.DB)
	}
	if !slices.Equal(dbs, []string{"ev_a", "ev_b", "ev_c"}) {
		t.Fatalf("invalidated %v; want the three new databases in order", dbs)
	}
	if id, _, _ := cur.Load(ctx); id != p.Stats().Latest.Load() || id == 0 {
		t.Fatalf("cursor %d, latest %d", id, p.Stats().Latest.Load())
	}
	if len(rec.drops) != 1 {
		t.Fatalf("drops %v after a clean poll", rec.drops)
	}
}

// fakeLog answers with a scripted notification log.
type fakeLog struct {
	latest int64
	events []int64 // ids present
}

func (f *fakeLog) Call(_ context.Context, method string, args []byte) (wire.Message, error) {
	e := wire.Encoder{B: wire.AppendHeader(nil, wire.Reply, []byte(method), 1)}
	e.FieldBegin(wire.TStruct, 0)
	switch method {
	case "get_current_notificationEventId":
		e.I64Field(1, f.latest)
	case "get_next_notification":
		d := wire.NewDecoder(args)
		d.FieldBegin()
		d.FieldBegin()
		last := d.I64()
		var ids []int64
		for _, id := range f.events {
			if id > last {
				ids = append(ids, id)
			}
		}
		e.FieldBegin(wire.TList, 1)
		e.ListBegin(wire.TStruct, len(ids))
		for _, id := range ids {
			e.I64Field(1, id)
			e.I32Field(2, int32(time.Now().Unix()))
			e.StringField(3, "CREATE_TABLE")
			e.StringField(4, "db")
			e.StringField(5, "t")
			e.StringField(6, "{}")
			e.Stop()
		}
	}
	e.Stop()
	e.Stop()
	return wire.Parse(e.B, wire.Limits{})
}

// TestPollGaps: purged or missing events, and a log that went backwards,
// drop the cache and move the cursor on.
func TestPollGaps(t *testing.T) {
	cases := []struct {
		name      string
		cursor    int64
		log       fakeLog
		wantDrops int
		wantAt    int64
	}{
		{"contiguous", 10, fakeLog{latest: 12, events: []int64{11, 12}}, 0, 12},
		{"missing in the middle", 10, fakeLog{latest: 13, events: []int64{11, 13}}, 1, 13},
		{"purged ahead of cursor", 10, fakeLog{latest: 20, events: []int64{15, 16, 17, 18, 19, 20}}, 1, 20},
		{"all newer purged", 10, fakeLog{latest: 20, events: nil}, 1, 20},
		{"log went backwards", 50, fakeLog{latest: 3, events: []int64{1, 2, 3}}, 1, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			cur := &MemCursor{}
			cur.Save(context.Background(), tc.cursor)
			p, _ := New(Config{Caller: &tc.log, Cursor: cur, Apply: rec.apply, Drop: rec.drop})
			if err := p.Poll(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(rec.drops) != tc.wantDrops {
				t.Fatalf("drops %v; want %d", rec.drops, tc.wantDrops)
			}
			if id, _, _ := cur.Load(context.Background()); id != tc.wantAt {
				t.Fatalf("cursor at %d; want %d", id, tc.wantAt)
			}
		})
	}
}

// TestBypassingWriteSeenThroughProxy: a write made directly on the
// metastore shows through a caching proxy within the poll interval plus
// one second (promise 4).
func TestBypassingWriteSeenThroughProxy(t *testing.T) {
	_, addr := proxytest.Demo(t, proxytest.DemoOptions{Seed: [3]int{1, 1, 3}})
	st := proxytest.Store(t, cache.Config{MaxBytes: 16 << 20})
	srv, err := proxy.New(proxy.Config{Cache: &proxy.Caching{Store: st}}, proxytest.Group(t, upstream.Config{}, addr))
	if err != nil {
		t.Fatal(err)
	}
	paddr := proxytest.Serve(t, srv)

	const interval = 200 * time.Millisecond
	p, err := New(Config{Caller: &hmsclient.Redialer{Addr: addr}, Cursor: &MemCursor{},
		Apply: func(ctx context.Context, e []cache.Entity) { srv.Flush(ctx, e) }, Drop: srv.DropAll})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.Poll(ctx)
	go func() { // the runner's loop, without its jitter
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for ctx.Err() == nil {
			p.Poll(ctx)
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()

	c := &hmsclient.Redialer{Addr: paddr}
	defer c.Close()
	direct := &hmsclient.Redialer{Addr: addr}
	defer direct.Close()
	count := partitionCounter(t, ctx, c)
	before := count()
	st.Wait()
	count() // now a hit
	dropBehind(t, ctx, direct)
	start := time.Now()
	if !wait.Until(interval+time.Second, func() bool { return count() == before-1 }) {
		t.Fatalf("bypassing write not visible through the proxy after %v", time.Since(start))
	}
	t.Logf("bypassing write visible through the proxy after %v (poll interval %v)", time.Since(start), interval)
}

// lostCursor is a shared cursor in a Redis that restarted empty, before
// a new leader is elected: nothing to load, and saves are refused.
type lostCursor struct{ saves int }

func (*lostCursor) Load(context.Context) (int64, bool, error) { return 0, false, nil }
func (c *lostCursor) Save(context.Context, int64) error {
	c.saves++
	return errors.New("test: not the leader")
}

// TestMissingCursorFlushesOnce (issue 10, item 6): while the shared cursor
// is missing and cannot be saved, the poller drops the cache once, then
// carries on from its own position, applying every event, instead of
// dropping every cache on each poll.
func TestMissingCursorFlushesOnce(t *testing.T) {
	log := &fakeLog{latest: 10, events: []int64{9, 10}}
	rec := &recorder{}
	cur := &lostCursor{}
	p, err := New(Config{Caller: log, Cursor: cur, Apply: rec.apply, Drop: rec.drop})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 3 {
		p.Poll(ctx) // fails to save; that is the point
		log.latest++
		log.events = append(log.events, log.latest)
		if i == 0 && len(rec.drops) != 1 {
			t.Fatalf("first poll without a cursor: drops %v; want one", rec.drops)
		}
	}
	p.Poll(ctx)
	if len(rec.drops) != 1 {
		t.Fatalf("drops %v over 4 polls without a cursor; want one", rec.drops)
	}
	if got := len(rec.ents); got != 3 {
		t.Fatalf("applied %d events' invalidations; want the 3 written after the first poll", got)
	}
	if cur.saves != 4 {
		t.Fatalf("cursor saves tried %d; want one per poll", cur.saves)
	}
}

// TestFollowReportsSharedCursor: a node that does not poll reports the
// shared cursor as applied while its cache is served, and never moves
// Applied back (issue 20: the twin and operators wait on every node).
func TestFollowReportsSharedCursor(t *testing.T) {
	cur := &MemCursor{}
	synced := true
	p, err := New(Config{Caller: &hmsclient.Redialer{Addr: "127.0.0.1:1"}, Cursor: cur,
		Apply: func(context.Context, []cache.Entity) {}, Drop: func(string) {}, Synced: func() bool { return synced }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, step := range []struct {
		saved  int64 // the shared cursor, saved by the polling node
		synced bool
		want   int64
	}{
		{0, true, 0}, // nothing saved yet
		{7, true, 7},
		{9, false, 7}, // not in step with the bus: reports nothing new
		{9, true, 9},
		{5, true, 9}, // never back
	} {
		if step.saved > 0 {
			cur.Save(ctx, step.saved)
		}
		synced = step.synced
		if err := p.Follow(ctx); err != nil {
			t.Fatal(err)
		}
		if got := p.Stats().Applied.Load(); got != step.want {
			t.Errorf("step %d: Applied = %d; want %d", i, got, step.want)
		}
	}
}

// createDBArgs are create_database's args for a database named db and
// nothing else.
func createDBArgs(db string) []byte { return hmsreq.Req(hmsreq.Str(1, db)) }

// partitionCounter returns a func that counts the partitions of the
// demo's demo_db0.t0 that get_partition_names lists through c.
func partitionCounter(t *testing.T, ctx context.Context, c *hmsclient.Redialer) func() int {
	var na wire.Encoder
	na.StringField(1, "demo_db0")
	na.StringField(2, "t0")
	na.FieldBegin(wire.TI16, 3)
	na.I16(-1)
	na.Stop()
	return func() int {
		m, err := c.Call(ctx, "get_partition_names", na.B)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Count(m.Body(), []byte("ds="))
	}
}

// dropBehind drops partition ds=2024-01-01/hr=0 of demo_db0.t0 through
// direct, a connection straight to the metastore: behind the proxy's back.
func dropBehind(t *testing.T, ctx context.Context, direct *hmsclient.Redialer) {
	t.Helper()
	var e wire.Encoder
	e.StringField(1, "demo_db0")
	e.StringField(2, "t0")
	e.StringField(3, "ds=2024-01-01/hr=0")
	e.BoolField(4, true)
	e.Stop()
	if m, err := direct.Call(ctx, "drop_partition_by_name", e.B); err != nil || m.Type != wire.Reply {
		t.Fatalf("direct drop: %v", err)
	}
}
