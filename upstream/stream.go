package upstream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// StreamingSink is a ReplySink that can also take a reply too large to
// hold (Config.HoldMax) as a stream of bytes, written to its client as they
// arrive through a bounded buffer. The upstream connection is held while
// the reply streams; each write is bounded by Config.StreamWriteTimeout.
type StreamingSink interface {
	ReplySink
	// StreamTo returns where to write the whole reply message, size bytes
	// long (-1 when the size is known only at its end), or nil when the
	// sink cannot take it so (the reply is then read whole). If w has a
	// SetWriteDeadline method, every write gets a deadline. done is called
	// once, after the last byte or on failure (err set).
	StreamTo(size int64) (w io.Writer, done func(err error))
}

// errStreamWrite marks a failed write to the client of a streamed reply.
var errStreamWrite = errors.New("upstream: write streamed reply")

// streamer walks one Thrift message from src, passes its bytes to dst
// through a window of bounded size, and stops at the message's end. It
// checks the header against the call before the first byte is passed on.
type streamer struct {
	src     io.Reader
	dst     io.Writer
	timeout time.Duration // per write to dst; 0: none
	lim     wire.Limits
	buf     []byte // window: buf[:r] walked, not yet passed on; buf[r:w] read ahead
	r, w    int
	depth   int
	sent    int64
}

type deadliner interface{ SetWriteDeadline(time.Time) error }

// flush passes the walked bytes on and moves what was read ahead to the
// front of the window.
func (s *streamer) flush() error {
	if s.r == 0 {
		return nil
	}
	if d, ok := s.dst.(deadliner); ok && s.timeout > 0 {
		d.SetWriteDeadline(time.Now().Add(s.timeout))
	}
	n, err := s.dst.Write(s.buf[:s.r])
	s.sent += int64(n)
	if err != nil {
		return fmt.Errorf("%w: %w", errStreamWrite, err)
	}
	copy(s.buf, s.buf[s.r:s.w])
	s.w -= s.r
	s.r = 0
	return nil
}

// fill makes n bytes (n <= len(buf)) available from r on.
func (s *streamer) fill(n int) error {
	for s.w-s.r < n {
		if len(s.buf)-s.r < n {
			if err := s.flush(); err != nil {
				return err
			}
		}
		k, err := s.src.Read(s.buf[s.w:])
		s.w += k
		if err != nil && s.w-s.r < n {
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

func (s *streamer) take(n int) ([]byte, error) {
	if n > len(s.buf) {
		return nil, &wire.ReadError{Err: wire.ErrStringTooLong}
	}
	if err := s.fill(n); err != nil {
		return nil, err
	}
	b := s.buf[s.r : s.r+n]
	s.r += n
	return b, nil
}

func (s *streamer) u32() (uint32, error) {
	b, err := s.take(4)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(b), nil
}

func (s *streamer) length(max int) (int, error) {
	v, err := s.u32()
	if err != nil {
		return 0, err
	}
	if int32(v) < 0 {
		return 0, &wire.ReadError{Err: wire.ErrNegativeLength}
	}
	if int(v) > max {
		return 0, &wire.ReadError{Err: wire.ErrTooLarge}
	}
	return int(v), nil
}

// skipN passes n bytes through the window.
func (s *streamer) skipN(n int) error {
	for n > 0 {
		if s.r == s.w {
			if err := s.fill(1); err != nil {
				return err
			}
		}
		k := min(n, s.w-s.r)
		s.r += k
		n -= k
	}
	return nil
}

func fixedWidth(t byte) int {
	switch t {
	case wire.TBool, wire.TByte:
		return 1
	case wire.TI16:
		return 2
	case wire.TI32:
		return 4
	case wire.TDouble, wire.TI64:
		return 8
	case wire.TUUID:
		return 16
	}
	return 0
}

func (s *streamer) skip(t byte) error {
	if n := fixedWidth(t); n > 0 {
		return s.skipN(n)
	}
	switch t {
	case wire.TString:
		n, err := s.length(s.lim.MaxString)
		if err != nil {
			return err
		}
		return s.skipN(n)
	case wire.TStruct:
		if s.depth++; s.depth > s.lim.MaxDepth {
			return &wire.ReadError{Err: wire.ErrTooDeep}
		}
		for {
			b, err := s.take(1)
			if err != nil {
				return err
			}
			ft := b[0]
			if ft == wire.TStop {
				break
			}
			if err := s.skipN(2); err != nil {
				return err
			}
			if err := s.skip(ft); err != nil {
				return err
			}
		}
		s.depth--
		return nil
	case wire.TList, wire.TSet, wire.TMap:
		if s.depth++; s.depth > s.lim.MaxDepth {
			return &wire.ReadError{Err: wire.ErrTooDeep}
		}
		var kt, vt byte
		if t == wire.TMap {
			b, err := s.take(2)
			if err != nil {
				return err
			}
			kt, vt = b[0], b[1]
		} else {
			b, err := s.take(1)
			if err != nil {
				return err
			}
			kt = b[0]
		}
		n, err := s.length(s.lim.MaxContainer)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := s.skip(kt); err != nil {
				return err
			}
			if t == wire.TMap {
				if err := s.skip(vt); err != nil {
					return err
				}
			}
		}
		s.depth--
		return nil
	}
	return &wire.ReadError{Err: wire.ErrBadType}
}

// header reads the message header and checks that it answers req, sent
// under seqid seq, and puts req's own seqid in its place; nothing has been
// passed on yet when it fails.
func (s *streamer) header(req wire.Message, seq int32) error {
	word, err := s.u32()
	if err != nil {
		return err
	}
	if word&0xffff0000 != 0x80010000 {
		return &wire.ReadError{Err: wire.ErrBadVersion}
	}
	typ := byte(word)
	// A name longer than the call's cannot be its answer.
	n, err := s.length(len(req.Name()))
	if err != nil {
		return fmt.Errorf("%w: reply name longer than %q", ErrMismatchedReply, req.Name())
	}
	name, err := s.take(n)
	if err != nil {
		return err
	}
	got, err := s.u32()
	if err != nil {
		return err
	}
	if (typ != wire.Reply && typ != wire.Exception) || int32(got) != seq || !sameName(name, req.Name()) {
		return fmt.Errorf("%w: %q seqid %d type %d in answer to %q seqid %d",
			ErrMismatchedReply, name, int32(got), typ, req.Name(), seq)
	}
	binary.BigEndian.PutUint32(s.buf[s.r-4:s.r], uint32(req.SeqID))
	return nil
}

// message streams one whole message answering req. leftover is what was
// read past its end.
func (s *streamer) message(req wire.Message, seq int32) (leftover int, err error) {
	if err := s.header(req, seq); err != nil {
		return 0, err
	}
	if err := s.skip(wire.TStruct); err != nil {
		return 0, err
	}
	if err := s.flush(); err != nil {
		return 0, err
	}
	return s.w, nil
}

// streamWindow is the buffer a streamed reply passes through, and
// unclaimedWindow the one it makes do with when the in-flight budget has
// no room for streamWindow. The header's method name must fit either:
// the walker takes it whole (a longer one is refused).
const (
	streamWindow    = 256 << 10
	unclaimedWindow = 16 << 10
)

// stream passes a reply too large to hold to sink as it arrives, the
// connection held meanwhile. done is false when the sink cannot take a
// stream (nothing was consumed; the caller reads the reply whole).
func (p *pool) stream(cn *conn, c Call, seq int32, sink StreamingSink) (done bool, err error) {
	pending := cn.r.Pending()
	size := int64(-1)
	src := io.MultiReader(bytes.NewReader(pending), cn.nc)
	if p.g.cfg.Transport == wire.Framed {
		if len(pending) < 4 {
			return false, nil
		}
		size = int64(binary.BigEndian.Uint32(pending))
		src = io.LimitReader(io.MultiReader(bytes.NewReader(pending[4:]), cn.nc), size)
	}
	w, finish := sink.StreamTo(size)
	if w == nil {
		return false, nil
	}
	// The connection is held while the reply streams, so the window never
	// waits for in-flight budget: a full budget (other clients' requests
	// being read) would otherwise stall this call and every call queued
	// behind its connection. A window that does not fit is a small one,
	// outside the budget: at most MaxConns of them per metastore, the
	// same bound as the replies held while their sink writes.
	window := streamWindow
	if p.g.cfg.Budget.TryAcquire(streamWindow) {
		defer p.g.cfg.Budget.Release(streamWindow)
	} else {
		window = unclaimedWindow
		p.g.n.streamedUnclaimed.Add(1)
	}
	p.g.n.streamed.Add(1)
	s := streamer{src: src, dst: w, timeout: p.g.cfg.StreamWriteTimeout, lim: p.g.cfg.ReplyLimits,
		buf: make([]byte, window)}
	leftover, err := s.message(c.Msg, seq)
	if err == nil && size >= 0 && s.sent != size {
		err = &wire.ReadError{Err: wire.ErrBadFrame, Detail: "bytes after message in frame"}
	}
	finish(err)
	cn.r.Detach(cn.r.Detach(nil)) // forget the pending bytes, keep the buffer
	if err != nil {
		cn.close()
		if errors.Is(err, ErrMismatchedReply) {
			p.g.n.mismatched.Add(1)
		}
		return true, fmt.Errorf("%w: stream reply to %s from %s (%d bytes passed on): %w",
			ErrBroken, c.Msg.Name(), p.addr, s.sent, err)
	}
	if leftover > 0 {
		cn.close() // the metastore sent more than the reply
	} else {
		p.put(cn, c.Session.key)
	}
	return true, nil
}
