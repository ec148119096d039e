package proxy

import (
	"encoding/binary"
	"io"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/trace"
)

// CallRecorder takes a record of every client call while Recording;
// *trace.Recorder implements it. Record must not block (the recorder
// buffers, and drops what does not fit) and must not keep c or its
// slices.
type CallRecorder interface {
	Recording() bool
	Record(c *trace.Call)
}

// callRec is what a connection gathers about the call in progress while
// the server records: its reply's size and first bytes. Unused, and
// untouched, when the server does not record.
type callRec struct {
	on   bool
	id   uint64 // the connection's number in the trace; 0: none yet
	tap  wire.Tap
	call trace.Call // reused for each call
}

// beginRecord arms the reply tap for the call about to be handled.
func (c *clientConn) beginRecord() {
	r := &c.rec
	if r.id == 0 {
		r.id = c.s.recConns.Add(1)
	}
	r.on = true
	r.tap.Bytes, r.tap.HeadN = 0, 0
	c.w.SetTap(&r.tap)
}

// endRecord hands the call to the recorder: what was asked (the args as
// the client sent them) and how it was answered.
func (c *clientConn) endRecord(rec CallRecorder, meth *hms.Method, m wire.Message, start, end time.Time, err error) {
	r := &c.rec
	c.w.SetTap(nil)
	r.on = false
	tc := &r.call
	*tc = trace.Call{Time: start, Took: end.Sub(start), Conn: r.id, User: c.sess.User(),
		Method: string(m.Name()), Oneway: m.Type == wire.Oneway || meth != nil && meth.Oneway,
		Args: m.Body(), ReplySize: r.tap.Bytes, Served: c.outcome.String()}
	switch {
	case c.sess.Authenticated() != "":
		tc.UserKind = trace.Authenticated
	case c.sess.User() != "":
		tc.UserKind = trace.Claimed
	}
	tc.Outcome, tc.ExField = replyOutcome(r.tap.Head[:r.tap.HeadN])
	if r.tap.Bytes == 0 || err != nil && tc.Outcome == trace.Unknown {
		tc.Outcome = trace.NoReply
	}
	rec.Record(tc)
	tc.Args = nil // the reader's buffer: not to be kept past this call
}

// replyOutcome reads a reply's first bytes: its type and, for a REPLY,
// the result field it sets.
func replyOutcome(b []byte) (trace.Outcome, int16) {
	if len(b) < 8 {
		return trace.Unknown, 0
	}
	typ := b[3]
	n := int(binary.BigEndian.Uint32(b[4:]))
	at := 8 + n + 4 // name, seqid
	switch {
	case typ == wire.Exception:
		return trace.AppError, 0
	case typ != wire.Reply || n < 0 || at >= len(b):
		return trace.Unknown, 0
	case b[at] == wire.TStop:
		return trace.OK, 0 // a void success
	case at+3 > len(b):
		return trace.Unknown, 0
	}
	if f := int16(binary.BigEndian.Uint16(b[at+1:])); f > 0 {
		return trace.Declared, f
	}
	return trace.OK, 0
}

// recordingWriter passes a streamed reply to the client and notes it for
// the recorder.
type recordingWriter struct {
	io.Writer
	tap *wire.Tap
}

func (w recordingWriter) Write(b []byte) (int, error) {
	n, err := w.Writer.Write(b)
	w.tap.Note(b[:n])
	return n, err
}
