package hms

import (
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

func TestMetaExceptionField(t *testing.T) {
	for _, tc := range []struct {
		method string
		want   int16
	}{
		{"get_table", 1},                 // o1 MetaException, o2 NoSuchObjectException
		{"get_database", 2},              // o1 NoSuchObjectException, o2 MetaException
		{"create_table", 3},              // AlreadyExists, InvalidObject, Meta, NoSuchObject
		{"get_table_objects_by_name", 0}, // declares nothing in 2.3
		{"no_such_method", 0},
	} {
		if got := MetaExceptionField(tc.method); got != tc.want {
			t.Errorf("MetaExceptionField(%q) = %d; want %d", tc.method, got, tc.want)
		}
	}
}

func TestAppendMetaException(t *testing.T) {
	for _, f := range []int16{1, 2, 3} {
		body := AppendMetaException([]byte("kept"), f, "refused: over the rate limit")
		if string(body[:4]) != "kept" {
			t.Fatalf("field %d: the bytes before were not kept: %q", f, body)
		}
		got, err := wire.ResultField(body[4:])
		if err != nil || got != f {
			t.Fatalf("result field: got %d, %v; want %d", got, err, f)
		}
		var msg string
		err = Walk(body[4:], Path{f, 1}, func(typ byte, v []byte) bool {
			msg = string(v)
			return true
		})
		if err != nil || msg != "refused: over the rate limit" {
			t.Fatalf("message: got %q, %v; want the one given", msg, err)
		}
	}
}
