package upstream

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/limits/inflight"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// streamSink records a streamed reply, or declines streams.
type streamSink struct {
	copySink
	decline  bool
	out      bytes.Buffer
	size     int64
	finished error
	streams  int
}

func (s *streamSink) StreamTo(size int64) (io.Writer, func(error)) {
	if s.decline {
		return nil, nil
	}
	s.streams++
	s.size = size
	return &s.out, func(err error) { s.finished = err }
}

// bigReply is a reply to m whose result is a list of n strings, so the
// walker crosses containers, strings and many window refills.
func bigReply(m wire.Message, name []byte, n int) []byte {
	e := wire.Encoder{B: wire.AppendHeader(nil, wire.Reply, name, m.SeqID)}
	e.FieldBegin(wire.TList, 0)
	e.ListBegin(wire.TString, n)
	for i := 0; i < n; i++ {
		e.String(fmt.Sprintf("partition-%08d-%s", i, bytes.Repeat([]byte{'x'}, i%300)))
	}
	e.Stop()
	return e.B
}

func TestStreamLargeReply(t *testing.T) {
	for _, tr := range []wire.Transport{wire.Buffered, wire.Framed} {
		t.Run(tr.String(), func(t *testing.T) {
			f := startFakeT(t, tr, func(fc *fakeConn, m wire.Message) ([][]byte, error) {
				return [][]byte{bigReply(m, m.Name(), 20000)}, nil
			})
			sentReply := bigReply(msg(t, wire.Call, "get_partition_names", 4), []byte("get_partition_names"), 20000)
			g := newGroup(t, Config{MaxConns: 1, Transport: tr, HoldMax: 64 << 10}, f.addr)
			var s streamSink
			if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_partition_names", 4)}, &s); err != nil {
				t.Fatal(err)
			}
			if s.streams != 1 || s.calls != 0 || s.finished != nil {
				t.Fatalf("streams %d, whole replies %d, finish %v; want 1 stream, ok", s.streams, s.calls, s.finished)
			}
			if len(sentReply) < 1<<20 || !bytes.Equal(s.out.Bytes(), sentReply) {
				t.Fatalf("streamed %d bytes; want the metastore's %d bytes exactly", s.out.Len(), len(sentReply))
			}
			wantSize := int64(-1)
			if tr == wire.Framed {
				wantSize = int64(len(sentReply))
			}
			if s.size != wantSize {
				t.Fatalf("stream size %d; want %d", s.size, wantSize)
			}
			// The connection is in step: the next call on it is answered.
			var small copySink
			if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_partition_names", 5)}, &streamSink{decline: true}); err != nil {
				t.Fatal(err)
			}
			if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", 6)}, &small); err != nil {
				t.Fatal(err)
			}
			if f.numConns() != 1 || g.Stats().Streamed != 1 {
				t.Fatalf("%d connections, %d streamed; want 1, 1", f.numConns(), g.Stats().Streamed)
			}
		})
	}
}

// TestStreamDeclinedReadsWhole: a sink that cannot stream gets the large
// reply whole.
func TestStreamDeclinedReadsWhole(t *testing.T) {
	f := startFake(t, func(fc *fakeConn, m wire.Message) ([][]byte, error) {
		return [][]byte{bigReply(m, m.Name(), 5000)}, nil
	})
	g := newGroup(t, Config{HoldMax: 4 << 10}, f.addr)
	s := streamSink{decline: true}
	if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_partition_names", 1)}, &s); err != nil {
		t.Fatal(err)
	}
	if s.calls != 1 || s.seq != 1 || len(s.got) < 64<<10 {
		t.Fatalf("whole replies %d seqid %d size %d", s.calls, s.seq, len(s.got))
	}
}

// TestStreamMismatchedReply: a large foreign reply is refused before a
// byte reaches the sink.
func TestStreamMismatchedReply(t *testing.T) {
	f := startFake(t, func(fc *fakeConn, m wire.Message) ([][]byte, error) {
		return [][]byte{bigReply(m, []byte("get_partitions"), 5000)}, nil
	})
	g := newGroup(t, Config{HoldMax: 4 << 10}, f.addr)
	var s streamSink
	err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_partition_names", 1)}, &s)
	if !errors.Is(err, ErrMismatchedReply) || !errors.Is(err, ErrBroken) {
		t.Fatalf("got %v; want ErrMismatchedReply", err)
	}
	if s.out.Len() != 0 {
		t.Fatalf("%d bytes of a foreign reply reached the sink", s.out.Len())
	}
}

// TestStreamWalkerLimits: the walker stops at the message's end and
// refuses what the reader refuses.
func TestStreamWalkerLimits(t *testing.T) {
	req := msg(t, wire.Call, "m", 1)
	good := replyTo(req, "v")
	for _, tc := range []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"exact", good, true},
		{"trailing", append(append([]byte(nil), good...), 1, 2, 3), true},
		{"truncated", good[:len(good)-2], false},
		{"negative length", append(wire.AppendHeader(nil, wire.Reply, []byte("m"), 1), wire.TString, 0, 0, 0xff, 0xff, 0xff, 0xff), false},
		{"bad type", append(wire.AppendHeader(nil, wire.Reply, []byte("m"), 1), 99, 0, 0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			s := streamer{src: bytes.NewReader(tc.in), dst: &out, lim: wire.Limits{}.WithDefaults(), buf: make([]byte, 16)}
			left, err := s.message(req, req.SeqID)
			if tc.ok != (err == nil) {
				t.Fatalf("err %v; want ok %v", err, tc.ok)
			}
			if tc.ok && (!bytes.Equal(out.Bytes(), good) || int(s.sent)+left != len(tc.in)) {
				t.Fatalf("passed on %x (left %d); want %x", out.Bytes(), left, good)
			}
		})
	}
	_ = binary.BigEndian
}

// TestStreamedReplyUnderFullBudget (issue 22): a reply too large to hold
// streams to its client even when the in-flight budget is full; it never
// waits for budget while it holds its metastore connection, which would
// stall every call queued behind that connection. The budget's wait
// counter is the seam: a wait would show there before the call returns.
func TestStreamedReplyUnderFullBudget(t *testing.T) {
	for _, tr := range []wire.Transport{wire.Buffered, wire.Framed} {
		t.Run(tr.String(), func(t *testing.T) {
			f := startFakeT(t, tr, func(fc *fakeConn, m wire.Message) ([][]byte, error) {
				return [][]byte{bigReply(m, m.Name(), 20000)}, nil
			})
			b := inflight.New(1 << 20)
			if !b.TryAcquire(1 << 20) { // jammed: nothing left
				t.Fatal("could not fill the budget")
			}
			g := newGroup(t, Config{MaxConns: 1, Transport: tr, HoldMax: 64 << 10, Budget: b}, f.addr)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var s streamSink
			done := make(chan error, 1)
			go func() {
				done <- g.Do(ctx, Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_partition_names", 4)}, &s)
			}()
			// The budget is jammed: a reply that waits for it never ends.
			if !wait.Until(10*time.Second, func() bool { return len(done) > 0 || b.Waits() > 0 }) {
				t.Fatal("no reply within 10s")
			}
			if b.Waits() > 0 {
				t.Fatal("the streamed reply waited for in-flight budget while holding its metastore connection")
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			want := bigReply(msg(t, wire.Call, "get_partition_names", 4), []byte("get_partition_names"), 20000)
			if s.streams != 1 || !bytes.Equal(s.out.Bytes(), want) {
				t.Fatalf("%d streams, %d bytes; want 1 stream of the metastore's %d bytes", s.streams, s.out.Len(), len(want))
			}
			if got := b.InUse(); got != 1<<20 {
				t.Fatalf("budget in use %d after the stream; want the jam's %d alone", got, 1<<20)
			}
			if st := g.Stats(); st.StreamedUnclaimed != 1 {
				t.Fatalf("Stats.StreamedUnclaimed %d; want 1", st.StreamedUnclaimed)
			}
			// The connection went back to the pool: the next call (the
			// pool holds one) is answered on it.
			if err := g.Do(ctxT(t), Call{Session: NoSession, Class: Read, Msg: msg(t, wire.Call, "get_table", 5)}, &streamSink{}); err != nil {
				t.Fatal(err)
			}
			if f.numConns() != 1 {
				t.Fatalf("%d metastore connections; want the streamed reply's one, reused", f.numConns())
			}
		})
	}
}
