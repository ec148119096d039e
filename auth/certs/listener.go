package certs

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/hmsproxy/hmsproxy/limits/peers"
)

// HandshakeTimeout bounds a client's TLS handshake on a Listener: a
// client that connects and says nothing holds its connection no longer.
const HandshakeTimeout = 10 * time.Second

// Listener wraps inner so that every accepted connection speaks TLS with
// the Reloader's current server material. The handshake runs off the
// accept loop (peers.Listener), within HandshakeTimeout, at most
// peers.DefaultHandshakesPerAddress at once per client host and
// peers.DefaultMaxHandshakes in all (the oldest cut to make room), so
// clients that connect and say nothing keep nobody out and hold no
// client slot. Accept returns only connections whose handshake passed
// (*tls.Conn); a failed handshake is logged once with the client's
// address and counted in Stats.HandshakeFailures.
func (r *Reloader) Listener(inner net.Listener) (net.Listener, error) {
	cfg, err := r.ServerConfig()
	if err != nil {
		return nil, err
	}
	hs := func(ctx context.Context, nc net.Conn) (net.Conn, error) {
		tc := tls.Server(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			r.handshakeFailures.Add(1)
			return nil, err
		}
		return tc, nil
	}
	return peers.Handshaking(inner, hs, peers.HandshakeConfig{Name: "tls", Timeout: HandshakeTimeout, Logger: r.log}), nil
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
