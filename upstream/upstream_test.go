package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/limits/inflight"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

func TestPoolReusesConnection(t *testing.T) {
	f := startFake(t, nil)
	g := newGroup(t, Config{}, f.addr)
	for i := int32(1); i <= 3; i++ {
		var s copySink
		if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", i)}, &s); err != nil {
			t.Fatal(err)
		}
		if s.seq != i || s.name != "get_table" {
			t.Fatalf("reply %q seqid %d; want get_table seqid %d", s.name, s.seq, i)
		}
	}
	if n := f.numConns(); n != 1 {
		t.Fatalf("got %d connections for 3 sequential calls; want 1", n)
	}
}

// hangingFake answers "hang" only when release is closed.
func hangingFake(t *testing.T) (*fakeHMS, chan struct{}) {
	release := make(chan struct{})
	f := startFake(t, func(fc *fakeConn, m wire.Message) ([][]byte, error) {
		if string(m.Name()) == "hang" {
			<-release
		}
		return [][]byte{replyTo(m, string(m.Name()))}, nil
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return f, release
}

func TestMaxConnsBoundsConnections(t *testing.T) {
	f, release := hangingFake(t)
	g := newGroup(t, Config{MaxConns: 2, ReservedReadConns: -1}, f.addr)
	var wg sync.WaitGroup
	for i := int32(1); i <= 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s copySink
			if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "hang", i)}, &s); err != nil {
				t.Error(err)
			}
		}()
	}
	f.waitCalls(2)
	if n := f.numConns(); n != 2 {
		t.Fatalf("got %d connections; want MaxConns 2", n)
	}
	close(release)
	wg.Wait()
	if n := f.numConns(); n != 2 {
		t.Fatalf("got %d connections after all calls; want 2", n)
	}
	if got := f.count("hang"); got != 3 {
		t.Fatalf("metastore got %d calls; want 3", got)
	}
}

// TestMismatchedReplyClosesConnection guards issue 9: a reply is paired
// with its call by method name, seqid and type, or the connection it came
// on is closed and the call fails as a transport error.
func TestMismatchedReplyClosesConnection(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  func(m wire.Message) []byte
	}{
		{"other method", func(m wire.Message) []byte { return replyAs([]byte("get_database"), m.SeqID, wire.Reply, "x") }},
		{"other seqid", func(m wire.Message) []byte { return replyAs(m.Name(), m.SeqID+1, wire.Reply, "x") }},
		{"type call", func(m wire.Message) []byte { return replyAs(m.Name(), m.SeqID, wire.Call, "x") }},
		{"type oneway", func(m wire.Message) []byte { return replyAs(m.Name(), m.SeqID, wire.Oneway, "x") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first atomic.Bool
			f := startFake(t, func(fc *fakeConn, m wire.Message) ([][]byte, error) {
				if !first.Swap(true) {
					return [][]byte{tc.bad(m)}, nil
				}
				return [][]byte{replyTo(m, string(m.Name()))}, nil
			})
			g := newGroup(t, Config{MaxConns: 1}, f.addr)
			var s copySink
			err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", 7)}, &s)
			if !errors.Is(err, ErrMismatchedReply) || !errors.Is(err, ErrBroken) {
				t.Fatalf("got %v; want ErrMismatchedReply and ErrBroken", err)
			}
			if s.calls != 0 {
				t.Fatalf("sink got a mismatched reply %q seqid %d", s.name, s.seq)
			}
			if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", 8)}, &s); err != nil {
				t.Fatal(err)
			}
			if n := f.numConns(); n != 2 {
				t.Fatalf("got %d connections; want 2 (the one with the foreign reply closed)", n)
			}
			if got := g.Stats().Mismatched; got != 1 {
				t.Fatalf("Stats.Mismatched %d; want 1", got)
			}
		})
	}
}

// TestUnsolicitedBytesNotReused: a metastore that sends more than the
// reply leaves the connection out of step; it is closed, not pooled.
func TestUnsolicitedBytesNotReused(t *testing.T) {
	f := startFake(t, func(fc *fakeConn, m wire.Message) ([][]byte, error) {
		return [][]byte{append(replyTo(m, "mine"), replyTo(m, "extra")...)}, nil
	})
	g := newGroup(t, Config{MaxConns: 1}, f.addr)
	for i := int32(1); i <= 2; i++ {
		var s copySink
		if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", i)}, &s); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.numConns(); n != 2 {
		t.Fatalf("got %d connections; want 2", n)
	}
}

// TestOnewayTypedUnknownClosesConnection guards issue 9: a ONEWAY-typed
// message the caller does not declare oneway is sent, but its connection
// is never reused, so whatever the metastore answers reaches no one.
func TestOnewayTypedUnknownClosesConnection(t *testing.T) {
	f := startFake(t, nil) // answers every message, as Java's processor does
	g := newGroup(t, Config{MaxConns: 1}, f.addr)
	var s copySink
	if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Write, Msg: msg(t, wire.Oneway, "some_new_method", 5)}, &s); err != nil {
		t.Fatal(err)
	}
	if s.calls != 0 {
		t.Fatal("a oneway call got a reply")
	}
	if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "some_new_method", 5)}, &s); err != nil {
		t.Fatal(err)
	}
	if got := resultString(t, wireMsg(t, s.got)); got != "some_new_method" || s.seq != 5 {
		t.Fatalf("got %q seqid %d", got, s.seq)
	}
	if n := f.numConns(); n != 2 {
		t.Fatalf("got %d connections; want 2 (the oneway one closed)", n)
	}
	if got := g.Stats().OnewayClosed; got != 1 {
		t.Fatalf("Stats.OnewayClosed %d; want 1", got)
	}
}

// TestOnewayConnectionNeverPooled guards issue 22: a connection that
// carried a oneway call is closed, never pooled. libthrift answers a
// method it lacks (reinitialize on a metastore without fb303) with an
// EXCEPTION even when the call was oneway; on a pooled connection that
// answer would meet the next call.
func TestOnewayConnectionNeverPooled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers bool
	}{
		{"answered as an unknown method", true},
		{"not answered", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := make(chan struct{})
			f := startFake(t, func(fc *fakeConn, m wire.Message) ([][]byte, error) {
				if string(m.Name()) != "reinitialize" {
					return [][]byte{replyTo(m, string(m.Name()))}, nil
				}
				if tc.answers {
					// Written here, so the test knows it is in the
					// proxy's socket before the next call.
					ex := wire.AppendApplicationException(nil, "reinitialize", m.SeqID, wire.ExUnknownMethod, "Invalid method name: 'reinitialize'")
					if err := wire.NewWriter(fc.nc, wire.Buffered).Write(ex); err != nil {
						return nil, err
					}
				}
				close(sent)
				return nil, nil
			})
			g := newGroup(t, Config{MaxConns: 1}, f.addr)
			var s copySink
			if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Write, Msg: msg(t, wire.Oneway, "reinitialize", 1), Oneway: true}, &s); err != nil {
				t.Fatal(err)
			}
			<-sent
			if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", 2)}, &s); err != nil {
				t.Fatalf("the call after a oneway one: %v", err)
			}
			if got := resultString(t, wireMsg(t, s.got)); got != "get_table" || s.seq != 2 {
				t.Fatalf("got %q seqid %d; want get_table's reply, seqid 2", got, s.seq)
			}
			if n := f.numConns(); n != 2 {
				t.Fatalf("got %d connections; want 2 (the oneway one closed)", n)
			}
			if got := g.Stats().OnewayClosed; got != 1 {
				t.Fatalf("Stats.OnewayClosed %d; want 1", got)
			}
		})
	}
}

func wireMsg(t testing.TB, b []byte) wire.Message {
	t.Helper()
	m, err := wire.Parse(b, wire.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestConnectionReleasedBeforeSink guards issue 9: the sink (the client
// write) runs after the connection went back to the pool, so with
// MaxConns 1 another call can run while the sink is still busy.
func TestConnectionReleasedBeforeSink(t *testing.T) {
	for _, class := range []Class{Read, Write} {
		t.Run(fmt.Sprint(class), func(t *testing.T) { testReleasedBeforeSink(t, class) })
	}
}

func testReleasedBeforeSink(t *testing.T, class Class) {
	f := startFake(t, nil)
	g := newGroup(t, Config{MaxConns: 1}, f.addr)
	var inner copySink
	var innerErr error
	outer := copySink{hook: func(wire.Message) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		innerErr = g.Do(ctx, Call{Session: NoSession, Class: class, Msg: msg(t, wire.Call, "get_database", 2)}, &inner)
	}}
	if err := g.Do(ctxT(t), Call{Session: NoSession, Class: class, Msg: msg(t, wire.Call, "get_table", 1)}, &outer); err != nil {
		t.Fatal(err)
	}
	if innerErr != nil {
		t.Fatalf("a call during the first one's sink: %v (the connection was still held)", innerErr)
	}
	if got := resultString(t, wireMsg(t, outer.got)); got != "get_table" {
		t.Fatalf("outer reply %q; want get_table", got)
	}
	if got := resultString(t, wireMsg(t, inner.got)); got != "get_database" {
		t.Fatalf("inner reply %q; want get_database", got)
	}
}

// TestBudgetFullHoldsConnection: a reply that does not fit the in-flight
// budget is written while its connection is held; one that fits claims
// its bytes only while the sink runs.
func TestBudgetFullHoldsConnection(t *testing.T) {
	f := startFake(t, nil)
	b := inflight.New(1 << 20)
	g := newGroup(t, Config{MaxConns: 1, Budget: b}, f.addr)
	var during int64
	s := copySink{hook: func(m wire.Message) { during = b.InUse() }}
	if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", 1)}, &s); err != nil {
		t.Fatal(err)
	}
	if during != int64(len(s.got)) || b.InUse() != 0 {
		t.Fatalf("budget in use %d during the sink, %d after; want %d, 0", during, b.InUse(), len(s.got))
	}
	if g.Stats().Held != 0 {
		t.Fatal("a reply that fits was held")
	}

	if !b.TryAcquire(1 << 20) { // the budget is now full
		t.Fatal("could not fill the budget")
	}
	var innerErr error
	s.hook = func(wire.Message) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		innerErr = g.Do(ctx, Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_database", 3)}, &copySink{})
	}
	if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", 2)}, &s); err != nil {
		t.Fatal(err)
	}
	if innerErr == nil {
		t.Fatal("a call ran while a held reply's sink ran; want its connection held")
	}
	if got := g.Stats().Held; got != 1 {
		t.Fatalf("Stats.Held %d; want 1", got)
	}
}

// TestKeptReplySurvivesLaterCalls: a sink that does not borrow may keep
// the reply (the cache fill does), so its buffer is never reused.
func TestKeptReplySurvivesLaterCalls(t *testing.T) {
	f := startFake(t, func(fc *fakeConn, m wire.Message) ([][]byte, error) {
		return [][]byte{replyTo(m, string(m.Name())+"-reply")}, nil
	})
	g := newGroup(t, Config{MaxConns: 1}, f.addr)
	var keep keepSink
	if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", 1)}, &keep); err != nil {
		t.Fatal(err)
	}
	for i := int32(2); i < 10; i++ {
		if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_partition", i)}, &copySink{}); err != nil {
			t.Fatal(err)
		}
		if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_database", i)}, &keep); err != nil {
			t.Fatal(err)
		}
	}
	if got := resultString(t, keep.msgs[0]); got != "get_table-reply" || keep.msgs[0].SeqID != 1 {
		t.Fatalf("kept reply now reads %q seqid %d; want get_table-reply seqid 1", got, keep.msgs[0].SeqID)
	}
}

// TestAcquireTimeout guards issue 9: a write with no timeout waits at
// most AcquireTimeout for a connection, and is then failed unsent.
func TestAcquireTimeout(t *testing.T) {
	f, release := hangingFake(t)
	g := newGroup(t, Config{MaxConns: 1, AcquireTimeout: 50 * time.Millisecond}, f.addr)
	done := make(chan error, 1)
	go func() {
		done <- g.Do(context.Background(), Call{Session: NoSession, Class: Write, Msg: msg(t, wire.Call, "hang", 1)}, &copySink{})
	}()
	f.waitCalls(1)
	err := g.Do(ctxT(t), Call{Session: NoSession, Class: Write, Msg: msg(t, wire.Call, "create_database", 2)}, &copySink{})
	if !errors.Is(err, ErrAcquireTimeout) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v; want ErrAcquireTimeout (unavailable)", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := f.count("create_database"); n != 0 {
		t.Fatalf("metastore got create_database %d times after its wait timed out; want 0", n)
	}
	if got := g.Stats().AcquireTimeouts; got != 1 {
		t.Fatalf("Stats.AcquireTimeouts %d; want 1", got)
	}
}

// TestReservedReadConns guards issue 9, long writes cannot take the
// connections reserved for reads, and issue 12, reads of a background
// session (the warm-up) share the write slots, so a warm-up that hangs
// never takes them either. Either way a client read still gets one.
func TestReservedReadConns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		session *Session
		class   Class
	}{
		{"writes", NoSession, Write},
		{"background reads", NoSession.InBackground(), Read},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, release := hangingFake(t)
			g := newGroup(t, Config{MaxConns: 4, ReservedReadConns: 1, AcquireTimeout: -1}, f.addr)
			p := g.pools[0]
			const hung = 5
			var wg sync.WaitGroup
			for i := int32(1); i <= hung; i++ {
				wg.Go(func() {
					if err := g.Do(context.Background(), Call{Session: tc.session, Class: tc.class, Msg: msg(t, wire.Call, "hang", i)}, &copySink{}); err != nil {
						t.Error(err)
					}
				})
			}
			// Every hung call has either reached the metastore or queued
			// for a write slot; without the reservation all four
			// connections hang.
			f.waitCalls(3)
			if !wait.Until(5*time.Second, func() bool { return f.count("hang")+int(p.queued.Load()) >= hung }) {
				t.Fatalf("%d %s arrived, %d queued; want %d in all", f.count("hang"), tc.name, p.queued.Load(), hung)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := g.Do(ctx, Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", 100)}, &copySink{}); err != nil {
				t.Fatalf("client read while %s hang: %v", tc.name, err)
			}
			if got := f.count("hang"); got != 3 {
				t.Fatalf("%d %s reached the metastore; want 3 (MaxConns 4 less 1 reserved)", got, tc.name)
			}
			close(release)
			wg.Wait()
			if got := f.count("hang"); got != hung {
				t.Fatalf("%d %s ran in the end; want %d", got, tc.name, hung)
			}
		})
	}
	if bg := NoSession.InBackground(); !bg.WithUGI(nil).Background() || NoSession.Background() {
		t.Fatal("the background mark must survive set_ugi and stay off the shared NoSession")
	}
}

// TestClientGoneDropped guards issue 9: a call queued for a connection
// whose client goes is dropped, never sent; the same call from a client
// that stays is sent (the control proves the drop is what stopped it).
func TestClientGoneDropped(t *testing.T) {
	for _, tc := range []struct {
		name     string
		class    Class // Write waits for a write slot, Read for a connection
		goes     bool
		wantSent int
	}{
		{"write, client stays", Write, false, 1},
		{"write, client gone", Write, true, 0},
		{"read, client stays", Read, false, 1},
		{"read, client gone", Read, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, release := hangingFake(t)
			g := newGroup(t, Config{MaxConns: 1, ClientGonePoll: 5 * time.Millisecond}, f.addr)
			first := make(chan error, 1)
			go func() {
				first <- g.Do(context.Background(), Call{Session: NoSession, Class: tc.class, Msg: msg(t, wire.Call, "hang", 1)}, &copySink{})
			}()
			f.waitCalls(1)
			var gone, asked atomic.Bool
			done := make(chan error, 1)
			go func() {
				done <- g.Do(context.Background(), Call{Session: NoSession, Class: tc.class,
					Msg: msg(t, wire.Call, "create_database", 2),
					ClientGone: func() bool {
						asked.Store(true)
						return gone.Load()
					}}, &copySink{})
			}()
			// Queued: ClientGone is being polled.
			wait.Eventually(t, 5*time.Second, func() bool { return asked.Load() }, "ClientGone not asked while the call was queued")
			gone.Store(tc.goes)
			if tc.goes {
				// Dropped while queued: the first call still holds the
				// only connection.
				var err error
				select {
				case err = <-done:
				case <-time.After(5 * time.Second):
					t.Fatal("a call whose client went was still queued after 5s")
				}
				if !errors.Is(err, ErrClientGone) {
					t.Fatalf("got %v; want ErrClientGone", err)
				}
			}
			close(release)
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			if !tc.goes {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			if got := f.count("create_database"); got != tc.wantSent {
				t.Fatalf("metastore got create_database %d times; want %d", got, tc.wantSent)
			}
			if want := map[bool]uint64{true: 1}[tc.goes]; g.Stats().ClientGone != want {
				t.Fatalf("Stats.ClientGone %d; want %d", g.Stats().ClientGone, want)
			}
		})
	}
}

// TestClientGoneAfterCheckout: a client that went while its call waited,
// between two polls, is caught once the call has a connection, before the
// send. A call that did not wait is not asked (its client was read from a
// moment ago).
func TestClientGoneAfterCheckout(t *testing.T) {
	f, release := hangingFake(t)
	g := newGroup(t, Config{MaxConns: 1, ClientGonePoll: time.Hour}, f.addr)
	var asked atomic.Int32
	gone := func() bool { asked.Add(1); return true }
	if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", 1), ClientGone: gone}, &copySink{}); err != nil {
		t.Fatalf("a call that did not wait: %v", err)
	}
	if asked.Load() != 0 {
		t.Fatal("ClientGone asked of a call that did not wait")
	}
	first := make(chan error, 1)
	go func() {
		first <- g.Do(context.Background(), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "hang", 2)}, &copySink{})
	}()
	f.waitCalls(2)
	done := make(chan error, 1)
	go func() {
		done <- g.Do(context.Background(), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "create_database", 3), ClientGone: gone}, &copySink{})
	}()
	p := g.pools[0]
	wait.Eventually(t, 5*time.Second, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.waiters > 0
	}, "the second call never waited for a connection")
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClientGone) {
		t.Fatalf("got %v; want ErrClientGone", err)
	}
	if got := f.count("create_database"); got != 0 {
		t.Fatalf("metastore got the call %d times; want 0", got)
	}
}

func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

func TestFailover(t *testing.T) {
	t.Run("unreachable first", func(t *testing.T) {
		f := startFake(t, nil)
		g := newGroup(t, Config{DialTimeout: time.Second}, deadAddr(t), f.addr)
		var s copySink
		if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Write, Msg: msg(t, wire.Call, "create_database", 1)}, &s); err != nil {
			t.Fatal(err)
		}
		if f.count("create_database") != 1 {
			t.Fatal("the call did not reach the second metastore")
		}
		if h := g.Healthy(); h[0] || !h[1] {
			t.Fatalf("health %v; want [false true]", h)
		}
	})
	dropping := func(t *testing.T) *fakeHMS {
		return startFake(t, func(*fakeConn, wire.Message) ([][]byte, error) { return nil, errCloseConn })
	}
	t.Run("read retried after a drop", func(t *testing.T) {
		bad, good := dropping(t), startFake(t, nil)
		g := newGroup(t, Config{}, bad.addr, good.addr)
		var s copySink
		if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", 1)}, &s); err != nil {
			t.Fatal(err)
		}
		if bad.count("get_table") != 1 || good.count("get_table") != 1 {
			t.Fatalf("first got %d, second %d; want 1, 1", bad.count("get_table"), good.count("get_table"))
		}
	})
	t.Run("write never retried", func(t *testing.T) {
		bad, good := dropping(t), startFake(t, nil)
		g := newGroup(t, Config{}, bad.addr, good.addr)
		err := g.Do(ctxT(t), Call{Session: NoSession, Class: Write, Msg: msg(t, wire.Call, "create_database", 1)}, &copySink{})
		if !errors.Is(err, ErrBroken) {
			t.Fatalf("got %v; want ErrBroken", err)
		}
		// The cause stays reachable (#11: Unwrap used to hide it).
		if !errors.Is(err, io.EOF) {
			t.Fatalf("got %v; want its cause, io.EOF, reachable", err)
		}
		if good.count("create_database") != 0 {
			t.Fatal("a write that may have run was sent again")
		}
	})
}

// TestSessionReplay: a connection carries one session; a fresh one is put
// into the call's session (set_ugi, then setMetaConf) before the call.
func TestSessionReplay(t *testing.T) {
	f := startFake(t, func(fc *fakeConn, m wire.Message) ([][]byte, error) {
		e := wire.Encoder{B: wire.AppendHeader(nil, wire.Reply, m.Name(), m.SeqID)}
		switch string(m.Name()) {
		case "set_ugi":
			e.StringListField(0, []string{"g"})
		case "setMetaConf":
		default:
			e.StringField(0, string(m.Name()))
		}
		e.Stop()
		return [][]byte{e.B}, nil
	})
	g := newGroup(t, Config{}, f.addr)
	ugi := wire.Encoder{}
	ugi.StringField(1, "alice")
	ugi.StringListField(2, []string{"g"})
	ugi.Stop()
	sess := NoSession.WithUGI(ugi.B).WithConf("k", "v")
	if sess.User() != "alice" {
		t.Fatalf("user %q; want alice", sess.User())
	}
	for i := int32(1); i <= 2; i++ {
		if err := g.Do(ctxT(t), Call{Session: sess, Class: Read, Msg: msg(t, wire.Call, "get_table", i)}, &copySink{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", 3)}, &copySink{}); err != nil {
		t.Fatal(err)
	}
	calls := f.callList()
	var got []string
	for _, c := range calls {
		got = append(got, c.method)
	}
	want := []string{"set_ugi", "setMetaConf", "get_table", "get_table", "get_table"}
	if len(got) != len(want) {
		t.Fatalf("calls %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("calls %v; want %v", got, want)
		}
	}
	if calls[3].conn != calls[0].conn || calls[4].conn == calls[0].conn {
		t.Fatalf("connections %v: the session's calls must share its connection, the other must not", calls)
	}
}

func TestHealthCheck(t *testing.T) {
	f := startFake(t, nil)
	g := newGroup(t, Config{HealthInterval: 10 * time.Millisecond, DialTimeout: time.Second}, f.addr)
	wait.Eventually(t, 5*time.Second, func() bool { return f.statusCalls() >= 2 }, "no health checks")
	if !g.Healthy()[0] {
		t.Fatal("unhealthy while answering")
	}
	f.close()
	wait.Eventually(t, 5*time.Second, func() bool { return !g.Healthy()[0] }, "still healthy 5s after the metastore went away")
}

// TestHealthCheckPairsReply: a getStatus answered under another name does
// not count as healthy.
func TestHealthCheckPairsReply(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				r := wire.NewReader(nc, wire.Buffered, wire.Limits{})
				for {
					m, err := r.Read()
					if err != nil {
						return
					}
					nc.Write(replyAs([]byte("get_table"), m.SeqID, wire.Reply, "x"))
				}
			}()
		}
	}()
	g := newGroup(t, Config{HealthInterval: 10 * time.Millisecond}, ln.Addr().String())
	wait.Eventually(t, 5*time.Second, func() bool { return !g.Healthy()[0] }, "healthy although getStatus got a foreign reply")
}

func TestCloseTwice(t *testing.T) {
	f := startFake(t, nil)
	g := newGroup(t, Config{}, f.addr)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Do(ctxT(t), Call{Session: NoSession, Msg: msg(t, wire.Call, "get_table", 1)}, &copySink{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v; want ErrClosed", err)
	}
}

// TestAliveIgnoresStaleDeadline: an idle connection whose last call's
// deadline has passed is still alive.
func TestAliveIgnoresStaleDeadline(t *testing.T) {
	f := startFake(t, nil)
	g := newGroup(t, Config{}, f.addr)
	p := g.pools[0]
	p.sem <- struct{}{}
	cn, err := p.dial(ctxT(t), NoSession)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.close()
	cn.nc.SetDeadline(time.Now().Add(-time.Second))
	if !cn.alive() {
		t.Fatal("a live connection with a stale deadline looks dead")
	}
	f.close()
	wait.Eventually(t, 5*time.Second, func() bool { return !cn.alive() }, "alive 5s after the metastore closed")
}

// TestSameName (issue 22, found by the twin): the metastore answers a
// call whose name is not valid UTF-8 with the name it decoded, malformed
// bytes as U+FFFD; that is the call's answer, not a stray reply.
func TestSameName(t *testing.T) {
	for _, tc := range []struct {
		reply, call string
		want        bool
	}{
		{"get_table", "get_table", true},
		{"get_tablf", "get_table", false},
		{"get_\ufffd\ufffdtable", "get_\xff\xfetable", true},
		{"get_\ufffdtable", "get_\xff\xfetable", true},
		{"get_\ufffdtable", "get_\xfftable", true},
		{"get_?table", "get_\xfftable", false},
		{"get_\ufffdtablex", "get_\xfftable", false},
		{"get_\ufffdtable", "get_\u00e9table", false}, // valid UTF-8 comes back as sent
	} {
		if got := sameName([]byte(tc.reply), []byte(tc.call)); got != tc.want {
			t.Errorf("sameName(%q, %q) = %v; want %v", tc.reply, tc.call, got, tc.want)
		}
	}
}

// TestStaleReplyNeverTakenForAnothers: a reply left on a pooled
// connection after its call was answered (here the metastore sends it
// twice) must not pass for the answer to the next call on that
// connection, even when that call is the same method under the same
// client seqid, as two clients counting from 1 send. The proxy numbers
// calls per connection, so the stale reply's seqid is no later call's:
// it is refused, and the read runs again on a fresh connection.
func TestStaleReplyNeverTakenForAnothers(t *testing.T) {
	dup, sent := make(chan struct{}), make(chan struct{})
	var n atomic.Int32
	f := startFake(t, func(fc *fakeConn, m wire.Message) ([][]byte, error) {
		i := n.Add(1)
		r := replyTo(m, fmt.Sprintf("reply %d", i))
		if i == 1 {
			go func() {
				<-dup
				fc.nc.Write(r) // the same reply again, unasked
				close(sent)
			}()
		}
		return [][]byte{r}, nil
	})
	g := newGroup(t, Config{MaxConns: 2}, f.addr)
	var s copySink
	if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", 7)}, &s); err != nil {
		t.Fatal(err)
	}
	if got := resultString(t, wireMsg(t, s.got)); got != "reply 1" || s.seq != 7 {
		t.Fatalf("first call got %q seqid %d; want reply 1 seqid 7", got, s.seq)
	}
	close(dup)
	<-sent
	// On loopback the bytes are in the proxy's socket buffer once the
	// write returned; the connection idles in the pool meanwhile.
	if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", 7)}, &s); err != nil {
		t.Fatal(err)
	}
	// Its own answer is the metastore's second or third (the second call
	// reached the closed connection too): never the first.
	if got := resultString(t, wireMsg(t, s.got)); got == "reply 1" || s.seq != 7 {
		t.Fatalf("second call got %q seqid %d: the first call's reply", got, s.seq)
	}
	if got := g.Stats().Mismatched; got != 1 {
		t.Fatalf("Stats.Mismatched %d; want 1 (the stale reply refused)", got)
	}
}

// TestCancelAfterReplyRetiresConnection: a cancel that lands once the
// reply is read but before the call's cancel function is stopped runs
// the deadline function on its own goroutine, maybe after the connection
// went back to the pool and out to another call (a write, which is not
// retried); so that connection is closed, not reused.
func TestCancelAfterReplyRetiresConnection(t *testing.T) {
	f := startFake(t, func(_ *fakeConn, m wire.Message) ([][]byte, error) {
		return [][]byte{replyTo(m, "ok")}, nil
	})
	g := newGroup(t, Config{MaxConns: 1}, f.addr)
	ctx, cancel := context.WithCancel(ctxT(t))
	hook := func(c context.Context) {
		if c == ctx {
			cancel()
		}
	}
	g.afterReplyRead.Store(&hook)
	var s copySink
	if err := g.Do(ctx, Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", 1)}, &s); err != nil {
		t.Fatal(err)
	}
	if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Write, Msg: msg(t, wire.Call, "alter_table", 2)}, &s); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.used) != 2 {
		t.Fatalf("%d connections carried the two calls; want 2: the cancelled call's connection went back to the pool", len(f.used))
	}
}
