package trace

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"time"
)

// Version is the format version this package writes. Readers take this
// version only: a newer file says so rather than being misread.
const Version = 1

const magic = "HMSTRACE"

// headerSize is the bytes of a file header.
const headerSize = len(magic) + 2 + 2 + 8

// recordHead is the length and checksum before each record's payload.
const recordHead = 8

// kindCall is the payload kind of a call record.
const kindCall = 1

// Header flags: how the recording was redacted.
const (
	// FlagRedactNames: every string of the args (and the identity) is a
	// keyed hash of the original.
	FlagRedactNames uint16 = 1 << 0
	// FlagNoBodies: no args were kept, only their sizes.
	FlagNoBodies uint16 = 1 << 1
	// FlagAudit: the calls were made from a metastore audit log.
	FlagAudit uint16 = 1 << 2
)

// Header starts every trace file.
type Header struct {
	Version uint16
	Flags   uint16
	// Start is the time record times are counted from.
	Start time.Time
}

func appendHeader(dst []byte, h Header) []byte {
	dst = append(dst, magic...)
	dst = binary.BigEndian.AppendUint16(dst, h.Version)
	dst = binary.BigEndian.AppendUint16(dst, h.Flags)
	return binary.BigEndian.AppendUint64(dst, uint64(h.Start.UnixNano()))
}

// IdentityKind says where a call's identity came from.
type IdentityKind uint8

const (
	// NoIdentity: the client neither authenticated nor called set_ugi.
	NoIdentity IdentityKind = iota
	// Claimed: a set_ugi user name, which the client chose.
	Claimed
	// Authenticated: a principal the listener authenticated (Kerberos).
	Authenticated
)

// Outcome is how a call was answered.
type Outcome uint8

const (
	// OK: a REPLY whose result is a success.
	OK Outcome = iota
	// Declared: a REPLY carrying one of the method's declared
	// exceptions (Call.ExField says which).
	Declared
	// AppError: a TApplicationException.
	AppError
	// NoReply: a oneway call, or a call whose client never got a reply
	// (its connection failed or was closed).
	NoReply
	// Unknown: a reply that could not be classified.
	Unknown
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "exception", "app_error", "no_reply", "unknown"}

func (o Outcome) String() string {
	if o >= numOutcomes {
		return "unknown"
	}
	return outcomeNames[o]
}

// Call flags.
const (
	callOneway      = 1 << 0
	callArgsDropped = 1 << 1 // Args were not kept (redaction, size, a full buffer)
	callApprox      = 1 << 2 // Args were made up from an audit line, not sent
)

// Call is one client call. A recorder copies what it keeps; the caller
// may reuse the struct and its slices once Record returns.
type Call struct {
	// Time is when the request had been read.
	Time time.Time
	// Took is how long the call took, request read to reply written.
	Took time.Duration
	// Conn numbers the client connection within the recording process:
	// the calls of one Conn were made in order on one connection.
	Conn uint64
	// User is the identity the call was made as, of kind UserKind.
	User     string
	UserKind IdentityKind
	// Method is the method name as the client sent it.
	Method string
	Oneway bool
	// Args is the request's args struct as sent; nil when ArgsDropped.
	Args []byte
	// ArgsSize is the size of the args sent, kept when Args is not.
	ArgsSize int
	// ArgsDropped: the args were not kept (see Args).
	ArgsDropped bool
	// Approximated: Args were filled in, not recorded (an audit line
	// names the table but not, say, the partitions).
	Approximated bool
	// ReplySize is the bytes of the reply message (0 for NoReply).
	ReplySize int64
	Outcome   Outcome
	// ExField is the result field of a Declared exception.
	ExField int16
	// Served is how the recording proxy answered: hit, miss,
	// passthrough, ... ("" from an audit log).
	Served string
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendCall appends c as a record: length, checksum, payload. start is
// the file's Header.Start.
func appendCall(dst []byte, c *Call, start time.Time) []byte {
	at := len(dst)
	dst = append(dst, make([]byte, recordHead)...)
	dst = append(dst, kindCall)
	dst = binary.AppendVarint(dst, c.Time.Sub(start).Nanoseconds())
	dst = binary.AppendUvarint(dst, uint64(max(c.Took, 0)))
	dst = binary.AppendUvarint(dst, c.Conn)
	dst = append(dst, byte(c.UserKind))
	dst = appendBytes(dst, c.User)
	dst = appendBytes(dst, c.Method)
	var fl byte
	if c.Oneway {
		fl |= callOneway
	}
	args := c.Args
	if c.ArgsDropped {
		fl |= callArgsDropped
		args = nil
	}
	if c.Approximated {
		fl |= callApprox
	}
	dst = append(dst, fl)
	dst = binary.AppendUvarint(dst, uint64(max(c.ArgsSize, len(args))))
	dst = binary.AppendUvarint(dst, uint64(len(args)))
	dst = append(dst, args...)
	dst = binary.AppendUvarint(dst, uint64(max(c.ReplySize, 0)))
	dst = append(dst, byte(c.Outcome))
	dst = binary.AppendVarint(dst, int64(c.ExField))
	dst = appendBytes(dst, c.Served)
	payload := dst[at+recordHead:]
	binary.BigEndian.PutUint32(dst[at:], uint32(len(payload)))
	binary.BigEndian.PutUint32(dst[at+4:], crc32.Checksum(payload, castagnoli))
	return dst
}

func appendBytes[T string | []byte](dst []byte, s T) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// Errors of a reader.
var (
	// ErrNotTrace: the file does not start with a trace header.
	ErrNotTrace = errors.New("trace: not a trace file")
	// ErrVersion: a trace of a version this reader does not know.
	ErrVersion = errors.New("trace: unsupported trace version")
	// ErrTruncated: the file ends inside a record (a recorder stopped
	// mid-write); the records before it are whole.
	ErrTruncated = errors.New("trace: file ends inside a record")
	// ErrCorrupt: a record's checksum or contents are wrong.
	ErrCorrupt = errors.New("trace: corrupt record")
	// ErrTooLarge: a record longer than the reader's bound.
	ErrTooLarge = errors.New("trace: record larger than the bound")
)

// decodeCall reads a payload into c; c's slices point into payload.
func decodeCall(payload []byte, start time.Time, c *Call) error {
	d := decoder{b: payload}
	if d.byte() != kindCall {
		return errors.Join(ErrCorrupt, errors.New("trace: unknown record kind"))
	}
	*c = Call{}
	c.Time = start.Add(time.Duration(d.varint()))
	c.Took = time.Duration(min(d.uvarint(), 1<<62))
	c.Conn = d.uvarint()
	c.UserKind = IdentityKind(d.byte())
	c.User = string(d.bytes())
	c.Method = string(d.bytes())
	fl := d.byte()
	c.Oneway = fl&callOneway != 0
	c.ArgsDropped = fl&callArgsDropped != 0
	c.Approximated = fl&callApprox != 0
	c.ArgsSize = int(min(d.uvarint(), 1<<40))
	c.Args = d.bytes()
	if c.ArgsDropped {
		c.Args = nil
	}
	c.ReplySize = int64(min(d.uvarint(), 1<<62))
	c.Outcome = Outcome(d.byte())
	c.ExField = int16(d.varint())
	c.Served = string(d.bytes())
	switch {
	case d.bad:
		return errors.Join(ErrCorrupt, errors.New("trace: record ends early"))
	case len(d.b) != 0:
		return errors.Join(ErrCorrupt, errors.New("trace: bytes after the record"))
	case c.UserKind > Authenticated || c.Outcome >= numOutcomes:
		return errors.Join(ErrCorrupt, errors.New("trace: unknown identity kind or outcome"))
	case c.Method == "":
		return errors.Join(ErrCorrupt, errors.New("trace: call without a method"))
	}
	return nil
}

// decoder reads a payload; past its end every read gives zero and bad.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.bad = true
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	d.skip(n)
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	d.skip(n)
	return v
}

// skip consumes the n bytes a varint took; n <= 0 is binary's report of
// a short or overflowing varint (its value then is 0), which marks the
// rest undecodable.
func (d *decoder) skip(n int) {
	if n <= 0 {
		d.bad = true
		d.b = nil
		return
	}
	d.b = d.b[n:]
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.bad = true
		d.b = nil
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}
