package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
)

// countGate records what a Reader tells its gate.
type countGate struct {
	started  int
	claimed  int
	peak     int
	grows    int
	failWith error
}

func (g *countGate) Started() { g.started++ }
func (g *countGate) Grow(n int) error {
	if g.failWith != nil {
		return g.failWith
	}
	g.grows++
	g.claimed += n
	g.peak = max(g.peak, g.claimed)
	return nil
}
func (g *countGate) Shrink(n int) { g.claimed -= n }

// pieces hands out its data at most step bytes per Read, as a slow peer.
type pieces struct {
	data []byte
	step int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		return 0, io.EOF
	}
	n := copy(b[:min(len(b), p.step)], p.data)
	p.data = p.data[n:]
	return n, nil
}

// A message that arrives in one read starts no deadline and claims
// nothing; one that trickles in starts it once; a large one claims what
// its buffer holds beyond FreeBuf, and gives it back once consumed (#9).
func TestGate(t *testing.T) {
	small := msg(Call, "get_table", 1, getTableArgs())
	big := msg(Call, "add_partitions", 2, stringArgs(300<<10))
	for _, tr := range []Transport{Buffered, Framed} {
		t.Run(tr.String(), func(t *testing.T) {
			enc := func(m []byte) []byte {
				if tr == Framed {
					return frame(m)
				}
				return m
			}
			t.Run("whole", func(t *testing.T) {
				g := &countGate{}
				r := NewReader(bytes.NewReader(enc(small)), tr, Limits{})
				r.SetGate(g)
				if _, err := r.Read(); err != nil {
					t.Fatal(err)
				}
				if g.started != 0 || g.grows != 0 {
					t.Errorf("started %d grows %d; want 0 0", g.started, g.grows)
				}
			})
			t.Run("trickle", func(t *testing.T) {
				g := &countGate{}
				r := NewReader(&pieces{data: enc(small), step: 1}, tr, Limits{})
				r.SetGate(g)
				if _, err := r.Read(); err != nil {
					t.Fatal(err)
				}
				if g.started != 1 {
					t.Errorf("started %d times; want 1", g.started)
				}
			})
			t.Run("large", func(t *testing.T) {
				g := &countGate{}
				r := NewReader(&pieces{data: cat(enc(big), enc(small)), step: 64 << 10}, tr, Limits{})
				r.SetGate(g)
				m, err := r.Read()
				if err != nil {
					t.Fatal(err)
				}
				if len(m.Buf) != len(big) {
					t.Fatalf("read %d bytes; want %d", len(m.Buf), len(big))
				}
				if g.claimed < len(big)-FreeBuf || g.claimed > 2*len(big) {
					t.Errorf("claimed %d holding a %d-byte message; want within [%d, %d]", g.claimed, len(big), len(big)-FreeBuf, 2*len(big))
				}
				if _, err := r.Read(); err != nil {
					t.Fatal(err)
				}
				if _, err := r.Read(); !errors.Is(err, io.EOF) {
					t.Fatalf("got %v; want EOF", err)
				}
				if g.claimed != 0 {
					t.Errorf("still claimed %d after the message was consumed; want 0", g.claimed)
				}
			})
			t.Run("discard", func(t *testing.T) {
				g := &countGate{}
				r := NewReader(&pieces{data: enc(big)[:200<<10], step: 64 << 10}, tr, Limits{})
				r.SetGate(g)
				if _, err := r.Read(); !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("got %v; want unexpected EOF", err)
				}
				if g.claimed == 0 {
					t.Fatal("nothing claimed for a partial large message")
				}
				r.Discard()
				if g.claimed != 0 {
					t.Errorf("claimed %d after Discard; want 0", g.claimed)
				}
			})
			t.Run("refused", func(t *testing.T) {
				no := errors.New("no budget")
				g := &countGate{failWith: no}
				r := NewReader(&pieces{data: enc(big), step: 64 << 10}, tr, Limits{})
				r.SetGate(g)
				if _, err := r.Read(); !errors.Is(err, no) {
					t.Fatalf("got %v; want the gate's error", err)
				}
			})
		})
	}
}

// stringArgs is an args struct holding one string of n bytes.
func stringArgs(n int) []byte {
	var e Encoder
	e.StringField(1, string(bytes.Repeat([]byte("x"), n)))
	e.Stop()
	return e.B
}

// TestGateClaimsWhatArrived (issue 22): a message that announces a large
// size (a frame, a long string) and sends only part of it claims at
// most twice the bytes that arrived, never the announced size: a peer
// must send bytes to hold budget.
func TestGateClaimsWhatArrived(t *testing.T) {
	const announced = 50 << 20
	for _, tr := range []Transport{Buffered, Framed} {
		for _, sent := range []int{0, 100, 5000, 300 << 10, 3 << 20} {
			t.Run(fmt.Sprintf("%s/%d", tr, sent), func(t *testing.T) {
				m := AppendHeader(nil, Call, []byte("get_table"), 1)
				m = append(m, TString, 0, 1)
				m = binary.BigEndian.AppendUint32(m, announced)
				if tr == Framed {
					m = binary.BigEndian.AppendUint32(nil, uint32(len(m)+announced+1))[:4:4]
					m = append(m, AppendHeader(nil, Call, []byte("get_table"), 1)...)
					m = append(m, TString, 0, 1)
					m = binary.BigEndian.AppendUint32(m, announced)
				}
				m = append(m, make([]byte, sent)...)
				g := &countGate{}
				r := NewReader(&pieces{data: m, step: 64 << 10}, tr, Limits{MaxMessage: 100 << 20})
				r.SetGate(g)
				if _, err := r.Read(); !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("got %v; want unexpected EOF", err)
				}
				if most := 2 * len(m); g.peak > most {
					t.Errorf("claimed %d bytes for a message announcing %d of which %d arrived; want at most %d",
						g.peak, announced, len(m), most)
				}
			})
		}
	}
}
