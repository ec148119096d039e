package wire

import (
	"bufio"
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

// Reader reads whole messages from a connection.
type Reader struct {
	br        *bufio.Reader
	transport Transport
	lim       Limits
	buf       []byte
	hdr       [4]byte // frame prefix; a field so it does not escape per Read
}

// NewReader returns a Reader over r.
func NewReader(r io.Reader, t Transport, lim Limits) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), transport: t, lim: lim.WithDefaults()}
}

// Buffered reports whether bytes are waiting in the read buffer.
func (r *Reader) Buffered() int { return r.br.Buffered() }

// Read returns the next message. Its bytes are valid until the next call.
// io.EOF means the peer closed cleanly between messages; a *ReadError means
// the bytes broke the protocol or a limit.
func (r *Reader) Read() (Message, error) {
	if cap(r.buf) > keepBuf {
		r.buf = nil
	}
	if r.buf == nil {
		r.buf = make([]byte, 0, 4096)
	}
	if r.transport == Framed {
		return r.readFramed()
	}
	s := scanner{buf: r.buf[:0], src: r.br, lim: r.lim}
	m, err := s.message()
	r.buf = s.buf[:0]
	return m, err
}

func (r *Reader) readFramed() (Message, error) {
	if _, err := io.ReadFull(r.br, r.hdr[:]); err != nil {
		return Message{}, err
	}
	n := int32(binary.BigEndian.Uint32(r.hdr[:]))
	if n <= 0 {
		return Message{}, &ReadError{Err: ErrBadFrame}
	}
	if int(n) > r.lim.MaxMessage {
		return Message{}, &ReadError{Err: ErrTooLarge}
	}
	// Pull exactly the frame, growing with the data that arrives.
	fill := scanner{buf: r.buf[:0], src: r.br, lim: r.lim}
	if err := fill.need(int(n)); err != nil {
		if err == io.EOF { // the frame header arrived, so EOF is not clean
			err = io.ErrUnexpectedEOF
		}
		return Message{}, err
	}
	r.buf = fill.buf[:0]
	s := scanner{buf: fill.buf[:n], lim: r.lim}
	m, err := s.message()
	if err == nil && s.pos != int(n) {
		err = &ReadError{Err: ErrBadFrame, Detail: "bytes after message in frame",
			HasHeader: true, Name: string(m.Name()), SeqID: m.SeqID}
	}
	return m, err
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
	if len(w.bufs) == 1 {
		_, err := w.w.Write(w.bufs[0])
		return err
	}
	w.out = w.bufs // WriteTo consumes the slice; keep our backing array.
	_, err := w.out.WriteTo(w.w)
	w.out = nil
	return err
}
