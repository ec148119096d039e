// Package proxytest starts on loopback what hmsproxy's tests need: a
// seeded demo metastore, an upstream group, a cache store, a served
// proxy (or any server), an echo floor and a client, each stopped when
// its test ends. Only tests import it.
//
// It stops below package proxy, so that proxy's own internal tests can
// use it too (a helper importing proxy could not be imported from them:
// an import cycle). A test builds its proxy with proxy.New, over a Group
// and a Store from here, and hands it to Serve, which owns the listener
// and the shutdown. A real Redis comes from internal/testenv/redistest.
package proxytest

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// Timeout bounds Ctx, Call and the shutdown of what Serve started.
const Timeout = 10 * time.Second

// DemoOptions shape a demo metastore; the zero value is the usual one.
type DemoOptions struct {
	// Config is passed to demohms.New as it is (zero: buffered transport,
	// no logs, HMS 3.1 defaults for get_config_value).
	Config demohms.Config
	// Seed is the databases, tables per database and partitions per table
	// created before serving. Zero: {2, 3, 20}.
	Seed [3]int
	// Empty serves the demo as New leaves it, Seed ignored.
	Empty bool
}

// Demo runs a seeded demo metastore on loopback and returns it and its
// address.
func Demo(t testing.TB, o DemoOptions) (*demohms.Server, string) {
	t.Helper()
	if o.Seed == [3]int{} {
		o.Seed = [3]int{2, 3, 20}
	}
	d := demohms.New(o.Config)
	if !o.Empty {
		d.Seed(o.Seed[0], o.Seed[1], o.Seed[2])
	}
	ln := Listen(t)
	go d.Serve(ln)
	t.Cleanup(func() { d.Close() })
	return d, ln.Addr().String()
}

// Group is an upstream group over the metastores at addrs (host:port,
// appended to cfg.URIs), closed when the test ends. Defaults where cfg
// leaves them zero: HealthInterval an hour (tests drive health through
// failures), Logger the test log.
func Group(t testing.TB, cfg upstream.Config, addrs ...string) *upstream.Metastores {
	t.Helper()
	cfg.URIs = append(append([]string(nil), cfg.URIs...), thriftURIs(addrs)...)
	if cfg.HealthInterval == 0 {
		cfg.HealthInterval = time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = Logger(t)
	}
	g, err := upstream.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func thriftURIs(addrs []string) []string {
	uris := make([]string, len(addrs))
	for i, a := range addrs {
		uris[i] = "thrift://" + a
	}
	return uris
}

// Store is a cache store closed when the test ends. Defaults where cfg
// leaves them zero: MaxBytes 64 MiB, Kinds cache.DefaultKinds().
func Store(t testing.TB, cfg cache.Config) *cache.Store {
	t.Helper()
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 64 << 20
	}
	if cfg.Kinds == ([cache.NumKinds]cache.KindConfig{}) {
		cfg.Kinds = cache.DefaultKinds()
	}
	st, err := cache.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// Server is what Serve runs: a *proxy.Server, for one.
type Server interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
}

// Serve serves s on a loopback listener and returns its address; s is
// shut down (within Timeout) when the test ends, before anything
// registered earlier, such as its Group, is closed.
func Serve(t testing.TB, s Server) string {
	t.Helper()
	return ServeOn(t, s, Listen(t))
}

// ServeOn is Serve on a listener of the caller's, such as a TLS one.
func ServeOn(t testing.TB, s Server, ln net.Listener) string {
	t.Helper()
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		s.Shutdown(ctx)
	})
	return ln.Addr().String()
}

// Listen is a listener on a free loopback port.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// Answer is a fake metastore's handling of one call read on a
// connection: it writes what it likes on c.W (or nothing, as a hung
// metastore); an error closes the connection.
type Answer func(c *FakeConn, m wire.Message) error

// FakeConn is one connection of a fake metastore.
type FakeConn struct {
	W *wire.Writer
	// Scratch is the connection's own buffer, kept between calls, for
	// answers built without allocating.
	Scratch []byte
}

// Fake serves a metastore of the test's making on loopback and returns
// its address. See ServeFake.
func Fake(t testing.TB, tr wire.Transport, answer Answer) string {
	t.Helper()
	ln := Listen(t)
	ServeFake(t, ln, tr, answer)
	return ln.Addr().String()
}

// ServeFake runs answer for every call read on a connection accepted
// from ln, one connection at a time in order. When the test ends, ln and
// every connection are closed and the goroutines waited for.
func ServeFake(t testing.TB, ln net.Listener, tr wire.Transport, answer Answer) {
	var wg sync.WaitGroup
	var mu sync.Mutex // guards conns
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Go(func() {
				defer nc.Close()
				r, c := wire.NewReader(nc, tr, wire.Limits{}), &FakeConn{W: wire.NewWriter(nc, tr)}
				for {
					m, err := r.Read()
					if err != nil || answer(c, m) != nil {
						return
					}
				}
			})
		}
	})
}

// Echo answers every call on ln with one fixed reply body under the
// caller's method name and seqid: the floor a proxy hit is measured
// against.
func Echo(t testing.TB, ln net.Listener, body []byte) { EchoOn(t, ln, wire.Buffered, body) }

// EchoOn is Echo on transport tr: framed for a raw-reading client
// (hmsclient.Raw).
func EchoOn(t testing.TB, ln net.Listener, tr wire.Transport, body []byte) {
	ServeFake(t, ln, tr, func(c *FakeConn, m wire.Message) error {
		c.Scratch = wire.AppendHeader(c.Scratch[:0], wire.Reply, m.Name(), m.SeqID)
		return c.W.Write(c.Scratch, body)
	})
}

// Dial is a client of addr, closed when the test ends.
func Dial(t testing.TB, addr string, tr wire.Transport) *hmsclient.Client {
	t.Helper()
	c, err := hmsclient.Dial(context.Background(), addr, tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// DialRaw is a raw-reading client of addr (framed), closed when the test
// ends.
func DialRaw(t testing.TB, addr string) *hmsclient.Raw {
	t.Helper()
	r, err := hmsclient.DialRaw(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// Call makes one call within Timeout and returns a copy of the whole
// reply message; the test fails on a transport error.
func Call(t testing.TB, c *hmsclient.Client, method string, args []byte) []byte {
	t.Helper()
	return CallWithin(t, Timeout, c, method, args)
}

// CallWithin is Call bounded by d (a cold real metastore wants longer).
func CallWithin(t testing.TB, d time.Duration, c *hmsclient.Client, method string, args []byte) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return CallCtx(t, ctx, c, method, args)
}

// CallCtx is Call bounded by ctx.
func CallCtx(t testing.TB, ctx context.Context, c *hmsclient.Client, method string, args []byte) []byte {
	t.Helper()
	m, err := c.Call(ctx, method, args)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return append([]byte(nil), m.Buf...)
}

// Ctx is a context that ends after Timeout or with the test.
func Ctx(t testing.TB) context.Context {
	return Within(t, Timeout)
}

// Within is a context that ends after d or with the test.
func Within(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Reconnecting runs clients that each, every period, connect to addr,
// make the calls of calls and disconnect, as a pool of engines keeps
// calling a metastore that fails them (errors are theirs to ignore),
// until the returned stop, which waits for them.
func Reconnecting(addr string, clients int, every time.Duration, calls func(context.Context, *hmsclient.Client)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				c, err := hmsclient.Dial(ctx, addr, wire.Buffered)
				if err != nil {
					continue
				}
				calls(ctx, c)
				c.Close()
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// Recv receives from ch, failing the test with what it waited for after
// Timeout: a wait that a bug in the proxy could leave hanging must fail
// as that test, not as the whole package's timeout.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Timeout):
		t.Fatalf("timed out after %v waiting for %s", Timeout, what)
		var zero T
		return zero
	}
}

// Eventually polls cond every 2ms until it holds, failing
// the test after Timeout with what it waited for.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	wait.Eventually(t, Timeout, cond, "waiting for %s", what)
}

// Logger sends debug logs to the test log, shown for failing tests. A
// benchmark's logger discards them: its logging would be measured.
func Logger(t testing.TB) *slog.Logger {
	if _, ok := t.(*testing.B); ok {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
