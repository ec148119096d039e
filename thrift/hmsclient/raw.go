package hmsclient

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Raw is the measuring client of benchmarks: it reads each reply as raw
// bytes and never scans or decodes it, so that what a benchmark times is
// the server and the moving of the bytes, not the client (Client scans
// every reply to find where it ends, which for a megabyte reply costs as
// much as a proxy's hit). It speaks framed transport only: the frame's
// length says where a reply ends, which on buffered transport only the
// reply's own structure says. Of the reply it checks only what sits at
// fixed places: the seqid (a reply to another call is an error) and the
// message type. It is not safe for concurrent use.
type Raw struct {
	nc  net.Conn
	seq int32
	out []byte // the last call, frame prefix first
	in  []byte // the last reply, frame prefix first
}

// rawReadChunk is the least room a read is given: a reply of a few
// kilobytes arrives in one read.
const rawReadChunk = 64 << 10

// DialRaw connects to addr (host:port), whose server must speak framed
// transport.
func DialRaw(ctx context.Context, addr string) (*Raw, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("hmsclient: dial %s: %w", addr, err)
	}
	return &Raw{nc: nc, in: make([]byte, rawReadChunk)}, nil
}

// Close closes the connection.
func (r *Raw) Close() error { return r.nc.Close() }

// ErrRawReply: a reply that is not the answer to the call made.
var ErrRawReply = errors.New("hmsclient: raw reply does not answer the call")

// Call sends method with args (an args struct ending in STOP) and returns
// the whole reply message (header and body, without the frame prefix),
// its type (wire.Reply or wire.Exception) and an error for a transport
// failure or a reply to another call. The bytes are valid until the next
// call. ctx's deadline, if any, bounds the call.
func (r *Raw) Call(ctx context.Context, method string, args []byte) (msg []byte, typ byte, err error) {
	if d, ok := ctx.Deadline(); ok {
		r.nc.SetDeadline(d)
	}
	if ctx.Done() != nil {
		// A cancelled ctx ends the call at once, not at its deadline.
		stop := context.AfterFunc(ctx, func() { r.nc.SetDeadline(time.Unix(1, 0)) })
		defer stop()
	}
	r.seq++
	out := append(r.out[:0], 0, 0, 0, 0)
	out = binary.BigEndian.AppendUint32(out, 0x80010000|uint32(wire.Call))
	out = binary.BigEndian.AppendUint32(out, uint32(len(method)))
	out = append(out, method...)
	out = binary.BigEndian.AppendUint32(out, uint32(r.seq))
	out = append(out, args...)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	r.out = out
	if _, err := r.nc.Write(out); err != nil {
		return nil, 0, fmt.Errorf("hmsclient: send %s: %w", method, err)
	}
	have, need := 0, 4
	for have < need {
		if len(r.in)-have < rawReadChunk && len(r.in) < need {
			grown := make([]byte, max(need, 2*len(r.in)))
			copy(grown, r.in[:have])
			r.in = grown
		}
		n, err := r.nc.Read(r.in[have:])
		have += n
		if need == 4 && have >= 4 {
			need = 4 + int(binary.BigEndian.Uint32(r.in))
		}
		if err != nil && have < need {
			return nil, 0, fmt.Errorf("hmsclient: read reply to %s: %w", method, err)
		}
	}
	msg = r.in[4:need]
	// A strict header: version word, name length, name, seqid.
	if have != need || len(msg) < 12+len(method) || binary.BigEndian.Uint32(msg)&0xffff0000 != 0x80010000 ||
		int(binary.BigEndian.Uint32(msg[4:])) != len(method) ||
		int32(binary.BigEndian.Uint32(msg[8+len(method):])) != r.seq {
		return nil, 0, fmt.Errorf("%w %s (seqid %d)", ErrRawReply, method, r.seq)
	}
	return msg, msg[3], nil
}
