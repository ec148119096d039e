package wire

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
)

// Transport is how messages are delimited on a connection.
type Transport uint8

const (
	// Buffered is Thrift's plain socket transport: messages back to back,
	// delimited only by their own structure (HMS's default).
	Buffered Transport = iota
	// Framed prefixes each message with a 4-byte big-endian length.
	Framed
)

func (t Transport) String() string {
	if t == Framed {
		return "framed"
	}
	return "buffered"
}

// ParseTransport maps "buffered" or "framed" to a Transport.
func ParseTransport(s string) (Transport, error) {
	switch s {
	case "", "buffered":
		return Buffered, nil
	case "framed":
		return Framed, nil
	}
	return 0, errors.New("wire: transport must be buffered or framed, got " + s)
}

// keepBuf is the largest buffer a Reader keeps between messages; a larger
// one, grown for a rare huge message, is dropped.
const keepBuf = 1 << 20

// Reader reads whole messages from a connection into a buffer of its own
// and parses them in place, so a message costs no copy and, once the
// buffer has grown to the usual message size, no allocation.
type Reader struct {
	rd        io.Reader
	transport Transport
	lim       Limits
	buf       []byte
	r, w      int // unread data is buf[r:w]; a message being parsed starts at r
	next      int // end of the last message returned; consumed by the next Read
}

// NewReader returns a Reader over rd.
func NewReader(rd io.Reader, t Transport, lim Limits) *Reader {
	return &Reader{rd: rd, transport: t, lim: lim.WithDefaults()}
}

// Release drops a buffer grown for a large message when nothing more is
// waiting in it, so an idle connection does not pin the largest reply it
// ever read. The last message's bytes are invalid afterwards.
func (r *Reader) Release() {
	if r.next == r.w && cap(r.buf) > keepBuf {
		r.buf, r.r, r.w, r.next = nil, 0, 0, 0
	}
}

// Buffered reports how many bytes past the last message have arrived.
func (r *Reader) Buffered() int { return r.w - r.next }

// ReadUpTo is Read with MaxMessage lowered to max for this message. A
// message that turns out larger fails with a *ReadError wrapping
// ErrTooLarge and is left unconsumed: Pending holds what has arrived of
// it, and Read (with the full limit) starts it over from its first byte.
func (r *Reader) ReadUpTo(max int) (Message, error) {
	full := r.lim.MaxMessage
	if max <= 0 || max >= full {
		return r.Read()
	}
	r.lim.MaxMessage = max
	defer func() { r.lim.MaxMessage = full }()
	m, err := r.Read()
	if err != nil {
		r.next = r.r // not consumed, even if the frame prefix was
	}
	return m, err
}

// Pending is what has arrived of the message being read (frame prefix
// included) and after it, after a Read that failed. It aliases the
// reader's buffer.
func (r *Reader) Pending() []byte { return r.buf[r.r:r.w] }

// Detach hands the caller the buffer holding the last message read, which
// stays valid for as long as the caller keeps it, and gives the reader buf
// (nil: a fresh one on the next Read) for what follows. It lets a reply
// outlive its connection's turn without a copy. Bytes that arrived past the
// last message are dropped: call it only when Buffered is 0, or when the
// connection is to be closed.
func (r *Reader) Detach(buf []byte) []byte {
	old := r.buf
	r.buf, r.r, r.w, r.next = buf[:cap(buf)], 0, 0, 0
	if len(r.buf) == 0 {
		r.buf = nil
	}
	return old
}

// Read returns the next message. Its bytes are valid until the next call.
// io.EOF means the peer closed cleanly between messages; a *ReadError means
// the bytes broke the protocol or a limit.
func (r *Reader) Read() (Message, error) {
	r.r = r.next
	if r.r == r.w {
		r.r, r.w = 0, 0
		if cap(r.buf) > keepBuf || r.buf == nil {
			r.buf = make([]byte, 4096)
		}
	}
	if r.transport == Framed {
		return r.readFramed()
	}
	s := scanner{buf: r.buf[r.r:r.w], src: r, lim: r.lim}
	m, err := s.message()
	if err != nil {
		return m, err
	}
	r.next = r.r + len(m.Buf)
	return m, nil
}

func (r *Reader) readFramed() (Message, error) {
	b, err := r.fill(4)
	if err != nil {
		return Message{}, err
	}
	n := int32(binary.BigEndian.Uint32(b))
	if n <= 0 {
		return Message{}, &ReadError{Err: ErrBadFrame}
	}
	if int(n) > r.lim.MaxMessage {
		return Message{}, &ReadError{Err: ErrTooLarge}
	}
	if b, err = r.fill(4 + int(n)); err != nil {
		return Message{}, err
	}
	s := scanner{buf: b[4 : 4+n], lim: r.lim}
	m, err := s.message()
	if err == nil && s.pos != int(n) {
		err = &ReadError{Err: ErrBadFrame, Detail: "bytes after message in frame",
			HasHeader: true, Name: string(m.Name()), SeqID: m.SeqID}
	}
	r.next = r.r + 4 + int(n)
	return m, err
}

// fill makes at least total bytes from r.r on available and returns them
// (and whatever else has arrived). It reads as much as the connection
// has, so back-to-back messages usually cost one read call.
func (r *Reader) fill(total int) ([]byte, error) {
	for r.w-r.r < total {
		have := r.w - r.r
		if len(r.buf)-r.r < total && len(r.buf)-r.w < readChunk {
			// Make room: grow with the data that has arrived (at most one
			// chunk ahead of it), or move the message to the front.
			size := min(total, have+readChunk)
			if size > len(r.buf) {
				nb := make([]byte, min(max(size, 2*len(r.buf)), r.lim.MaxMessage+4))
				copy(nb, r.buf[r.r:r.w])
				r.buf = nb
			} else {
				copy(r.buf, r.buf[r.r:r.w])
			}
			r.r, r.w = 0, have
		}
		n, err := r.rd.Read(r.buf[r.w:])
		r.w += n
		if err != nil && r.w-r.r < total {
			if errors.Is(err, io.EOF) && r.w > r.r {
				return r.buf[r.r:r.w], io.ErrUnexpectedEOF
			}
			return r.buf[r.r:r.w], err
		}
	}
	return r.buf[r.r:r.w], nil
}

// Writer writes whole messages to a connection in one system call.
type Writer struct {
	w         io.Writer
	transport Transport
	frame     [4]byte
	bufs      net.Buffers
	out       net.Buffers // consumed by WriteTo; a field so it does not escape per Write
}

// NewWriter returns a Writer over w.
func NewWriter(w io.Writer, t Transport) *Writer {
	return &Writer{w: w, transport: t}
}

// Write sends the concatenation of parts as one message.
func (w *Writer) Write(parts ...[]byte) error {
	w.bufs = w.bufs[:0]
	if w.transport == Framed {
		n := 0
		for _, p := range parts {
			n += len(p)
		}
		binary.BigEndian.PutUint32(w.frame[:], uint32(n))
		w.bufs = append(w.bufs, w.frame[:])
	}
	for _, p := range parts {
		if len(p) > 0 {
			w.bufs = append(w.bufs, p)
		}
	}
	var err error
	if len(w.bufs) == 1 {
		_, err = w.w.Write(w.bufs[0])
	} else {
		w.out = w.bufs // WriteTo consumes the slice; keep our backing array.
		_, err = w.out.WriteTo(w.w)
		w.out = nil
	}
	clear(w.bufs) // the caller's buffers are not ours to keep alive
	return err
}
