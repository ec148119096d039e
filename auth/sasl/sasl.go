// Package sasl performs the Thrift-SASL handshake with the Kerberos GSSAPI
// mechanism (RFC 4752, quality of protection "auth") for both ends of a
// metastore connection: accepting clients with a service keytab, and
// authenticating to a Kerberized metastore with a client keytab.
//
// After the handshake each message on the connection is a 4-byte big-endian
// length followed by the plain Thrift message: exactly the framed transport,
// so the caller keeps using the connection as it is. Integrity and privacy
// layers ("auth-int", "auth-conf") are neither offered nor accepted.
package sasl

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// Status is the first byte of every Thrift-SASL handshake message.
type Status byte

// The handshake statuses of Thrift's TSaslTransport.
const (
	StatusStart    Status = 1
	StatusOK       Status = 2
	StatusBad      Status = 3
	StatusError    Status = 4
	StatusComplete Status = 5
)

func (s Status) String() string {
	switch s {
	case StatusStart:
		return "START"
	case StatusOK:
		return "OK"
	case StatusBad:
		return "BAD"
	case StatusError:
		return "ERROR"
	case StatusComplete:
		return "COMPLETE"
	}
	return fmt.Sprintf("status(%d)", byte(s))
}

// Mechanism is the only SASL mechanism this package speaks.
const Mechanism = "GSSAPI"

// Errors callers branch on. Each is wrapped with what was being done.
var (
	// ErrMechanism: the peer asked for a mechanism other than GSSAPI
	// (DIGEST-MD5 delegation tokens, PLAIN).
	ErrMechanism = errors.New("sasl: unsupported mechanism")
	// ErrAuthentication: the peer's Kerberos credentials were refused
	// (ticket expired, not for this service, bad integrity, replay).
	ErrAuthentication = errors.New("sasl: authentication failed")
	// ErrPrincipalMismatch: the client's authenticator names another
	// principal or realm than its service ticket (RFC 4120 §3.2.3). The
	// client writes its authenticator, the KDC its ticket, so this is a
	// forgery or a broken client. Always wrapped with ErrAuthentication.
	ErrPrincipalMismatch = errors.New("sasl: the authenticator's client principal does not match the ticket's")
	// ErrRejected: the peer answered the handshake with BAD or ERROR.
	ErrRejected = errors.New("sasl: rejected by peer")
	// ErrQOP: no common quality of protection; only "auth" is supported.
	ErrQOP = errors.New("sasl: no common quality of protection")
	// ErrAuthzID: a client asked to act as another user (SASL
	// authorization id), which a metastore refuses on GSSAPI and so do we.
	ErrAuthzID = errors.New("sasl: authorization id differs from the authenticated principal")
	// ErrProtocol: the peer broke the Thrift-SASL framing.
	ErrProtocol = errors.New("sasl: protocol error")
)

// maxMessage bounds a handshake message: Kerberos tickets with large
// authorisation data (Active Directory PACs) run to tens of KiB.
const maxMessage = 256 << 10

// Security-layer bits of RFC 4752 §3.3.
const (
	layerNone      = 1
	layerIntegrity = 2
	layerPrivacy   = 4
)

// readMessage reads one handshake message.
func readMessage(r io.Reader) (Status, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxMessage {
		return 0, nil, fmt.Errorf("%w: handshake message of %d bytes (limit %d)", ErrProtocol, n, maxMessage)
	}
	st := Status(hdr[0])
	if st < StatusStart || st > StatusComplete {
		return 0, nil, fmt.Errorf("%w: unknown handshake status %d", ErrProtocol, hdr[0])
	}
	// Held as the bytes arrive, not as announced: a client that announces
	// a large message and sends nothing holds nothing while its handshake
	// waits out its deadline.
	var buf bytes.Buffer
	buf.Grow(min(int(n), 4<<10))
	got, err := io.Copy(&buf, io.LimitReader(r, int64(n)))
	if err != nil {
		return 0, nil, err
	}
	if got < int64(n) {
		return 0, nil, io.ErrUnexpectedEOF
	}
	return st, buf.Bytes(), nil
}

// writeMessage writes one handshake message in a single write.
func writeMessage(w io.Writer, st Status, payload []byte) error {
	b := make([]byte, 5+len(payload))
	b[0] = byte(st)
	binary.BigEndian.PutUint32(b[1:5], uint32(len(payload)))
	copy(b[5:], payload)
	_, err := w.Write(b)
	return err
}

// expect reads a message that must carry one of the given statuses; BAD and
// ERROR become ErrRejected with the peer's text.
func expect(r io.Reader, want ...Status) (Status, []byte, error) {
	st, b, err := readMessage(r)
	if err != nil {
		return 0, nil, err
	}
	if st == StatusBad || st == StatusError {
		return st, nil, fmt.Errorf("%w: %s: %s", ErrRejected, st, printable(b))
	}
	for _, w := range want {
		if st == w {
			return st, b, nil
		}
	}
	return st, nil, fmt.Errorf("%w: got %s; want %v", ErrProtocol, st, want)
}

// printable keeps a peer's error text readable in our own error.
func printable(b []byte) string {
	const max = 512
	if len(b) > max {
		b = b[:max]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, string(b))
}

// withDeadline bounds the handshake on c by ctx: the deadline from ctx, and
// cancellation unblocks any read or write. The returned stop clears both.
func withDeadline(ctx context.Context, c net.Conn) (stop func()) {
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	var unblock func() bool
	if ctx.Done() != nil {
		unblock = context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	}
	return func() {
		if unblock != nil && !unblock() {
			// cancelled: the deadline in the past stays, the caller sees ctx.Err()
			return
		}
		_ = c.SetDeadline(time.Time{})
	}
}

// ctxErr prefers the context's error to the I/O error it caused.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}
