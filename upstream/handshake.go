package upstream

import (
	"context"
	"fmt"
	"net"
)

// authenticate runs Config.Handshake on a fresh connection (after TLS),
// bounded like the TLS handshake, and returns nc itself without one. On
// failure nc is closed. Errors are wrapped by the dial that called it.
func (p *pool) authenticate(ctx context.Context, nc net.Conn, user string) (net.Conn, error) {
	if p.g.cfg.Handshake == nil {
		return nc, nil
	}
	hctx, cancel := context.WithTimeout(ctx, p.g.cfg.DialTimeout)
	defer cancel()
	c, err := p.g.cfg.Handshake(hctx, nc, user)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("authentication: %w", err)
	}
	return c, nil
}
