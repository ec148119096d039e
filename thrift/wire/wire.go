// Package wire reads and writes Thrift binary-protocol messages as raw bytes,
// decoding only as far as a proxy needs: the header, and fields on demand.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Thrift binary-protocol type ids.
const (
	TStop   byte = 0
	TBool   byte = 2
	TByte   byte = 3
	TDouble byte = 4
	TI16    byte = 6
	TI32    byte = 8
	TI64    byte = 10
	TString byte = 11
	TStruct byte = 12
	TMap    byte = 13
	TSet    byte = 14
	TList   byte = 15
	TUUID   byte = 16
)

// Message types carried in the strict header.
const (
	Call      byte = 1
	Reply     byte = 2
	Exception byte = 3
	Oneway    byte = 4
)

// TApplicationException type codes that the proxy produces or inspects.
const (
	ExUnknown         int32 = 0
	ExUnknownMethod   int32 = 1
	ExInvalidMsgType  int32 = 2
	ExBadSequenceID   int32 = 4
	ExInternalError   int32 = 6
	ExProtocolError   int32 = 7
	ExInvalidProtocol int32 = 9
)

const strictVersion = 0x80010000

// Sentinel errors; a *ReadError wraps one of them.
var (
	ErrNotStrict      = errors.New("wire: missing version in message header (old client?)")
	ErrCompact        = errors.New("wire: compact protocol is not supported")
	ErrBadVersion     = errors.New("wire: bad protocol version in message header")
	ErrMessageType    = errors.New("wire: unexpected message type")
	ErrTooLarge       = errors.New("wire: message exceeds size limit")
	ErrStringTooLong  = errors.New("wire: string exceeds length limit")
	ErrContainerLarge = errors.New("wire: container exceeds size limit")
	ErrNegativeLength = errors.New("wire: negative length")
	ErrTooDeep        = errors.New("wire: nesting exceeds depth limit")
	ErrBadType        = errors.New("wire: unknown field type")
	ErrTruncated      = errors.New("wire: message truncated")
	ErrBadFrame       = errors.New("wire: bad frame length")
)

// Limits bound what a reader accepts before it allocates. The zero value of
// each field selects the default given in its comment.
type Limits struct {
	// MaxMessage bounds one message (header and body, without a frame
	// prefix). Default 100 MiB, HMS's hive.metastore.server.max.message.size.
	MaxMessage int
	// MaxString bounds one string or binary value. Default MaxMessage.
	MaxString int
	// MaxContainer bounds the element count of one list, set or map.
	// Default 10,000,000.
	MaxContainer int
	// MaxDepth bounds struct and container nesting. Default 64, as in
	// Thrift Java.
	MaxDepth int
}

// DefaultMaxMessage is the request limit HMS applies by default.
const DefaultMaxMessage = 100 << 20

// WithDefaults returns l with zero fields replaced by their defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxMessage <= 0 {
		l.MaxMessage = DefaultMaxMessage
	}
	if l.MaxString <= 0 || l.MaxString > l.MaxMessage {
		l.MaxString = l.MaxMessage
	}
	if l.MaxContainer <= 0 {
		l.MaxContainer = 10_000_000
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 64
	}
	return l
}

// ReadError describes a message the reader refused. When HasHeader is true
// the header was decoded, so the peer can be answered with a
// TApplicationException carrying Name and SeqID.
type ReadError struct {
	Err       error // one of the sentinels above
	Detail    string
	HasHeader bool
	Name      string
	SeqID     int32
}

func (e *ReadError) Error() string {
	if e.Detail == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + ": " + e.Detail
}

func (e *ReadError) Unwrap() error { return e.Err }

// Message is one Thrift message held as bytes. Buf holds the header and the
// body, without any frame prefix; the other fields index into it.
type Message struct {
	Buf      []byte
	Type     byte
	SeqID    int32
	nameEnd  int // Buf[12:nameEnd] is the method name; seqid follows
	bodyFrom int
}

// Name is the method name, aliasing Buf.
func (m *Message) Name() []byte { return m.Buf[8:m.nameEnd] }

// Body is the args or result struct, aliasing Buf.
func (m *Message) Body() []byte { return m.Buf[m.bodyFrom:] }

// Header is the message header bytes (version word, name, seqid).
func (m *Message) Header() []byte { return m.Buf[:m.bodyFrom] }

// SetSeqID rewrites the seqid in place.
func (m *Message) SetSeqID(id int32) {
	binary.BigEndian.PutUint32(m.Buf[m.nameEnd:], uint32(id))
	m.SeqID = id
}

// Parse decodes and validates a complete message held in b (no frame
// prefix). The returned Message aliases b.
func Parse(b []byte, lim Limits) (Message, error) {
	s := scanner{buf: b, lim: lim.WithDefaults()}
	m, err := s.message()
	if err == nil && len(m.Buf) > s.lim.MaxMessage {
		return m, &ReadError{Err: ErrTooLarge, HasHeader: true, Name: string(m.Name()), SeqID: m.SeqID}
	}
	return m, err
}

// AppendHeader appends a strict message header.
func AppendHeader(dst []byte, typ byte, name []byte, seq int32) []byte {
	dst = binary.BigEndian.AppendUint32(dst, strictVersion|uint32(typ))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(name)))
	dst = append(dst, name...)
	return binary.BigEndian.AppendUint32(dst, uint32(seq))
}

// AppendApplicationException appends a complete EXCEPTION message.
func AppendApplicationException(dst []byte, name string, seq int32, code int32, msg string) []byte {
	dst = AppendHeader(dst, Exception, []byte(name), seq)
	e := Encoder{B: dst}
	e.FieldBegin(TString, 1)
	e.String(msg)
	e.FieldBegin(TI32, 2)
	e.I32(code)
	e.Stop()
	return e.B
}

// ApplicationException is a decoded TApplicationException body.
type ApplicationException struct {
	Code    int32
	Message string
}

func (e *ApplicationException) Error() string {
	return fmt.Sprintf("thrift application exception %d: %s", e.Code, e.Message)
}

// DecodeApplicationException decodes the body of an EXCEPTION message.
func DecodeApplicationException(body []byte) (*ApplicationException, error) {
	d := NewDecoder(body)
	ex := &ApplicationException{}
	d.Fields(func(id int16, typ byte) bool {
		switch {
		case id == 1 && typ == TString:
			ex.Message = string(d.Bytes())
		case id == 2 && typ == TI32:
			ex.Code = d.I32()
		default:
			return false
		}
		return true
	})
	if err := d.Err(); err != nil {
		return nil, err
	}
	return ex, nil
}

// ResultField reports which field a reply's result struct sets: 0 for
// success, a positive id for a declared exception, and -1 for a void
// success (an empty struct).
func ResultField(body []byte) (int16, error) {
	d := NewDecoder(body)
	typ, id := d.FieldBegin()
	if err := d.Err(); err != nil {
		return 0, err
	}
	if typ == TStop {
		return -1, nil
	}
	return id, nil
}
