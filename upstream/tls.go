package upstream

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
)

// secure runs the TLS handshake on a fresh connection when the group is
// configured for TLS, and returns nc itself otherwise. On failure nc is
// closed. Errors are wrapped by the dial that called it.
func (p *pool) secure(ctx context.Context, nc net.Conn) (net.Conn, error) {
	if p.g.cfg.TLS == nil {
		return nc, nil
	}
	cfg := p.g.cfg.TLS()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(p.addr)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS server name: %w", err)
		}
		cfg.ServerName = host
	}
	// The dialer's timeout covered connecting only; a metastore that
	// accepts and says nothing must not hold the slot forever.
	hctx, cancel := context.WithTimeout(ctx, p.g.cfg.DialTimeout)
	defer cancel()
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(hctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tc, nil
}

// rawConn is the TCP connection under a TLS one, for the liveness peek:
// bytes or EOF waiting on an idle connection mean the metastore closed
// it, whether or not they are TLS records.
func rawConn(nc net.Conn) net.Conn {
	if tc, ok := nc.(*tls.Conn); ok {
		return tc.NetConn()
	}
	return nc
}
