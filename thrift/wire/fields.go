package wire

// A Field is one field of a struct that Decoder.Struct reads: its id,
// its wire type and where its value goes. A field of another type under
// the same id is skipped, as an unknown one is.
type Field struct {
	id   int16
	typ  byte
	str  *string
	i32  *int32
	i64  *int64
	each func(d *Decoder)
}

// StringAt reads string field id into p.
func StringAt(id int16, p *string) Field { return Field{id: id, typ: TString, str: p} }

// I32At reads i32 field id into p.
func I32At(id int16, p *int32) Field { return Field{id: id, typ: TI32, i32: p} }

// I64At reads i64 field id into p.
func I64At(id int16, p *int64) Field { return Field{id: id, typ: TI64, i64: p} }

// ListAt reads list field id, calling each once per element to read it.
func ListAt(id int16, each func(d *Decoder)) Field { return Field{id: id, typ: TList, each: each} }

// Struct reads the struct at d's position through its STOP: each field
// that one of fields names is read as it says, the others are skipped.
// It stops at the first error, which stays in d. It serves code that
// reads a few fields of a metastore struct off the request path; the
// hit path walks bytes instead.
func (d *Decoder) Struct(fields ...Field) {
	d.Fields(func(id int16, typ byte) bool {
		for i := range fields {
			f := &fields[i]
			if f.id != id || f.typ != typ {
				continue
			}
			switch {
			case f.str != nil:
				*f.str = d.String()
			case f.i32 != nil:
				*f.i32 = d.I32()
			case f.i64 != nil:
				*f.i64 = d.I64()
			default:
				_, n := d.ListBegin()
				for j := 0; j < n && d.Err() == nil; j++ {
					f.each(d)
				}
			}
			return true
		}
		return false
	})
}
