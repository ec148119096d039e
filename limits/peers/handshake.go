package peers

import (
	"container/list"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Handshake secures or authenticates a connection a Listener accepted
// (TLS, SASL), within ctx, and returns the connection Accept hands on.
// It must return when ctx ends; on an error the Listener closes nc.
type Handshake func(ctx context.Context, nc net.Conn) (net.Conn, error)

// HandshakeConfig configures a Listener.
type HandshakeConfig struct {
	// Name names the handshake in log lines ("kerberos", "tls").
	Name string
	// Timeout bounds one client's handshake. Default 10s.
	Timeout time.Duration
	// Max bounds the handshakes in progress. At the bound the oldest is
	// cut to make room for the new one: the accept loop never waits on
	// handshakes, so clients that connect and say nothing cannot keep
	// the others out. Default 128.
	Max int
	// PerAddress bounds the handshakes in progress from one client host
	// (Key): a connection past it is closed at once. Default 16.
	PerAddress int
	// Logger receives one line per refused client (at PerAddress: at most
	// one a second, with a count of the others). Default: discard.
	Logger *slog.Logger
	// OnResult, if set, is told each handshake's outcome (nil: passed);
	// for metrics and tests.
	OnResult func(error)
	// Result, if set, names a refusal's kind for its log line (the
	// "result" attribute), from a closed set.
	Result func(error) string
}

// Handshake defaults; see HandshakeConfig.
const (
	DefaultHandshakeTimeout     = 10 * time.Second
	DefaultMaxHandshakes        = 128
	DefaultHandshakesPerAddress = 16
)

// Listener runs a Handshake on each connection it accepts, off its
// accept loop, each bounded by the handshake deadline, per client host
// and in total, and returns from Accept only connections that passed.
// Close closes the inner listener, cuts handshakes in progress and waits
// for them.
type Listener struct {
	inner net.Listener
	hs    Handshake
	cfg   HandshakeConfig

	ready  chan net.Conn
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and the handshakes

	mu      sync.Mutex // guards err, pending, perAddr, warned, quiet
	err     error      // why the accept loop ended
	pending list.List  // of *inProgress, oldest first
	perAddr Counter    // handshakes in pending, by client host
	warned  time.Time  // the last refusal at PerAddress logged
	quiet   int        // refusals at PerAddress since, not logged

	refused, cut atomic.Uint64
}

// inProgress is one handshake running.
type inProgress struct {
	nc     net.Conn
	src    Key
	ctx    context.Context
	cancel context.CancelFunc
	elem   *list.Element // in pending; nil once out of it (done, or cut)
	cut    bool          // cut to make room for a newer one
}

// Handshaking wraps inner: each of its connections passes hs before
// Accept returns it.
func Handshaking(inner net.Listener, hs Handshake, cfg HandshakeConfig) *Listener {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultHandshakeTimeout
	}
	if cfg.Max <= 0 {
		cfg.Max = DefaultMaxHandshakes
	}
	if cfg.PerAddress <= 0 {
		cfg.PerAddress = DefaultHandshakesPerAddress
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{inner: inner, hs: hs, cfg: cfg, ready: make(chan net.Conn), ctx: ctx, cancel: cancel}
	l.wg.Add(1)
	go l.loop()
	return l
}

func (l *Listener) loop() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		nc, err := l.inner.Accept()
		if err != nil {
			var ne net.Error
			if l.ctx.Err() == nil && (errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) {
				// Out of descriptors: wait for some to be released rather
				// than stop listening.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				l.cfg.Logger.Warn("accept failed; retrying", "err", err, "backoff", backoff)
				select {
				case <-time.After(backoff):
				case <-l.ctx.Done():
				}
				continue
			}
			l.mu.Lock()
			l.err = err
			l.mu.Unlock()
			l.cancel()
			return
		}
		backoff = 0
		if p := l.admit(nc); p != nil {
			l.wg.Add(1)
			go l.run(p)
		}
	}
}

// admit starts the bookkeeping of nc's handshake, or closes nc when its
// host has PerAddress handshakes in progress. At Max the oldest
// handshake is cut.
func (l *Listener) admit(nc net.Conn) *inProgress {
	src := KeyOf(nc.RemoteAddr())
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perAddr.N(src) >= l.cfg.PerAddress {
		nc.Close()
		l.refused.Add(1)
		if now := time.Now(); now.Sub(l.warned) >= time.Second {
			l.cfg.Logger.Warn(l.cfg.Name+" client refused: its address has too many handshakes in progress",
				"remote", nc.RemoteAddr().String(), "source", src.String(), "max_per_address", l.cfg.PerAddress,
				"refused_unlogged", l.quiet)
			l.warned, l.quiet = now, 0
		} else {
			l.quiet++
		}
		return nil
	}
	if l.pending.Len() >= l.cfg.Max {
		old := l.pending.Front().Value.(*inProgress)
		l.forget(old)
		old.cut = true
		old.cancel()
		l.cut.Add(1)
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.Timeout)
	p := &inProgress{nc: nc, src: src, ctx: ctx, cancel: cancel}
	p.elem = l.pending.PushBack(p)
	l.perAddr.Add(src)
	return p
}

// forget takes p out of the handshakes in progress; l.mu is held.
func (l *Listener) forget(p *inProgress) {
	if p.elem == nil {
		return
	}
	l.pending.Remove(p.elem)
	p.elem = nil
	l.perAddr.Done(p.src)
}

func (l *Listener) run(p *inProgress) {
	defer l.wg.Done()
	c, err := l.hs(p.ctx, p.nc)
	p.cancel()
	l.mu.Lock()
	l.forget(p)
	cut := p.cut
	l.mu.Unlock()
	if l.cfg.OnResult != nil {
		l.cfg.OnResult(err)
	}
	if err != nil {
		lvl, msg := slog.LevelWarn, l.cfg.Name+" client refused"
		switch {
		case cut:
			// A client that said too little for too long, while others
			// were arriving.
			lvl, msg = slog.LevelDebug, l.cfg.Name+" handshake cut to make room for a newer one"
		case errors.Is(err, io.EOF):
			lvl = slog.LevelDebug // closed before a word: a TCP health probe
		}
		attrs := []any{"remote", p.nc.RemoteAddr().String(), "err", err}
		if l.cfg.Result != nil {
			attrs = append(attrs, "result", l.cfg.Result(err))
		}
		l.cfg.Logger.Log(context.Background(), lvl, msg, attrs...)
		p.nc.Close()
		return
	}
	select {
	case l.ready <- c:
	case <-l.ctx.Done():
		c.Close()
	}
}

// Accept returns the next connection that passed its handshake.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err != nil {
			return nil, l.err
		}
		return nil, net.ErrClosed
	}
}

// HandshakeStats are a Listener's counters.
type HandshakeStats struct {
	// InProgress is the handshakes running now.
	InProgress int
	// RefusedPerAddress counts connections closed at once because their
	// host had PerAddress handshakes in progress.
	RefusedPerAddress uint64
	// Cut counts handshakes cut at Max to make room.
	Cut uint64
}

// Stats returns the listener's counters.
func (l *Listener) Stats() HandshakeStats {
	l.mu.Lock()
	n := l.pending.Len()
	l.mu.Unlock()
	return HandshakeStats{InProgress: n, RefusedPerAddress: l.refused.Load(), Cut: l.cut.Load()}
}

// Close stops accepting and waits for handshakes in progress. Safe to
// call twice.
func (l *Listener) Close() error {
	l.cancel()
	err := l.inner.Close()
	l.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// Addr is the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }
