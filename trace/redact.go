package trace

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Redaction says what a recording keeps of names.
type Redaction uint8

const (
	// RedactOff keeps the requests as sent.
	RedactOff Redaction = iota
	// RedactNames replaces every string of a request, and the identity,
	// with a keyed hash: equal names stay equal within a key, so the
	// call mix and its repetition survive, but not the names.
	RedactNames
	// RedactBodies keeps no request bytes, only their sizes; identities
	// are hashed as with RedactNames.
	RedactBodies
)

// ParseRedaction reads off, names or bodies.
func ParseRedaction(s string) (Redaction, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "off", "none":
		return RedactOff, nil
	case "names":
		return RedactNames, nil
	case "bodies":
		return RedactBodies, nil
	}
	return 0, fmt.Errorf("trace: redaction %q: want off, names or bodies", s)
}

func (r Redaction) String() string {
	switch r {
	case RedactNames:
		return "names"
	case RedactBodies:
		return "bodies"
	}
	return "off"
}

func (r Redaction) flags() uint16 {
	switch r {
	case RedactNames:
		return FlagRedactNames
	case RedactBodies:
		return FlagRedactNames | FlagNoBodies
	}
	return 0
}

// hashedLen is the hex digits of a hashed name: 64 bits, so that two
// names of one metastore meet by chance about once in 2^32 pairs.
const hashedLen = 16

// hashName is the stable stand-in of s under key: "h" and hex digits,
// a valid metastore name.
func hashName(dst []byte, key []byte, s []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(s)
	var sum [sha256.Size]byte
	dst = append(dst, 'h')
	return hex.AppendEncode(dst, m.Sum(sum[:0])[:hashedLen/2])
}

// errRedact: a request whose args could not be walked keeps no args.
var errRedact = errors.New("trace: args are not a Thrift struct")

// redactArgs appends args to dst with every string (and binary) value,
// map keys included, replaced by its hash. Structure, field ids, numbers
// and booleans are kept, so the request still resolves as the same call
// shape.
func redactArgs(dst []byte, key []byte, args []byte) ([]byte, error) {
	w := redactor{d: wire.NewDecoder(args), e: wire.Encoder{B: dst}, key: key, src: args}
	w.structure(0)
	if w.d.Err() != nil || w.d.Pos() != len(args) {
		return dst, errRedact
	}
	return w.e.B, nil
}

// maxRedactDepth bounds the nesting redactArgs follows; the proxy reads
// requests under a depth bound of 64 by default.
const maxRedactDepth = 64

// redactor copies a struct from src, strings hashed.
type redactor struct {
	d   *wire.Decoder
	e   wire.Encoder
	key []byte
	src []byte
}

func (w *redactor) structure(depth int) {
	for w.d.Err() == nil {
		typ, id := w.d.FieldBegin()
		if typ == wire.TStop {
			w.e.Stop()
			return
		}
		w.e.FieldBegin(typ, id)
		w.value(typ, depth+1)
	}
}

func (w *redactor) value(typ byte, depth int) {
	d, e := w.d, &w.e
	if depth > maxRedactDepth {
		d.Skip(0xff) // an invalid type: the decoder fails, and so the walk
		return
	}
	switch typ {
	case wire.TString:
		s := d.Bytes()
		var buf [1 + hashedLen]byte
		e.Bytes(hashName(buf[:0], w.key, s))
	case wire.TStruct:
		w.structure(depth)
	case wire.TList, wire.TSet:
		elem, n := d.ListBegin()
		e.ListBegin(elem, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			w.value(elem, depth+1)
		}
	case wire.TMap:
		kt, vt, n := d.MapBegin()
		e.MapBegin(kt, vt, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			w.value(kt, depth+1)
			w.value(vt, depth+1)
		}
	default:
		// Numbers, booleans and any type this walker does not know are
		// copied as they are: they name nothing.
		from := d.Pos()
		d.Skip(typ)
		if d.Err() == nil {
			e.B = append(e.B, w.src[from:d.Pos()]...)
		}
	}
}
