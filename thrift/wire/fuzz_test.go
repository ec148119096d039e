package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// fuzzLimits are small so the fuzzer reaches every limit quickly.
var fuzzLimits = Limits{MaxMessage: 1 << 20, MaxString: 64 << 10, MaxContainer: 100_000, MaxDepth: 16}

func fuzzSeeds() [][]byte {
	var seeds [][]byte
	for _, tc := range validMessages() {
		m := msg(tc.typ, tc.meth, tc.seq, tc.body)
		seeds = append(seeds, m, frame(m))
	}
	var two []byte
	for i := 0; i < 2; i++ {
		two = append(two, msg(Call, "get_table", int32(i), getTableArgs())...)
	}
	seeds = append(seeds, two, frame(two))
	for _, tc := range badCases() {
		seeds = append(seeds, tc.data)
	}
	var e Encoder
	e.FieldBegin(TMap, 1)
	e.MapBegin(TString, TList, 1)
	e.String("k")
	e.ListBegin(TSet, 1)
	e.ListBegin(TStruct, 1)
	e.FieldBegin(TMap, 1)
	e.MapBegin(TI32, TDouble, 1)
	e.I32(1)
	e.Double(2)
	e.Stop()
	e.Stop()
	seeds = append(seeds, msg(Call, "nested", 1, e.B), rawFrame(0, nil), rawFrame(0xffffffff, nil))
	return seeds
}

// checkFuzzMessage verifies the invariants of a successfully read message.
func checkFuzzMessage(t *testing.T, how string, m Message) {
	t.Helper()
	if len(m.Buf) > fuzzLimits.MaxMessage {
		t.Fatalf("%s: len(Buf) = %d; want <= %d", how, len(m.Buf), fuzzLimits.MaxMessage)
	}
	if m.Type < Call || m.Type > Oneway {
		t.Fatalf("%s: Type = %d; want 1..4", how, m.Type)
	}
	again, err := Parse(m.Buf, fuzzLimits)
	if err != nil {
		t.Fatalf("%s: reparse of Buf: got %v; want nil", how, err)
	}
	if len(again.Buf) != len(m.Buf) || again.Type != m.Type || again.SeqID != m.SeqID ||
		!bytes.Equal(again.Name(), m.Name()) || !bytes.Equal(again.Header(), m.Header()) {
		t.Fatalf("%s: reparse = (%d, %d, %q, %d bytes); want (%d, %d, %q, %d bytes)", how,
			again.Type, again.SeqID, again.Name(), len(again.Buf), m.Type, m.SeqID, m.Name(), len(m.Buf))
	}
	if len(m.Header())+len(m.Body()) != len(m.Buf) {
		t.Fatalf("%s: header %d + body %d != buf %d", how, len(m.Header()), len(m.Body()), len(m.Buf))
	}
	// The decoder agrees that the body is exactly one struct.
	d := NewDecoder(m.Body())
	d.Skip(TStruct)
	if d.Err() != nil || d.Pos() != len(m.Body()) {
		t.Fatalf("%s: Decoder.Skip(body) = (pos %d, %v); want (%d, nil)", how, d.Pos(), d.Err(), len(m.Body()))
	}
	// What the proxy does with bodies must not panic.
	_, _ = ResultField(m.Body())
	_, _ = DecodeApplicationException(m.Body())
}

// checkStreamErr accepts only the errors a Reader documents.
func checkStreamErr(t *testing.T, how string, err error) {
	t.Helper()
	var re *ReadError
	if err == io.EOF || err == io.ErrUnexpectedEOF || errors.As(err, &re) {
		return
	}
	t.Fatalf("%s: got %T %v; want io.EOF, io.ErrUnexpectedEOF or *ReadError", how, err, err)
}

func FuzzReader(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pm, perr := Parse(data, fuzzLimits)
		if perr == nil {
			checkFuzzMessage(t, "Parse", pm)
			if !bytes.HasPrefix(data, pm.Buf) {
				t.Fatalf("Parse: Buf is not a prefix of the input")
			}
		} else if !errors.Is(perr, ErrTruncated) {
			var re *ReadError
			if !errors.As(perr, &re) {
				t.Fatalf("Parse: got %T %v; want *ReadError", perr, perr)
			}
		}

		for _, tr := range transports {
			r := NewReader(bytes.NewReader(data), tr, fuzzLimits)
			for i := 0; ; i++ {
				m, err := r.Read()
				if err != nil {
					checkStreamErr(t, tr.String(), err)
					if i == 0 && tr == Buffered && perr == nil && len(data) <= fuzzLimits.MaxMessage {
						t.Fatalf("buffered: Read failed with %v where Parse succeeded", err)
					}
					if i == 0 && tr == Buffered && perr != nil && !errors.Is(perr, ErrTruncated) && !errors.Is(err, unwrapSentinel(perr)) {
						t.Fatalf("buffered: Read failed with %v; Parse failed with %v", err, perr)
					}
					break
				}
				checkFuzzMessage(t, tr.String(), m)
				if i == 0 && tr == Buffered {
					if perr != nil {
						t.Fatalf("buffered: Read succeeded where Parse failed with %v", perr)
					}
					if !bytes.Equal(m.Buf, pm.Buf) {
						t.Fatalf("buffered: Read got %d bytes; Parse got %d", len(m.Buf), len(pm.Buf))
					}
				}
				if i == 0 && tr == Framed && len(data) >= 4 && !bytes.Equal(m.Buf, data[4:4+len(m.Buf)]) {
					t.Fatalf("framed: Buf is not the first frame's contents")
				}
			}
		}
	})
}

func unwrapSentinel(err error) error {
	var re *ReadError
	if errors.As(err, &re) {
		return re.Err
	}
	return err
}
