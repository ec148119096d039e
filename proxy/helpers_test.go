package proxy

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/demohms"
	"github.com/hmsproxy/hmsproxy/internal/hmsclient"
	"github.com/hmsproxy/hmsproxy/internal/hmsreq"
	"github.com/hmsproxy/hmsproxy/internal/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// startDemo runs a seeded demo metastore on loopback.
func startDemo(t testing.TB, tr wire.Transport) (*demohms.Server, string) {
	t.Helper()
	d := demohms.New(demohms.Config{Transport: tr})
	d.Seed(2, 3, 20)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go d.Serve(ln)
	t.Cleanup(func() { d.Close() })
	return d, ln.Addr().String()
}

type proxyOpts struct {
	clientTransport wire.Transport
	up              upstream.Config
	cache           *Caching
}

// startProxy runs a proxy in front of the given metastore addresses.
func startProxy(t testing.TB, o proxyOpts, addrs ...string) (*Server, string) {
	t.Helper()
	for _, a := range addrs {
		o.up.URIs = append(o.up.URIs, "thrift://"+a)
	}
	if o.up.HealthInterval == 0 {
		o.up.HealthInterval = time.Hour // tests drive health through failures
	}
	if o.up.Logger == nil {
		o.up.Logger = testLogger(t)
	}
	g, err := upstream.New(o.up)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Transport: o.clientTransport, Logger: testLogger(t), Cache: o.cache}, g)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		g.Close()
	})
	return s, ln.Addr().String()
}

func dial(t testing.TB, addr string, tr wire.Transport) *hmsclient.Client {
	t.Helper()
	c, err := hmsclient.Dial(context.Background(), addr, tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// call makes one call and returns a copy of the whole reply message.
func call(t testing.TB, c *hmsclient.Client, method string, args []byte) []byte {
	t.Helper()
	m, err := c.Call(ctxT(t), method, args)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return append([]byte(nil), m.Buf...)
}

func ugiArgs(user string, groups ...string) []byte {
	return hmsreq.Args(hmsreq.Str(1, user), hmsreq.Strings(2, groups...))
}

// expectClosed asserts the server closes the connection (after at most
// one reply) without hanging.
func expectClosed(t testing.TB, c *hmsclient.Client) {
	t.Helper()
	c.Conn().SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	for {
		_, err := c.Conn().Read(buf)
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("connection not closed within 5s")
		}
		return
	}
}

// testLogger sends logs to the test log, shown for failing tests.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// startProxyOver runs a caching proxy whose forwarder is wrap(the
// upstream group of addr): a seam for tests that watch or alter calls.
// Each of before runs on the server before it serves: the place to set
// its test hooks.
func startProxyOver(t *testing.T, caching *Caching, addr string, wrap func(Forwarder) Forwarder, before ...func(*Server)) string {
	t.Helper()
	g, err := upstream.New(upstream.Config{URIs: []string{"thrift://" + addr}, HealthInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	s, err := New(Config{Cache: caching, Logger: testLogger(t)}, wrap(g))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range before {
		f(s)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return ln.Addr().String()
}

// refreshesSettled waits until every refresh-ahead job queued so far has
// finished, and returns how many were queued in all. A hit queues its
// refresh before its reply is written, so once a client has its replies,
// upstream calls counted after this are final: a refresh that should not
// have happened would have been counted.
func refreshesSettled(t testing.TB, s *Server) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		q := s.cache.queued.Load() // before settled: settled never passes it
		if s.cache.settled.Load() == q {
			return q
		}
		if time.Now().After(deadline) {
			t.Fatalf("refresh jobs not finished within 10s: %d of %d", s.cache.settled.Load(), q)
		}
		time.Sleep(time.Millisecond)
	}
}
