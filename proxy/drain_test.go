package proxy

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// TestDrainClosesBetweenCalls: a drain closes an idle connection at once,
// lets a call in flight and a request already begun be answered before
// closing theirs, closes a new connection before its first call, and
// Resume serves again (issue 15: a rolling restart loses no call).
func TestDrainClosesBetweenCalls(t *testing.T) {
	release := make(chan struct{})
	up := proxytest.Fake(t, wire.Buffered, func(c *proxytest.FakeConn, m wire.Message) error {
		if bytes.Equal(m.Name(), []byte("slow_call")) {
			<-release
		}
		c.Scratch = wire.AppendHeader(c.Scratch[:0], wire.Reply, m.Name(), m.SeqID)
		c.Scratch = append(c.Scratch, wire.TStop)
		return c.W.Write(c.Scratch)
	})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the fake's own cleanup, which waits for its calls
	s, addr := serve(t, Config{}, proxytest.Group(t, upstream.Config{}, up))

	busy := func() (busy, all int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for c := range s.conns {
			c.phaseMu.Lock()
			if c.phase == phaseBusy {
				busy++
			}
			c.phaseMu.Unlock()
		}
		return busy, len(s.conns)
	}
	idle := dial(t, addr, wire.Buffered)
	call(t, idle, "fast_call", hmsclient.Args())
	// The connection counts its call after the reply: until then it is
	// busy, and would stand in for the begun request below.
	eventually(t, "the first connection idle", func() bool { b, n := busy(); return b == 0 && n == 1 })

	inCall := dial(t, addr, wire.Buffered)
	if err := inCall.Send(ctxT(t), wire.Call, "slow_call", hmsclient.Args()); err != nil {
		t.Fatal(err)
	}
	// A request of which only the first bytes have arrived.
	begun := dial(t, addr, wire.Buffered)
	req := append(wire.AppendHeader(nil, wire.Call, []byte("fast_call"), 0), hmsclient.Args()...)
	if err := begun.SendRaw(req[:5]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the call in flight and the begun request to be read", func() bool { b, _ := busy(); return b == 2 })

	s.Drain()
	if !s.Draining() {
		t.Fatal("Draining() = false after Drain")
	}
	expectClosed(t, idle)

	if err := begun.SendRaw(req[5:]); err != nil {
		t.Fatal(err)
	}
	if m, err := begun.Recv(ctxT(t)); err != nil || m.Type != wire.Reply {
		t.Fatalf("request begun before the drain: %v, type %d; want its reply", err, m.Type)
	}
	expectClosed(t, begun)

	free()
	if m, err := inCall.Recv(ctxT(t)); err != nil || m.Type != wire.Reply {
		t.Fatalf("call in flight at the drain: %v; want its reply", err)
	}
	expectClosed(t, inCall)

	late := dial(t, addr, wire.Buffered)
	if _, err := late.Call(ctxT(t), "fast_call", hmsclient.Args()); err == nil {
		t.Fatal("a connection made during the drain was served; want it closed before its first call")
	}

	s.Resume()
	call(t, dial(t, addr, wire.Buffered), "fast_call", hmsclient.Args())
}

// TestCutWriteAbandonsItsGroup: a Shutdown that cuts a write in flight
// tells the group's Coherence to abandon (the write may land after every
// invalidation published, so the peers must not be told a clean
// goodbye); cutting a read does not.
func TestCutWriteAbandonsItsGroup(t *testing.T) {
	for _, tc := range []struct {
		method  string
		args    []byte
		abandon bool
	}{
		{"get_table", hmsclient.Args("demo_db0", "t0"), false},
		{"drop_table", hmsclient.Args("demo_db0", "t0"), true},
	} {
		t.Run(tc.method, func(t *testing.T) {
			release, got := make(chan struct{}), make(chan string, 16)
			up := proxytest.Fake(t, wire.Buffered, func(c *proxytest.FakeConn, m wire.Message) error {
				got <- string(m.Name())
				<-release
				return io.EOF
			})
			caching := newCaching(t, nil)
			coh := &fakeCoherence{published: make(chan []cache.Entity, 4)}
			coh.synced.Store(true)
			caching.Coherence = coh
			caching.Scope = ScopeShared // auto would wait for the hung metastore to tell it
			s, addr := startProxy(t, proxyOpts{cache: caching}, up)
			// Before the proxy's cleanup, which waits for its calls, and
			// the fake's, which waits for its handlers.
			t.Cleanup(func() { close(release) })
			c := dial(t, addr, wire.Buffered)
			if err := c.Send(ctxT(t), wire.Call, tc.method, tc.args); err != nil {
				t.Fatal(err)
			}
			for m := ""; m != tc.method; {
				m = proxytest.Recv(t, got, tc.method+" at the metastore")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			if err := s.Shutdown(ctx); err == nil {
				t.Fatal("Shutdown cut nothing; want the call in flight cut")
			}
			if a := coh.abandoned.Load(); a != tc.abandon {
				t.Fatalf("cut %s: coherence abandoned %v; want %v", tc.method, a, tc.abandon)
			}
		})
	}
}
