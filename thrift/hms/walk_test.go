package hms

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// visit is one fn call of Walk, val rendered as a string.
type visit struct {
	typ byte
	val string
}

func (v visit) String() string { return fmt.Sprintf("%d:%q", v.typ, v.val) }

func str(s string) visit { return visit{wire.TString, s} }

// collect walks args and returns what fn saw, checking that every val
// aliases args with its capacity capped.
func collect(t testing.TB, args []byte, p Path, limit int) ([]visit, error) {
	var got []visit
	err := Walk(args, p, func(typ byte, val []byte) bool {
		if len(val) > 0 {
			lo := uintptr(unsafe.Pointer(unsafe.SliceData(args)))
			at := uintptr(unsafe.Pointer(unsafe.SliceData(val)))
			if at < lo || at+uintptr(len(val)) > lo+uintptr(len(args)) {
				t.Errorf("val %q does not alias args", val)
			}
		}
		if cap(val) != len(val) {
			t.Errorf("val cap %d > len %d", cap(val), len(val))
		}
		got = append(got, visit{typ, string(val)})
		return limit <= 0 || len(got) < limit
	})
	return got, err
}

// enc builds a struct body with e.
func enc(f func(e *wire.Encoder)) []byte {
	var e wire.Encoder
	f(&e)
	e.Stop()
	return e.B
}

func i32(v int32) string { return string(binary.BigEndian.AppendUint32(nil, uint32(v))) }

func TestWalk(t *testing.T) {
	// get_table_req: 1 GetTableRequest{1 db, 2 tbl, 3 caps{1 list<i32>}, 4 cat}
	getTableReq := enc(func(e *wire.Encoder) {
		e.FieldBegin(wire.TStruct, 1)
		e.StringField(1, "sales")
		e.StringField(2, "orders")
		e.FieldBegin(wire.TStruct, 3)
		e.FieldBegin(wire.TList, 1)
		e.ListBegin(wire.TI32, 2)
		e.I32(1)
		e.I32(2)
		e.Stop()
		e.StringField(4, "hive")
		e.I64Field(11, -1)
		e.Stop()
	})
	// get_partitions_by_names: 1 db, 2 tbl, 3 names
	byNames := enc(func(e *wire.Encoder) {
		e.StringField(1, "@hive#sales")
		e.StringField(2, "orders")
		e.StringListField(3, []string{"ds=1", "ds=2", ""})
	})
	// add_partitions: 1 list<Partition{1 values, 2 db, 3 tbl}>
	addParts := enc(func(e *wire.Encoder) {
		e.FieldBegin(wire.TList, 1)
		e.ListBegin(wire.TStruct, 2)
		for _, v := range []string{"a", "b"} {
			e.StringListField(1, []string{v, v + "2"})
			e.StringField(2, "db")
			e.StringField(3, "t"+v)
			e.Stop()
		}
	})
	setOfStrings := enc(func(e *wire.Encoder) {
		e.FieldBegin(wire.TSet, 1)
		e.ListBegin(wire.TString, 2)
		e.String("x")
		e.String("y")
	})
	listOfLists := enc(func(e *wire.Encoder) {
		e.FieldBegin(wire.TList, 1)
		e.ListBegin(wire.TList, 2)
		e.ListBegin(wire.TString, 1)
		e.String("p")
		e.ListBegin(wire.TString, 2)
		e.String("q")
		e.String("r")
	})
	mapArg := enc(func(e *wire.Encoder) {
		e.StringMapField(1, []string{"k"}, map[string]string{"k": "v"})
	})
	emptyList := enc(func(e *wire.Encoder) { e.StringListField(3, nil) })
	// Field 1 twice: a Thrift reader keeps the last one.
	dup := enc(func(e *wire.Encoder) {
		e.StringField(1, "first")
		e.StringField(2, "t")
		e.StringField(1, "second")
	})
	// Field 1 as a struct, then as a string: a reader expecting a struct
	// skips the string.
	dupWrongType := enc(func(e *wire.Encoder) {
		e.FieldBegin(wire.TStruct, 1)
		e.StringField(1, "db")
		e.Stop()
		e.StringField(1, "not a struct")
	})
	dupStruct := enc(func(e *wire.Encoder) {
		e.FieldBegin(wire.TStruct, 1)
		e.StringField(1, "old")
		e.StringField(2, "gone")
		e.Stop()
		e.FieldBegin(wire.TStruct, 1)
		e.StringField(1, "new")
		e.Stop()
	})
	i32List := enc(func(e *wire.Encoder) {
		e.FieldBegin(wire.TList, 1)
		e.ListBegin(wire.TI32, 2)
		e.I32(7)
		e.I32(8)
	})
	truncated := byNames[:len(byNames)-3]
	badType := []byte{99, 0, 1, 0}

	structBytes := func(b []byte, from int) string { return string(b[from:]) }

	for _, tc := range []struct {
		name  string
		args  []byte
		path  Path
		limit int
		want  []visit
		err   error
	}{
		{"nested string", getTableReq, Path{1, 1}, 0, []visit{str("sales")}, nil},
		{"nested table", getTableReq, Path{1, 2}, 0, []visit{str("orders")}, nil},
		{"catalog", getTableReq, Path{1, 4}, 0, []visit{str("hive")}, nil},
		{"missing nested field", getTableReq, Path{1, 5}, 0, nil, nil},
		{"missing top field", getTableReq, Path{2, 1}, 0, nil, nil},
		{"i64 at end", getTableReq, Path{1, 11}, 0, []visit{{wire.TI64, "\xff\xff\xff\xff\xff\xff\xff\xff"}}, nil},
		{"i32 list at end is one value", getTableReq, Path{1, 3, 1}, 0,
			[]visit{{wire.TList, "\x08" + i32(2) + i32(1) + i32(2)}}, nil},
		{"each over i32 list", getTableReq, Path{1, 3, 1, Each}, 0,
			[]visit{{wire.TI32, i32(1)}, {wire.TI32, i32(2)}}, nil},
		{"struct at end", getTableReq, Path{1, 3}, 0,
			[]visit{{wire.TStruct, "\x0f\x00\x01\x08" + i32(2) + i32(1) + i32(2) + "\x00"}}, nil},
		{"string through string", getTableReq, Path{1, 1, 1}, 0, nil, nil},
		{"each over struct", getTableReq, Path{1, Each}, 0, nil, nil},
		{"each at top", getTableReq, Path{Each}, 0, nil, nil},
		{"empty path", byNames, Path{}, 0, []visit{{wire.TStruct, structBytes(byNames, 0)}}, nil},
		{"top-level string", byNames, Path{1}, 0, []visit{str("@hive#sales")}, nil},
		{"string list expands", byNames, Path{3}, 0, []visit{str("ds=1"), str("ds=2"), str("")}, nil},
		{"string list each", byNames, Path{3, Each}, 0, []visit{str("ds=1"), str("ds=2"), str("")}, nil},
		{"stop early", byNames, Path{3, Each}, 2, []visit{str("ds=1"), str("ds=2")}, nil},
		{"stop early at end list", byNames, Path{3}, 1, []visit{str("ds=1")}, nil},
		{"each then field", addParts, Path{1, Each, 3}, 0, []visit{str("ta"), str("tb")}, nil},
		{"each then values", addParts, Path{1, Each, 1}, 0, []visit{str("a"), str("a2"), str("b"), str("b2")}, nil},
		{"each then field stop", addParts, Path{1, Each, 2}, 1, []visit{str("db")}, nil},
		{"each then missing", addParts, Path{1, Each, 9}, 0, nil, nil},
		{"set", setOfStrings, Path{1, Each}, 0, []visit{str("x"), str("y")}, nil},
		{"set at end", setOfStrings, Path{1}, 0, []visit{str("x"), str("y")}, nil},
		{"list of lists", listOfLists, Path{1, Each, Each}, 0, []visit{str("p"), str("q"), str("r")}, nil},
		{"list of lists at end", listOfLists, Path{1, Each}, 0, []visit{str("p"), str("q"), str("r")}, nil},
		{"map at end", mapArg, Path{1}, 0,
			[]visit{{wire.TMap, "\x0b\x0b" + i32(1) + i32(1) + "k" + i32(1) + "v"}}, nil},
		{"each over map", mapArg, Path{1, Each}, 0, nil, nil},
		{"empty list", emptyList, Path{3}, 0, nil, nil},
		{"empty list each", emptyList, Path{3, Each}, 0, nil, nil},
		{"last occurrence wins", dup, Path{1}, 0, []visit{str("second")}, nil},
		{"wrong-typed duplicate ignored", dupWrongType, Path{1, 1}, 0, []visit{str("db")}, nil},
		{"last struct wins whole", dupStruct, Path{1, 2}, 0, nil, nil},
		{"last struct wins", dupStruct, Path{1, 1}, 0, []visit{str("new")}, nil},
		{"i32 list each", i32List, Path{1, Each}, 0, []visit{{wire.TI32, i32(7)}, {wire.TI32, i32(8)}}, nil},
		{"trailing bytes ignored", append(append([]byte{}, byNames...), 0xff, 0xff), Path{2}, 0, []visit{str("orders")}, nil},
		{"truncated", truncated, Path{1}, 0, nil, wire.ErrTruncated},
		{"empty args", nil, Path{1}, 0, nil, wire.ErrTruncated},
		{"bad type", badType, Path{1}, 0, nil, wire.ErrBadType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := collect(t, tc.args, tc.path, tc.limit)
			if !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestWalkDoesNotAllocate(t *testing.T) {
	args := enc(func(e *wire.Encoder) {
		e.FieldBegin(wire.TStruct, 1)
		e.StringField(1, "sales")
		e.StringField(2, "orders")
		e.StringListField(3, []string{"ds=1", "ds=2"})
		e.Stop()
	})
	n := 0
	fn := func(byte, []byte) bool { n++; return true }
	allocs := testing.AllocsPerRun(100, func() {
		_ = Walk(args, Path{1, 2}, fn)
		_ = Walk(args, Path{1, 3, Each}, fn)
	})
	if allocs != 0 {
		t.Errorf("Walk allocates %.1f times per run", allocs)
	}
	if n == 0 {
		t.Error("nothing visited")
	}
}

// FuzzWalk feeds arbitrary args bytes and paths: Walk must not panic, must
// only hand out slices of args, and must either fail validation without
// calling fn or succeed.
func FuzzWalk(f *testing.F) {
	seeds := [][]byte{
		enc(func(e *wire.Encoder) {
			e.FieldBegin(wire.TStruct, 1)
			e.StringField(1, "db")
			e.StringField(2, "t")
			e.StringListField(3, []string{"a", "b"})
			e.Stop()
		}),
		enc(func(e *wire.Encoder) {
			e.FieldBegin(wire.TList, 1)
			e.ListBegin(wire.TStruct, 1)
			e.StringListField(1, []string{"v"})
			e.Stop()
		}),
		{wire.TList, 0, 1, wire.TString, 0xff, 0xff, 0xff, 0xff},
		{},
	}
	paths := [][]byte{{0, 1, 0, 1}, {0, 1, 0xff, 0xff, 0, 1}, {0, 1, 0, 3}, {}}
	for i, s := range seeds {
		f.Add(s, paths[i])
	}
	f.Fuzz(func(t *testing.T, args, pb []byte) {
		var p Path
		for i := 0; i+1 < len(pb) && len(p) < 12; i += 2 {
			p = append(p, int16(binary.BigEndian.Uint16(pb[i:])))
		}
		called := false
		_, err := collect(t, args, p, 0)
		if err != nil {
			// Validation comes first: a failing Walk visits nothing.
			err2 := Walk(args, p, func(byte, []byte) bool { called = true; return true })
			if err2 == nil || called {
				t.Fatalf("inconsistent: %v / %v, called %v", err, err2, called)
			}
		}
	})
}

// TestTargetsWalk resolves every Read's Target paths against an empty
// args struct and one of garbage: nothing is visited, nothing panics.
func TestTargetsWalk(t *testing.T) {
	empty := []byte{wire.TStop}
	for _, m := range All() {
		e := m.Target
		for _, p := range []Path{e.Cat, e.DB, e.Table, e.Part} {
			if p == nil {
				continue
			}
			got, err := collect(t, empty, p, 0)
			if err != nil || len(got) != 0 {
				t.Errorf("%s %v: %v %v", m.Name, p, got, err)
			}
			if _, err := collect(t, []byte(strings.Repeat("\x0c\x00\x01", 4)), p, 0); err == nil {
				t.Errorf("%s %v: truncated args accepted", m.Name, p)
			}
		}
	}
}
