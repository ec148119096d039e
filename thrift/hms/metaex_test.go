package hms

import "testing"

// TestMetaExceptionField also checks that AppendMetaException puts the
// message where each method declares its MetaException.
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
		f := MetaExceptionField(tc.method)
		if f != tc.want {
			t.Errorf("MetaExceptionField(%q) = %d; want %d", tc.method, f, tc.want)
		}
		if f <= 0 {
			continue
		}
		const msg = "refused: over the rate limit"
		body := AppendMetaException([]byte("kept"), f, msg)
		if string(body[:4]) != "kept" {
			t.Fatalf("%s: the bytes before were not kept: %q", tc.method, body)
		}
		var got string
		err := Walk(body[4:], Path{f, 1}, func(typ byte, v []byte) bool {
			got = string(v)
			return true
		})
		if err != nil || got != msg {
			t.Errorf("%s: message at field %d: got %q, %v; want %q", tc.method, f, got, err, msg)
		}
	}
}
