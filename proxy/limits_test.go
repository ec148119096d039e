package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/limits/inflight"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// A client that sends part of a request and then trickles, or stops, is
// cut off once the read timeout has passed since the request began,
// however steadily its bytes trickle in (#9: slowloris).
func TestSlowlorisCutOff(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	const readTimeout = 300 * time.Millisecond
	s, paddr := serve(t, Config{ReadTimeout: readTimeout}, proxytest.Group(t, upstream.Config{}, addr))
	req := wire.AppendHeader(nil, wire.Call, []byte("get_table"), 1)
	req = append(req, hmsclient.Args("demo_db0", "t0")...)

	for _, tc := range []struct {
		name  string
		every time.Duration // 0: send a few bytes, then nothing
	}{{"stall", 0}, {"trickle", 20 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.Stats().ClientTimeouts(TimeoutRead)
			nc, err := net.Dial("tcp", paddr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			began := time.Now()
			if _, err := nc.Write(req[:5]); err != nil {
				t.Fatal(err)
			}
			sent := make(chan int, 1)
			go func() {
				i := 5
				for ; tc.every > 0 && i < len(req); i++ {
					time.Sleep(tc.every) // a client slow on the wire on purpose
					if _, err := nc.Write(req[i : i+1]); err != nil {
						break
					}
				}
				sent <- i
			}()
			nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := nc.Read(make([]byte, 64)); !errors.Is(err, io.EOF) && !isReset(err) {
				t.Fatalf("read %d bytes, %v; want the connection closed", n, err)
			}
			if took := time.Since(began); took < readTimeout {
				t.Errorf("closed after %v; want no sooner than the read timeout %v", took, readTimeout)
			}
			if tc.every > 0 {
				if i := <-sent; i >= len(req) {
					t.Errorf("the whole %d-byte request was sent before the cut; want it cut mid-request", len(req))
				}
			}
			eventually(t, "read timeout counted", func() bool { return s.Stats().ClientTimeouts(TimeoutRead) == before+1 })
		})
	}
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && !oe.Timeout()
}

// A connection that starts no request within the idle timeout is
// closed; one that keeps calling is not, and a call that runs longer
// than the idle timeout does not count as idleness (#9).
func TestIdleTimeout(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	const idle = 300 * time.Millisecond
	slow := &slowForwarder{up: proxytest.Group(t, upstream.Config{}, addr), delay: 3 * idle}
	s, paddr := serve(t, Config{IdleTimeout: idle}, slow)
	args := hmsclient.Args("demo_db0", "t0")

	t.Run("idle", func(t *testing.T) {
		c := dial(t, paddr, wire.Buffered)
		began := time.Now()
		expectClosed(t, c)
		if took := time.Since(began); took < idle*7/8 {
			t.Errorf("closed after %v; want at least 7/8 of %v", took, idle)
		}
		eventually(t, "idle timeout counted", func() bool { return s.Stats().ClientTimeouts(TimeoutIdle) >= 1 })
	})
	t.Run("busy", func(t *testing.T) {
		c := dial(t, paddr, wire.Buffered)
		// A client that calls at a pace: the pauses are the point.
		for end := time.Now().Add(3 * idle); time.Now().Before(end); time.Sleep(idle / 6) {
			call(t, c, "get_table", args)
		}
	})
	t.Run("long call", func(t *testing.T) {
		c := dial(t, paddr, wire.Buffered)
		call(t, c, "get_table", args) // sets the idle deadline
		slow.on.Store(true)
		defer slow.on.Store(false)
		call(t, c, "get_table", args) // longer than the idle timeout
		slow.on.Store(false)
		call(t, c, "get_table", args) // must find the connection open
	})
}

// slowForwarder delays calls while on: a call slower than a timeout.
type slowForwarder struct {
	up    Forwarder
	delay time.Duration
	on    atomic.Bool
}

func (f *slowForwarder) Do(ctx context.Context, c upstream.Call, sink upstream.ReplySink) error {
	if f.on.Load() {
		time.Sleep(f.delay) // slower than a timeout on purpose
	}
	return f.up.Do(ctx, c, sink)
}

// A client that sends calls but does not read the replies is cut off
// once a reply has waited the write timeout (#9).
func TestWriteTimeout(t *testing.T) {
	var e wire.Encoder
	e.StringField(0, string(make([]byte, 4<<20)))
	e.Stop()
	up := echoServer(t, e.B)
	const wt = 300 * time.Millisecond
	// Forwarded replies go out in one write; replies from the cache as
	// header and body in one writev. Both are this client's deadline.
	for _, tc := range []struct {
		name   string
		cached bool
	}{{"forwarded", false}, {"from the cache", true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{WriteTimeout: wt}
			if tc.cached {
				cfg.Cache = newCaching(t, nil)
			}
			s, paddr := serve(t, cfg, proxytest.Group(t, upstream.Config{}, up))
			nc, err := net.Dial("tcp", paddr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.(*net.TCPConn).SetReadBuffer(4 << 10)
			w := wire.NewWriter(nc, wire.Buffered)
			for i := int32(1); i <= 8; i++ { // 32 MiB of replies: more than any socket buffers
				req := append(wire.AppendHeader(nil, wire.Call, []byte("get_table"), i), hmsclient.Args("db", "t")...)
				if err := w.Write(req); err != nil {
					break // the proxy has cut us off already
				}
			}
			eventually(t, "write timeout counted", func() bool { return s.Stats().ClientTimeouts(TimeoutWrite) == 1 })
			eventually(t, "connection dropped", func() bool { return s.Clients() == 0 })
		})
	}
}

// Four clients each holding a large incomplete request hold no more
// than the in-flight budget: the others wait (back-pressure) and then
// complete once the first finishes, rather than fail (#9: four clients
// with 48 MiB requests took RSS from 22 MB to 421 MB).
func TestRequestBudget(t *testing.T) {
	up := echoServer(t, []byte{wire.TStop})
	const budget = 16 << 20
	b := inflight.NewReserving(budget, 100<<20) // as cmd/hmsproxy makes it
	_, paddr := serve(t, Config{Budget: b, ReadTimeout: time.Minute}, proxytest.Group(t, upstream.Config{}, up))

	// Requests of 12 MiB: each claims its bytes as they arrive. The
	// shared part of the budget fills; the oldest waiting request then
	// finishes on the reserve (14 MiB), so no two wait on each other.
	var e wire.Encoder
	e.StringField(1, string(make([]byte, 12<<20)))
	e.Stop()
	req := append(wire.AppendHeader(nil, wire.Call, []byte("get_table"), 1), e.B...)
	held := len(req) - (1 << 20) // sent before the clients stall

	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := heap()

	const clients = 4
	conns := make([]net.Conn, clients)
	var wg sync.WaitGroup
	for i := range conns {
		nc, err := net.Dial("tcp", paddr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		conns[i] = nc
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc.Write(req[:held]) // blocks while the proxy holds back
		}()
	}
	eventually(t, "three clients waiting for budget", func() bool { return b.Waits() >= clients-1 && b.InUse() > budget/2 })
	if got := b.InUse(); got > budget {
		t.Fatalf("in use %d; want at most the budget %d", got, budget)
	}
	// The heap is the whole test binary's: what other tests' servers
	// still hold while they wind down counts too, and goes within a
	// second. What the proxy holds for the waiting clients stays, so the
	// least of a second's samples is its share.
	grew := int64(math.MaxInt64)
	wait.Poll(time.Second, 50*time.Millisecond, func() bool {
		grew = min(grew, int64(heap())-int64(base))
		return grew <= budget+8<<20
	})
	if grew > budget+8<<20 {
		t.Errorf("heap grew %d MiB with %d clients holding %d MiB each; want at most the %d MiB budget (+8 MiB)",
			grew>>20, clients, held>>20, budget>>20)
	}

	// Every client finishes its request in turn and gets its reply.
	replies := make(chan error, clients)
	for _, nc := range conns {
		go func() {
			if _, err := nc.Write(req[held:]); err != nil {
				replies <- err
				return
			}
			nc.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, err := wire.NewReader(nc, wire.Buffered, wire.Limits{}).Read()
			replies <- err
		}()
	}
	for range conns {
		if err := <-replies; err != nil {
			t.Fatalf("a waiting client failed: %v; want back-pressure, not failure", err)
		}
	}
	wg.Wait()
	eventually(t, "budget returned", func() bool { return b.InUse() == 0 })
}

// A client waiting for in-flight budget is not a call in flight:
// Shutdown ends its wait at once, while it drains the call that holds
// the budget (#9).
func TestShutdownEndsBudgetWaits(t *testing.T) {
	up := echoServer(t, []byte{wire.TStop})
	b := inflight.New(3 << 19) // room for one of the requests below
	hold := &heldForwarder{up: proxytest.Group(t, upstream.Config{}, up), release: make(chan struct{}), entered: make(chan struct{}, 1)}
	s, err := New(Config{Budget: b, Logger: testLogger(t)}, hold)
	if err != nil {
		t.Fatal(err)
	}
	ln := proxytest.Listen(t)
	go s.Serve(ln)

	// The first client's 768 KiB request arrives whole and its call is
	// held at the forwarder, its bytes still claimed; the second sends
	// the same, and its buffer outgrows what is left.
	var e wire.Encoder
	e.StringField(1, string(make([]byte, 768<<10)))
	e.Stop()
	req := append(wire.AppendHeader(nil, wire.Call, []byte("get_table"), 1), e.B...)
	dial := func(b []byte) net.Conn {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		go nc.Write(b)
		return nc
	}
	holder := dial(req)
	proxytest.Recv(t, hold.entered, "the held call upstream")
	dial(req)
	eventually(t, "a client waiting for budget", func() bool { return b.Waits() == 1 })

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	eventually(t, "the waiting client gone while the call drains", func() bool { return s.Clients() == 1 })
	close(hold.release)
	holder.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := wire.NewReader(holder, wire.Buffered, wire.Limits{}).Read(); err != nil {
		t.Errorf("the call in flight got no reply: %v", err)
	}
	if err := proxytest.Recv(t, shut, "Shutdown to return"); err != nil {
		t.Errorf("shutdown: %v; want a clean drain", err)
	}
	if got := b.InUse(); got != 0 {
		t.Errorf("%d bytes still claimed after shutdown; want 0", got)
	}
}

// heldForwarder holds each call until release is closed.
type heldForwarder struct {
	up      Forwarder
	release chan struct{}
	entered chan struct{}
}

func (f *heldForwarder) Do(ctx context.Context, c upstream.Call, sink upstream.ReplySink) error {
	select {
	case f.entered <- struct{}{}:
	default:
	}
	<-f.release
	return f.up.Do(ctx, c, sink)
}

// TestBudgetJam (issue 22, item 3): connections that announce a large
// request and then send nothing (or little) more hold no in-flight
// budget beyond what they sent, so another client's 1 MiB request never
// waits for budget behind them. The budget's wait counter is the seam:
// the honest request would count there had it waited.
func TestBudgetJam(t *testing.T) {
	const (
		budget   = 16 << 20
		maxMsg   = 7 << 20
		jammers  = 8
		announce = maxMsg - 1024 // a string just under the message limit
	)
	for _, tc := range []struct {
		name string
		sent int // bytes of the announced string each jammer sends
	}{
		{"header only", 0},
		{"some bytes", 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := echoServer(t, []byte{wire.TStop})
			b := inflight.New(budget)
			var started atomic.Int32
			_, paddr := serve(t, Config{Budget: b, ReadTimeout: time.Minute, Limits: wire.Limits{MaxMessage: maxMsg}},
				proxytest.Group(t, upstream.Config{}, up), func(s *Server) { s.startHook = func() { started.Add(1) } })

			// Each jammer: a get_table call whose first field announces a
			// string of nearly maxMsg bytes, then tc.sent bytes of it.
			jam := wire.AppendHeader(nil, wire.Call, []byte("get_table"), 1)
			jam = append(jam, wire.TString, 0, 1)
			jam = binary.BigEndian.AppendUint32(jam, announce)
			jam = append(jam, make([]byte, tc.sent)...)
			for range jammers {
				nc, err := net.Dial("tcp", paddr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { nc.Close() })
				if _, err := nc.Write(jam); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "every jammer's request begun", func() bool {
				return started.Load() == jammers && b.InUse() >= int64(jammers*(tc.sent-wire.FreeBuf))
			})
			// Claims follow the bytes that arrived: at most twice them.
			if held, most := b.InUse(), int64(jammers*2*len(jam)); held > most {
				t.Errorf("%d jammers that sent %d bytes each hold %d bytes of budget; want at most %d (twice what they sent)",
					jammers, len(jam), held, most)
			}

			waits := b.Waits()
			var e wire.Encoder
			e.StringField(1, string(make([]byte, 1<<20)))
			e.Stop()
			honest := append(wire.AppendHeader(nil, wire.Call, []byte("get_table"), 2), e.B...)
			nc, err := net.Dial("tcp", paddr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			start := time.Now()
			replied := make(chan error, 1)
			go func() {
				if _, err := nc.Write(honest); err != nil {
					replied <- err
					return
				}
				nc.SetReadDeadline(time.Now().Add(30 * time.Second))
				_, err := wire.NewReader(nc, wire.Buffered, wire.Limits{}).Read()
				replied <- err
			}()
			for {
				// Polled until the reply: the request must never wait.
				wait.Until(time.Second, func() bool { return len(replied) > 0 || b.Waits() != waits })
				select {
				case err := <-replied:
					if err != nil {
						t.Fatalf("honest 1 MiB request: %v", err)
					}
					t.Logf("honest 1 MiB request answered in %v beside %d jammers", time.Since(start), jammers)
					if got := b.Waits() - waits; got != 0 {
						t.Fatalf("%d waits for budget while the honest request was read; want none", got)
					}
					return
				default:
				}
				if got := b.Waits() - waits; got != 0 {
					t.Fatalf("the honest 1 MiB request waited for in-flight budget held by %d jammers (%d bytes in use); want no wait",
						jammers, b.InUse())
				}
			}
		})
	}
}
