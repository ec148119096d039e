package trace

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// FuzzReader: bytes from disk are untrusted. A reader never panics, never
// takes more memory than its bound, and what it accepts encodes back to
// the same record.
func FuzzReader(f *testing.F) {
	start := time.Unix(1700000000, 0)
	var seed []byte
	seed = appendHeader(seed, Header{Version: Version, Start: start})
	for i := range 3 {
		c := sampleCall(i)
		seed = appendCall(seed, &c, start)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-7])
	f.Add(seed[:headerSize])
	f.Add([]byte("HMSTRACE\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := NewReader(bytes.NewReader(b), 1<<16)
		if err != nil {
			return
		}
		for {
			var c Call
			err := r.Next(&c)
			if err == io.EOF {
				return
			}
			if err != nil {
				if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				return
			}
			// Accepted: it encodes back to a record that reads the same.
			again := appendCall(nil, &c, r.Header().Start)
			var back Call
			if err := decodeCall(again[recordHead:], r.Header().Start, &back); err != nil {
				t.Fatalf("re-encoded record does not read: %v", err)
			}
			if back.Method != c.Method || !bytes.Equal(back.Args, c.Args) || back.ReplySize != c.ReplySize || !back.Time.Equal(c.Time) {
				t.Fatalf("re-encoded record differs: %+v vs %+v", back, c)
			}
		}
	})
}

// FuzzRedactArgs: args are a client's bytes. Redaction never panics, and
// what it accepts comes out as a struct of the same shape, every string a
// hash.
func FuzzRedactArgs(f *testing.F) {
	for i := range 3 {
		c := sampleCall(i)
		f.Add(c.Args)
	}
	f.Add(hmsreq.Req(hmsreq.Str(1, "db"), hmsreq.Strings(3, "a", "b"), hmsreq.Map(5, map[string]string{"k": "v"}), hmsreq.I64s(6, 1, 2)))
	f.Add([]byte{wire.TStop})
	f.Fuzz(func(t *testing.T, args []byte) {
		out, err := redactArgs(nil, []byte("k"), args)
		if err != nil {
			return
		}
		again, err := redactArgs(nil, []byte("k"), out)
		if err != nil {
			t.Fatalf("redacted args do not walk: %v", err)
		}
		// Hashing the hashes keeps the shape: the same length, since every
		// string becomes one of fixed length.
		if len(again) != len(out) {
			t.Fatalf("shape changed: %d bytes, then %d", len(out), len(again))
		}
	})
}
