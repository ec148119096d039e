// Package impersonate authenticates metastore connections on behalf of
// Kerberos users: the proxy, a Hadoop proxy user of the metastore, obtains
// a delegation token for each user with its own Kerberos credentials and
// opens that user's connections with the token (SASL DIGEST-MD5), the way
// Trino's hive.metastore.thrift.impersonation.enabled works.
//
// A metastore refuses the direct route, a GSSAPI authorization id other
// than the authenticated principal ("Problem with callback handler").
package impersonate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hmsproxy/hmsproxy/auth/sasl"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// ErrTokenRefused: the metastore would not issue a delegation token for
// the user (the proxy is not allowed to impersonate them, or the
// metastore has no token secret manager).
var ErrTokenRefused = errors.New("impersonate: delegation token refused")

// Config configures an Impersonator.
type Config struct {
	// Client is the proxy's own Kerberos identity. Required.
	Client *sasl.Client
	// Service is the metastores' service principal. Required.
	Service string
	// Renewer is the principal named as the tokens' renewer. Required
	// (the proxy's own principal).
	Renewer string
	// TokenTTL is how long a user's token is reused for new connections
	// before a fresh one is fetched. Default 1h; metastores expire tokens
	// not renewed within hive.cluster.delegation.token.renew-interval (1
	// day by default), so keep it below that.
	TokenTTL time.Duration
	// Dial opens a connection to a metastore address (with TLS when the
	// metastores use it) to fetch a token on. Default: plain TCP.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Logger receives one line per token fetched. Default: discard.
	Logger *slog.Logger
	// Now is the clock; a seam for tests. Default time.Now.
	Now func() time.Time
}

// Impersonator is an upstream.Config.Handshake. Safe for concurrent use.
type Impersonator struct {
	cfg Config

	mu     sync.Mutex // guards tokens
	tokens map[string]*entry
}

// entry is one user's token at one metastore; its mutex serialises the
// fetch so that concurrent dials for the user ask the metastore once.
type entry struct {
	mu      sync.Mutex // guards tok and fetched
	tok     sasl.Token
	fetched time.Time
}

// New validates cfg.
func New(cfg Config) (*Impersonator, error) {
	if cfg.Client == nil || cfg.Service == "" || cfg.Renewer == "" {
		return nil, errors.New("impersonate: client, service and renewer are required")
	}
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = time.Hour
	}
	if cfg.Dial == nil {
		var d net.Dialer
		cfg.Dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Impersonator{cfg: cfg, tokens: map[string]*entry{}}, nil
}

// Handshake authenticates c: as the proxy itself when user is "", else
// with user's delegation token, so that the metastore acts as user.
func (im *Impersonator) Handshake(ctx context.Context, c net.Conn, user string) (net.Conn, error) {
	if user == "" {
		return c, im.cfg.Client.Handshake(ctx, c, im.cfg.Service, "")
	}
	addr := c.RemoteAddr().String()
	e := im.entry(addr, user)
	tok, err := e.get(ctx, im, addr, user)
	if err != nil {
		return nil, err
	}
	if err := sasl.DigestHandshake(ctx, c, tok); err != nil {
		// an expired or cancelled token: the next connection fetches anew
		e.mu.Lock()
		e.fetched = time.Time{}
		e.mu.Unlock()
		return nil, fmt.Errorf("impersonate: as %s: %w", user, err)
	}
	return c, nil
}

func (im *Impersonator) entry(addr, user string) *entry {
	key := addr + "\x00" + user
	im.mu.Lock()
	defer im.mu.Unlock()
	e := im.tokens[key]
	if e == nil {
		e = &entry{}
		im.tokens[key] = e
	}
	return e
}

func (e *entry) get(ctx context.Context, im *Impersonator, addr, user string) (sasl.Token, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.fetched.IsZero() && im.cfg.Now().Sub(e.fetched) < im.cfg.TokenTTL {
		return e.tok, nil
	}
	tok, err := im.fetch(ctx, addr, user)
	if err != nil {
		return sasl.Token{}, err
	}
	e.tok, e.fetched = tok, im.cfg.Now()
	return tok, nil
}

// fetch asks the metastore at addr, as the proxy, for user's token.
func (im *Impersonator) fetch(ctx context.Context, addr, user string) (sasl.Token, error) {
	nc, err := im.cfg.Dial(ctx, addr)
	if err != nil {
		return sasl.Token{}, fmt.Errorf("impersonate: token for %s: dial %s: %w", user, addr, err)
	}
	defer nc.Close()
	if err := im.cfg.Client.Handshake(ctx, nc, im.cfg.Service, ""); err != nil {
		return sasl.Token{}, fmt.Errorf("impersonate: token for %s: %w", user, err)
	}
	m, err := hmsclient.New(nc, wire.Framed).Call(ctx, "get_delegation_token", hmsclient.Args(user, im.cfg.Renewer))
	if err != nil {
		return sasl.Token{}, fmt.Errorf("impersonate: token for %s: %w", user, err)
	}
	s, msg, err := tokenReply(m)
	if err != nil {
		return sasl.Token{}, fmt.Errorf("impersonate: token for %s: %w", user, err)
	}
	if msg != "" || s == "" {
		return sasl.Token{}, fmt.Errorf("%w for %s by %s: %s", ErrTokenRefused, user, addr, msg)
	}
	tok, err := sasl.ParseToken(s)
	if err != nil {
		return sasl.Token{}, fmt.Errorf("impersonate: token for %s: %w", user, err)
	}
	im.cfg.Logger.Info("delegation token fetched", "user", user, "metastore", addr)
	return tok, nil
}

// tokenReply decodes get_delegation_token's result: field 0 the token
// string, field 1 a MetaException, or a Thrift application exception.
func tokenReply(m wire.Message) (tok, refused string, err error) {
	if m.Type == wire.Exception {
		return "", "", fmt.Errorf("impersonate: get_delegation_token: application exception %q", m.Body())
	}
	d := wire.NewDecoder(m.Body())
	d.Fields(func(id int16, typ byte) bool {
		switch {
		case id == 0 && typ == wire.TString:
			tok = d.String()
		case id == 1 && typ == wire.TStruct:
			refused = exceptionMessage(d)
			if refused == "" {
				refused = "MetaException"
			}
		default:
			return false
		}
		return true
	})
	if err := d.Err(); err != nil {
		return "", "", err
	}
	return tok, refused, nil
}

// exceptionMessage reads a MetaException struct's message (field 1).
func exceptionMessage(d *wire.Decoder) string {
	var msg string
	d.Struct(wire.StringAt(1, &msg))
	return msg
}
