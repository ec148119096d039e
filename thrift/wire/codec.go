package wire

import (
	"encoding/binary"
	"math"
)

// Decoder reads values from a complete byte slice. The first error sticks:
// later reads return zero values, and Err reports it.
type Decoder struct {
	s   scanner
	err error
}

// NewDecoder returns a Decoder over b with default limits.
func NewDecoder(b []byte) *Decoder {
	d := new(Decoder)
	d.Reset(b)
	return d
}

// Reset makes d a fresh Decoder over b with default limits: a Decoder
// held by value, which the request hit path keeps off the heap.
func (d *Decoder) Reset(b []byte) {
	*d = Decoder{s: scanner{buf: b, lim: Limits{}.WithDefaults()}}
}

// ResetLimits makes d a fresh Decoder over b with limits lim (zero
// fields: their defaults), for callers that decode what a reader took
// under configured limits.
func (d *Decoder) ResetLimits(b []byte, lim Limits) {
	*d = Decoder{s: scanner{buf: b, lim: lim.WithDefaults()}}
}

// Err is the first error met.
func (d *Decoder) Err() error { return d.err }

// Pos is the offset of the next unread byte.
func (d *Decoder) Pos() int { return d.s.pos }

func (d *Decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if err := d.s.need(n); err != nil {
		d.err = err
		return nil
	}
	b := d.s.buf[d.s.pos : d.s.pos+n]
	d.s.pos += n
	return b
}

// FieldBegin reads a field header; typ is TStop at the end of a struct.
func (d *Decoder) FieldBegin() (typ byte, id int16) {
	b := d.take(1)
	if b == nil || b[0] == TStop {
		return TStop, 0
	}
	typ = b[0]
	if ib := d.take(2); ib != nil {
		id = int16(binary.BigEndian.Uint16(ib))
	}
	return typ, id
}

// Bool reads a bool.
func (d *Decoder) Bool() bool { b := d.take(1); return b != nil && b[0] != 0 }

// Byte reads an i8.
func (d *Decoder) Byte() int8 {
	if b := d.take(1); b != nil {
		return int8(b[0])
	}
	return 0
}

// I16 reads an i16.
func (d *Decoder) I16() int16 {
	if b := d.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

// I32 reads an i32.
func (d *Decoder) I32() int32 {
	if b := d.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

// I64 reads an i64.
func (d *Decoder) I64() int64 {
	if b := d.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// Double reads a double.
func (d *Decoder) Double() float64 {
	if b := d.take(8); b != nil {
		return math.Float64frombits(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (d *Decoder) length(max int, tooBig error) int {
	if d.err != nil {
		return 0
	}
	n, err := d.s.length(max, tooBig)
	if err != nil {
		d.err = err
	}
	return n
}

// Bytes reads a string or binary value, aliasing the input.
func (d *Decoder) Bytes() []byte {
	return d.take(d.length(d.s.lim.MaxString, ErrStringTooLong))
}

// String reads a string value.
func (d *Decoder) String() string { return string(d.Bytes()) }

// ListBegin reads a list or set header.
func (d *Decoder) ListBegin() (elem byte, n int) {
	b := d.take(1)
	if b == nil {
		return TStop, 0
	}
	return b[0], d.length(d.s.lim.MaxContainer, ErrContainerLarge)
}

// MapBegin reads a map header.
func (d *Decoder) MapBegin() (key, val byte, n int) {
	b := d.take(2)
	if b == nil {
		return TStop, TStop, 0
	}
	return b[0], b[1], d.length(d.s.lim.MaxContainer, ErrContainerLarge)
}

// Skip skips one value of type typ.
func (d *Decoder) Skip(typ byte) {
	if d.err != nil {
		return
	}
	if err := d.s.skip(typ); err != nil {
		d.err = err
	}
}

// Fields visits the fields of the struct at d's position, through its
// STOP: fn reads the value of a field and returns true, or returns false
// to have it skipped. It stops at the first error.
func (d *Decoder) Fields(fn func(id int16, typ byte) bool) {
	for {
		typ, id := d.FieldBegin()
		if typ == TStop || d.err != nil {
			return
		}
		if !fn(id, typ) {
			d.Skip(typ)
		}
	}
}

// Encoder appends Thrift binary values to B.
type Encoder struct {
	B []byte
}

// FieldBegin appends a field header.
func (e *Encoder) FieldBegin(typ byte, id int16) {
	e.B = append(e.B, typ, byte(uint16(id)>>8), byte(id))
}

// Stop ends a struct.
func (e *Encoder) Stop() { e.B = append(e.B, TStop) }

// Bool appends a bool.
func (e *Encoder) Bool(v bool) {
	if v {
		e.B = append(e.B, 1)
	} else {
		e.B = append(e.B, 0)
	}
}

// Byte appends an i8.
func (e *Encoder) Byte(v int8) { e.B = append(e.B, byte(v)) }

// I16 appends an i16.
func (e *Encoder) I16(v int16) { e.B = binary.BigEndian.AppendUint16(e.B, uint16(v)) }

// I32 appends an i32.
func (e *Encoder) I32(v int32) { e.B = binary.BigEndian.AppendUint32(e.B, uint32(v)) }

// I64 appends an i64.
func (e *Encoder) I64(v int64) { e.B = binary.BigEndian.AppendUint64(e.B, uint64(v)) }

// Double appends a double.
func (e *Encoder) Double(v float64) {
	e.B = binary.BigEndian.AppendUint64(e.B, math.Float64bits(v))
}

// String appends a string.
func (e *Encoder) String(s string) {
	e.I32(int32(len(s)))
	e.B = append(e.B, s...)
}

// Bytes appends a binary value.
func (e *Encoder) Bytes(b []byte) {
	e.I32(int32(len(b)))
	e.B = append(e.B, b...)
}

// ListBegin appends a list header.
func (e *Encoder) ListBegin(elem byte, n int) {
	e.B = append(e.B, elem)
	e.I32(int32(n))
}

// MapBegin appends a map header.
func (e *Encoder) MapBegin(key, val byte, n int) {
	e.B = append(e.B, key, val)
	e.I32(int32(n))
}

// StringField appends a string field.
func (e *Encoder) StringField(id int16, s string) {
	e.FieldBegin(TString, id)
	e.String(s)
}

// I32Field appends an i32 field.
func (e *Encoder) I32Field(id int16, v int32) {
	e.FieldBegin(TI32, id)
	e.I32(v)
}

// I64Field appends an i64 field.
func (e *Encoder) I64Field(id int16, v int64) {
	e.FieldBegin(TI64, id)
	e.I64(v)
}

// BoolField appends a bool field.
func (e *Encoder) BoolField(id int16, v bool) {
	e.FieldBegin(TBool, id)
	e.Bool(v)
}

// StringListField appends a list<string> field.
func (e *Encoder) StringListField(id int16, v []string) {
	e.FieldBegin(TList, id)
	e.ListBegin(TString, len(v))
	for _, s := range v {
		e.String(s)
	}
}

// StringMapField appends a map<string,string> field with keys in the
// order given by keys (callers sort them for stable bytes).
func (e *Encoder) StringMapField(id int16, keys []string, m map[string]string) {
	e.FieldBegin(TMap, id)
	e.MapBegin(TString, TString, len(keys))
	for _, k := range keys {
		e.String(k)
		e.String(m[k])
	}
}
