package hms

import "testing"

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
