// Package hmsclient is a minimal HMS Thrift client that sends args structs
// as bytes and returns reply messages as bytes, for tests, the bench and
// hmscli.
package hmsclient

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Client is one connection. It is not safe for concurrent use.
type Client struct {
	nc  net.Conn
	r   *wire.Reader
	w   *wire.Writer
	seq int32
	buf []byte
}

// Dial connects to addr (host:port).
func Dial(ctx context.Context, addr string, t wire.Transport) (*Client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("hmsclient: dial %s: %w", addr, err)
	}
	return &Client{nc: nc, r: wire.NewReader(nc, t, wire.Limits{MaxMessage: 1<<31 - 1}), w: wire.NewWriter(nc, t)}, nil
}

// New is a client on a connection already open, such as a *tls.Conn.
func New(nc net.Conn, t wire.Transport) *Client {
	return &Client{nc: nc, r: wire.NewReader(nc, t, wire.Limits{MaxMessage: 1<<31 - 1}), w: wire.NewWriter(nc, t)}
}

// Close closes the connection.
func (c *Client) Close() error { return c.nc.Close() }

// Conn is the underlying connection.
func (c *Client) Conn() net.Conn { return c.nc }

// Call sends method with the given args struct bytes (ending in STOP) and
// returns the reply, valid until the next call. An EXCEPTION reply is
// returned as a message too; callers decode it as they need.
func (c *Client) Call(ctx context.Context, method string, args []byte) (wire.Message, error) {
	// A cancelled ctx (a worker stopped at shutdown) ends the call at once,
	// not at its deadline: the connection is unusable afterwards.
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Unix(1, 0)) })
		defer stop()
	}
	if err := c.Send(ctx, wire.Call, method, args); err != nil {
		return wire.Message{}, err
	}
	return c.Recv(ctx)
}

// Send writes one message without waiting for a reply.
func (c *Client) Send(ctx context.Context, typ byte, method string, args []byte) error {
	c.deadline(ctx)
	c.seq++
	c.buf = wire.AppendHeader(c.buf[:0], typ, []byte(method), c.seq)
	c.buf = append(c.buf, args...)
	if err := c.w.Write(c.buf); err != nil {
		return fmt.Errorf("hmsclient: send %s: %w", method, err)
	}
	return nil
}

// SendRaw writes bytes as they are (no framing added).
func (c *Client) SendRaw(b []byte) error {
	_, err := c.nc.Write(b)
	return err
}

// Recv reads the reply to the last call and checks its seqid.
func (c *Client) Recv(ctx context.Context) (wire.Message, error) {
	c.deadline(ctx)
	m, err := c.r.Read()
	if err != nil {
		return m, fmt.Errorf("hmsclient: read reply: %w", err)
	}
	if m.SeqID != c.seq {
		return m, fmt.Errorf("hmsclient: reply seqid %d, want %d", m.SeqID, c.seq)
	}
	return m, nil
}

func (c *Client) deadline(ctx context.Context) {
	d, _ := ctx.Deadline()
	c.nc.SetDeadline(d)
	if ctx.Err() != nil { // checked after the set: Call's AfterFunc may have run before it
		c.nc.SetDeadline(time.Unix(1, 0))
	}
}

// Args builds an args struct from string arguments at ids 1, 2, ...
func Args(strs ...string) []byte {
	var e wire.Encoder
	for i, s := range strs {
		e.StringField(int16(i+1), s)
	}
	e.Stop()
	return e.B
}

// Redialer is a Client that connects on first use and again after any
// failure, for workers that call the metastore now and then. It is not
// safe for concurrent use.
type Redialer struct {
	Addr      string
	Transport wire.Transport
	c         *Client
}

// Call makes one call, dialing first when there is no connection.
func (r *Redialer) Call(ctx context.Context, method string, args []byte) (wire.Message, error) {
	if r.c == nil {
		c, err := Dial(ctx, r.Addr, r.Transport)
		if err != nil {
			return wire.Message{}, err
		}
		r.c = c
	}
	m, err := r.c.Call(ctx, method, args)
	if err != nil {
		r.Close()
	}
	return m, err
}

// Close drops the connection; the next Call dials again.
func (r *Redialer) Close() error {
	if r.c == nil {
		return nil
	}
	err := r.c.Close()
	r.c = nil
	return err
}
