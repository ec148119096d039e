package e2e

import (
	"bytes"
	"sort"
	"strconv"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Builders for the HMS structs the end-to-end corpus sends, on
// thrift/hmsreq. Field ids are those of shared/hms-protocol.md §3.11 and
// §4.11.

// kv is a map of alternating keys and values.
func kv(pairs ...string) map[string]string {
	m := make(map[string]string, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return m
}

const fixedTime = 1700000000

// textSD is a text StorageDescriptor with columns id and name.
func textSD(location string) hmsreq.StorageDescriptor {
	return hmsreq.TextSD(location, hmsreq.Column{Name: "id", Type: "bigint"}, hmsreq.Column{Name: "name", Type: "string"})
}

// corpusTable is a Table; partitioned tables have one key, ds.
func corpusTable(db, name, location string, partitioned bool, params ...string) hmsreq.Table {
	t := hmsreq.Table{
		DB:         db,
		Name:       name,
		Owner:      "e2e",
		CreateTime: fixedTime,
		SD:         textSD(location),
		Params:     kv(append([]string{"transient_lastDdlTime", strconv.Itoa(fixedTime)}, params...)...),
	}
	if partitioned {
		t.PartKeys = []hmsreq.Column{{Name: "ds", Type: "string"}}
	}
	return t
}

// corpusPartition is a Partition of a table partitioned by ds.
func corpusPartition(db, table, tableLoc, ds string, params ...string) hmsreq.Partition {
	return hmsreq.Partition{
		DB:         db,
		Table:      table,
		Values:     []string{ds},
		CreateTime: fixedTime,
		SD:         textSD(tableLoc + "/ds=" + ds),
		Params:     kv(append([]string{"transient_lastDdlTime", strconv.Itoa(fixedTime)}, params...)...),
	}
}

// longStats is a ColumnStatistics of one bigint column "id".
func longStats(db, table, partName string, low, high int64) []hmsreq.Field {
	desc := []hmsreq.Field{hmsreq.Bool(1, partName == ""), hmsreq.Str(2, db), hmsreq.Str(3, table)}
	if partName != "" {
		desc = append(desc, hmsreq.Str(4, partName))
	}
	desc = append(desc, hmsreq.I64(5, fixedTime))
	obj := []hmsreq.Field{hmsreq.Str(1, "id"), hmsreq.Str(2, "bigint"),
		hmsreq.Struct(3, hmsreq.Struct(2, hmsreq.I64(1, low), hmsreq.I64(2, high), hmsreq.I64(3, 0), hmsreq.I64(4, high-low+1)))}
	return []hmsreq.Field{hmsreq.Struct(1, desc...), hmsreq.StructList(2, obj)}
}

// functionFields is a Function of class org.example.Upper.
func functionFields(db, name string) []hmsreq.Field {
	return []hmsreq.Field{hmsreq.Str(1, name), hmsreq.Str(2, db), hmsreq.Str(3, "org.example.Upper"), hmsreq.Str(4, "e2e"),
		hmsreq.I32(5, 1), hmsreq.I32(6, fixedTime), hmsreq.I32(7, 1), hmsreq.StructList(8)}
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
