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
	d := wire.NewDecoder(args)
	e := wire.Encoder{B: dst}
	redactStruct(d, &e, key, 0)
	if d.Err() != nil || d.Pos() != len(args) {
		return dst, errRedact
	}
	return e.B, nil
}

// maxRedactDepth bounds the nesting redactArgs follows; the proxy reads
// requests under a depth bound of 64 by default.
const maxRedactDepth = 64

func redactStruct(d *wire.Decoder, e *wire.Encoder, key []byte, depth int) {
	for d.Err() == nil {
		typ, id := d.FieldBegin()
		if typ == wire.TStop {
			e.Stop()
			return
		}
		e.FieldBegin(typ, id)
		redactValue(d, e, key, typ, depth+1)
	}
}

func redactValue(d *wire.Decoder, e *wire.Encoder, key []byte, typ byte, depth int) {
	if depth > maxRedactDepth {
		d.Skip(0xff) // an invalid type: the decoder fails, and so the walk
		return
	}
	switch typ {
	case wire.TString:
		s := d.Bytes()
		var buf [1 + hashedLen]byte
		e.Bytes(hashName(buf[:0], key, s))
	case wire.TStruct:
		redactStruct(d, e, key, depth)
	case wire.TList, wire.TSet:
		elem, n := d.ListBegin()
		e.ListBegin(elem, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			redactValue(d, e, key, elem, depth+1)
		}
	case wire.TMap:
		kt, vt, n := d.MapBegin()
		e.MapBegin(kt, vt, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			redactValue(d, e, key, kt, depth+1)
			redactValue(d, e, key, vt, depth+1)
		}
	case wire.TBool:
		e.Bool(d.Bool())
	case wire.TByte:
		e.Byte(d.Byte())
	case wire.TI16:
		e.I16(d.I16())
	case wire.TI32:
		e.I32(d.I32())
	case wire.TI64:
		e.I64(d.I64())
	case wire.TDouble:
		e.Double(d.Double())
	default:
		d.Skip(typ)
	}
}
