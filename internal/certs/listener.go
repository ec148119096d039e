package certs

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"
)

// HandshakeTimeout bounds a client's TLS handshake on a Listener: a
// client that connects and says nothing holds its connection no longer.
const HandshakeTimeout = 10 * time.Second

// Listener wraps inner so that every accepted connection speaks TLS with
// the Reloader's current server material. The handshake runs on the
// connection's first Read or Write, in the goroutine that serves it, so a
// slow client never stalls Accept; a failed handshake is logged once
// with the client's address and counted in Stats.HandshakeFailures.
func (r *Reloader) Listener(inner net.Listener) (net.Listener, error) {
	cfg, err := r.ServerConfig()
	if err != nil {
		return nil, err
	}
	return &listener{Listener: inner, r: r, cfg: cfg}, nil
}

// HTTPListener wraps inner in TLS for an http.Server, which needs to see
// the *tls.Conn itself (for Request.TLS) and runs and logs the handshake
// on its own, within its read timeouts; handshake failures are not
// counted in Stats.
func (r *Reloader) HTTPListener(inner net.Listener) (net.Listener, error) {
	cfg, err := r.ServerConfig()
	if err != nil {
		return nil, err
	}
	return tls.NewListener(inner, cfg), nil
}

type listener struct {
	net.Listener
	r   *Reloader
	cfg *tls.Config
}

func (l *listener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &serverConn{Conn: tls.Server(nc, l.cfg), r: l.r}, nil
}

// serverConn is a server-side *tls.Conn whose handshake failure is
// reported once, clearly, instead of surfacing as a read error.
type serverConn struct {
	*tls.Conn
	r    *Reloader
	once sync.Once
	err  error
}

func (c *serverConn) handshake() error {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), HandshakeTimeout)
		defer cancel()
		if err := c.Conn.HandshakeContext(ctx); err != nil {
			c.r.handshakeFailures.Add(1)
			c.r.log.Warn("TLS handshake with a client failed; closing its connection",
				"remote", c.RemoteAddr().String(), "err", err)
			c.err = &HandshakeError{Remote: c.RemoteAddr().String(), Err: err}
			c.Conn.Close()
		}
	})
	return c.err
}

func (c *serverConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *serverConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// HandshakeError is a client's failed TLS handshake. It unwraps to
// net.ErrClosed, so a connection loop treats it as the client going away
// (the failure was logged already), and to the crypto/tls error.
type HandshakeError struct {
	Remote string
	Err    error
}

func (e *HandshakeError) Error() string {
	return "certs: TLS handshake with " + e.Remote + ": " + e.Err.Error()
}

func (e *HandshakeError) Unwrap() []error { return []error{e.Err, net.ErrClosed} }
