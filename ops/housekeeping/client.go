// Package housekeeping is the proxy's built-in metastore housekeeping
// tasks.
//
// Each task is built from a Config and returns a worker.Task; its results
// are read with a Counts/Stats/Progress method that the caller bridges
// to metrics. The tasks talk to a metastore through a Caller: a Client
// with its own connection to the upstream for the monitors and the
// reaper, and a Client to the proxy's own address for the warm-up, so
// that the proxy's cache fills.
package housekeeping

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hmsproxy/hmsproxy/ops/worker"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Caller makes one HMS call with an args struct (ending in STOP) and
// returns the reply message, which stays valid after later calls.
type Caller interface {
	Call(ctx context.Context, method string, args []byte) (wire.Message, error)
}

// ClientConfig configures a Client. Addrs or Dial is required.
type ClientConfig struct {
	// Addrs are host:port of the metastores (or of the proxy), tried in
	// order when (re)connecting.
	Addrs []string
	// Dial, if set, opens the connection instead of Addrs (the proxy's
	// in-process background connection, proxy.Server.DialBackground).
	// Default nil: dial Addrs.
	Dial func(ctx context.Context) (net.Conn, error)
	// Transport of the metastore. Default: buffered.
	Transport wire.Transport
	// User, if set, is sent with set_ugi on each new connection.
	User string
	// DialTimeout bounds one connection attempt. Default 5s.
	DialTimeout time.Duration
	// Handshake, if set, authenticates each new connection before any
	// call (Kerberos: upstream.Config.Handshake's hook, user ""). Default
	// nil: none.
	Handshake func(ctx context.Context, c net.Conn, user string) (net.Conn, error)
	// CallTimeout bounds one call when the ctx has no earlier deadline.
	// Default 2m.
	CallTimeout time.Duration
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
}

// Client is a Caller with one connection of its own, opened on first use
// and after any error. Calls are serialised; it is safe for concurrent
// use.
type Client struct {
	cfg ClientConfig
	log *slog.Logger

	// mu guards c and closed, and serialises calls on c.
	mu     sync.Mutex
	c      *hmsclient.Client
	closed bool
}

// ErrClosed is returned by Call after Close.
var ErrClosed = errors.New("housekeeping: client is closed")

// NewClient validates cfg.
func NewClient(cfg ClientConfig) (*Client, error) {
	if len(cfg.Addrs) == 0 && cfg.Dial == nil {
		return nil, errors.New("housekeeping: client needs at least one address")
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Client{cfg: cfg, log: cfg.Logger}, nil
}

// NewClients is n Clients of cfg, each with a connection of its own: the
// callers a warm-up spreads its loads over. closeAll closes them all.
func NewClients(cfg ClientConfig, n int) (callers []Caller, closeAll func(), err error) {
	clients := make([]*Client, 0, n)
	closeAll = func() {
		for _, c := range clients {
			c.Close()
		}
	}
	for range n {
		c, err := NewClient(cfg)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		clients = append(clients, c)
		callers = append(callers, c)
	}
	return callers, closeAll, nil
}

// Call implements Caller. A failed call drops the connection; the next
// call reconnects. The call is never retried (abort_txns is a write).
func (c *Client) Call(ctx context.Context, method string, args []byte) (wire.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return wire.Message{}, ErrClosed
	}
	if c.c == nil {
		hc, err := c.connect(ctx)
		if err != nil {
			return wire.Message{}, err
		}
		c.c = hc
	}
	m, err := c.c.Call(ctx, method, args)
	if err != nil {
		c.c.Close()
		c.c = nil
		return wire.Message{}, err
	}
	// The reply aliases the connection's buffer; give the caller its own.
	return wire.Parse(append([]byte(nil), m.Buf...), wire.Limits{MaxMessage: 1<<31 - 1})
}

func (c *Client) connect(ctx context.Context) (*hmsclient.Client, error) {
	var errs []error
	addrs := c.cfg.Addrs
	if c.cfg.Dial != nil {
		addrs = []string{"in-process"}
	}
	for _, addr := range addrs {
		dctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
		var hc *hmsclient.Client
		var err error
		if c.cfg.Dial != nil {
			var nc net.Conn
			if nc, err = c.cfg.Dial(dctx); err == nil {
				hc = hmsclient.New(nc, c.cfg.Transport)
			}
		} else {
			hc, err = hmsclient.Dial(dctx, addr, c.cfg.Transport)
		}
		if err == nil && c.cfg.Handshake != nil {
			var nc net.Conn
			if nc, err = c.cfg.Handshake(dctx, hc.Conn(), ""); err != nil {
				hc.Close()
			} else {
				hc = hmsclient.New(nc, c.cfg.Transport)
			}
		}
		if err == nil && c.cfg.User != "" {
			var m wire.Message
			if m, err = hc.Call(dctx, "set_ugi", hmsreq.Args(hmsreq.Str(1, c.cfg.User), hmsreq.Strings(2))); err == nil && m.Type != wire.Reply {
				err = fmt.Errorf("housekeeping: set_ugi refused by %s", addr)
			}
			if err != nil {
				hc.Close()
			}
		}
		cancel()
		if err == nil {
			c.log.Debug("housekeeping: connected", "addr", addr)
			return hc, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("housekeeping: connect: %w", errors.Join(errs...))
}

// Close closes the connection; later calls fail with ErrClosed. Safe to
// call twice.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.c != nil {
		c.c.Close()
		c.c = nil
	}
	return nil
}

// CallError is a failed call's reply: a declared exception (Field > 0)
// or a TApplicationException (Field 0).
type CallError struct {
	Method  string
	Field   int16 // result field of the declared exception; 0: application exception
	Message string
}

func (e *CallError) Error() string {
	if e.Field == 0 {
		return fmt.Sprintf("housekeeping: %s: application exception: %s", e.Method, e.Message)
	}
	return fmt.Sprintf("housekeeping: %s: exception (field %d): %s", e.Method, e.Field, e.Message)
}

// call makes a call and returns a decoder positioned at the value of the
// success field (its wire type in typ), or typ TStop for a void success.
func call(ctx context.Context, c Caller, method string, args []byte) (d *wire.Decoder, typ byte, err error) {
	m, err := c.Call(ctx, method, args)
	if err != nil {
		return nil, 0, err
	}
	if m.Type == wire.Exception {
		ex, err := wire.DecodeApplicationException(m.Body())
		if err != nil {
			return nil, 0, fmt.Errorf("housekeeping: %s: bad exception: %w", method, err)
		}
		return nil, 0, &CallError{Method: method, Message: ex.Message}
	}
	d = wire.NewDecoder(m.Body())
	typ, id := d.FieldBegin()
	if err := d.Err(); err != nil {
		return nil, 0, fmt.Errorf("housekeeping: %s: bad reply: %w", method, err)
	}
	if typ == wire.TStop || id == 0 {
		return d, typ, nil
	}
	ce := &CallError{Method: method, Field: id}
	if typ == wire.TStruct {
		d.Struct(wire.StringAt(1, &ce.Message))
	}
	return nil, 0, ce
}

// leaderPoll is the task of a periodic look at the metastore's own state
// (its transactions, its compactions): one node, the leader, does it for
// the fleet; runs spread by a tenth of the period, and each is bounded by
// the period so that a hung call cannot stack runs.
func leaderPoll(name string, every time.Duration, run func(context.Context) error) worker.Task {
	return worker.Task{Name: name, Every: every, Jitter: 0.1, Timeout: every, Scope: worker.LeaderOnly, Run: run}
}

// stringList reads a list<string> value.
func stringList(d *wire.Decoder) []string {
	_, n := d.ListBegin()
	out := make([]string, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		out = append(out, d.String())
	}
	return out
}
