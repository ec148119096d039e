package demohms

import (
	"maps"
	"slices"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// tval is one decoded Thrift value. Requests are decoded into a tree of
// these first, then the handlers pick fields by id; a field whose wire type
// is not the expected one reads as absent, as generated Java skips it.
type tval struct {
	t      byte
	i      int64   // bool, byte, i16, i32, i64
	f      float64 // double
	s      string  // string / binary
	fields map[int16]*tval
	elems  []*tval // list/set elements; map entries as key, value, key, value...
	kt, vt byte    // element types (vt for maps only)
}

// decodeStruct decodes a struct body (fields up to STOP).
func decodeStruct(b []byte) (*tval, error) {
	d := wire.NewDecoder(b)
	v := readValue(d, wire.TStruct)
	return v, d.Err()
}

// readValue reads one value of type t. Depth is already bounded by the
// wire.Reader, which walked the whole message before we see it.
func readValue(d *wire.Decoder, t byte) *tval {
	v := &tval{t: t}
	switch t {
	case wire.TBool:
		if d.Bool() {
			v.i = 1
		}
	case wire.TByte:
		v.i = int64(d.Byte())
	case wire.TI16:
		v.i = int64(d.I16())
	case wire.TI32:
		v.i = int64(d.I32())
	case wire.TI64:
		v.i = d.I64()
	case wire.TDouble:
		v.f = d.Double()
	case wire.TString:
		v.s = d.String()
	case wire.TStruct:
		v.fields = map[int16]*tval{}
		for d.Err() == nil {
			ft, id := d.FieldBegin()
			if ft == wire.TStop {
				break
			}
			v.fields[id] = readValue(d, ft)
		}
	case wire.TList, wire.TSet:
		et, n := d.ListBegin()
		v.kt = et
		for i := 0; i < n && d.Err() == nil; i++ {
			v.elems = append(v.elems, readValue(d, et))
		}
	case wire.TMap:
		kt, vt, n := d.MapBegin()
		v.kt, v.vt = kt, vt
		for i := 0; i < n && d.Err() == nil; i++ {
			v.elems = append(v.elems, readValue(d, kt), readValue(d, vt))
		}
	default:
		d.Skip(t)
	}
	return v
}

// field returns field id of struct v if it has wire type t.
func (v *tval) field(id int16, t byte) *tval {
	if v == nil || v.fields == nil {
		return nil
	}
	f := v.fields[id]
	if f == nil || f.t != t {
		return nil
	}
	return f
}

func (v *tval) has(id int16) bool { return v != nil && v.fields != nil && v.fields[id] != nil }

func (v *tval) str(id int16) string {
	if f := v.field(id, wire.TString); f != nil {
		return f.s
	}
	return ""
}

func (v *tval) strOK(id int16) (string, bool) {
	if f := v.field(id, wire.TString); f != nil {
		return f.s, true
	}
	return "", false
}

// integer reads any integer-typed field, def when absent.
func (v *tval) integer(id int16, def int64) int64 {
	if v == nil || v.fields == nil {
		return def
	}
	f := v.fields[id]
	if f == nil {
		return def
	}
	switch f.t {
	case wire.TByte, wire.TI16, wire.TI32, wire.TI64:
		return f.i
	}
	return def
}

func (v *tval) boolean(id int16, def bool) bool {
	if f := v.field(id, wire.TBool); f != nil {
		return f.i != 0
	}
	return def
}

func (v *tval) boolPtr(id int16) *bool {
	if f := v.field(id, wire.TBool); f != nil {
		b := f.i != 0
		return &b
	}
	return nil
}

func (v *tval) i32Ptr(id int16) *int32 {
	if f := v.field(id, wire.TI32); f != nil {
		i := int32(f.i)
		return &i
	}
	return nil
}

func (v *tval) sub(id int16) *tval { return v.field(id, wire.TStruct) }

func (v *tval) list(id int16) []*tval {
	f := v.field(id, wire.TList)
	if f == nil {
		f = v.field(id, wire.TSet)
	}
	if f == nil {
		return nil
	}
	return f.elems
}

// strList returns a list<string> field; nil when absent.
func (v *tval) strList(id int16) []string {
	f := v.field(id, wire.TList)
	if f == nil {
		f = v.field(id, wire.TSet)
	}
	if f == nil {
		return nil
	}
	out := make([]string, 0, len(f.elems))
	for _, e := range f.elems {
		if e.t == wire.TString {
			out = append(out, e.s)
		}
	}
	return out
}

// strMap returns a map<string,string> field; nil when absent.
func (v *tval) strMap(id int16) map[string]string {
	f := v.field(id, wire.TMap)
	if f == nil {
		return nil
	}
	out := make(map[string]string, len(f.elems)/2)
	for i := 0; i+1 < len(f.elems); i += 2 {
		if f.elems[i].t == wire.TString && f.elems[i+1].t == wire.TString {
			out[f.elems[i].s] = f.elems[i+1].s
		}
	}
	return out
}

// encodeValue re-encodes a decoded value (used for opaque sub-structs kept
// as received, e.g. SkewedInfo). Struct fields are written in id order so
// the bytes are stable.
func encodeValue(e *wire.Encoder, v *tval) {
	switch v.t {
	case wire.TBool:
		e.Bool(v.i != 0)
	case wire.TByte:
		e.Byte(int8(v.i))
	case wire.TI16:
		e.I16(int16(v.i))
	case wire.TI32:
		e.I32(int32(v.i))
	case wire.TI64:
		e.I64(v.i)
	case wire.TDouble:
		e.Double(v.f)
	case wire.TString:
		e.String(v.s)
	case wire.TStruct:
		for _, id := range sortedIDs(v.fields) {
			f := v.fields[id]
			e.FieldBegin(f.t, id)
			encodeValue(e, f)
		}
		e.Stop()
	case wire.TList, wire.TSet:
		e.ListBegin(v.kt, len(v.elems))
		for _, x := range v.elems {
			encodeValue(e, x)
		}
	case wire.TMap:
		e.MapBegin(v.kt, v.vt, len(v.elems)/2)
		for _, x := range v.elems {
			encodeValue(e, x)
		}
	}
}

func sortedIDs(m map[int16]*tval) []int16 { return slices.Sorted(maps.Keys(m)) }
