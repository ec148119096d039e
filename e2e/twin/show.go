package twin

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// describe shows a reply body briefly: an exception's message, or the
// result as nested fields, cut at a few hundred characters.
func describe(typ byte, body []byte) string {
	if typ == wire.Exception {
		if ex, err := wire.DecodeApplicationException(body); err == nil {
			return fmt.Sprintf("TApplicationException(%d %q)", ex.Code, ex.Message)
		}
	}
	var b strings.Builder
	d := wire.NewDecoder(body)
	showStruct(&b, d, 0)
	s := b.String()
	if d.Err() != nil {
		s += " <malformed: " + d.Err().Error() + ">"
	}
	const max = 600
	if len(s) > max {
		s = s[:max] + fmt.Sprintf("… (%d bytes)", len(body))
	}
	return s
}

func showStruct(b *strings.Builder, d *wire.Decoder, depth int) {
	b.WriteByte('{')
	first := true
	for {
		typ, id := d.FieldBegin()
		if d.Err() != nil || typ == wire.TStop {
			break
		}
		if !first {
			b.WriteByte(' ')
		}
		first = false
		fmt.Fprintf(b, "%d:", id)
		showValue(b, d, typ, depth+1)
		if b.Len() > 2000 {
			return
		}
	}
	b.WriteByte('}')
}

func showValue(b *strings.Builder, d *wire.Decoder, typ byte, depth int) {
	if depth > 12 {
		d.Skip(typ)
		b.WriteString("…")
		return
	}
	switch typ {
	case wire.TBool:
		b.WriteString(strconv.FormatBool(d.Bool()))
	case wire.TByte:
		b.WriteString(strconv.Itoa(int(d.Byte())))
	case wire.TI16:
		b.WriteString(strconv.Itoa(int(d.I16())))
	case wire.TI32:
		b.WriteString(strconv.Itoa(int(d.I32())))
	case wire.TI64:
		b.WriteString(strconv.FormatInt(d.I64(), 10))
	case wire.TDouble:
		b.WriteString(strconv.FormatFloat(d.Double(), 'g', -1, 64))
	case wire.TString:
		b.WriteString(strconv.Quote(d.String()))
	case wire.TStruct:
		showStruct(b, d, depth)
	case wire.TList, wire.TSet:
		et, n := d.ListBegin()
		b.WriteByte('[')
		for i := 0; i < n && d.Err() == nil; i++ {
			if i > 0 {
				b.WriteByte(' ')
			}
			showValue(b, d, et, depth+1)
		}
		b.WriteByte(']')
	case wire.TMap:
		kt, vt, n := d.MapBegin()
		b.WriteString("map[")
		for i := 0; i < n && d.Err() == nil; i++ {
			if i > 0 {
				b.WriteByte(' ')
			}
			showValue(b, d, kt, depth+1)
			b.WriteByte(':')
			showValue(b, d, vt, depth+1)
		}
		b.WriteByte(']')
	default:
		d.Skip(typ)
		b.WriteString("?")
	}
}
