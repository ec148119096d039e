package e2e

import (
	"bytes"
	"sort"
	"strconv"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/wire"
)

// Encoders for the HMS structs the end-to-end corpus sends. Field ids are
// those of shared/hms-protocol.md §3.11 and §4.11.

type fields = func(e *wire.Encoder)

func str(id int16, v string) fields { return func(e *wire.Encoder) { e.StringField(id, v) } }
func i16f(id int16, v int16) fields {
	return func(e *wire.Encoder) { e.FieldBegin(wire.TI16, id); e.I16(v) }
}
func i32f(id int16, v int32) fields { return func(e *wire.Encoder) { e.I32Field(id, v) } }
func i64f(id int16, v int64) fields { return func(e *wire.Encoder) { e.I64Field(id, v) } }
func boolf(id int16, v bool) fields { return func(e *wire.Encoder) { e.BoolField(id, v) } }
func strs(id int16, v ...string) fields {
	return func(e *wire.Encoder) { e.StringListField(id, append([]string{}, v...)) }
}

// strMap is a map<string,string> field with keys in the order given.
func strMap(id int16, kv ...string) fields {
	return func(e *wire.Encoder) {
		e.FieldBegin(wire.TMap, id)
		e.MapBegin(wire.TString, wire.TString, len(kv)/2)
		for _, s := range kv {
			e.String(s)
		}
	}
}

// structf is a struct field made of fields.
func structf(id int16, fs ...fields) fields {
	return func(e *wire.Encoder) {
		e.FieldBegin(wire.TStruct, id)
		for _, f := range fs {
			f(e)
		}
		e.Stop()
	}
}

// structList is a list<struct> field, one element per entry.
func structList(id int16, elems ...[]fields) fields {
	return func(e *wire.Encoder) {
		e.FieldBegin(wire.TList, id)
		e.ListBegin(wire.TStruct, len(elems))
		for _, fs := range elems {
			for _, f := range fs {
				f(e)
			}
			e.Stop()
		}
	}
}

// build encodes an args struct.
func build(fs ...fields) []byte {
	var e wire.Encoder
	for _, f := range fs {
		f(&e)
	}
	e.Stop()
	return e.B
}

// req1 wraps fields in a request struct at arg 1 (the _req methods).
func req1(fs ...fields) []byte { return build(structf(1, fs...)) }

func cols(id int16, nameType ...string) fields {
	var elems [][]fields
	for i := 0; i+1 < len(nameType); i += 2 {
		elems = append(elems, []fields{str(1, nameType[i]), str(2, nameType[i+1]), str(3, "")})
	}
	return structList(id, elems...)
}

// sdf is a StorageDescriptor with a text SerDe, as the Java client sends.
func sdf(id int16, location string) fields {
	return structf(id,
		cols(1, "id", "bigint", "name", "string"),
		str(2, location),
		str(3, "org.apache.hadoop.mapred.TextInputFormat"),
		str(4, "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"),
		boolf(5, false),
		i32f(6, -1),
		structf(7, str(1, ""), str(2, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"), strMap(3, "serialization.format", "1")),
		strs(8),
		structList(9),
		strMap(10),
	)
}

const fixedTime = 1700000000

// tableFields is a Table; partitioned tables have one key, ds.
func tableFields(db, name, location string, partitioned bool, params ...string) []fields {
	keys := cols(8)
	if partitioned {
		keys = cols(8, "ds", "string")
	}
	return []fields{
		str(1, name), str(2, db), str(3, "e2e"), i32f(4, fixedTime), i32f(5, 0), i32f(6, 0),
		sdf(7, location), keys,
		strMap(9, append([]string{"transient_lastDdlTime", strconv.Itoa(fixedTime)}, params...)...),
		str(12, "MANAGED_TABLE"),
	}
}

// partitionFields is a Partition of a table partitioned by ds.
func partitionFields(db, table, tableLoc, ds string, params ...string) []fields {
	return []fields{
		strs(1, ds), str(2, db), str(3, table), i32f(4, fixedTime), i32f(5, 0),
		sdf(6, tableLoc+"/ds="+ds),
		strMap(7, append([]string{"transient_lastDdlTime", strconv.Itoa(fixedTime)}, params...)...),
	}
}

// longStats is a ColumnStatistics of one bigint column "id".
func longStats(db, table, partName string, low, high int64) []fields {
	desc := []fields{boolf(1, partName == ""), str(2, db), str(3, table)}
	if partName != "" {
		desc = append(desc, str(4, partName))
	}
	desc = append(desc, i64f(5, fixedTime))
	obj := []fields{str(1, "id"), str(2, "bigint"),
		structf(3, structf(2, i64f(1, low), i64f(2, high), i64f(3, 0), i64f(4, high-low+1)))}
	return []fields{structf(1, desc...), structList(2, obj)}
}

// functionFields is a Function of class org.example.Upper.
func functionFields(db, name string) []fields {
	return []fields{str(1, name), str(2, db), str(3, "org.example.Upper"), str(4, "e2e"),
		i32f(5, 1), i32f(6, fixedTime), i32f(7, 1), structList(8)}
}

// mask re-encodes a reply body with the values that legitimately differ
// between two runs of the same sequence zeroed: i32/i64 values and
// decimal strings within a week of now (createTime, lastAccessTime,
// transient_lastDdlTime, eventTime, in seconds or milliseconds) and
// Table.id (i64 field 25, 4.0).
func mask(body []byte) []byte { return maskSorted(body, false) }

// maskSorted is mask, with the elements of every list of strings sorted
// when sorted is set.
func maskSorted(body []byte, sorted bool) []byte {
	now := time.Now().Unix()
	lo, hi := now-7*86400, now+86400
	recent := func(v int64) bool {
		return (v >= lo && v <= hi) || (v >= lo*1000 && v <= hi*1000)
	}
	d := wire.NewDecoder(body)
	var e wire.Encoder
	var val func(typ byte, id int16)
	strct := func() {
		for {
			typ, id := d.FieldBegin()
			if typ == wire.TStop || d.Err() != nil {
				e.Stop()
				return
			}
			e.FieldBegin(typ, id)
			val(typ, id)
		}
	}
	val = func(typ byte, id int16) {
		switch typ {
		case wire.TBool:
			e.Bool(d.Bool())
		case wire.TByte:
			e.Byte(d.Byte())
		case wire.TI16:
			e.I16(d.I16())
		case wire.TI32:
			v := d.I32()
			if recent(int64(v)) {
				v = 0
			}
			e.I32(v)
		case wire.TI64:
			v := d.I64()
			if recent(v) || id == 25 {
				v = 0
			}
			e.I64(v)
		case wire.TDouble:
			e.Double(d.Double())
		case wire.TString:
			b := d.Bytes()
			if n, err := strconv.ParseInt(string(b), 10, 64); err == nil && recent(n) {
				b = []byte("0")
			}
			e.Bytes(b)
		case wire.TStruct:
			strct()
		case wire.TList, wire.TSet:
			et, n := d.ListBegin()
			e.ListBegin(et, n)
			if sorted && et == wire.TString {
				var elems []string
				for i := 0; i < n && d.Err() == nil; i++ {
					elems = append(elems, d.String())
				}
				sort.Strings(elems)
				for _, s := range elems {
					e.String(s)
				}
				return
			}
			for i := 0; i < n && d.Err() == nil; i++ {
				val(et, 0)
			}
		case wire.TMap:
			kt, vt, n := d.MapBegin()
			e.MapBegin(kt, vt, n)
			for i := 0; i < n && d.Err() == nil; i++ {
				val(kt, 0)
				val(vt, 0)
			}
		default:
			d.Skip(typ)
		}
	}
	strct()
	if d.Err() != nil {
		return append([]byte("unparsable:"), body...)
	}
	return e.B
}

// bodyOf parses a whole reply message.
func bodyOf(reply []byte) (typ byte, name string, body []byte) {
	m, err := wire.Parse(reply, wire.Limits{MaxMessage: 1 << 30})
	if err != nil {
		return 0, "", reply
	}
	return m.Type, string(m.Name()), m.Body()
}

// sameMirrored compares a reply of the proxy run with the reply of the
// direct run for the same step: the direct run's database name replaced by
// the proxy run's (same length, so Thrift lengths hold) and run-specific
// values masked.
func sameMirrored(direct, proxied []byte, from, to string, unordered bool) bool {
	dt, dn, db := bodyOf(direct)
	pt, pn, pb := bodyOf(proxied)
	mapped := bytes.ReplaceAll(db, []byte(from), []byte(to))
	if dt == wire.Exception || pt == wire.Exception {
		return dt == pt && dn == pn && bytes.Equal(mapped, pb)
	}
	return dt == pt && dn == pn && bytes.Equal(maskSorted(mapped, unordered), maskSorted(pb, unordered))
}
