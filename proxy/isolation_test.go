package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// Tests of issue 9 on the upstream side: replies reach only the client
// whose request they answer, and a slow or departed client costs only its
// own connection.

// isoProxy runs a proxy over addr with the given upstream config, and
// returns its address and upstream group. wrap, if set, wraps the group.
func isoProxy(t *testing.T, up upstream.Config, caching *Caching, addr string, wrap func(Forwarder) Forwarder) (string, *upstream.Metastores) {
	t.Helper()
	g := proxytest.Group(t, up, addr)
	var fw Forwarder = g
	if wrap != nil {
		fw = wrap(g)
	}
	_, paddr := serve(t, Config{Cache: caching}, fw)
	return paddr, g
}

// doneForwarder signals each call it has forwarded.
type doneForwarder struct {
	up   Forwarder
	done chan upstream.Call
}

func (f *doneForwarder) Do(ctx context.Context, c upstream.Call, sink upstream.ReplySink) error {
	err := f.up.Do(ctx, c, sink)
	select {
	case f.done <- c:
	default:
	}
	return err
}

func getTableArgs(db, tbl string) []byte {
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl))
}

// replyTableName is the tableName of a get_table reply.
func replyTableName(t testing.TB, m wire.Message) string {
	t.Helper()
	return proxytest.TableName(t, m.Buf)
}

// appException decodes a TApplicationException reply.
func appException(t testing.TB, m wire.Message) *wire.ApplicationException {
	t.Helper()
	if m.Type != wire.Exception {
		t.Fatalf("message type %d; want EXCEPTION", m.Type)
	}
	ex, err := wire.DecodeApplicationException(m.Body())
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// TestOnewayTwoWayMethodRefused guards issue 9: a get_table typed ONEWAY
// made the proxy release its metastore connection at once; the metastore
// answered anyway and the next client on that connection with the same
// seqid got table t1 for its get_table(t0) — and with the cache on, so did
// everyone after it. Now the proxy refuses the message and never forwards
// it.
func TestOnewayTwoWayMethodRefused(t *testing.T) {
	withAndWithoutCache(t, func(t *testing.T, caching *Caching) {
		d, addr := startDemo(t, wire.Buffered)
		fw := &doneForwarder{done: make(chan upstream.Call, 16)}
		paddr, _ := isoProxy(t, upstream.Config{MaxConns: 1}, caching, addr, func(g Forwarder) Forwarder {
			fw.up = g
			return fw
		})

		bad := dial(t, paddr, wire.Buffered)
		if err := bad.Send(ctxT(t), wire.Oneway, "get_table", getTableArgs("demo_db0", "t1")); err != nil {
			t.Fatal(err)
		}
		// Either the proxy answers the bad client (refused), or it
		// forwarded the call: wait for whichever happens first.
		answered := make(chan error, 1)
		var ans wire.Message
		go func() {
			m, err := bad.Recv(ctxT(t))
			ans = m
			answered <- err
		}()
		select {
		case err := <-answered:
			if err != nil {
				t.Fatalf("bad client: %v; want INVALID_MESSAGE_TYPE", err)
			}
			if ex := appException(t, ans); ex.Code != wire.ExInvalidMsgType {
				t.Fatalf("exception type %d; want INVALID_MESSAGE_TYPE", ex.Code)
			}
			expectClosed(t, bad)
		case c := <-fw.done:
			t.Logf("proxy forwarded %s typed %d", c.Msg.Name(), c.Msg.Type)
		case <-time.After(5 * time.Second):
			t.Fatal("the oneway-typed get_table was neither refused nor forwarded")
		}

		for i := 0; i < 3; i++ {
			victim := dial(t, paddr, wire.Buffered) // seqid 1, as the bad call
			m, err := victim.Call(ctxT(t), "get_table", getTableArgs("demo_db0", "t0"))
			if err != nil {
				t.Fatalf("victim %d: %v", i, err)
			}
			if got := replyTableName(t, m); got != "t0" {
				t.Fatalf("victim %d: get_table(demo_db0, t0) returned table %q", i, got)
			}
		}
		if n := d.CallCount("get_table"); n < 1 {
			t.Fatalf("metastore got %d get_table calls; want at least the victim's", n)
		}
	})
}

// TestOnewayUnknownMethodNotReused: an unknown method typed ONEWAY is
// forwarded (the proxy cannot know it is not oneway), and whatever the
// metastore answers reaches no later client.
func TestOnewayUnknownMethodNotReused(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered) // answers every message, with an UNKNOWN_METHOD exception here
	paddr, g := isoProxy(t, upstream.Config{MaxConns: 1}, nil, addr, nil)
	c := dial(t, paddr, wire.Buffered)
	if err := c.Send(ctxT(t), wire.Oneway, "get_table_from_the_future", hmsreq.Args()); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 5*time.Second, func() bool { return g.Stats().OnewayClosed != 0 }, "the unknown oneway call was not forwarded on a connection closed after it")
	// The same client's next call, with the next seqid, gets its own reply.
	m, err := c.Call(ctxT(t), "get_table", getTableArgs("demo_db0", "t0"))
	if err != nil {
		t.Fatal(err)
	}
	if got := replyTableName(t, m); got != "t0" {
		t.Fatalf("got table %q; want t0", got)
	}
}

// TestRepliesPairedProperty: many clients send random message types
// (1..4), random seqids from a small range (so they collide), known and
// unknown methods, over one upstream connection. Every reply a client
// gets answers its own request: same method name and seqid, and for
// get_table the table it asked for.
func TestRepliesPairedProperty(t *testing.T) {
	withAndWithoutCache(t, func(t *testing.T, caching *Caching) {
		_, addr := startDemo(t, wire.Buffered)
		paddr, _ := isoProxy(t, upstream.Config{MaxConns: 1}, caching, addr, nil)
		const clients, ops = 8, 60
		var wg sync.WaitGroup
		for i := 0; i < clients; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pairedClient(t, paddr, uint64(i), ops)
			}()
		}
		wg.Wait()
	})
}

// withAndWithoutCache runs test twice, as subtests: with caching nil (no
// cache), then with a cache (newCaching).
func withAndWithoutCache(t *testing.T, test func(t *testing.T, caching *Caching)) {
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cache=%v", cached), func(t *testing.T) {
			var caching *Caching
			if cached {
				caching = newCaching(t, nil)
			}
			test(t, caching)
		})
	}
}

type pairOp struct {
	method string
	args   []byte
	table  string // for get_table, the table asked for
}

func pairedClient(t *testing.T, addr string, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, 9))
	var nc net.Conn
	var r *wire.Reader
	var w *wire.Writer
	connect := func() bool {
		var err error
		nc, err = net.Dial("tcp", addr)
		if err != nil {
			t.Error(err)
			return false
		}
		r = wire.NewReader(nc, wire.Buffered, wire.Limits{MaxMessage: 1 << 30})
		w = wire.NewWriter(nc, wire.Buffered)
		return true
	}
	if !connect() {
		return
	}
	defer func() { nc.Close() }()
	for i := 0; i < ops; i++ {
		var op pairOp
		switch rng.IntN(4) {
		case 0, 1:
			tbl := fmt.Sprintf("t%d", rng.IntN(3))
			op = pairOp{"get_table", getTableArgs("demo_db0", tbl), tbl}
		case 2:
			op = pairOp{"get_database", hmsreq.Args(hmsreq.Str(1, fmt.Sprintf("demo_db%d", rng.IntN(2)))), ""}
		default:
			op = pairOp{"no_such_method", hmsreq.Args(), ""}
		}
		typ := byte(1 + rng.IntN(4))
		if rng.IntN(2) == 0 {
			typ = wire.Call // mostly well-formed traffic, so the calls interleave
		}
		seq := int32(rng.IntN(3))
		b := wire.AppendHeader(nil, typ, []byte(op.method), seq)
		b = append(b, op.args...)
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := w.Write(b); err != nil {
			t.Errorf("client %d op %d: send: %v", seed, i, err)
			return
		}
		expectReply := typ == wire.Call
		refused := typ == wire.Reply || typ == wire.Exception || typ == wire.Oneway && op.method != "no_such_method"
		if !expectReply && !refused {
			// A oneway-typed unknown method: no answer; carry on.
			continue
		}
		m, err := r.Read()
		if err != nil {
			t.Errorf("client %d op %d: %s typed %d: no reply: %v", seed, i, op.method, typ, err)
			return
		}
		if string(m.Name()) != op.method || m.SeqID != seq {
			t.Errorf("client %d op %d: sent %s seqid %d; got a reply to %s seqid %d", seed, i, op.method, seq, m.Name(), m.SeqID)
			return
		}
		if refused {
			if ex := appException(t, m); ex.Code != wire.ExInvalidMsgType {
				t.Errorf("client %d op %d: refused with %d; want INVALID_MESSAGE_TYPE", seed, i, ex.Code)
			}
			// The proxy closes a connection whose stream it refused.
			if _, err := r.Read(); !errors.Is(err, io.EOF) {
				t.Errorf("client %d op %d: after a refusal got %v; want EOF", seed, i, err)
				return
			}
			nc.Close()
			if !connect() {
				return
			}
			continue
		}
		if op.table != "" {
			if got := replyTableName(t, m); got != op.table {
				t.Errorf("client %d op %d: get_table(%s) returned table %s", seed, i, op.table, got)
				return
			}
		}
	}
}

// bigFake is a metastore that answers big_reply with size bytes and any
// other method with a small reply; it closes big when it has sent it.
func bigFake(t *testing.T, size int) (addr string, sent chan struct{}) {
	return bigFakeT(t, wire.Buffered, size)
}

func bigFakeT(t *testing.T, tr wire.Transport, size int) (addr string, sent chan struct{}) {
	sent = make(chan struct{}, 1)
	return proxytest.Fake(t, tr, func(c *proxytest.FakeConn, m wire.Message) error {
		e := wire.Encoder{B: wire.AppendHeader(nil, wire.Reply, m.Name(), m.SeqID)}
		if string(m.Name()) == "big_reply" {
			e.FieldBegin(wire.TString, 0)
			e.Bytes(make([]byte, size))
		} else {
			e.StringField(0, "small")
		}
		e.Stop()
		if err := c.W.Write(e.B); err != nil {
			return err
		}
		if string(m.Name()) == "big_reply" {
			sent <- struct{}{}
		}
		return nil
	}), sent
}

// TestSlowReaderDoesNotPinUpstream guards issue 9: a client that does not
// read its (large) reply held the only metastore connection while the
// proxy blocked writing to it. Now a reply up to HoldMax is detached from
// its connection first.
func TestSlowReaderDoesNotPinUpstream(t *testing.T) {
	addr, sent := bigFake(t, 32<<20)
	paddr, _ := isoProxy(t, upstream.Config{MaxConns: 1, HoldMax: 64 << 20}, nil, addr, nil)
	slow := dial(t, paddr, wire.Buffered)
	if tc, ok := slow.Conn().(*net.TCPConn); ok {
		tc.SetReadBuffer(4 << 10)
	}
	if err := slow.Send(ctxT(t), wire.Call, "big_reply", hmsreq.Args()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sent: // the proxy has read it all from the metastore
	case <-time.After(5 * time.Second):
		t.Fatal("metastore never finished sending the big reply")
	}
	otherClientAnswered(t, paddr, 3*time.Second)
}

// TestSlowReaderOfStreamedReply: a reply above HoldMax streams with its
// connection held, but a client that stops reading frees it after
// StreamWriteTimeout, and loses only its own connection.
func TestSlowReaderOfStreamedReply(t *testing.T) {
	addr, _ := bigFake(t, 32<<20)
	paddr, g := isoProxy(t, upstream.Config{MaxConns: 1, HoldMax: 1 << 20, StreamWriteTimeout: 200 * time.Millisecond}, nil, addr, nil)
	slow := dial(t, paddr, wire.Buffered)
	if tc, ok := slow.Conn().(*net.TCPConn); ok {
		tc.SetReadBuffer(4 << 10)
	}
	if err := slow.Send(ctxT(t), wire.Call, "big_reply", hmsreq.Args()); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 5*time.Second, func() bool { return g.Stats().Streamed != 0 }, "the big reply was not streamed")
	otherClientAnswered(t, paddr, 5*time.Second)
}

// TestStreamedReplyIntact: a client that reads gets a streamed reply
// byte for byte. A framed client can take a stream only when the
// metastore's frame gives its size; otherwise the reply is read whole.
func TestStreamedReplyIntact(t *testing.T) {
	for _, tc := range []struct {
		client, up wire.Transport
		streamed   uint64
	}{
		{wire.Buffered, wire.Buffered, 1},
		{wire.Framed, wire.Framed, 1},
		{wire.Buffered, wire.Framed, 1},
		{wire.Framed, wire.Buffered, 0},
	} {
		t.Run(fmt.Sprintf("client=%v,upstream=%v", tc.client, tc.up), func(t *testing.T) {
			addr, _ := bigFakeT(t, tc.up, 3<<20)
			up := upstream.Config{URIs: []string{"thrift://" + addr}, MaxConns: 1, HoldMax: 1 << 20,
				Transport: tc.up, HealthInterval: time.Hour}
			g, err := upstream.New(up)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			_, paddr := serve(t, Config{Transport: tc.client}, g)
			c := dial(t, paddr, tc.client)
			m, err := c.Call(ctxT(t), "big_reply", hmsreq.Args())
			if err != nil {
				t.Fatal(err)
			}
			d := wire.NewDecoder(m.Body())
			if typ, id := d.FieldBegin(); typ != wire.TString || id != 0 || len(d.Bytes()) != 3<<20 {
				t.Fatalf("reply result field %d type %d; want a 3 MiB string", id, typ)
			}
			if got := g.Stats().Streamed; got != tc.streamed {
				t.Fatalf("Stats.Streamed %d; want %d", got, tc.streamed)
			}
			m, err = c.Call(ctxT(t), "small", hmsreq.Args())
			if err != nil || string(m.Name()) != "small" {
				t.Fatalf("next call: %v %s", err, m.Name())
			}
		})
	}
}

// TestQueuedWriteDroppedWhenClientGone guards issue 9: a create_database
// queued behind a busy connection ran after its client had given up. The
// control case shows the same call is sent when the client stays.
func TestQueuedWriteDroppedWhenClientGone(t *testing.T) {
	for _, leaves := range []bool{false, true} {
		t.Run(fmt.Sprintf("leaves=%v", leaves), func(t *testing.T) {
			d, addr := startDemo(t, wire.Buffered)
			d.SetDelay("get_all_functions", 500*time.Millisecond)
			paddr, g := isoProxy(t, upstream.Config{MaxConns: 1, ClientGonePoll: 5 * time.Millisecond}, nil, addr, nil)

			busy := dial(t, paddr, wire.Buffered)
			if err := busy.Send(ctxT(t), wire.Call, "get_all_functions", hmsreq.Args()); err != nil {
				t.Fatal(err)
			}
			wait.Eventually(t, 5*time.Second, func() bool { return d.CallCount("get_all_functions") != 0 }, "the busy call never reached the metastore")
			db := hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, "dropped_db"), hmsreq.Str(3, "file:/tmp/dropped_db")))
			writer, err := hmsclient.Dial(ctxT(t), paddr, wire.Buffered)
			if err != nil {
				t.Fatal(err)
			}
			if err := writer.Send(ctxT(t), wire.Call, "create_database", db); err != nil {
				t.Fatal(err)
			}
			if leaves {
				writer.Close()
				wait.Eventually(t, 5*time.Second, func() bool { return g.Stats().ClientGone != 0 }, "the departed client's call was not dropped")
			}
			if _, err := busy.Recv(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			if !leaves {
				if _, err := writer.Recv(ctxT(t)); err != nil {
					t.Fatal(err)
				}
				writer.Close()
			}
			// One more call through the only connection: anything queued
			// before it has run by now.
			if _, err := busy.Call(ctxT(t), "get_all_databases", hmsreq.Args()); err != nil {
				t.Fatal(err)
			}
			want := map[bool]int{false: 1, true: 0}[leaves]
			if got := d.CallCount("create_database"); got != want {
				t.Fatalf("metastore ran create_database %d times; want %d", got, want)
			}
		})
	}
}

// TestClientGonePeek: gone sees a closed client, not a live one, and not
// a read deadline that has passed while the call waited.
func TestClientGonePeek(t *testing.T) {
	ln := proxytest.Listen(t)
	defer ln.Close()
	cl, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	s := &Server{cfg: Config{Limits: wire.Limits{}.WithDefaults()}}
	c := newClientConn(s, sv)
	sv.SetReadDeadline(time.Now().Add(-time.Second))
	if c.gone() {
		t.Fatal("gone with the client still connected (deadline passed)")
	}
	if _, err := cl.Write([]byte{0x80}); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	// The pipelined byte is there, then EOF: not gone until it is read.
	if c.gone() {
		t.Fatal("gone with unread bytes waiting")
	}
	one := make([]byte, 1)
	sv.SetReadDeadline(time.Time{})
	if _, err := sv.Read(one); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 5*time.Second, func() bool { return c.gone() }, "not gone 5s after the client closed")
}

// otherClientAnswered fails the test unless a new client of paddr gets
// its answer within d, while another client is not reading.
func otherClientAnswered(t *testing.T, paddr string, d time.Duration) {
	t.Helper()
	other := dial(t, paddr, wire.Buffered)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	m, err := other.Call(ctx, "other_call", hmsreq.Args())
	if err != nil {
		t.Fatalf("another client's call while the first does not read: %v", err)
	}
	if string(m.Name()) != "other_call" {
		t.Fatalf("got a reply to %s", m.Name())
	}
}
