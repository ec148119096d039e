package wire

import (
	"bytes"
	"testing"
)

// FuzzGatedReader reads arbitrary bytes in arbitrary pieces through a
// gated Reader: whatever the bytes, the claim is never negative, always
// covers the buffer beyond FreeBuf, and is all returned by Discard.
func FuzzGatedReader(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s, uint16(7), false)
		f.Add(s, uint16(3000), true)
	}
	big := msg(Call, "add_partitions", 1, stringArgs(300<<10))
	f.Add(big, uint16(5000), false)
	f.Add(frame(big), uint16(5000), true)
	f.Fuzz(func(t *testing.T, data []byte, step uint16, framed bool) {
		tr := Buffered
		if framed {
			tr = Framed
		}
		g := &checkGate{t: t}
		r := NewReader(&pieces{data: bytes.Clone(data), step: int(step%8192) + 1}, tr, fuzzLimits)
		r.SetGate(g)
		g.r = r
		for i := 0; i < 64; i++ {
			if _, err := r.Read(); err != nil {
				break
			}
			g.check()
		}
		g.check()
		r.Discard()
		if g.claimed != 0 {
			t.Fatalf("claimed %d after Discard; want 0", g.claimed)
		}
	})
}

// checkGate tracks claims and checks them against the Reader's buffer.
type checkGate struct {
	t       *testing.T
	r       *Reader
	claimed int
}

func (g *checkGate) Started() {}

func (g *checkGate) Grow(n int) error {
	if n <= 0 {
		g.t.Fatalf("Grow(%d); want a positive claim", n)
	}
	g.claimed += n
	return nil
}

func (g *checkGate) Shrink(n int) {
	if g.claimed -= n; g.claimed < 0 {
		g.t.Fatalf("shrank below zero: %d", g.claimed)
	}
}

func (g *checkGate) check() {
	if g.claimed != g.r.claimed {
		g.t.Fatalf("gate holds %d, reader thinks %d", g.claimed, g.r.claimed)
	}
	if over := cap(g.r.buf) - FreeBuf; over > g.claimed {
		g.t.Fatalf("buffer of %d bytes, %d beyond FreeBuf, but only %d claimed", cap(g.r.buf), over, g.claimed)
	}
}
