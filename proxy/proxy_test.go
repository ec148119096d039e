package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// testTable is table db.name with two columns, partitioned by ds.
func testTable(db, name string, params map[string]string) hmsreq.Table {
	return hmsreq.Table{
		DB:         db,
		Name:       name,
		Owner:      "tester",
		CreateTime: 1700000000,
		SD: hmsreq.TextSD("file:/tmp/wh/"+db+".db/"+name,
			hmsreq.Column{Name: "id", Type: "bigint"}, hmsreq.Column{Name: "name", Type: "string"}),
		PartKeys: []hmsreq.Column{{Name: "ds", Type: "string"}},
		Params:   params,
	}
}

func databaseArgs(name string) []byte {
	return hmsreq.Args(hmsreq.Database{Name: name, Description: "test database", Location: "file:/tmp/wh/" + name + ".db"}.Field(1))
}

func tableArgs(db, name string) []byte { return hmsreq.Args(testTable(db, name, nil).Field(1)) }

func alterTableArgs(db, name string, newTable hmsreq.Table) []byte {
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, name), newTable.Field(3))
}

func partitionArgs(db, table, ds string) []byte {
	return hmsreq.Args(hmsreq.Partition{
		DB:         db,
		Table:      table,
		Values:     []string{ds},
		CreateTime: 1700000000,
		SD: hmsreq.TextSD("file:/tmp/wh/"+db+".db/"+table+"/ds="+ds,
			hmsreq.Column{Name: "id", Type: "bigint"}, hmsreq.Column{Name: "name", Type: "string"}),
	}.Field(1))
}

func dropTableArgs(db, table string) []byte {
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, table), hmsreq.Bool(3, true))
}

func partNamesArgs(db, table string, max int16) []byte {
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, table), hmsreq.I16(3, max))
}

type req struct {
	method string
	args   []byte
}

// corpus is a sequence of calls covering every method the demo metastore
// implements, reads and writes, with some that fail.
func corpus() []req {
	byNames := func(db, tbl string, names ...string) []byte {
		return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, names...))
	}
	filter := func(db, tbl, f string) []byte {
		return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Str(3, f), hmsreq.I16(4, -1))
	}
	getTableReq := func(db, tbl string) []byte { return hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, tbl)) }
	notif := func(last int64, max int32) []byte { return hmsreq.Req(hmsreq.I64(1, last), hmsreq.I32(2, max)) }
	return []req{
		{"getName", hmsclient.Args()},
		{"getVersion", hmsclient.Args()},
		{"getStatus", hmsclient.Args()},
		{"get_all_databases", hmsclient.Args()},
		{"get_databases", hmsclient.Args("demo*")},
		{"get_database", hmsclient.Args("demo_db0")},
		{"get_database", hmsclient.Args("no_such_db")},
		{"get_all_tables", hmsclient.Args("demo_db0")},
		{"get_tables", hmsclient.Args("demo_db0", "t*")},
		{"get_table", hmsclient.Args("demo_db0", "t0")},
		{"get_table", hmsclient.Args("demo_db0", "missing")},
		{"get_table_req", getTableReq("demo_db0", "t1")},
		{"get_partition_names", partNamesArgs("demo_db0", "t0", -1)},
		{"get_partition_names", partNamesArgs("demo_db0", "t0", 5)},
		{"get_partitions_by_filter", filter("demo_db0", "t0", "ds = '2024-01-01'")},
		{"get_partitions_by_filter", filter("demo_db0", "t0", "ds >")},
		{"no_such_method_at_all", hmsclient.Args("x")},
		{"create_database", databaseArgs("corpus_db")},
		{"create_database", databaseArgs("corpus_db")}, // AlreadyExists
		{"get_database", hmsclient.Args("corpus_db")},
		{"create_table", tableArgs("corpus_db", "events")},
		{"get_table", hmsclient.Args("corpus_db", "events")},
		{"add_partition", partitionArgs("corpus_db", "events", "2024-02-01")},
		{"add_partition", partitionArgs("corpus_db", "events", "2024-02-02")},
		{"get_partition_names", partNamesArgs("corpus_db", "events", -1)},
		{"get_partitions_by_names", byNames("corpus_db", "events", "ds=2024-02-02", "ds=2024-02-01", "ds=missing")},
		{"get_partition_by_name", hmsclient.Args("corpus_db", "events", "ds=2024-02-01")},
		{"alter_table", alterTableArgs("corpus_db", "events", testTable("corpus_db", "events2", nil))},
		{"get_table", hmsclient.Args("corpus_db", "events")},
		{"get_table", hmsclient.Args("corpus_db", "events2")},
		{"get_partition_names", partNamesArgs("corpus_db", "events2", -1)},
		{"drop_table", dropTableArgs("corpus_db", "events2")},
		{"get_all_tables", hmsclient.Args("corpus_db")},
		{"get_current_notificationEventId", hmsclient.Args()},
		{"get_next_notification", notif(0, 100)},
	}
}

// TestTransparency replays the corpus against two identical demo
// metastores, one directly and one through the proxy, and requires equal
// bytes for every reply (promise 1).
func TestTransparency(t *testing.T) {
	for _, tc := range []struct {
		name           string
		client, server wire.Transport
	}{
		{"buffered", wire.Buffered, wire.Buffered},
		{"framed", wire.Framed, wire.Framed},
		{"framed-client-buffered-upstream", wire.Framed, wire.Buffered},
		{"buffered-client-framed-upstream", wire.Buffered, wire.Framed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One stopped clock for both: a create through each must
			// stamp the same second however the calls straddle one.
			at := time.Unix(1_700_000_000, 0)
			clock := func() time.Time { return at }
			demo := func() string {
				_, addr := proxytest.Demo(t, proxytest.DemoOptions{Config: demohms.Config{Transport: tc.server, Now: clock}})
				return addr
			}
			directAddr, behind := demo(), demo()
			_, proxyAddr := startProxy(t, proxyOpts{clientTransport: tc.client, up: upstream.Config{Transport: tc.server}}, behind)
			direct := dial(t, directAddr, tc.server)
			viaProxy := dial(t, proxyAddr, tc.client)
			methods := map[string]bool{}
			for i, r := range corpus() {
				want := call(t, direct, r.method, r.args)
				got := call(t, viaProxy, r.method, r.args)
				if !bytes.Equal(got, want) {
					t.Fatalf("call %d %s: reply through proxy differs\n got %x\nwant %x", i, r.method, got, want)
				}
				methods[r.method] = true
			}
			if len(methods) < 20 {
				t.Fatalf("corpus covered %d methods; want at least 20", len(methods))
			}
		})
	}
}

func TestUnknownMethodPassesThrough(t *testing.T) {
	demo, addr := startDemo(t, wire.Buffered)
	_, paddr := startProxy(t, proxyOpts{}, addr)
	c := dial(t, paddr, wire.Buffered)
	m, err := c.Call(ctxT(t), "get_table_req_from_the_future", hmsclient.Args("a"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Type != wire.Exception {
		t.Fatalf("got message type %d; want EXCEPTION", m.Type)
	}
	ex, err := wire.DecodeApplicationException(m.Body())
	if err != nil || ex.Code != wire.ExUnknownMethod {
		t.Fatalf("got %v, %v; want UNKNOWN_METHOD from the metastore", ex, err)
	}
	if n := demo.CallCount("get_table_req_from_the_future"); n != 1 {
		t.Fatalf("metastore saw the unknown method %d times; want 1", n)
	}
}

// TestOneway: oneway calls get no reply and do not desynchronise the
// stream; shutdown is not forwarded onto shared upstream connections.
func TestOneway(t *testing.T) {
	for _, typ := range []byte{wire.Oneway, wire.Call} {
		t.Run(fmt.Sprintf("type%d", typ), func(t *testing.T) {
			demo, addr := startDemo(t, wire.Buffered)
			_, paddr := startProxy(t, proxyOpts{}, addr)
			c := dial(t, paddr, wire.Buffered)
			ctx := ctxT(t)
			if err := c.Send(ctx, typ, "reinitialize", hmsclient.Args()); err != nil {
				t.Fatal(err)
			}
			if err := c.Send(ctx, typ, "shutdown", hmsclient.Args()); err != nil {
				t.Fatal(err)
			}
			// The next reply must be getName's, with getName's seqid.
			m, err := c.Call(ctx, "getName", hmsclient.Args())
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Name()) != "getName" || m.Type != wire.Reply {
				t.Fatalf("got %s type %d; want getName REPLY", m.Name(), m.Type)
			}
			if n := demo.CallCount("reinitialize"); n != 1 {
				t.Fatalf("reinitialize reached the metastore %d times; want 1", n)
			}
			if n := demo.CallCount("shutdown"); n != 0 {
				t.Fatalf("shutdown reached the metastore %d times; want 0", n)
			}
		})
	}
}

// TestSetUGIIsolation: users interleaved over a pool of one upstream
// connection each see only their own identity upstream (promise 6).
func TestSetUGIIsolation(t *testing.T) {
	demo, addr := startDemo(t, wire.Buffered)
	_, paddr := startProxy(t, proxyOpts{up: upstream.Config{MaxConns: 1}}, addr)
	alice := dial(t, paddr, wire.Buffered)
	bob := dial(t, paddr, wire.Buffered)
	anon := dial(t, paddr, wire.Buffered)
	ugiReply := call(t, alice, "set_ugi", ugiArgs("alice", "analysts"))
	call(t, bob, "set_ugi", ugiArgs("bob"))
	demo.ResetCalls()

	var wg sync.WaitGroup
	run := func(c *hmsclient.Client, method string, args []byte) {
		defer wg.Done()
		for i := 0; i < 50; i++ {
			if _, err := c.Call(context.Background(), method, args); err != nil {
				t.Error(err)
				return
			}
		}
	}
	wg.Add(3)
	go run(alice, "get_all_databases", hmsclient.Args())
	go run(bob, "get_all_tables", hmsclient.Args("demo_db0"))
	go run(anon, "getName", hmsclient.Args())
	wg.Wait()

	want := map[string]string{"get_all_databases": "alice", "get_all_tables": "bob", "getName": ""}
	seen := map[string]int{}
	for _, c := range demo.Calls() {
		if c.Method == "set_ugi" {
			continue
		}
		if c.User != want[c.Method] {
			t.Fatalf("%s ran upstream as %q; want %q", c.Method, c.User, want[c.Method])
		}
		seen[c.Method]++
	}
	for m := range want {
		if seen[m] != 50 {
			t.Fatalf("%s reached the metastore %d times; want 50", m, seen[m])
		}
	}

	// The client saw the metastore's own set_ugi reply.
	direct := dial(t, addr, wire.Buffered)
	if want := call(t, direct, "set_ugi", ugiArgs("alice", "analysts")); !bytes.Equal(ugiReply, want) {
		t.Fatalf("set_ugi reply through proxy %x; want %x", ugiReply, want)
	}

	// HMS drops a connection that calls set_ugi twice; so does the proxy.
	alice.Send(ctxT(t), wire.Call, "set_ugi", ugiArgs("mallory"))
	expectClosed(t, alice)
}

// TestSetMetaConfFollowsClient: a client's setMetaConf holds on whatever
// upstream connection serves it, and no other client sees it.
func TestSetMetaConfFollowsClient(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	_, paddr := startProxy(t, proxyOpts{up: upstream.Config{MaxConns: 1}}, addr)
	a := dial(t, paddr, wire.Buffered)
	b := dial(t, paddr, wire.Buffered)
	const key = "hive.metastore.try.direct.sql"
	call(t, a, "setMetaConf", hmsclient.Args(key, "false"))
	for i := 0; i < 5; i++ {
		gotA := call(t, a, "getMetaConf", hmsclient.Args(key))
		gotB := call(t, b, "getMetaConf", hmsclient.Args(key))
		if !bytes.Contains(gotA, []byte("false")) {
			t.Fatalf("client a lost its setMetaConf: %q", gotA)
		}
		if bytes.Contains(gotB, []byte("false")) {
			t.Fatalf("client b sees a's setMetaConf: %q", gotB)
		}
	}
}

// TestUpstreamDown: an unreachable metastore reaches the client as a
// closed connection, quickly, never as an answer.
func TestUpstreamDown(t *testing.T) {
	ln := proxytest.Listen(t)
	dead := ln.Addr().String()
	ln.Close()
	_, paddr := startProxy(t, proxyOpts{up: upstream.Config{DialTimeout: time.Second}}, dead)
	c := dial(t, paddr, wire.Buffered)
	start := time.Now()
	_, err := c.Call(ctxT(t), "get_table", hmsclient.Args("db", "t"))
	if err == nil {
		t.Fatal("got a reply from a proxy whose metastore is down; want a transport failure")
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		var ne net.Error
		if !errors.As(err, &ne) || ne.Timeout() {
			t.Fatalf("got %v; want the connection closed", err)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("failure took %v; want well under the dial timeout plus slack", d)
	}
}

// TestFailover: with the first metastore down, calls go to the next; when
// the serving metastore dies mid-run, reads move on.
func TestFailover(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	demoA, addrA := startDemo(t, wire.Buffered)
	demoB, addrB := startDemo(t, wire.Buffered)
	_, paddr := startProxy(t, proxyOpts{}, dead, addrA, addrB)
	c := dial(t, paddr, wire.Buffered)
	want := call(t, dial(t, addrB, wire.Buffered), "get_table", hmsclient.Args("demo_db0", "t0"))
	for i := 0; i < 5; i++ {
		if got := call(t, c, "get_table", hmsclient.Args("demo_db0", "t0")); !sameButSeqID(got, want) {
			t.Fatalf("reply %d differs", i)
		}
	}
	if demoA.CallCount("get_table") != 5 {
		t.Fatalf("first live metastore served %d calls; want 5", demoA.CallCount("get_table"))
	}
	demoA.Close()
	for i := 0; i < 5; i++ {
		call(t, c, "get_table", hmsclient.Args("demo_db0", "t0"))
	}
	if demoB.CallCount("get_table") < 5 {
		t.Fatalf("second metastore served %d calls after the first died; want 5", demoB.CallCount("get_table"))
	}
}

// sameButSeqID compares two whole messages, seqid aside.
func sameButSeqID(a, b []byte) bool {
	ma, errA := wire.Parse(a, wire.Limits{})
	mb, errB := wire.Parse(b, wire.Limits{})
	return errA == nil && errB == nil && ma.Type == mb.Type &&
		bytes.Equal(ma.Name(), mb.Name()) && bytes.Equal(ma.Body(), mb.Body())
}

// blackHole answers health checks, then reads one call and closes without
// replying: a metastore that died mid-call.
func blackHole(t *testing.T) (string, *int32Counter) {
	var n int32Counter
	return proxytest.Fake(t, wire.Buffered, func(c *proxytest.FakeConn, m wire.Message) error {
		if string(m.Name()) != "getStatus" {
			n.add()
			return errHangUp
		}
		// Health checks pass: the metastore looks alive.
		e := wire.Encoder{B: wire.AppendHeader(nil, wire.Reply, m.Name(), m.SeqID)}
		e.I32Field(0, 2)
		e.Stop()
		return c.W.Write(e.B)
	}), &n
}

// errHangUp makes a fake metastore close the connection.
var errHangUp = errors.New("proxy test: hang up")

type int32Counter struct {
	mu sync.Mutex
	n  int
}

func (c *int32Counter) add() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *int32Counter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestWriteNeverRetried: a write whose metastore dies after receiving it is
// reported to the client as a failure and never sent to another
// metastore; a read in the same spot moves on (promise 8).
func TestWriteNeverRetried(t *testing.T) {
	hole, received := blackHole(t)
	demo, addr := startDemo(t, wire.Buffered)
	_, paddr := startProxy(t, proxyOpts{}, hole, addr)

	w := dial(t, paddr, wire.Buffered)
	if _, err := w.Call(ctxT(t), "create_database", databaseArgs("never_twice")); err == nil {
		t.Fatal("write reported success though its metastore died mid-call")
	}
	if received.get() != 1 {
		t.Fatalf("dying metastore received the write %d times; want 1", received.get())
	}
	if n := demo.CallCount("create_database"); n != 0 {
		t.Fatalf("write was retried on the next metastore (%d calls); want never", n)
	}

	r := dial(t, paddr, wire.Buffered)
	call(t, r, "get_all_databases", hmsclient.Args())
	if demo.CallCount("get_all_databases") != 1 {
		t.Fatal("read that failed before any reply was not retried on the next metastore")
	}
}

// TestLongWriteLives: a write far longer than the read timeout completes,
// and other clients keep being served meanwhile; a read that slow is cut
// off, so the write survives by rule, not by luck (promise 8).
func TestLongWriteLives(t *testing.T) {
	demo, addr := startDemo(t, wire.Buffered)
	_, paddr := startProxy(t, proxyOpts{up: upstream.Config{ReadTimeout: 300 * time.Millisecond}}, addr)
	const writeTime = 3 * time.Second
	demo.SetDelay("alter_table", writeTime)

	setup := dial(t, paddr, wire.Buffered)
	call(t, setup, "create_table", tableArgs("demo_db0", "wide"))
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		c, err := hmsclient.Dial(context.Background(), paddr, wire.Buffered)
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		m, err := c.Call(context.Background(), "alter_table", alterTableArgs("demo_db0", "wide", testTable("demo_db0", "wide", nil)))
		if err == nil && !upstream.Succeeded(m) {
			err = fmt.Errorf("alter_table failed: %x", m.Buf)
		}
		done <- err
	}()

	other := dial(t, paddr, wire.Buffered)
	served := 0
	for time.Since(start) < writeTime-500*time.Millisecond {
		call(t, other, "get_database", hmsclient.Args("demo_db0"))
		served++
	}
	if err := <-done; err != nil {
		t.Fatalf("long write: %v", err)
	}
	if d := time.Since(start); d < writeTime {
		t.Fatalf("write returned after %v; the delay was %v", d, writeTime)
	}
	if served < 10 {
		t.Fatalf("only %d reads served during the write", served)
	}

	demo.SetDelay("get_database", time.Second)
	slow := dial(t, paddr, wire.Buffered)
	if _, err := slow.Call(ctxT(t), "get_database", hmsclient.Args("demo_db0")); err == nil {
		t.Fatal("a read slower than the read timeout was not cut off")
	}
}

// TestShutdownDrains: a call in flight when shutdown starts completes;
// idle connections are closed; new ones are refused.
func TestShutdownDrains(t *testing.T) {
	demo, addr := startDemo(t, wire.Buffered)
	s, paddr := startProxy(t, proxyOpts{}, addr)
	demo.SetDelay("get_all_databases", 500*time.Millisecond)
	busy := dial(t, paddr, wire.Buffered)
	idle := dial(t, paddr, wire.Buffered)
	call(t, idle, "getName", hmsclient.Args())

	errc := make(chan error, 1)
	go func() {
		_, err := busy.Call(context.Background(), "get_all_databases", hmsclient.Args())
		errc <- err
	}()
	// Shut down once the call is in flight: the metastore has it.
	wait.Eventually(t, 10*time.Second, func() bool { return demo.CallCount("get_all_databases") != 0 }, "the call never reached the metastore")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("in-flight call cut by shutdown: %v", err)
	}
	expectClosed(t, idle)
	if c, err := net.DialTimeout("tcp", paddr, time.Second); err == nil {
		c.Close()
		t.Fatal("proxy still accepts after shutdown")
	}
}
