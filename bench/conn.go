package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Target is one endpoint under test.
type Target struct {
	// Name labels the target in reports ("direct", "proxy").
	Name string
	// Addr is host:port.
	Addr string
	// MetricsURL, if set, is the target's Prometheus endpoint (an
	// hmsproxy admin /metrics); the report then shows upstream calls saved.
	MetricsURL string
}

// ParseTarget parses "name=thrift://host:port".
func ParseTarget(s string) (Target, error) {
	name, uri, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return Target{}, fmt.Errorf("bench: target %q: want name=thrift://host:port", s)
	}
	addr, ok := strings.CutPrefix(uri, "thrift://")
	if !ok || addr == "" {
		return Target{}, fmt.Errorf("bench: target %q: want name=thrift://host:port", s)
	}
	return Target{Name: name, Addr: addr}, nil
}

// outcome is how one call ended.
type outcome uint8

const (
	outOK          outcome = iota
	outExists              // AlreadyExistsException (setup treats it as done)
	outException           // another declared exception
	outUnsupported         // TApplicationException UNKNOWN_METHOD
	outAppError            // another TApplicationException
	outTransport           // connection failed; the connection is dropped
)

// errUnsupported is returned for an UNKNOWN_METHOD answer.
var errUnsupported = errors.New("bench: method not supported by target")

// conn is one connection to a target, redialled after a transport error.
// On framed transport it reads replies raw (hmsclient.Raw): the bench
// then times the targets, not its own decoding of their replies. Not
// safe for concurrent use.
type conn struct {
	addr    string
	tr      wire.Transport
	timeout time.Duration
	c       *hmsclient.Client
	raw     *hmsclient.Raw
}

func (c *conn) close() {
	if c.c != nil {
		c.c.Close()
		c.c = nil
	}
	if c.raw != nil {
		c.raw.Close()
		c.raw = nil
	}
}

// roundTrip makes one call and returns the reply's type and body.
func (c *conn) roundTrip(ctx context.Context, method string, args []byte) (byte, []byte, error) {
	if c.tr == wire.Framed {
		if c.raw == nil {
			r, err := hmsclient.DialRaw(ctx, c.addr)
			if err != nil {
				return 0, nil, err
			}
			c.raw = r
		}
		msg, typ, err := c.raw.Call(ctx, method, args)
		if err != nil {
			return 0, nil, err
		}
		return typ, msg[12+len(method):], nil // after the strict header
	}
	if c.c == nil {
		cl, err := hmsclient.Dial(ctx, c.addr, c.tr)
		if err != nil {
			return 0, nil, err
		}
		c.c = cl
	}
	m, err := c.c.Call(ctx, method, args)
	if err != nil {
		return 0, nil, err
	}
	return m.Type, m.Body(), nil
}

// call makes one call and classifies its reply. existsField is the result
// field id of AlreadyExistsException for the method (0: none). The reply
// body is valid until the next call.
func (c *conn) call(ctx context.Context, method string, args []byte, existsField int16) (outcome, []byte, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	typ, body, err := c.roundTrip(ctx, method, args)
	if err != nil {
		c.close()
		return outTransport, nil, err
	}
	switch typ {
	case wire.Reply:
		f, err := wire.ResultField(body)
		if err != nil {
			c.close()
			return outTransport, nil, fmt.Errorf("bench: %s: bad reply: %w", method, err)
		}
		switch {
		case f <= 0:
			return outOK, body, nil
		case f == existsField:
			return outExists, body, nil
		}
		return outException, body, fmt.Errorf("bench: %s: exception in result field %d: %s", method, f, exceptionMessage(body))
	case wire.Exception:
		ex, err := wire.DecodeApplicationException(body)
		if err != nil {
			c.close()
			return outTransport, nil, fmt.Errorf("bench: %s: bad exception: %w", method, err)
		}
		if ex.Code == wire.ExUnknownMethod {
			return outUnsupported, nil, errUnsupported
		}
		return outAppError, nil, fmt.Errorf("bench: %s: %w", method, ex)
	}
	c.close()
	return outTransport, nil, fmt.Errorf("bench: %s: unexpected message type %d", method, typ)
}

// exceptionMessage reads field 1 (message) of the exception struct in a
// result body.
func exceptionMessage(body []byte) string {
	d := wire.NewDecoder(body)
	typ, _ := d.FieldBegin()
	if typ != wire.TStruct {
		return ""
	}
	for {
		t, id := d.FieldBegin()
		if t == wire.TStop || d.Err() != nil {
			return ""
		}
		if id == 1 && t == wire.TString {
			return d.String()
		}
		d.Skip(t)
	}
}

// stringList decodes a list<string> success (field 0) of a result body.
func stringList(body []byte) []string {
	d := wire.NewDecoder(body)
	typ, id := d.FieldBegin()
	if typ != wire.TList || id != 0 {
		return nil
	}
	_, n := d.ListBegin()
	out := make([]string, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		out = append(out, d.String())
	}
	return out
}
