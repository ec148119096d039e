package cache

import (
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/hms"
	"github.com/hmsproxy/hmsproxy/internal/wire"
)

// field appends one field to an args struct under construction.
type field func(e *wire.Encoder)

func sf(id int16, v string) field { return func(e *wire.Encoder) { e.StringField(id, v) } }

func slf(id int16, v ...string) field { return func(e *wire.Encoder) { e.StringListField(id, v) } }

func i64f(id int16, v int64) field { return func(e *wire.Encoder) { e.I64Field(id, v) } }

func i64list(id int16, v ...int64) field {
	return func(e *wire.Encoder) {
		e.FieldBegin(wire.TList, id)
		e.ListBegin(wire.TI64, len(v))
		for _, x := range v {
			e.I64(x)
		}
	}
}

// st is a struct field holding fs.
func st(id int16, fs ...field) field {
	return func(e *wire.Encoder) {
		e.FieldBegin(wire.TStruct, id)
		for _, f := range fs {
			f(e)
		}
		e.Stop()
	}
}

// structList is a list<struct> field, one struct per element of elems.
func structList(id int16, elems ...[]field) field {
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

// args encodes an args struct.
func args(fs ...field) []byte {
	var e wire.Encoder
	for _, f := range fs {
		f(&e)
	}
	e.Stop()
	return e.B
}

func method(t testing.TB, name string) *hms.Method {
	t.Helper()
	m := hms.Lookup([]byte(name))
	if m == nil {
		t.Fatalf("hms.Lookup(%q) = nil", name)
	}
	return m
}

// readNames extracts a read's names as the proxy does.
func readNames(t testing.TB, m *hms.Method, a []byte) Names {
	t.Helper()
	n, err := ExtractNames(&m.Target, a, "hive")
	if err != nil {
		t.Fatalf("ExtractNames(%s): %v", m.Name, err)
	}
	return n
}
