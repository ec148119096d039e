package sasl

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/limits/peers"
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
	// MaxHandshakes bounds the handshakes in progress. At the bound the
	// oldest is cut to make room for the new one: the accept loop never
	// waits on handshakes, so clients that connect and say nothing cannot
	// keep the others out. With maxMessage it bounds the handshakes'
	// memory (128 × 256 KiB, for clients that send that much). Default
	// 128.
	MaxHandshakes int
	// MaxHandshakesPerAddress bounds the handshakes in progress from one
	// client host (an IPv4 address, an IPv6 /64): a connection past it
	// is closed at once. Default 16.
	MaxHandshakesPerAddress int
	// Logger receives one line per refused client (those refused at
	// MaxHandshakesPerAddress: at most one a second, with a count).
	// Default: discard.
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
// loop (peers.Listener), and returns from Accept only connections that
// passed it, each a *Conn. Close closes the inner listener, cuts
// handshakes in progress and waits for them.
type Listener struct {
	*peers.Listener
	results ListenerStats
}

// Listen wraps inner: its connections speak Thrift-SASL with GSSAPI first.
func Listen(inner net.Listener, srv *Server, cfg ListenerConfig) *Listener {
	hs := func(ctx context.Context, nc net.Conn) (net.Conn, error) {
		p, err := srv.Accept(ctx, nc)
		if err != nil {
			return nil, err
		}
		return &Conn{Conn: nc, peer: p}, nil
	}
	l := &Listener{}
	onResult := func(err error) {
		l.results.Handshakes[ResultOf(err)].Add(1)
		if cfg.OnResult != nil {
			cfg.OnResult(err)
		}
	}
	l.Listener = peers.Handshaking(inner, hs, peers.HandshakeConfig{Name: "kerberos",
		Timeout: cfg.HandshakeTimeout, Max: cfg.MaxHandshakes, PerAddress: cfg.MaxHandshakesPerAddress,
		Logger: cfg.Logger, OnResult: onResult, Result: func(err error) string { return ResultOf(err).String() }})
	return l
}

// Results returns the handshakes' outcomes, by Result.
func (l *Listener) Results() *ListenerStats { return &l.results }
