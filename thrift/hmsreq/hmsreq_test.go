package hmsreq

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// decode reads a struct into a map from field id to value: string, bool,
// int16/32/64, []any for lists, map[string]string for string maps and
// map[int16]any for structs.
func decode(t *testing.T, d *wire.Decoder) map[int16]any {
	t.Helper()
	out := map[int16]any{}
	for {
		typ, id := d.FieldBegin()
		if typ == wire.TStop || d.Err() != nil {
			return out
		}
		out[id] = value(t, d, typ)
	}
}

func value(t *testing.T, d *wire.Decoder, typ byte) any {
	t.Helper()
	switch typ {
	case wire.TString:
		return d.String()
	case wire.TBool:
		return d.Bool()
	case wire.TI16:
		return d.I16()
	case wire.TI32:
		return d.I32()
	case wire.TI64:
		return d.I64()
	case wire.TStruct:
		return decode(t, d)
	case wire.TList:
		elem, n := d.ListBegin()
		l := []any{}
		for i := 0; i < n; i++ {
			l = append(l, value(t, d, elem))
		}
		return l
	case wire.TMap:
		kt, vt, n := d.MapBegin()
		if kt != wire.TString || vt != wire.TString {
			t.Fatalf("map<%d,%d>; want map<string,string>", kt, vt)
		}
		m := map[string]string{}
		for i := 0; i < n; i++ {
			k := d.String()
			m[k] = d.String()
		}
		return m
	}
	t.Fatalf("unexpected type %d", typ)
	return nil
}

func decodeArgs(t *testing.T, b []byte) map[int16]any {
	t.Helper()
	d := wire.NewDecoder(b)
	got := decode(t, d)
	if d.Err() != nil {
		t.Fatalf("decode: %v", d.Err())
	}
	if d.Pos() != len(b) {
		t.Fatalf("decode: %d trailing bytes", len(b)-d.Pos())
	}
	return got
}

var textSD = map[int16]any{
	1: []any{map[int16]any{1: "id", 2: "bigint", 3: ""}},
	2: "file:/wh/t",
	3: "org.apache.hadoop.mapred.TextInputFormat",
	4: "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
	5: false,
	6: int32(-1),
	7: map[int16]any{1: "", 2: "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
		3: map[string]string{"serialization.format": "1"}},
	8:  []any{},
	9:  []any{},
	10: map[string]string{},
}

func TestEncode(t *testing.T) {
	sd := TextSD("file:/wh/t", Column{Name: "id", Type: "bigint"})
	tests := []struct {
		name string
		args []byte
		want map[int16]any
	}{
		{"empty", Args(), map[int16]any{}},
		{"scalars", Args(Str(1, "db"), Bool(2, true), I16(3, -1), I32(4, 7), I64(5, 1<<40)),
			map[int16]any{1: "db", 2: true, 3: int16(-1), 4: int32(7), 5: int64(1 << 40)}},
		{"lists", Args(Strings(1, "a", "b"), Strings(2), I64s(3, 4, 5)),
			map[int16]any{1: []any{"a", "b"}, 2: []any{}, 3: []any{int64(4), int64(5)}}},
		{"map", Args(Map(1, map[string]string{"b": "2", "a": "1"}), Map(2, nil)),
			map[int16]any{1: map[string]string{"a": "1", "b": "2"}, 2: map[string]string{}}},
		{"req", Req(Str(1, "db"), Str(4, "hive")),
			map[int16]any{1: map[int16]any{1: "db", 4: "hive"}}},
		{"nested", Args(Str(1, "db"), Nested(9, 3), Nested(10, 0)),
			map[int16]any{1: "db", 9: map[int16]any{9: map[int16]any{9: map[int16]any{}}}}},
		{"struct list", Args(StructList(1, []Field{Str(1, "x")}, nil)),
			map[int16]any{1: []any{map[int16]any{1: "x"}, map[int16]any{}}}},
		{"database", Args(Database{Name: "db", Location: "file:/wh/db.db"}.Field(1)),
			map[int16]any{1: map[int16]any{1: "db", 2: "", 3: "file:/wh/db.db", 4: map[string]string{}}}},
		{"database with owner", Args(Database{Name: "db", Description: "d", Params: map[string]string{"k": "v"}, Owner: "me"}.Field(1)),
			map[int16]any{1: map[int16]any{1: "db", 2: "d", 3: "", 4: map[string]string{"k": "v"}, 6: "me", 7: int32(1)}}},
		{"managed table", Args(Str(1, "db"), Table{DB: "db", Name: "t", Owner: "o", CreateTime: 9, SD: sd,
			PartKeys: []Column{{Name: "ds", Type: "string", Comment: "day"}}}.Field(3)),
			map[int16]any{1: "db", 3: map[int16]any{1: "t", 2: "db", 3: "o", 4: int32(9), 5: int32(0), 6: int32(0),
				7: textSD, 8: []any{map[int16]any{1: "ds", 2: "string", 3: "day"}},
				9: map[string]string{}, 12: "MANAGED_TABLE"}}},
		{"external table", Args(Table{DB: "db", Name: "t", SD: sd, Params: map[string]string{"v": "1"}, External: true}.Field(1)),
			map[int16]any{1: map[int16]any{1: "t", 2: "db", 3: "", 4: int32(0), 5: int32(0), 6: int32(0),
				7: textSD, 8: []any{}, 9: map[string]string{"EXTERNAL": "TRUE", "v": "1"}, 12: "EXTERNAL_TABLE"}}},
		{"view", Args(Table{TableType: "VIRTUAL_VIEW"}.Field(1)),
			map[int16]any{1: map[int16]any{1: "", 2: "", 3: "", 4: int32(0), 5: int32(0), 6: int32(0),
				7: map[int16]any{1: []any{}, 2: "", 3: "", 4: "", 5: false, 6: int32(-1),
					7: map[int16]any{1: "", 2: "", 3: map[string]string{}}, 8: []any{}, 9: []any{}, 10: map[string]string{}},
				8: []any{}, 9: map[string]string{}, 12: "VIRTUAL_VIEW"}}},
		{"partitions", Args(Partitions(1,
			Partition{DB: "db", Table: "t", Values: []string{"1"}, CreateTime: 9, SD: sd, Params: map[string]string{"p": "q"}},
			Partition{DB: "db", Table: "t", Values: []string{"2"}, SD: sd})),
			map[int16]any{1: []any{
				map[int16]any{1: []any{"1"}, 2: "db", 3: "t", 4: int32(9), 5: int32(0), 6: textSD, 7: map[string]string{"p": "q"}},
				map[int16]any{1: []any{"2"}, 2: "db", 3: "t", 4: int32(0), 5: int32(0), 6: textSD, 7: map[string]string{}},
			}}},
		{"partition", Args(Str(1, "db"), Partition{Values: []string{"1"}, SD: sd}.Field(3)),
			map[int16]any{1: "db", 3: map[int16]any{1: []any{"1"}, 2: "", 3: "", 4: int32(0), 5: int32(0), 6: textSD, 7: map[string]string{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decodeArgs(t, tt.args); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v; want %v", got, tt.want)
			}
		})
	}
}

// TestMapSortedKeys: equal maps encode to equal bytes, keys in order.
func TestMapSortedKeys(t *testing.T) {
	m := map[string]string{}
	for i := range 50 {
		m[fmt.Sprint("k", i)] = "v"
	}
	first := Args(Map(1, m))
	for range 20 {
		if b := Args(Map(1, m)); string(b) != string(first) {
			t.Fatalf("got %x; want %x", b, first)
		}
	}
	d := wire.NewDecoder(first)
	d.FieldBegin()
	_, _, n := d.MapBegin()
	prev := ""
	for i := 0; i < n; i++ {
		k := d.String()
		_ = d.String()
		if k <= prev {
			t.Fatalf("key %q after %q", k, prev)
		}
		prev = k
	}
}

// TestExternalKeepsParams: External does not write into the caller's map.
func TestExternalKeepsParams(t *testing.T) {
	params := map[string]string{"v": "1"}
	Args(Table{Params: params, External: true}.Field(1))
	if len(params) != 1 {
		t.Errorf("got params %v; want only v", params)
	}
}
