package wire

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"time"
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

// dropBuf is the size from which a gated reader gives the pages of a
// buffer it has outgrown or dropped back to the system (dropPages): the
// copies of a large message's growth, and a message whose claim has been
// returned, would otherwise stay resident as garbage while the budget
// lets others claim the same bytes again. It relies on Read's promise:
// a message's bytes are valid only until the next Read (or Release or
// Discard), and a gated reader never Detaches.
const dropBuf = 1 << 20

// FreeBuf is the buffer every Reader starts with. A Reader with a Gate
// claims only the bytes it grows beyond this, and drops a grown buffer
// once its message is consumed, so an idle connection holds no claim.
const FreeBuf = 4096

// Gate lets the owner of a Reader pace and bound each message as its
// bytes arrive. The methods are called from the Read goroutine.
type Gate interface {
	// Started is called at most once per message, when some of its bytes
	// have arrived and the Reader must wait for more: the moment a
	// message-read deadline starts. A message that arrives with one read
	// never calls it.
	Started()
	// Grow claims n more bytes before the buffer grows past FreeBuf. It
	// may block (back-pressure); an error fails the Read with it.
	Grow(n int) error
	// Shrink returns n bytes claimed by Grow, when the buffer is dropped.
	Shrink(n int)
}

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

	gate    Gate // nil: no claims, no start notice
	claimed int  // bytes of buf claimed from gate
	started bool // gate.Started was called for the message at r
}

// NewReader returns a Reader over rd.
func NewReader(rd io.Reader, t Transport, lim Limits) *Reader {
	return &Reader{rd: rd, transport: t, lim: lim.WithDefaults()}
}

// SetGate makes the Reader report to g; call it before the first Read.
func (r *Reader) SetGate(g Gate) { r.gate = g }

// Release drops a buffer grown for a large message when nothing more is
// waiting in it, so an idle connection does not pin the largest reply it
// ever read. The last message's bytes are invalid afterwards.
func (r *Reader) Release() {
	if r.next == r.w && cap(r.buf) > r.keep() {
		r.drop()
	}
}

// Discard drops the buffer, whatever it holds, and returns its claim:
// for a connection being closed.
func (r *Reader) Discard() {
	r.drop()
	r.r, r.w, r.next = 0, 0, 0
}

func (r *Reader) keep() int {
	if r.gate != nil {
		return FreeBuf
	}
	return keepBuf
}

func (r *Reader) drop() {
	if r.gate != nil && len(r.buf) >= dropBuf {
		// Its claim goes back to the budget below: so do its pages, or
		// the next claim of the same bytes would double what is resident.
		dropPages(r.buf)
	}
	r.buf, r.r, r.w, r.next = nil, 0, 0, 0
	if r.claimed > 0 {
		r.gate.Shrink(r.claimed)
		r.claimed = 0
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
	r.started = false
	if r.r == r.w {
		r.r, r.w, r.next = 0, 0, 0
		if cap(r.buf) > r.keep() || r.buf == nil {
			r.drop()
			r.buf = make([]byte, FreeBuf)
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
		if len(r.buf)-r.r < total && len(r.buf)-r.w < r.room() {
			size := r.nextSize(total, have)
			if size > len(r.buf) {
				if r.gate != nil {
					if err := r.claim(size); err != nil {
						return r.buf[r.r:r.w], err
					}
				}
				nb := make([]byte, size)
				copy(nb, r.buf[r.r:r.w])
				if r.gate != nil && len(r.buf) >= dropBuf {
					dropPages(r.buf) // outgrown; no message read before is valid now
				}
				r.buf = nb
			} else {
				copy(r.buf, r.buf[r.r:r.w])
			}
			// next moves with the data: a Read after a failed one starts
			// the message over from its first byte, where it now is.
			r.next = max(r.next-r.r, 0)
			r.r, r.w = 0, have
		}
		if r.gate != nil && !r.started && r.w > r.r {
			r.started = true
			r.gate.Started()
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

// room is the free space at the end of the buffer below which fill makes
// more. Without a gate, a chunk: reads stay large. With one, none: the
// buffer grows only once the bytes that arrived fill it, so what a
// message holds follows what its peer actually sent, never what it
// announced.
func (r *Reader) room() int {
	if r.gate != nil {
		return 1
	}
	return readChunk
}

// nextSize is the size the buffer is made (moved or grown) to hold more of
// a message that needs total bytes, have of which have arrived.
//
// Without a gate the buffer grows with the data that has arrived, at
// most one chunk ahead of it, or doubles.
//
// With a gate the buffer is full when this is called: the message moves
// to the front if that frees half of the buffer, or the buffer doubles,
// up to what the message needs (and, on buffered transport, where its
// length is learnt field by field, a chunk for the fields after it). So
// what a reader claims is never more than twice the bytes it has
// received: an announced size claims nothing, and a peer must send
// bytes to hold budget.
func (r *Reader) nextSize(total, have int) int {
	limit := r.lim.MaxMessage + 4
	if r.gate == nil {
		size := min(total, have+readChunk)
		if size <= len(r.buf) {
			return len(r.buf) // room enough once the message is at the front
		}
		size = min(max(size, 2*len(r.buf)), limit)
		if r.transport == Framed {
			size = min(size, total) // the frame is the whole message
		}
		return size
	}
	if r.r > 0 && have <= len(r.buf)/2 {
		return len(r.buf)
	}
	want := total
	if r.transport != Framed {
		want = total + readChunk
	}
	return max(min(2*len(r.buf), want, limit), have+1)
}

// claim makes sure the gate has granted the bytes of a buffer grown to
// size, beyond the free FreeBuf. The message's read deadline starts
// before any wait for budget, so it covers the wait.
func (r *Reader) claim(size int) error {
	if !r.started {
		r.started = true
		r.gate.Started()
	}
	if n := size - FreeBuf - r.claimed; n > 0 {
		if err := r.gate.Grow(n); err != nil {
			return err
		}
		r.claimed += n
	}
	return nil
}

// Writer writes whole messages to a connection in one system call.
type Writer struct {
	w         io.Writer
	transport Transport
	frame     [4]byte
	bufs      net.Buffers
	out       net.Buffers // consumed by WriteTo; a field so it does not escape per Write

	conn    interface{ SetWriteDeadline(time.Time) error } // nil: writes are not bounded
	timeout time.Duration
	until   time.Time // the write deadline set last

	tap *Tap // nil: none (SetTap)
}

// TapHead is how much of what it sees a Tap keeps: a message header with
// a method name of up to TapHead-16 bytes, and the first field of the
// body.
const TapHead = 256

// Tap notes the bytes a Writer writes: how many, and the first TapHead
// of them. The proxy's call recorder learns each reply's size and
// outcome so, whichever path wrote it.
type Tap struct {
	Bytes int64
	Head  [TapHead]byte
	HeadN int
}

// Note adds p to what the tap has seen.
func (t *Tap) Note(p []byte) {
	t.Bytes += int64(len(p))
	if t.HeadN < TapHead {
		t.HeadN += copy(t.Head[t.HeadN:], p)
	}
}

// SetTap has t note every message Write sends from now on (before it is
// sent); nil stops it. Without a tap a Write pays one nil check.
func (w *Writer) SetTap(t *Tap) { w.tap = t }

// SetTimeout bounds each Write on conn (the connection w writes to) by d,
// so a peer that does not read cannot hold the writer forever. The
// deadline is moved only when less than 7/8 of d is left, so a busy
// connection does not re-arm a timer on every message: a Write gets
// between 7/8 of d and d. d <= 0 leaves writes unbounded.
func (w *Writer) SetTimeout(conn interface{ SetWriteDeadline(time.Time) error }, d time.Duration) {
	if d <= 0 {
		conn = nil
	}
	w.conn, w.timeout, w.until = conn, d, time.Time{}
}

// NewWriter returns a Writer over w.
func NewWriter(w io.Writer, t Transport) *Writer {
	return &Writer{w: w, transport: t}
}

// Write sends the concatenation of parts as one message.
func (w *Writer) Write(parts ...[]byte) error {
	if w.tap != nil {
		for _, p := range parts {
			w.tap.Note(p)
		}
	}
	if w.conn != nil {
		if now := time.Now(); w.until.Sub(now) < w.timeout-w.timeout/8 {
			w.until = now.Add(w.timeout)
			if err := w.conn.SetWriteDeadline(w.until); err != nil {
				return err
			}
		}
	}
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
