package feed

import (
	"encoding/json"
	"strconv"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// tstruct is a decoded Thrift struct: field id to value. Values are
// string, int64, bool, float64, tstruct, []any and map[string]any (maps
// with other keys are left out). One shape for the two encodings the
// feed reads: the binary protocol of a client's request and the Thrift
// JSON protocol of a notification-log message.
type tstruct map[int16]any

// maxDepth bounds nesting: the metastore's structs are a few levels deep,
// and a request is bytes from a client.
const maxDepth = 16

// field is field id when it holds a T; the zero T when it is absent or of
// another type (a message from a client or a metastore of another
// version may carry anything).
func field[T any](s tstruct, id int16) T {
	v, _ := s[id].(T)
	return v
}

// elems is the elements of list field id that are T; others are left out.
func elems[T any](s tstruct, id int16) []T {
	var out []T
	for _, v := range field[[]any](s, id) {
		if e, ok := v.(T); ok {
			out = append(out, e)
		}
	}
	return out
}

func (s tstruct) str(id int16) string     { return field[string](s, id) }
func (s tstruct) i64(id int16) int64      { return field[int64](s, id) }
func (s tstruct) rec(id int16) tstruct    { return field[tstruct](s, id) }
func (s tstruct) list(id int16) []any     { return field[[]any](s, id) }
func (s tstruct) strs(id int16) []string  { return elems[string](s, id) }
func (s tstruct) recs(id int16) []tstruct { return elems[tstruct](s, id) }

func (s tstruct) strMap(id int16) map[string]string {
	m, _ := s[id].(map[string]any)
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if str, ok := v.(string); ok {
			out[k] = str
		}
	}
	return out
}

// readArgs decodes the arguments struct of a request (binary protocol).
func readArgs(args []byte) (tstruct, error) {
	d := wire.NewDecoder(args)
	s := readStruct(d, 0)
	return s, d.Err()
}

func readStruct(d *wire.Decoder, depth int) tstruct {
	s := tstruct{}
	d.Fields(func(id int16, typ byte) bool {
		if depth >= maxDepth {
			return false
		}
		v, ok := readValue(d, typ, depth+1)
		if ok {
			s[id] = v
		}
		return true
	})
	return s
}

func readValue(d *wire.Decoder, typ byte, depth int) (any, bool) {
	switch typ {
	case wire.TBool:
		return d.Bool(), true
	case wire.TByte:
		return int64(d.Byte()), true
	case wire.TI16:
		return int64(d.I16()), true
	case wire.TI32:
		return int64(d.I32()), true
	case wire.TI64:
		return d.I64(), true
	case wire.TDouble:
		return d.Double(), true
	case wire.TString:
		return d.String(), true
	case wire.TStruct:
		if depth >= maxDepth {
			d.Skip(typ)
			return nil, false
		}
		return readStruct(d, depth), true
	case wire.TList, wire.TSet:
		elem, n := d.ListBegin()
		out := make([]any, 0, min(n, 1024))
		for i := 0; i < n && d.Err() == nil; i++ {
			if v, ok := readValue(d, elem, depth+1); ok {
				out = append(out, v)
			}
		}
		return out, true
	case wire.TMap:
		kt, vt, n := d.MapBegin()
		out := make(map[string]any, min(n, 1024))
		for i := 0; i < n && d.Err() == nil; i++ {
			k, _ := readValue(d, kt, depth+1)
			v, ok := readValue(d, vt, depth+1)
			if ks, isStr := k.(string); isStr && ok {
				out[ks] = v
			}
		}
		return out, true
	}
	d.Skip(typ)
	return nil, false
}

// readJSON decodes a struct in the Thrift JSON protocol, as the
// notification log's messages carry objects ({"1":{"str":"t"},...}).
func readJSON(s string) tstruct {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &m) != nil {
		return nil
	}
	return jsonStruct(m, 0)
}

func jsonStruct(m map[string]json.RawMessage, depth int) tstruct {
	s := tstruct{}
	for k, raw := range m {
		id, err := strconv.ParseInt(k, 10, 16)
		if err != nil {
			continue
		}
		var typed map[string]json.RawMessage
		if json.Unmarshal(raw, &typed) != nil || len(typed) != 1 {
			continue
		}
		for t, v := range typed {
			if val, ok := jsonValue(t, v, depth+1); ok {
				s[int16(id)] = val
			}
		}
	}
	return s
}

func jsonValue(typ string, raw json.RawMessage, depth int) (any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	switch typ {
	case "str":
		var v string
		return v, json.Unmarshal(raw, &v) == nil
	case "i8", "i16", "i32", "i64":
		var v int64
		return v, json.Unmarshal(raw, &v) == nil
	case "tf":
		var v int64
		return v != 0, json.Unmarshal(raw, &v) == nil
	case "dbl":
		var v float64
		return v, json.Unmarshal(raw, &v) == nil
	case "rec":
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return nil, false
		}
		return jsonStruct(m, depth), true
	case "lst", "set":
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) != nil || len(arr) < 2 {
			return nil, false
		}
		var et string
		json.Unmarshal(arr[0], &et)
		out := []any{}
		for _, e := range arr[2:] {
			if v, ok := jsonValue(et, e, depth+1); ok {
				out = append(out, v)
			}
		}
		return out, true
	case "map":
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) != nil || len(arr) < 4 {
			return nil, false
		}
		var kt, vt string
		json.Unmarshal(arr[0], &kt)
		json.Unmarshal(arr[1], &vt)
		var m map[string]json.RawMessage
		if kt != "str" || json.Unmarshal(arr[3], &m) != nil {
			return nil, false
		}
		out := make(map[string]any, len(m))
		for k, e := range m {
			if v, ok := jsonValue(vt, e, depth+1); ok {
				out[k] = v
			}
		}
		return out, true
	}
	return nil, false
}
