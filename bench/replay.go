package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/trace"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// ReplayConfig configures Replay. Calls and Upstream are required.
type ReplayConfig struct {
	// Calls is the trace, in the order it was recorded.
	Calls []trace.Call
	// Upstream are the metastore's addresses (host:port): the direct
	// pass calls the first, the proxy's upstream group takes them all.
	Upstream []string
	// Transport is the framing toward the metastore and the proxy.
	// Default buffered.
	Transport wire.Transport
	// Caching makes the in-process proxy's cache (a fresh one: nothing is
	// cached when the proxy pass begins). Nil: a proxy with no cache.
	Caching func() (*proxy.Caching, error)
	// Speed divides the recorded time between calls: 2 replays a trace
	// in half its time. 0: every connection goes as fast as it can.
	Speed float64
	// Writes replays writes and the calls that change state
	// (transactions, locks, unknown methods). Off: they are skipped, as a
	// replay must not change a production metastore twice.
	Writes bool
	// MaxConns bounds the connections open at once on each side.
	// Default 256.
	MaxConns int
	// Timeout bounds each call. Default 2m.
	Timeout time.Duration
	// Logger receives the proxy's logs. Default: discard.
	Logger *slog.Logger
}

// Skip reasons of calls not replayed.
const (
	skipWrite   = "write or state change (replay with --writes against a scratch metastore)"
	skipNoArgs  = "args not recorded (redacted or elided)"
	skipUnknown = "method unknown to this build"
)

// replayable says whether c is replayed, and why not.
func replayable(c *trace.Call, writes bool) (bool, string) {
	if c.ArgsDropped {
		return false, skipNoArgs
	}
	m := hms.Lookup([]byte(c.Method))
	switch {
	case writes:
		return true, ""
	case m == nil:
		return false, skipUnknown
	case m.Idempotent() || m.Class == hms.Session:
		return true, ""
	}
	return false, skipWrite
}

// replayConn is one recorded client connection: the indexes of its calls
// in ReplayConfig.Calls, in order.
type replayConn struct {
	id    uint64
	calls []int
}

// plan groups the replayable calls by connection, each in time order,
// connections by their first call; the rest are counted by reason.
func plan(calls []trace.Call, writes bool) (conns []*replayConn, skipped map[string]int, t0 time.Time) {
	byID := map[uint64]*replayConn{}
	skipped = map[string]int{}
	for i := range calls {
		c := &calls[i]
		if ok, why := replayable(c, writes); !ok {
			skipped[why]++
			continue
		}
		if t0.IsZero() || c.Time.Before(t0) {
			t0 = c.Time
		}
		rc := byID[c.Conn]
		if rc == nil {
			rc = &replayConn{id: c.Conn}
			byID[c.Conn] = rc
			conns = append(conns, rc)
		}
		rc.calls = append(rc.calls, i)
	}
	for _, rc := range conns {
		sort.SliceStable(rc.calls, func(a, b int) bool { return calls[rc.calls[a]].Time.Before(calls[rc.calls[b]].Time) })
	}
	sort.SliceStable(conns, func(a, b int) bool {
		return calls[conns[a].calls[0]].Time.Before(calls[conns[b].calls[0]].Time)
	})
	return conns, skipped, t0
}

// sideStats are one pass's results, by method.
type sideStats struct {
	mu     sync.Mutex // guards the maps
	hist   map[string]*Hist
	bytes  map[string]int64
	calls  map[string]int
	failed int
}

func newSideStats() *sideStats {
	return &sideStats{hist: map[string]*Hist{}, bytes: map[string]int64{}, calls: map[string]int{}}
}

// merge adds a connection's results.
func (s *sideStats) merge(h map[string]*Hist, b map[string]int64, n map[string]int, failed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for m, x := range h {
		if s.hist[m] == nil {
			s.hist[m] = &Hist{}
		}
		s.hist[m].Merge(x)
	}
	for m, x := range b {
		s.bytes[m] += x
	}
	for m, x := range n {
		s.calls[m] += x
	}
	s.failed += failed
}

// pass replays the planned connections against addr.
func (rp *replayer) pass(ctx context.Context, addr string) *sideStats {
	out := newSideStats()
	sem := make(chan struct{}, rp.cfg.MaxConns)
	var wg sync.WaitGroup
	begin := time.Now()
	for _, rc := range rp.conns {
		first := rp.cfg.Calls[rc.calls[0]].Time
		if !rp.wait(ctx, begin, first) {
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			rp.replayConn(ctx, addr, rc, begin, out)
		})
	}
	wg.Wait()
	return out
}

// wait sleeps until the replay time of a call recorded at t; false when
// ctx ended first.
func (rp *replayer) wait(ctx context.Context, begin, t time.Time) bool {
	if rp.cfg.Speed <= 0 {
		return ctx.Err() == nil
	}
	at := begin.Add(time.Duration(float64(t.Sub(rp.t0)) / rp.cfg.Speed))
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// replayConn makes one recorded connection's calls in order, each at its
// scaled time (or as soon as the one before is answered), on one
// connection that is dialled again after a failure.
func (rp *replayer) replayConn(ctx context.Context, addr string, rc *replayConn, begin time.Time, out *sideStats) {
	hist, bytes, n, failed := map[string]*Hist{}, map[string]int64{}, map[string]int{}, 0
	var cl *hmsclient.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
		out.merge(hist, bytes, n, failed)
	}()
	for _, i := range rc.calls {
		c := &rp.cfg.Calls[i]
		if !rp.wait(ctx, begin, c.Time) {
			return
		}
		if cl == nil {
			var err error
			if cl, err = hmsclient.Dial(ctx, addr, rp.cfg.Transport); err != nil {
				failed++
				n[c.Method]++
				continue
			}
		}
		h := hist[c.Method]
		if h == nil {
			h = &Hist{}
			hist[c.Method] = h
		}
		n[c.Method]++
		size, d, err := rp.call(ctx, cl, c)
		if err != nil {
			h.Errors++
			failed++
			cl.Close()
			cl = nil
			continue
		}
		if !c.Oneway {
			h.Record(d)
		}
		bytes[c.Method] += size
	}
}

// call makes one call: its reply's size and how long it took. The reply
// is read as raw bytes and never decoded.
func (rp *replayer) call(ctx context.Context, cl *hmsclient.Client, c *trace.Call) (int64, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, rp.cfg.Timeout)
	defer cancel()
	start := time.Now()
	if c.Oneway {
		return 0, 0, cl.Send(ctx, wire.Oneway, c.Method, c.Args)
	}
	m, err := cl.Call(ctx, c.Method, c.Args)
	if err != nil {
		return 0, 0, err
	}
	return int64(len(m.Buf)), time.Since(start), nil
}

// replayer runs the two passes of one replay.
type replayer struct {
	cfg   ReplayConfig
	conns []*replayConn
	t0    time.Time
}

// countingForwarder counts the calls the proxy makes to the metastore,
// by method: the proxy's upstream side, refreshes and checks included.
type countingForwarder struct {
	up proxy.Forwarder
	mu sync.Mutex // guards n
	n  map[string]*atomic.Uint64
}

func (f *countingForwarder) Do(ctx context.Context, c upstream.Call, sink upstream.ReplySink) error {
	name := string(c.Msg.Name())
	f.mu.Lock()
	ctr := f.n[name]
	if ctr == nil {
		ctr = new(atomic.Uint64)
		f.n[name] = ctr
	}
	f.mu.Unlock()
	ctr.Add(1)
	return f.up.Do(ctx, c, sink)
}

func (f *countingForwarder) counts() map[string]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]uint64{}
	for m, c := range f.n {
		out[m] = c.Load()
	}
	return out
}

// Replay replays cfg.Calls twice, straight to the metastore and through
// an in-process proxy, and reports both.
func Replay(ctx context.Context, cfg ReplayConfig) (*ReplayReport, error) {
	if len(cfg.Upstream) == 0 {
		return nil, errors.New("bench: replay: no metastore")
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 256
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	rp := &replayer{cfg: cfg}
	var skipped map[string]int
	rp.conns, skipped, rp.t0 = plan(cfg.Calls, cfg.Writes)
	rep := &ReplayReport{Recorded: len(cfg.Calls), Skipped: skipped, Speed: cfg.Speed}
	if len(rp.conns) == 0 {
		return rep, errors.New("bench: replay: no call to replay")
	}

	direct := rp.pass(ctx, cfg.Upstream[0])
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	px, err := startReplayProxy(cfg)
	if err != nil {
		return nil, err
	}
	viaProxy := rp.pass(ctx, px.addr)
	px.close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep.fill(direct, viaProxy, px)
	return rep, nil
}

// replayProxy is the in-process proxy of the second pass.
type replayProxy struct {
	addr  string
	srv   *proxy.Server
	fwd   *countingForwarder
	group *upstream.Metastores
	cache *proxy.Caching
	done  chan struct{}
}

func startReplayProxy(cfg ReplayConfig) (_ *replayProxy, err error) {
	px := &replayProxy{done: make(chan struct{})}
	var uris []string
	for _, a := range cfg.Upstream {
		uris = append(uris, "thrift://"+a)
	}
	px.group, err = upstream.New(upstream.Config{URIs: uris, Transport: cfg.Transport, Logger: cfg.Logger.With("component", "upstream")})
	if err != nil {
		return nil, err
	}
	if cfg.Caching != nil {
		if px.cache, err = cfg.Caching(); err != nil {
			px.group.Close()
			return nil, err
		}
	}
	px.fwd = &countingForwarder{up: px.group, n: map[string]*atomic.Uint64{}}
	px.srv, err = proxy.New(proxy.Config{Transport: cfg.Transport, Logger: cfg.Logger.With("component", "proxy"), Cache: px.cache}, px.fwd)
	if err != nil {
		px.group.Close()
		return nil, err
	}
	// A proxy that has run for a while knows its metastore's settings;
	// until it does, it answers nothing locally.
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	err = px.srv.SettingsRead(sctx)
	cancel()
	if err != nil {
		px.group.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		px.group.Close()
		return nil, fmt.Errorf("bench: replay proxy listen: %w", err)
	}
	px.addr = ln.Addr().String()
	go func() {
		defer close(px.done)
		px.srv.Serve(ln)
	}()
	return px, nil
}

// close stops the proxy; its counters stay readable.
func (px *replayProxy) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	px.srv.Shutdown(ctx)
	<-px.done
	px.group.Close()
	if px.cache != nil {
		px.cache.Store.Close()
	}
}

// methodsOf is the sorted union of the maps' keys.
func methodsOf[V any](ms ...map[string]V) []string {
	var out []string
	for _, m := range ms {
		for k := range m {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}
