package sasl

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Result is how a client's handshake ended, one of a closed set (a
// metric label).
type Result uint8

const (
	ResultAccepted  Result = iota
	ResultMismatch         // the authenticator named another principal than the ticket (ErrPrincipalMismatch)
	ResultRefused          // other credentials refused: expired, another service, no identity (ErrAuthentication)
	ResultMechanism        // another SASL mechanism: delegation tokens, PLAIN (ErrMechanism)
	ResultAuthzID          // asked to act as another user (ErrAuthzID)
	ResultFailed           // the rest: broken framing, no common QOP, timeouts, closed connections
	NumResults
)

var resultNames = [NumResults]string{"accepted", "mismatch", "refused", "mechanism", "authzid", "failed"}

func (r Result) String() string {
	if r < NumResults {
		return resultNames[r]
	}
	return "failed"
}

// ResultOf classifies a handshake's error (nil: accepted).
func ResultOf(err error) Result {
	switch {
	case err == nil:
		return ResultAccepted
	case errors.Is(err, ErrPrincipalMismatch):
		return ResultMismatch
	case errors.Is(err, ErrMechanism):
		return ResultMechanism
	case errors.Is(err, ErrAuthzID):
		return ResultAuthzID
	case errors.Is(err, ErrAuthentication):
		return ResultRefused
	}
	return ResultFailed
}

// ListenerStats are a Listener's counters.
type ListenerStats struct {
	Handshakes [NumResults]atomic.Uint64 // by Result
}

// ListenerConfig configures Listen.
type ListenerConfig struct {
	// HandshakeTimeout bounds one client's handshake. Default 10s.
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds handshakes in progress; further connections
	// wait in the kernel's accept queue. Default 64.
	MaxHandshakes int
	// Logger receives one line per refused client. Default: discard.
	Logger *slog.Logger
	// OnResult, if set, is told each handshake's outcome (nil: accepted);
	// for metrics and tests.
	OnResult func(error)
}

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
	sem    chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and the handshakes
	stats  ListenerStats

	mu  sync.Mutex // guards err
	err error      // why the accept loop ended
}

// Listen wraps inner: its connections speak Thrift-SASL with GSSAPI first.
func Listen(inner net.Listener, srv *Server, cfg ListenerConfig) *Listener {
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if cfg.MaxHandshakes <= 0 {
		cfg.MaxHandshakes = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{inner: inner, srv: srv, cfg: cfg, ready: make(chan *Conn),
		sem: make(chan struct{}, cfg.MaxHandshakes), ctx: ctx, cancel: cancel}
	l.wg.Add(1)
	go l.loop()
	return l
}

func (l *Listener) loop() {
	defer l.wg.Done()
	for {
		select {
		case l.sem <- struct{}{}:
		case <-l.ctx.Done():
			return
		}
		nc, err := l.inner.Accept()
		if err != nil {
			<-l.sem
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.mu.Lock()
			l.err = err
			l.mu.Unlock()
			l.cancel()
			return
		}
		l.wg.Add(1)
		go l.handshake(nc)
	}
}

func (l *Listener) handshake(nc net.Conn) {
	defer l.wg.Done()
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.HandshakeTimeout)
	peer, err := l.srv.Accept(ctx, nc)
	cancel()
	<-l.sem
	l.stats.Handshakes[ResultOf(err)].Add(1)
	if l.cfg.OnResult != nil {
		l.cfg.OnResult(err)
	}
	if err != nil {
		lvl := slog.LevelWarn
		if errors.Is(err, io.EOF) {
			lvl = slog.LevelDebug // closed before a word: a TCP health probe
		}
		l.cfg.Logger.Log(context.Background(), lvl, "kerberos client refused", "remote", nc.RemoteAddr().String(),
			"result", ResultOf(err).String(), "err", err)
		nc.Close()
		return
	}
	select {
	case l.ready <- &Conn{Conn: nc, peer: peer}:
	case <-l.ctx.Done():
		nc.Close()
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

// Stats returns the handshake counters.
func (l *Listener) Stats() *ListenerStats { return &l.stats }

// Addr is the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }
