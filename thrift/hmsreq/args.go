// Package hmsreq builds Hive Metastore request args as Thrift bytes, for the bench tool, hmscli, the housekeeping tasks and tests.
package hmsreq

import (
	"slices"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Field appends one field to a struct under construction.
type Field func(e *wire.Encoder)

// Args encodes an args struct made of fields.
func Args(fields ...Field) []byte {
	var e wire.Encoder
	appendFields(&e, fields)
	e.Stop()
	return e.B
}

// Req encodes the args of a _req method: one request struct, made of
// fields, at arg 1.
func Req(fields ...Field) []byte { return Args(Struct(1, fields...)) }

func appendFields(e *wire.Encoder, fields []Field) {
	for _, f := range fields {
		f(e)
	}
}

// Str is a string field.
func Str(id int16, v string) Field { return func(e *wire.Encoder) { e.StringField(id, v) } }

// Bool is a bool field.
func Bool(id int16, v bool) Field { return func(e *wire.Encoder) { e.BoolField(id, v) } }

// I16 is an i16 field.
func I16(id, v int16) Field {
	return func(e *wire.Encoder) { e.FieldBegin(wire.TI16, id); e.I16(v) }
}

// I32 is an i32 field.
func I32(id int16, v int32) Field { return func(e *wire.Encoder) { e.I32Field(id, v) } }

// I64 is an i64 field.
func I64(id int16, v int64) Field { return func(e *wire.Encoder) { e.I64Field(id, v) } }

// Strings is a list<string> field.
func Strings(id int16, vs ...string) Field {
	return func(e *wire.Encoder) { e.StringListField(id, vs) }
}

// I64s is a list<i64> field.
func I64s(id int16, vs ...int64) Field {
	return func(e *wire.Encoder) { appendList(e, id, wire.TI64, vs, (*wire.Encoder).I64) }
}

// appendList writes vs as list field id of elements of type et, each
// written by put.
func appendList[T any](e *wire.Encoder, id int16, et byte, vs []T, put func(*wire.Encoder, T)) {
	e.FieldBegin(wire.TList, id)
	e.ListBegin(et, len(vs))
	for _, v := range vs {
		put(e, v)
	}
}

// Map is a map<string,string> field with its keys sorted, so that equal
// maps encode to equal bytes. A nil map is written empty.
func Map(id int16, m map[string]string) Field {
	return func(e *wire.Encoder) { appendMap(e, id, m) }
}

func appendMap(e *wire.Encoder, id int16, m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.StringMapField(id, keys, m)
}

// Struct is a struct field made of fields.
func Struct(id int16, fields ...Field) Field {
	return func(e *wire.Encoder) {
		e.FieldBegin(wire.TStruct, id)
		appendFields(e, fields)
		e.Stop()
	}
}

// Nested is a struct field id that holds the same field, depth structs
// deep, and nothing else: an unknown field a metastore skips at any
// depth, which tests send to see that a reader bounds how deep it goes.
func Nested(id int16, depth int) Field {
	return func(e *wire.Encoder) {
		for range depth {
			e.FieldBegin(wire.TStruct, id)
		}
		for range depth {
			e.Stop()
		}
	}
}

// StructList is a list<struct> field with one struct per element of elems.
func StructList(id int16, elems ...[]Field) Field {
	return func(e *wire.Encoder) {
		appendList(e, id, wire.TStruct, elems, func(e *wire.Encoder, fs []Field) {
			appendFields(e, fs)
			e.Stop()
		})
	}
}
