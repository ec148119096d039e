package sasl

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

	"github.com/hmsproxy/hmsproxy/internal/peers"
)

// ListenerConfig configures Listen.
type ListenerConfig struct {
	// HandshakeTimeout bounds one client's handshake. Default 10s.
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds the handshakes in progress. At the bound the
	// oldest is cut to make room for the new one: the accept loop never
	// waits on handshakes, so clients that connect and say nothing cannot
	// keep the others out. With maxMessage it bounds the handshakes'
	// memory (128 × 256 KiB). Default 128.
	MaxHandshakes int
	// MaxHandshakesPerAddress bounds the handshakes in progress from one
	// source address (an IPv4 address, an IPv6 /64): a connection past it
	// is closed at once. Default 16.
	MaxHandshakesPerAddress int
	// Logger receives one line per refused client (refusals at
	// MaxHandshakesPerAddress: at most one a second, with a count).
	// Default: discard.
	Logger *slog.Logger
	// OnResult, if set, is told each handshake's outcome (nil: accepted);
	// for metrics and tests.
	OnResult func(error)
}

// Listener defaults; see ListenerConfig.
const (
	DefaultHandshakeTimeout        = 10 * time.Second
	DefaultMaxHandshakes           = 128
	DefaultMaxHandshakesPerAddress = 16
)

// Conn is an accepted connection whose client has authenticated.
type Conn struct {
	net.Conn
	peer Peer
}

// Peer is the authenticated client.
func (c *Conn) Peer() Peer { return c.peer }

// NetConn is the connection under the handshake: with QOP auth it carries
// the framed messages as they are, and callers doing I/O on it keep the
// fast paths (writev) that a wrapper would hide.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// AuthenticatedUser is the identity the proxy gives the connection (the
// principal's short name, as the metastore would).
func (c *Conn) AuthenticatedUser() string { return c.peer.User }

// Listener runs the handshake on each accepted connection, off the accept
// loop, and returns from Accept only connections that passed it. Close
// closes the inner listener, cuts handshakes in progress and waits for them.
type Listener struct {
	inner net.Listener
	srv   *Server
	cfg   ListenerConfig

	ready  chan *Conn
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and the handshakes

	mu      sync.Mutex    // guards err, pending, perAddr, warned, quiet
	err     error         // why the accept loop ended
	pending list.List     // of *handshake, oldest first
	perAddr peers.Counter // handshakes in pending, by source
	warned  time.Time     // the last per-address refusal logged
	quiet   int           // per-address refusals since, not logged

	refused, cut atomic.Uint64
}

// handshake is one in progress.
type handshake struct {
	nc     net.Conn
	src    peers.Key
	ctx    context.Context
	cancel context.CancelFunc
	elem   *list.Element // in pending; nil once out of it (done, or cut)
	cut    bool          // cut to make room for a newer one
}

// Listen wraps inner: its connections speak Thrift-SASL with GSSAPI first.
func Listen(inner net.Listener, srv *Server, cfg ListenerConfig) *Listener {
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.MaxHandshakes <= 0 {
		cfg.MaxHandshakes = DefaultMaxHandshakes
	}
	if cfg.MaxHandshakesPerAddress <= 0 {
		cfg.MaxHandshakesPerAddress = DefaultMaxHandshakesPerAddress
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{inner: inner, srv: srv, cfg: cfg, ready: make(chan *Conn), ctx: ctx, cancel: cancel}
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
		if h := l.admit(nc); h != nil {
			l.wg.Add(1)
			go l.handshake(h)
		}
	}
}

// admit starts the bookkeeping of nc's handshake, or closes nc when its
// address has MaxHandshakesPerAddress in progress. At MaxHandshakes the
// oldest handshake is cut.
func (l *Listener) admit(nc net.Conn) *handshake {
	src := peers.KeyOf(nc.RemoteAddr())
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perAddr.N(src) >= l.cfg.MaxHandshakesPerAddress {
		nc.Close()
		l.refused.Add(1)
		if now := time.Now(); now.Sub(l.warned) >= time.Second {
			l.cfg.Logger.Warn("kerberos client refused: its address has too many handshakes in progress",
				"remote", nc.RemoteAddr().String(), "source", src.String(), "max_per_address", l.cfg.MaxHandshakesPerAddress,
				"refused_unlogged", l.quiet)
			l.warned, l.quiet = now, 0
		} else {
			l.quiet++
		}
		return nil
	}
	if l.pending.Len() >= l.cfg.MaxHandshakes {
		old := l.pending.Front().Value.(*handshake)
		l.forget(old)
		old.cut = true
		old.cancel()
		l.cut.Add(1)
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.HandshakeTimeout)
	h := &handshake{nc: nc, src: src, ctx: ctx, cancel: cancel}
	h.elem = l.pending.PushBack(h)
	l.perAddr.Add(src)
	return h
}

// forget takes h out of the handshakes in progress; l.mu is held.
func (l *Listener) forget(h *handshake) {
	if h.elem == nil {
		return
	}
	l.pending.Remove(h.elem)
	h.elem = nil
	l.perAddr.Done(h.src)
}

func (l *Listener) handshake(h *handshake) {
	defer l.wg.Done()
	peer, err := l.srv.Accept(h.ctx, h.nc)
	h.cancel()
	l.mu.Lock()
	l.forget(h)
	cut := h.cut
	l.mu.Unlock()
	if l.cfg.OnResult != nil {
		l.cfg.OnResult(err)
	}
	if err != nil {
		lvl, msg := slog.LevelWarn, "kerberos client refused"
		switch {
		case cut:
			// A client that said too little for too long, while others
			// were arriving.
			lvl, msg = slog.LevelDebug, "kerberos handshake cut to make room for a newer one"
		case errors.Is(err, io.EOF):
			lvl = slog.LevelDebug // closed before a word: a TCP health probe
		}
		l.cfg.Logger.Log(context.Background(), lvl, msg, "remote", h.nc.RemoteAddr().String(), "err", err)
		h.nc.Close()
		return
	}
	select {
	case l.ready <- &Conn{Conn: h.nc, peer: peer}:
	case <-l.ctx.Done():
		h.nc.Close()
	}
}

// Accept returns the next authenticated connection, a *Conn.
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

// ListenerStats are a Listener's counters.
type ListenerStats struct {
	// InProgress is the handshakes running now.
	InProgress int
	// RefusedPerAddress counts connections closed at once because their
	// address had MaxHandshakesPerAddress in progress.
	RefusedPerAddress uint64
	// Cut counts handshakes cut at MaxHandshakes to make room.
	Cut uint64
}

// Stats returns the listener's counters.
func (l *Listener) Stats() ListenerStats {
	l.mu.Lock()
	n := l.pending.Len()
	l.mu.Unlock()
	return ListenerStats{InProgress: n, RefusedPerAddress: l.refused.Load(), Cut: l.cut.Load()}
}

// Close stops accepting and waits for handshakes in progress. Safe to call
// twice.
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
