package proxy

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestUnknownMethodInvalidates (issue 10): a method the proxy does not
// know may be a newer metastore's write. It is forwarded as is (the demo
// metastore answers UNKNOWN_METHOD, passed through), then everything
// cached for the upstream group is invalidated, locally and on the bus
// hook writes publish through; a name listed in KnownReads passes
// through and the cached entry stays (the second read is a hit: the
// metastore sees no get_table).
func TestUnknownMethodInvalidates(t *testing.T) {
	const unknown = "get_made_up_thing"
	for _, tc := range []struct {
		name       string
		knownReads []string
		flush      bool
	}{
		{"unknown", nil, true},
		{"other name known", []string{"list_made_up_things"}, true},
		{"known read", []string{unknown}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			demo, addr := startDemo(t, wire.Buffered)
			caching := newCaching(t, nil)
			caching.KnownReads = tc.knownReads
			published := &flushCounter{}
			caching.Coherence = published
			srv, paddr := startProxy(t, proxyOpts{cache: caching}, addr)
			c := dial(t, paddr, wire.Buffered)
			direct := dial(t, addr, wire.Buffered)

			read := cachedGetTable(t, demo, caching, c)

			args := hmsreq.Args(hmsreq.Str(1, "demo_db0"))
			want := call(t, direct, unknown, args)
			got := call(t, c, unknown, args)
			if !sameButSeqID(got, want) {
				t.Fatalf("unknown method reply\n got %x\nwant %x", got, want)
			}

			before := demo.CallCount("get_table")
			call(t, c, "get_table", read)
			wantLoads, wantPublished := 0, int32(0)
			if tc.flush {
				wantLoads, wantPublished = 1, 1
			}
			if n := demo.CallCount("get_table") - before; n != wantLoads {
				t.Errorf("get_table after %s reached the metastore %d times; want %d", unknown, n, wantLoads)
			}
			if n := published.n.Load(); n != wantPublished {
				t.Errorf("published %d flush-everything invalidations; want %d", n, wantPublished)
			}
			flushes := map[string]uint64{}
			srv.EachUnknownFlush(func(m string, n uint64) { flushes[m] = n })
			wantRows := map[string]uint64{}
			if tc.flush {
				wantRows[unknown] = 1
			}
			if !maps.Equal(flushes, wantRows) {
				t.Errorf("flush counts %v; want %v", flushes, wantRows)
			}
		})
	}
}

// logCounter counts log records per message and "method" attribute.
type logCounter struct {
	mu sync.Mutex // guards n
	n  map[string]int
}

func (h *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCounter) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logCounter) WithGroup(string) slog.Handler            { return h }
func (h *logCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "method" {
			h.n[a.Value.String()]++
		}
		return true
	})
	return nil
}

// TestUnknownMethodNameLogged: a name that is not valid UTF-8, or longer
// than the bound, is logged quoted and cut (issue 22: such a name once
// crashed the process as a metric label).
func TestUnknownMethodNameLogged(t *testing.T) {
	h := &logCounter{n: map[string]int{}}
	u := newUnknownMethods(nil, slog.New(h))
	u.writeFor([]byte("get_\xff\xfetable"))
	u.writeFor(bytes.Repeat([]byte("y"), 4*maxUnknownNameLen))
	for name := range h.n {
		if !utf8.ValidString(name) || len(name) > maxUnknownNameLen+40 {
			t.Errorf("logged method %q (%d bytes); want valid UTF-8 of at most about %d bytes", name, len(name), maxUnknownNameLen)
		}
	}
	if h.n[`"get_\xff\xfetable"`] != 1 {
		t.Errorf("logged %v; want the name quoted once", h.n)
	}
}

// TestUnknownMethodsBounded: each name is logged once however often it
// comes, and counted on its own row up to maxUnknownNames names (and
// maxUnknownNameLen bytes); past that, names share the "other" row and
// one log line, so a client cannot grow the map or the label set.
func TestUnknownMethodsBounded(t *testing.T) {
	h := &logCounter{n: map[string]int{}}
	u := newUnknownMethods(nil, slog.New(h))
	for range 3 {
		if m := u.writeFor([]byte("new_write")); m.Name != "new_write" || len(m.Effects) != 1 {
			t.Fatalf("writeFor = %+v; want a flush-everything write named new_write", m)
		}
	}
	long := bytes.Repeat([]byte("x"), maxUnknownNameLen+1)
	if m := u.writeFor(long); m.Name != unknownOther {
		t.Errorf("a %d-byte name is tracked as %q; want %q", len(long), m.Name, unknownOther)
	}
	for i := range 2 * maxUnknownNames {
		u.writeFor(fmt.Appendf(nil, "m%d", i))
	}
	rows := map[string]uint64{}
	u.each(func(m string, n uint64) { rows[m] = n })
	if len(rows) != maxUnknownNames {
		t.Errorf("tracking %d names; want the bound, %d", len(rows), maxUnknownNames)
	}
	if rows["new_write"] != 3 {
		t.Errorf("new_write flushed %d times; want 3", rows["new_write"])
	}
	// long, then every name past the bound (2*max - (max-2) tracked).
	if want := uint64(1 + 2*maxUnknownNames - (maxUnknownNames - 2)); rows[unknownOther] != want {
		t.Errorf("other flushed %d times; want %d", rows[unknownOther], want)
	}
	if h.n[`"new_write"`] != 1 {
		t.Errorf("new_write logged %d times; want once", h.n[`"new_write"`])
	}
	if got := len(h.n); got > maxUnknownNames+1 {
		t.Errorf("logged %d distinct names; want at most %d", got, maxUnknownNames+1)
	}
}

// onewaySink stands for a metastore that knows a oneway method the proxy
// does not: it takes the call and never replies. Other calls go on.
// TestUnknownOnewayInvalidates: an unknown oneway call is forwarded as
// one (no reply awaited) and still flushes, before the next call on that
// connection is read.
func TestUnknownOnewayInvalidates(t *testing.T) {
	demo, addr := startDemo(t, wire.Buffered)
	caching := newCaching(t, nil)
	published := &flushCounter{}
	caching.Coherence = published
	paddr := startProxyOver(t, caching, addr, func(f Forwarder) Forwarder { return f })
	c := dial(t, paddr, wire.Buffered)
	read := cachedGetTable(t, demo, caching, c)
	if err := c.Send(ctxT(t), wire.Oneway, "made_up_oneway", hmsreq.Args()); err != nil {
		t.Fatal(err)
	}
	before := demo.CallCount("get_table")
	call(t, c, "get_table", read)
	if n := demo.CallCount("get_table") - before; n != 1 {
		t.Errorf("get_table after an unknown oneway call reached the metastore %d times; want 1", n)
	}
	// The oneway call went on a connection of its own; the metastore may
	// read it after the get_table above.
	wait.Until(5*time.Second, func() bool { return demo.CallCount("made_up_oneway") != 0 })
	if n := demo.CallCount("made_up_oneway"); n != 1 || published.n.Load() != 1 {
		t.Errorf("oneway calls reaching the metastore %d, flushes published %d; want 1, 1", n, published.n.Load())
	}
}

// flushCounter is a Coherence that counts the flush-everything
// invalidations published, always in sync.
type flushCounter struct{ n atomic.Int32 }

func (f *flushCounter) Publish(_ context.Context, ents []cache.Entity) error {
	if len(ents) == 1 && ents[0] == (cache.Entity{Level: cache.LevelAll}) {
		f.n.Add(1)
	}
	return nil
}

func (f *flushCounter) Synced() bool { return true }
func (f *flushCounter) Abandon()     {}

// cachedGetTable reads demo_db0.t0 through c twice, fails unless the
// second read is a hit, and returns the read's args.
func cachedGetTable(t *testing.T, demo *demohms.Server, caching *Caching, c *hmsclient.Client) []byte {
	t.Helper()
	read := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	call(t, c, "get_table", read)
	caching.Store.Wait()
	before := demo.CallCount("get_table")
	call(t, c, "get_table", read)
	if n := demo.CallCount("get_table") - before; n != 0 {
		t.Fatalf("second get_table reached the metastore %d times; want a hit", n)
	}
	return read
}
