package wire

import (
	"io"
	"testing"
)

// loopReader replays data forever, as a connection carrying the same
// message over and over.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}

// namedMessage is a whole message a benchmark runs on, and its name.
type namedMessage struct {
	name string
	m    []byte
}

func benchMessages() []namedMessage {
	return []namedMessage{
		{"get_table_req", msg(Call, "get_table_req", 1, getTableArgs())},
		{"reply20k", msg(Reply, "get_table_req", 1, getTableResult())},
	}
}

func newLoopReader(tr Transport, m []byte) *Reader {
	var data []byte
	for i := 0; i < 7; i++ { // an odd count, so reads straddle message ends
		if tr == Framed {
			data = append(data, frame(m)...)
		} else {
			data = append(data, m...)
		}
	}
	return NewReader(&loopReader{data: data}, tr, Limits{})
}

func benchRead(b *testing.B, tr Transport) {
	for _, bm := range benchMessages() {
		b.Run(bm.name, func(b *testing.B) {
			r := newLoopReader(tr, bm.m)
			if _, err := r.Read(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(bm.m)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				m, err := r.Read()
				if err != nil || len(m.Buf) != len(bm.m) {
					b.Fatalf("Read: got (%d bytes, %v); want (%d, nil)", len(m.Buf), err, len(bm.m))
				}
			}
		})
	}
}

func BenchmarkReadBuffered(b *testing.B) { benchRead(b, Buffered) }

func BenchmarkReadFramed(b *testing.B) { benchRead(b, Framed) }

func BenchmarkParse(b *testing.B) {
	for _, bm := range benchMessages() {
		b.Run(bm.name, func(b *testing.B) {
			b.SetBytes(int64(len(bm.m)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(bm.m, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestReadSteadyStateAllocs pins the benchmarks' 0 allocs/op.
func TestReadSteadyStateAllocs(t *testing.T) {
	for _, tr := range transports {
		for _, bm := range benchMessages() {
			r := newLoopReader(tr, bm.m)
			if _, err := r.Read(); err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(100, func() {
				if _, err := r.Read(); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%v %s: %v allocs per Read; want 0", tr, bm.name, allocs)
			}
		}
	}
}

func TestWriteSteadyStateAllocs(t *testing.T) {
	for _, tr := range transports {
		for _, bm := range benchMessages() {
			w := NewWriter(io.Discard, tr)
			hdr, body := bm.m[:20], bm.m[20:]
			allocs := testing.AllocsPerRun(100, func() {
				if err := w.Write(hdr, body); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%v %s: %v allocs per Write; want 0", tr, bm.name, allocs)
			}
		}
	}
}
