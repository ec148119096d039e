package wire

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

var transports = []Transport{Buffered, Framed}

// validMessages are well-formed messages of every type.
func validMessages() []struct {
	name string
	typ  byte
	meth string
	seq  int32
	body []byte
} {
	var args Encoder
	args.StringField(1, "default")
	args.StringField(2, "t")
	args.Stop()
	return []struct {
		name string
		typ  byte
		meth string
		seq  int32
		body []byte
	}{
		{"get_table call", Call, "get_table", 1, args.B},
		{"get_table_req call", Call, "get_table_req", 7, getTableArgs()},
		{"reply", Reply, "get_table_req", 7, getTableResult()},
		{"void reply", Reply, "drop_table", -5, []byte{TStop}},
		{"exception", Exception, "nope", math.MaxInt32, exceptionBody()},
		{"oneway", Oneway, "shutdown", 0, []byte{TStop}},
		{"empty name", Call, "", 3, []byte{TStop}},
		{"nested containers", Call, "n", 9, nestedLists(10)},
		{"deep structs", Call, "n", 10, nested(64)},
	}
}

// exceptionBody is the body of an EXCEPTION message.
func exceptionBody() []byte {
	m, err := Parse(AppendApplicationException(nil, "nope", 1, ExUnknownMethod, "Invalid method name: 'nope'"), Limits{})
	if err != nil {
		panic(err)
	}
	return m.Body()
}

func checkMessage(t *testing.T, m Message, typ byte, name string, seq int32, body []byte) {
	t.Helper()
	if m.Type != typ {
		t.Errorf("Type = %d; want %d", m.Type, typ)
	}
	if string(m.Name()) != name {
		t.Errorf("Name = %q; want %q", m.Name(), name)
	}
	if m.SeqID != seq {
		t.Errorf("SeqID = %d; want %d", m.SeqID, seq)
	}
	if !bytes.Equal(m.Body(), body) {
		t.Errorf("Body = %d bytes; want %d bytes %x", len(m.Body()), len(body), body[:min(len(body), 32)])
	}
	if want := msg(typ, name, seq, body); !bytes.Equal(m.Buf, want) {
		t.Errorf("Buf = %d bytes; want %d", len(m.Buf), len(want))
	}
	if got, want := len(m.Header())+len(m.Body()), len(m.Buf); got != want {
		t.Errorf("len(Header)+len(Body) = %d; want %d", got, want)
	}
}

func TestRoundTripPipe(t *testing.T) {
	for _, tr := range transports {
		for _, tc := range validMessages() {
			t.Run(tr.String()+"/"+tc.name, func(t *testing.T) {
				c1, c2 := net.Pipe()
				defer c1.Close()
				defer c2.Close()
				_ = c2.SetDeadline(time.Now().Add(10 * time.Second))
				w := NewWriter(c1, tr)
				done := make(chan error, 1)
				go func() {
					hdr := AppendHeader(nil, tc.typ, []byte(tc.meth), tc.seq)
					// Twice: once split in parts, once as one slice.
					err := w.Write(hdr, nil, tc.body)
					if err == nil {
						err = w.Write(msg(tc.typ, tc.meth, tc.seq, tc.body))
					}
					done <- err
				}()
				r := NewReader(c2, tr, Limits{})
				for i := 0; i < 2; i++ {
					m, err := r.Read()
					if err != nil {
						t.Fatalf("Read #%d: got error %v; want nil", i, err)
					}
					checkMessage(t, m, tc.typ, tc.meth, tc.seq, tc.body)
				}
				if err := <-done; err != nil {
					t.Fatalf("Write: got error %v; want nil", err)
				}
			})
		}
	}
}

func TestWriterOutput(t *testing.T) {
	for _, tc := range validMessages() {
		t.Run(tc.name, func(t *testing.T) {
			want := msg(tc.typ, tc.meth, tc.seq, tc.body)
			var buf bytes.Buffer
			hdr := AppendHeader(nil, tc.typ, []byte(tc.meth), tc.seq)
			if err := NewWriter(&buf, Buffered).Write(hdr, tc.body); err != nil {
				t.Fatalf("buffered Write: got %v; want nil", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("buffered output = %x; want %x", buf.Bytes(), want)
			}
			m, err := Parse(buf.Bytes(), Limits{})
			if err != nil {
				t.Fatalf("Parse(buffered output): got %v; want nil", err)
			}
			checkMessage(t, m, tc.typ, tc.meth, tc.seq, tc.body)

			buf.Reset()
			if err := NewWriter(&buf, Framed).Write(hdr, tc.body); err != nil {
				t.Fatalf("framed Write: got %v; want nil", err)
			}
			if !bytes.Equal(buf.Bytes(), frame(want)) {
				t.Errorf("framed output = %x; want %x", buf.Bytes(), frame(want))
			}
		})
	}
}

// stream concatenates every valid message plus a few big ones, in one
// transport's encoding.
func stream(tr Transport) (data []byte, msgs [][]byte) {
	var e Encoder
	e.StringField(1, strings.Repeat("x", 300<<10)) // > bufio size and > readChunk
	e.Stop()
	big := e.B
	for i, tc := range validMessages() {
		msgs = append(msgs, msg(tc.typ, tc.meth, tc.seq, tc.body))
		if i%3 == 0 {
			msgs = append(msgs, msg(Call, "big", int32(i), big))
		}
	}
	for _, m := range msgs {
		if tr == Framed {
			m = frame(m)
		}
		data = append(data, m...)
	}
	return data, msgs
}

func TestBackToBack(t *testing.T) {
	readers := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"bytes", func(r io.Reader) io.Reader { return r }},
		{"one byte", iotest.OneByteReader},
		{"half", iotest.HalfReader},
		{"data err", iotest.DataErrReader},
	}
	for _, tr := range transports {
		data, msgs := stream(tr)
		for _, rd := range readers {
			t.Run(tr.String()+"/"+rd.name, func(t *testing.T) {
				r := NewReader(rd.wrap(bytes.NewReader(data)), tr, Limits{MaxMessage: 1 << 20})
				for i, want := range msgs {
					m, err := r.Read()
					if err != nil {
						t.Fatalf("Read #%d: got error %v; want nil", i, err)
					}
					if !bytes.Equal(m.Buf, want) {
						t.Fatalf("Read #%d: got %d bytes %q...; want %d bytes %q...", i, len(m.Buf), m.Buf[:min(len(m.Buf), 24)], len(want), want[:24])
					}
				}
				if m, err := r.Read(); err != io.EOF {
					t.Fatalf("Read after last: got (%d bytes, %v); want io.EOF", len(m.Buf), err)
				}
			})
		}
	}
}

func TestTruncated(t *testing.T) {
	lim := Limits{MaxMessage: 1 << 20}
	for _, tc := range validMessages() {
		full := msg(tc.typ, tc.meth, tc.seq, tc.body)
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for cut := 0; cut < len(full); cut++ {
				part := full[:cut]
				// Parse of the cut bytes, at every boundary.
				if _, err := Parse(part, lim); !errors.Is(err, ErrTruncated) {
					t.Fatalf("Parse cut at %d: got %v; want ErrTruncated", cut, err)
				}
				// Long messages repeat one shape (a column list); each
				// stream reader costs a 64 KiB buffer, so cut their middle
				// at a prime stride only.
				if len(full) > 4096 && cut > 512 && cut < len(full)-512 && cut%97 != 0 {
					continue
				}
				// Buffered stream cut short.
				_, err := NewReader(bytes.NewReader(part), Buffered, lim).Read()
				want := io.ErrUnexpectedEOF
				if cut == 0 {
					want = io.EOF
				}
				if err != want {
					t.Fatalf("buffered cut at %d: got %v; want %v", cut, err, want)
				}
				_, err = NewReader(iotest.OneByteReader(bytes.NewReader(part)), Buffered, lim).Read()
				if err != want {
					t.Fatalf("buffered one-byte cut at %d: got %v; want %v", cut, err, want)
				}
				// Framed stream cut short (frame header claims it all).
				fr := frame(full)[:cut+4]
				_, err = NewReader(bytes.NewReader(fr), Framed, lim).Read()
				if err != io.ErrUnexpectedEOF {
					t.Fatalf("framed cut at %d: got %v; want io.ErrUnexpectedEOF", cut, err)
				}
				if cut < 4 {
					_, err = NewReader(bytes.NewReader(fr[:cut]), Framed, lim).Read()
					if err != want {
						t.Fatalf("framed header cut at %d: got %v; want %v", cut, err, want)
					}
				}
				// A whole frame holding a truncated message.
				if cut > 0 {
					_, err = NewReader(bytes.NewReader(frame(part)), Framed, lim).Read()
					if !isReadError(err, ErrTruncated) {
						t.Fatalf("frame of cut message at %d: got %v; want *ReadError(ErrTruncated)", cut, err)
					}
				}
			}
		})
	}
}

func isReadError(err, sentinel error) bool {
	var re *ReadError
	return errors.As(err, &re) && re.Err == sentinel
}

// badCase is one malformed or oversized message.
type badCase struct {
	name      string
	lim       Limits
	data      []byte // the message, without frame prefix
	want      error
	hasHeader bool
	meth      string
	seq       int32
	// streamOnly marks limits only a stream reader can hit (the claimed
	// bytes never arrive); Parse and a framed reader see ErrTruncated.
	streamOnly bool
}

func hdr(meth string, seq int32) []byte { return AppendHeader(nil, Call, []byte(meth), seq) }

func badCases() []badCase {
	small := Limits{MaxMessage: 1 << 20, MaxString: 1 << 10, MaxContainer: 1000, MaxDepth: 8}
	h := hdr("get_table", 42)
	strField := []byte{TString, 0, 1}
	listField := func(et byte) []byte { return []byte{TList, 0, 2, et} }
	mapField := func(kt, vt byte) []byte { return []byte{TMap, 0, 3, kt, vt} }
	withHdr := func(name string, want error, body ...[]byte) badCase {
		return badCase{name: name, lim: small, data: cat(append([][]byte{h}, body...)...), want: want, hasHeader: true, meth: "get_table", seq: 42}
	}
	cases := []badCase{
		withHdr("negative string length", ErrNegativeLength, strField, be32(-1)),
		withHdr("min int32 string length", ErrNegativeLength, strField, be32(math.MinInt32)),
		withHdr("string over MaxString", ErrStringTooLong, strField, be32(1<<10+1)),
		withHdr("huge string", ErrStringTooLong, strField, be32(math.MaxInt32)),
		withHdr("negative list count", ErrNegativeLength, listField(TString), be32(-7)),
		withHdr("list over MaxContainer", ErrContainerLarge, listField(TString), be32(1001)),
		withHdr("huge set", ErrContainerLarge, []byte{TSet, 0, 2, TI64}, be32(math.MaxInt32)),
		withHdr("negative map count", ErrNegativeLength, mapField(TString, TString), be32(-1)),
		withHdr("map over MaxContainer", ErrContainerLarge, mapField(TString, TI32), be32(1<<30)),
		withHdr("nested negative string", ErrNegativeLength, []byte{TStruct, 0, 1}, listField(TString), be32(1), be32(-2)),
		withHdr("struct too deep", ErrTooDeep, nested(9)),
		withHdr("lists too deep", ErrTooDeep, nestedLists(9)),
		withHdr("unknown field type 1", ErrBadType, []byte{1, 0, 1, 0}),
		withHdr("unknown field type 5", ErrBadType, []byte{5, 0, 1, 0, 0, 0, 0}),
		withHdr("unknown field type 17", ErrBadType, []byte{17, 0, 1, 0}),
		withHdr("unknown field type 255", ErrBadType, []byte{255, 0, 1, 0}),
		withHdr("bad list element type", ErrBadType, listField(7), be32(1), []byte{0}),
		withHdr("list element type stop", ErrBadType, listField(TStop), be32(1), []byte{0}),
		withHdr("bad map key type", ErrBadType, mapField(9, TI32), be32(1), []byte{0}),
		withHdr("bad map value type", ErrBadType, mapField(TI32, 0), be32(1), []byte{0}),
		withHdr("bad type inside nested struct", ErrBadType, []byte{TStruct, 0, 1, 99, 0, 1, 0, 0}),
		{name: "not strict", lim: small, data: cat(be32(9), []byte("get_table"), []byte{Call}, be32(1), []byte{0}), want: ErrNotStrict},
		{name: "compact", lim: small, data: []byte{0x82, 0x21, 0x01, 0x09, 'g', 'e', 't', '_', 't', 'a', 'b', 'l', 'e', 0}, want: ErrCompact},
		{name: "bad version", lim: small, data: cat([]byte{0x80, 0x02, 0, 1}, be32(1), []byte("x"), be32(1), []byte{0}), want: ErrBadVersion},
		{name: "version 0xff01", lim: small, data: cat([]byte{0xff, 0x01, 0, 1}, be32(1), []byte("x"), be32(1), []byte{0}), want: ErrBadVersion},
		{name: "negative name length", lim: small, data: cat([]byte{0x80, 1, 0, 1}, be32(-1)), want: ErrNegativeLength},
		{name: "huge name length", lim: small, data: cat([]byte{0x80, 1, 0, 1}, be32(math.MaxInt32)), want: ErrStringTooLong},
		{name: "message type 0", lim: small, data: cat(AppendHeader(nil, 0, []byte("m"), 5), []byte{0}), want: ErrMessageType, hasHeader: true, meth: "m", seq: 5},
		{name: "message type 5", lim: small, data: cat(AppendHeader(nil, 5, []byte("m"), -5), []byte{0}), want: ErrMessageType, hasHeader: true, meth: "m", seq: -5},
		{name: "message type 255", lim: small, data: cat(AppendHeader(nil, 255, []byte("m"), 0), []byte{0}), want: ErrMessageType, hasHeader: true, meth: "m"},
	}
	// Limits only a stream can hit: the claim fits the per-value limits
	// but not the message limit.
	stream := []badCase{
		withHdr("string past MaxMessage", ErrTooLarge, strField, be32(1<<20-10)),
		withHdr("i64 list past MaxMessage", ErrTooLarge, []byte{TList, 0, 1, TI64}, be32(200_000)),
		withHdr("bool map past MaxMessage", ErrTooLarge, mapField(TBool, TByte), be32(600_000)),
	}
	for i := range stream {
		stream[i].lim = Limits{MaxMessage: 1 << 20, MaxContainer: 1 << 20}
		stream[i].streamOnly = true
	}
	// A fixed-width run whose byte size overflows int32 is refused up front.
	huge := withHdr("i64 list past MaxInt32 bytes", ErrTooLarge, []byte{TList, 0, 1, TI64}, be32(math.MaxInt32))
	huge.lim.MaxContainer = math.MaxInt32
	return append(append(cases, stream...), huge)
}

func checkBad(t *testing.T, how string, tc badCase, err error) {
	t.Helper()
	var re *ReadError
	if !errors.As(err, &re) {
		t.Fatalf("%s: got %T %v; want *ReadError", how, err, err)
	}
	if !errors.Is(err, tc.want) {
		t.Errorf("%s: got %v; want %v", how, err, tc.want)
	}
	if re.HasHeader != tc.hasHeader {
		t.Errorf("%s: HasHeader = %v; want %v", how, re.HasHeader, tc.hasHeader)
	}
	if re.Name != tc.meth || re.SeqID != tc.seq {
		t.Errorf("%s: got Name %q SeqID %d; want %q %d", how, re.Name, re.SeqID, tc.meth, tc.seq)
	}
	if re.Error() == "" {
		t.Errorf("%s: got empty Error(); want text", how)
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range badCases() {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tc.data), Buffered, tc.lim).Read()
			checkBad(t, "buffered", tc, err)
			_, err = NewReader(iotest.OneByteReader(bytes.NewReader(tc.data)), Buffered, tc.lim).Read()
			checkBad(t, "buffered one-byte", tc, err)
			if tc.streamOnly {
				tc.want = ErrTruncated
			}
			_, err = NewReader(bytes.NewReader(frame(tc.data)), Framed, tc.lim).Read()
			checkBad(t, "framed", tc, err)
			_, err = Parse(tc.data, tc.lim)
			checkBad(t, "Parse", tc, err)
		})
	}
}

func TestDepthLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		body  []byte
		depth int
		want  error
	}{
		{"structs at limit", nested(8), 8, nil},
		{"structs over limit", nested(9), 8, ErrTooDeep},
		{"lists at limit", nestedLists(8), 8, nil},
		{"lists over limit", nestedLists(9), 8, ErrTooDeep},
		{"default 64 structs", nested(64), 0, nil},
		{"default 65 structs", nested(65), 0, ErrTooDeep},
		{"default 1000 structs", nested(1000), 0, ErrTooDeep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(msg(Call, "d", 1, tc.body), Limits{MaxDepth: tc.depth})
			if !errors.Is(err, tc.want) {
				t.Errorf("Parse: got %v; want %v", err, tc.want)
			}
		})
	}
}

func TestFramedErrors(t *testing.T) {
	lim := Limits{MaxMessage: 1 << 20}
	good := msg(Call, "get_table", 3, []byte{TStop})
	for _, tc := range []struct {
		name      string
		data      []byte
		want      error
		hasHeader bool
	}{
		{"length 0", rawFrame(0, good), ErrBadFrame, false},
		{"length -1", rawFrame(0xffffffff, good), ErrBadFrame, false},
		{"length min int32", rawFrame(0x80000000, good), ErrBadFrame, false},
		{"length MaxMessage+1", rawFrame(1<<20+1, good), ErrTooLarge, false},
		{"length max int32", rawFrame(math.MaxInt32, good), ErrTooLarge, false},
		{"bytes after message", frame(append(append([]byte{}, good...), 0, 0, 0)), ErrBadFrame, true},
		{"second message in frame", frame(append(append([]byte{}, good...), good...)), ErrBadFrame, true},
		{"compact inside frame", frame([]byte{0x82, 0x21, 1, 1, 'x', 0}), ErrCompact, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tc.data), Framed, lim).Read()
			var re *ReadError
			if !errors.As(err, &re) || re.Err != tc.want {
				t.Fatalf("Read: got %v; want *ReadError(%v)", err, tc.want)
			}
			if re.HasHeader != tc.hasHeader {
				t.Errorf("HasHeader = %v; want %v", re.HasHeader, tc.hasHeader)
			}
			if tc.hasHeader && (re.Name != "get_table" || re.SeqID != 3) {
				t.Errorf("got Name %q SeqID %d; want %q %d", re.Name, re.SeqID, "get_table", 3)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	var e Encoder
	e.StringField(1, strings.Repeat("a", 2000))
	e.Stop()
	m := msg(Call, "big", 4, e.B)
	if _, err := Parse(m, Limits{MaxMessage: len(m)}); err != nil {
		t.Fatalf("Parse at limit: got %v; want nil", err)
	}
	_, err := Parse(m, Limits{MaxMessage: len(m) - 1})
	var re *ReadError
	if !errors.As(err, &re) || re.Err != ErrTooLarge || !re.HasHeader || re.Name != "big" || re.SeqID != 4 {
		t.Fatalf("Parse over limit: got %#v; want *ReadError(ErrTooLarge) with header big/4", err)
	}
	// Trailing bytes are not part of the message.
	got, err := Parse(append(append([]byte{}, m...), 1, 2, 3), Limits{})
	if err != nil || len(got.Buf) != len(m) {
		t.Fatalf("Parse with trailing bytes: got (%d bytes, %v); want (%d, nil)", len(got.Buf), err, len(m))
	}
}

// allocDelta reports the bytes allocated while f runs.
func allocDelta(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestAllocationBound(t *testing.T) {
	const claim = 90 << 20
	const bound = 1 << 20
	bigList := cat(hdr("get_partitions_by_names", 1), []byte{TList, 0, 3, TString}, be32(9_000_000), be32(3), []byte("abc"))
	for _, tc := range []struct {
		name string
		tr   Transport
		data []byte
		lim  Limits
	}{
		{"buffered 90MiB string", Buffered, cat(hdr("get_table", 1), []byte{TString, 0, 1}, be32(claim), []byte("0123456789")), Limits{}},
		{"buffered 90MiB name", Buffered, cat([]byte{0x80, 1, 0, 1}, be32(claim), []byte("0123456789")), Limits{}},
		{"buffered 9M-element list", Buffered, bigList, Limits{}},
		{"buffered 10M i64 list", Buffered, cat(hdr("x", 1), []byte{TList, 0, 3, TI64}, be32(10_000_000), be32(3)), Limits{}},
		{"framed 90MiB frame", Framed, rawFrame(claim, cat(hdr("get_table", 1), []byte("0123456789"))), Limits{}},
		{"framed 100MiB frame", Framed, rawFrame(DefaultMaxMessage, cat(hdr("get_table", 1), []byte("0123456789"))), Limits{}},
		{"framed 90MiB string", Framed, frame(cat(hdr("get_table", 1), []byte{TString, 0, 1}, be32(claim), []byte("0123456789"))), Limits{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			n := allocDelta(func() {
				_, err = NewReader(bytes.NewReader(tc.data), tc.tr, tc.lim).Read()
			})
			if err == nil {
				t.Fatalf("Read: got nil error; want an error")
			}
			if n > bound {
				t.Errorf("allocated %d bytes; want <= %d", n, bound)
			}
		})
	}
}

// TestLargeMessageGrowth checks that a big message arriving in pieces costs
// a small multiple of its size.
func TestLargeMessageGrowth(t *testing.T) {
	var e Encoder
	e.StringField(1, strings.Repeat("z", 3<<20))
	e.Stop()
	m := msg(Reply, "r", 1, e.B)
	for _, tr := range transports {
		data := m
		if tr == Framed {
			data = frame(m)
		}
		var got Message
		var err error
		n := allocDelta(func() {
			got, err = NewReader(iotest.HalfReader(bytes.NewReader(data)), tr, Limits{}).Read()
		})
		if err != nil || !bytes.Equal(got.Buf, m) {
			t.Fatalf("%v: got (%d bytes, %v); want (%d bytes, nil)", tr, len(got.Buf), err, len(m))
		}
		if n > 4*uint64(len(m)) {
			t.Errorf("%v: allocated %d bytes for a %d-byte message; want <= 4x", tr, n, len(m))
		}
	}
}

func TestReaderReuse(t *testing.T) {
	var e Encoder
	e.StringField(1, strings.Repeat("q", 2<<20)) // > keepBuf
	e.Stop()
	big := msg(Call, "big", 1, e.B)
	small := msg(Call, "small", 2, []byte{TStop})
	for _, tr := range transports {
		var data []byte
		for _, m := range [][]byte{small, big, small, small} {
			if tr == Framed {
				m = frame(m)
			}
			data = append(data, m...)
		}
		r := NewReader(bytes.NewReader(data), tr, Limits{})
		for i, want := range [][]byte{small, big, small, small} {
			m, err := r.Read()
			if err != nil || !bytes.Equal(m.Buf, want) {
				t.Fatalf("%v Read #%d: got (%d bytes, %v); want (%d bytes, nil)", tr, i, len(m.Buf), err, len(want))
			}
		}
		if r.Buffered() != 0 {
			t.Errorf("%v Buffered = %d; want 0", tr, r.Buffered())
		}
	}
}

// errReader fails with err after delivering data.
type errReader struct {
	data []byte
	err  error
}

func (r *errReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestIOErrorPassesThrough(t *testing.T) {
	boom := errors.New("connection reset")
	full := msg(Call, "get_table", 1, getTableArgs())
	for _, tr := range transports {
		data := full
		if tr == Framed {
			data = frame(full)
		}
		for _, cut := range []int{0, 1, 5, 20, len(data) - 1} {
			_, err := NewReader(&errReader{data: data[:cut], err: boom}, tr, Limits{}).Read()
			if err != boom {
				t.Errorf("%v cut %d: got %v; want %v", tr, cut, err, boom)
			}
		}
	}
}

func TestSetSeqID(t *testing.T) {
	for _, tc := range validMessages() {
		t.Run(tc.name, func(t *testing.T) {
			orig := msg(tc.typ, tc.meth, tc.seq, tc.body)
			m, err := Parse(append([]byte{}, orig...), Limits{})
			if err != nil {
				t.Fatalf("Parse: got %v; want nil", err)
			}
			for _, id := range []int32{0, 1, -1, math.MaxInt32, math.MinInt32} {
				m.SetSeqID(id)
				if m.SeqID != id {
					t.Errorf("SeqID field = %d; want %d", m.SeqID, id)
				}
				again, err := Parse(m.Buf, Limits{})
				if err != nil || again.SeqID != id {
					t.Errorf("reparsed SeqID = %d (%v); want %d", again.SeqID, err, id)
				}
				if want := msg(tc.typ, tc.meth, id, tc.body); !bytes.Equal(m.Buf, want) {
					t.Errorf("Buf after SetSeqID(%d) differs from a fresh message", id)
				}
			}
		})
	}
}

func TestApplicationException(t *testing.T) {
	for _, tc := range []struct {
		name, meth, text string
		seq, code        int32
	}{
		{"unknown method", "get_foo", "Invalid method name: 'get_foo'", 12, ExUnknownMethod},
		{"protocol error", "get_table", "string exceeds length limit", -1, ExProtocolError},
		{"empty", "", "", 0, ExUnknown},
		{"unicode", "get_table", "zu groß ✓", math.MaxInt32, ExInternalError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := AppendApplicationException([]byte("prefix"), tc.meth, tc.seq, tc.code, tc.text)
			if string(b[:6]) != "prefix" {
				t.Fatalf("prefix = %q; want %q", b[:6], "prefix")
			}
			m, err := Parse(b[6:], Limits{})
			if err != nil {
				t.Fatalf("Parse: got %v; want nil", err)
			}
			if m.Type != Exception || string(m.Name()) != tc.meth || m.SeqID != tc.seq {
				t.Errorf("header = (%d, %q, %d); want (%d, %q, %d)", m.Type, m.Name(), m.SeqID, Exception, tc.meth, tc.seq)
			}
			ex, err := DecodeApplicationException(m.Body())
			if err != nil {
				t.Fatalf("Decode: got %v; want nil", err)
			}
			if ex.Code != tc.code || ex.Message != tc.text {
				t.Errorf("got (%d, %q); want (%d, %q)", ex.Code, ex.Message, tc.code, tc.text)
			}
			if !strings.Contains(ex.Error(), tc.text) {
				t.Errorf("Error() = %q; want it to contain %q", ex.Error(), tc.text)
			}
		})
	}
	// Unknown fields are skipped; type mismatches ignored.
	var e Encoder
	e.I64Field(9, 5)
	e.I32Field(1, 77) // wrong type for message: skipped
	e.StringListField(3, []string{"a"})
	e.I32Field(2, ExBadSequenceID)
	e.StringField(1, "m")
	e.Stop()
	ex, err := DecodeApplicationException(e.B)
	if err != nil || ex.Code != ExBadSequenceID || ex.Message != "m" {
		t.Errorf("with extra fields: got (%+v, %v); want ({4 m}, nil)", ex, err)
	}
	for cut := 0; cut < len(e.B); cut++ {
		if ex, err := DecodeApplicationException(e.B[:cut]); err == nil {
			t.Errorf("cut at %d: got (%+v, nil); want error", cut, ex)
		}
	}
	if _, err := DecodeApplicationException([]byte{TString, 0, 1, 0xff, 0xff, 0xff, 0xff}); !errors.Is(err, ErrNegativeLength) {
		t.Errorf("negative message length: got %v; want ErrNegativeLength", err)
	}
}

func TestResultField(t *testing.T) {
	var ex Encoder
	ex.FieldBegin(TStruct, 2)
	ex.StringField(1, "NoSuchObjectException: t")
	ex.Stop()
	ex.Stop()
	for _, tc := range []struct {
		name string
		body []byte
		want int16
		err  error
	}{
		{"success", getTableResult(), 0, nil},
		{"exception id 2", ex.B, 2, nil},
		{"void", []byte{TStop}, -1, nil},
		{"empty", nil, 0, ErrTruncated},
		{"cut field header", []byte{TStruct, 0}, 0, ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResultField(tc.body)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v; want %v", err, tc.err)
			}
			if err == nil && got != tc.want {
				t.Errorf("got %d; want %d", got, tc.want)
			}
		})
	}
}

func TestDecoder(t *testing.T) {
	var e Encoder
	e.BoolField(1, true)
	e.FieldBegin(TByte, 2)
	e.Byte(-3)
	e.FieldBegin(TI16, 3)
	e.I16(-300)
	e.I32Field(4, -70000)
	e.I64Field(5, math.MinInt64)
	e.FieldBegin(TDouble, 6)
	e.Double(-2.25)
	e.StringField(7, "héllo")
	e.FieldBegin(TString, 8)
	e.Bytes([]byte{0, 1, 2})
	e.StringListField(9, []string{"a", "bc"})
	e.StringMapField(10, []string{"k1", "k2"}, map[string]string{"k1": "v1", "k2": "v2"})
	e.FieldBegin(TStruct, 11) // skipped
	e.StringField(1, "inner")
	e.Stop()
	e.FieldBegin(TStruct, -1) // negative id, read
	e.BoolField(1, false)
	e.Stop()
	e.Stop()
	body := e.B

	d := NewDecoder(body)
	type field struct {
		typ byte
		id  int16
	}
	var got []field
	for {
		typ, id := d.FieldBegin()
		if typ == TStop {
			break
		}
		got = append(got, field{typ, id})
		switch id {
		case 1:
			if v := d.Bool(); !v {
				t.Errorf("bool = %v; want true", v)
			}
		case 2:
			if v := d.Byte(); v != -3 {
				t.Errorf("byte = %d; want -3", v)
			}
		case 3:
			if v := d.I16(); v != -300 {
				t.Errorf("i16 = %d; want -300", v)
			}
		case 4:
			if v := d.I32(); v != -70000 {
				t.Errorf("i32 = %d; want -70000", v)
			}
		case 5:
			if v := d.I64(); v != math.MinInt64 {
				t.Errorf("i64 = %d; want %d", v, int64(math.MinInt64))
			}
		case 6:
			if v := d.Double(); v != -2.25 {
				t.Errorf("double = %v; want -2.25", v)
			}
		case 7:
			if v := d.String(); v != "héllo" {
				t.Errorf("string = %q; want %q", v, "héllo")
			}
		case 8:
			if v := d.Bytes(); !bytes.Equal(v, []byte{0, 1, 2}) {
				t.Errorf("binary = %x; want 000102", v)
			}
		case 9:
			et, n := d.ListBegin()
			var items []string
			for i := 0; i < n; i++ {
				items = append(items, d.String())
			}
			if et != TString || strings.Join(items, ",") != "a,bc" {
				t.Errorf("list = (%d, %q); want (%d, [a bc])", et, items, TString)
			}
		case 10:
			kt, vt, n := d.MapBegin()
			var kv []string
			for i := 0; i < n; i++ {
				kv = append(kv, d.String()+"="+d.String())
			}
			if kt != TString || vt != TString || strings.Join(kv, ",") != "k1=v1,k2=v2" {
				t.Errorf("map = (%d, %d, %q); want string/string [k1=v1 k2=v2]", kt, vt, kv)
			}
		case -1:
			typ, id := d.FieldBegin()
			if typ != TBool || id != 1 || d.Bool() {
				t.Errorf("inner field = (%d, %d); want (%d, 1) false", typ, id, TBool)
			}
			if typ, _ := d.FieldBegin(); typ != TStop {
				t.Errorf("inner end = %d; want TStop", typ)
			}
		default:
			d.Skip(typ)
		}
	}
	if err := d.Err(); err != nil {
		t.Fatalf("Err = %v; want nil", err)
	}
	if d.Pos() != len(body) {
		t.Errorf("Pos = %d; want %d", d.Pos(), len(body))
	}
	if len(got) != 12 || got[10] != (field{TStruct, 11}) || got[11] != (field{TStruct, -1}) {
		t.Errorf("fields = %v; want 12 ending {12 11} {12 -1}", got)
	}
}

func TestDecoderStickyErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		read func(d *Decoder)
		want error
	}{
		{"truncated i32", []byte{0, 0}, func(d *Decoder) { d.I32() }, ErrTruncated},
		{"truncated string", cat(be32(5), []byte("ab")), func(d *Decoder) { d.Bytes() }, ErrTruncated},
		{"negative string", be32(-1), func(d *Decoder) { _ = d.String() }, ErrNegativeLength},
		{"negative list", cat([]byte{TString}, be32(-1)), func(d *Decoder) { d.ListBegin() }, ErrNegativeLength},
		{"huge map", cat([]byte{TString, TString}, be32(math.MaxInt32)), func(d *Decoder) { d.MapBegin() }, ErrContainerLarge},
		{"skip bad type", []byte{1, 2, 3}, func(d *Decoder) { d.Skip(7) }, ErrBadType},
		{"skip deep", nested(100), func(d *Decoder) { d.Skip(TStruct) }, ErrTooDeep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(tc.in)
			tc.read(d)
			if !errors.Is(d.Err(), tc.want) {
				t.Fatalf("Err = %v; want %v", d.Err(), tc.want)
			}
			first := d.Err()
			pos := d.Pos()
			if typ, id := d.FieldBegin(); typ != TStop || id != 0 {
				t.Errorf("FieldBegin after error = (%d, %d); want (0, 0)", typ, id)
			}
			if d.Bool() || d.Byte() != 0 || d.I16() != 0 || d.I32() != 0 || d.I64() != 0 || d.Double() != 0 {
				t.Errorf("scalar reads after error returned non-zero values")
			}
			if b := d.Bytes(); b != nil {
				t.Errorf("Bytes after error = %x; want nil", b)
			}
			if s := d.String(); s != "" {
				t.Errorf("String after error = %q; want empty", s)
			}
			if et, n := d.ListBegin(); et != TStop || n != 0 {
				t.Errorf("ListBegin after error = (%d, %d); want (0, 0)", et, n)
			}
			if kt, vt, n := d.MapBegin(); kt != TStop || vt != TStop || n != 0 {
				t.Errorf("MapBegin after error = (%d, %d, %d); want zeros", kt, vt, n)
			}
			d.Skip(TI64)
			if d.Err() != first {
				t.Errorf("Err changed to %v; want first error %v", d.Err(), first)
			}
			if d.Pos() != pos {
				t.Errorf("Pos moved from %d to %d after error", pos, d.Pos())
			}
		})
	}
	// Sticky across a later valid read: a successful value after an error
	// must not be returned.
	d := NewDecoder(cat(be32(-1), be32(7)))
	_ = d.String()
	if v := d.I32(); v != 0 || !errors.Is(d.Err(), ErrNegativeLength) {
		t.Errorf("I32 after error = %d (%v); want 0 (ErrNegativeLength)", v, d.Err())
	}
}

func TestEncoder(t *testing.T) {
	for _, tc := range []struct {
		name string
		enc  func(e *Encoder)
		want []byte
	}{
		{"field header", func(e *Encoder) { e.FieldBegin(TI32, -2) }, []byte{TI32, 0xff, 0xfe}},
		{"bools", func(e *Encoder) { e.Bool(true); e.Bool(false) }, []byte{1, 0}},
		{"i16", func(e *Encoder) { e.I16(-2) }, []byte{0xff, 0xfe}},
		{"i64", func(e *Encoder) { e.I64(1) }, []byte{0, 0, 0, 0, 0, 0, 0, 1}},
		{"double", func(e *Encoder) { e.Double(1) }, []byte{0x3f, 0xf0, 0, 0, 0, 0, 0, 0}},
		{"string", func(e *Encoder) { e.String("ab") }, []byte{0, 0, 0, 2, 'a', 'b'}},
		{"empty list", func(e *Encoder) { e.StringListField(4, nil) }, []byte{TList, 0, 4, TString, 0, 0, 0, 0}},
		{"map", func(e *Encoder) { e.StringMapField(1, []string{"k"}, map[string]string{"k": "v"}) },
			[]byte{TMap, 0, 1, TString, TString, 0, 0, 0, 1, 0, 0, 0, 1, 'k', 0, 0, 0, 1, 'v'}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e Encoder
			tc.enc(&e)
			if !bytes.Equal(e.B, tc.want) {
				t.Errorf("got %x; want %x", e.B, tc.want)
			}
		})
	}
}

func TestParseTransport(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Transport
		err  bool
	}{
		{"", Buffered, false},
		{"buffered", Buffered, false},
		{"framed", Framed, false},
		{"Framed", 0, true},
		{"sasl", 0, true},
	} {
		got, err := ParseTransport(tc.in)
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("ParseTransport(%q) = (%v, %v); want (%v, err=%v)", tc.in, got, err, tc.want, tc.err)
		}
		if !tc.err && got.String() != map[Transport]string{Buffered: "buffered", Framed: "framed"}[tc.want] {
			t.Errorf("String() = %q; want %q", got.String(), tc.in)
		}
	}
}

func TestLimitsDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Limits
		want Limits
	}{
		{"zero", Limits{}, Limits{DefaultMaxMessage, DefaultMaxMessage, 10_000_000, 64}},
		{"negative", Limits{-1, -1, -1, -1}, Limits{DefaultMaxMessage, DefaultMaxMessage, 10_000_000, 64}},
		{"string clamped", Limits{MaxMessage: 100, MaxString: 1000}, Limits{100, 100, 10_000_000, 64}},
		{"kept", Limits{1000, 10, 5, 3}, Limits{1000, 10, 5, 3}},
	} {
		if got := tc.in.WithDefaults(); got != tc.want {
			t.Errorf("%s: got %+v; want %+v", tc.name, got, tc.want)
		}
	}
}

// stepReader delivers its chunks one Read at a time, failing with a
// timeout between them, as a connection whose read deadline passed
// before the rest of a message came.
type stepReader struct {
	chunks [][]byte
	fail   bool
}

func (r *stepReader) Read(p []byte) (int, error) {
	if r.fail || len(r.chunks) == 0 {
		r.fail = false
		return 0, os.ErrDeadlineExceeded
	}
	n := copy(p, r.chunks[0])
	r.chunks[0] = r.chunks[0][n:]
	if len(r.chunks[0]) == 0 {
		r.chunks = r.chunks[1:]
		r.fail = true
	}
	return n, nil
}

// TestReadAfterFailedRead: a Read after one that failed part-way through
// a message (a deadline) starts the message over, even when the buffer
// was compacted meanwhile; it once panicked with next past the data.
func TestReadAfterFailedRead(t *testing.T) {
	first := msg(Call, "get_table", 1, getTableArgs())
	var e Encoder
	e.StringField(1, strings.Repeat("z", 3*FreeBuf)) // makes the buffer grow, moving the data
	e.Stop()
	second := msg(Call, "big", 2, e.B)
	for _, tr := range transports {
		a, b := first, second
		if tr == Framed {
			a, b = frame(first), frame(second)
		}
		r := NewReader(&stepReader{chunks: [][]byte{a, b[:10], b[10 : len(b)/2], b[len(b)/2:]}}, tr, Limits{})
		var got [][]byte
		for i := 0; i < 10 && len(got) < 2; i++ {
			m, err := r.Read()
			if err != nil {
				continue // the deadline: read again
			}
			got = append(got, append([]byte(nil), m.Buf...))
		}
		if len(got) != 2 || !bytes.Equal(got[0], first) || !bytes.Equal(got[1], second) {
			t.Errorf("%v: read %d messages back; want both, whole", tr, len(got))
		}
	}
}

// TestDecoderStruct: Struct reads the fields it names, skips the others
// (unknown ids, and a named id sent with another type), reads a list of
// structs element by element, and leaves a truncated struct's error in
// the decoder.
func TestDecoderStruct(t *testing.T) {
	type elem struct{ name string }
	type got struct {
		id    int64
		state int32
		user  string
		host  string
		elems []elem
	}
	var e Encoder
	e.I64Field(1, 42)
	e.FieldBegin(TMap, 9) // unknown: skipped
	e.MapBegin(TString, TI32, 1)
	e.String("k")
	e.I32(7)
	e.I32Field(2, 3)
	e.StringField(3, "alice")
	e.I32Field(4, 99) // named as a string below: skipped
	e.FieldBegin(TList, 5)
	e.ListBegin(TStruct, 2)
	for _, n := range []string{"a", "b"} {
		e.StringField(1, n)
		e.I64Field(2, 0) // unknown in the element: skipped
		e.Stop()
	}
	e.Stop()
	whole := append([]byte(nil), e.B...)

	read := func(b []byte) (got, error) {
		var g got
		d := NewDecoder(b)
		d.Struct(I64At(1, &g.id), I32At(2, &g.state), StringAt(3, &g.user), StringAt(4, &g.host),
			ListAt(5, func(d *Decoder) {
				var x elem
				d.Struct(StringAt(1, &x.name))
				g.elems = append(g.elems, x)
			}))
		return g, d.Err()
	}
	g, err := read(whole)
	if err != nil {
		t.Fatal(err)
	}
	want := got{id: 42, state: 3, user: "alice", elems: []elem{{"a"}, {"b"}}}
	if g.id != want.id || g.state != want.state || g.user != want.user || g.host != "" ||
		len(g.elems) != 2 || g.elems[0] != want.elems[0] || g.elems[1] != want.elems[1] {
		t.Fatalf("got %+v; want %+v", g, want)
	}
	if _, err := read(whole[:len(whole)-4]); err == nil {
		t.Fatal("a truncated struct read without an error")
	}
}
