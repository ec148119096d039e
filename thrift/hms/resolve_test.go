package hms

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

func strs(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

// TestResolve: one walk finds the names as sent, the key remainder
// without the name fields, and a batch's list with its spans in the
// remainder (issue 11).
func TestResolve(t *testing.T) {
	names := hmsreq.Strings(3, "p=2", "p=1")
	tests := []struct {
		name, method string
		args         []byte
		cat, db      string
		tables, list []string
		rest         []byte // nil: not checked
		cut          []byte // the bytes Cuts must cover in Rest
		bad          bool
	}{
		{name: "legacy by-names", method: "get_partitions_by_names",
			args: hmsreq.Args(hmsreq.Str(1, "@hive#DB"), hmsreq.Str(2, "T1"), names, hmsreq.Str(4, "x")),
			db:   "@hive#DB", tables: []string{"T1"}, list: []string{"p=2", "p=1"},
			rest: hmsreq.Args(names, hmsreq.Str(4, "x")), cut: hmsreq.Args(names)[:len(hmsreq.Args(names))-1]},
		{name: "request struct by-names", method: "get_partitions_by_names_req",
			args: hmsreq.Req(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), names),
			db:   "db", tables: []string{"t"}, list: []string{"p=2", "p=1"},
			rest: hmsreq.Req(names), cut: hmsreq.Args(names)[:len(hmsreq.Args(names))-1]},
		{name: "a later struct replaces an earlier one", method: "get_table_req",
			args:   hmsreq.Args(hmsreq.Struct(1, hmsreq.Str(1, "old"), hmsreq.Str(2, "t0")), hmsreq.Struct(1, hmsreq.Str(2, "t1"))),
			tables: []string{"t1"}, rest: hmsreq.Args(hmsreq.Struct(1), hmsreq.Struct(1))},
		{name: "a repeated field counts last", method: "get_table",
			args: hmsreq.Args(hmsreq.Str(1, "a"), hmsreq.Str(2, "t"), hmsreq.Str(1, "b")),
			db:   "b", tables: []string{"t"}, rest: hmsreq.Args()},
		{name: "name list of tables", method: "get_table_objects_by_name",
			args: hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Strings(2, "A", "b")),
			db:   "db", tables: []string{"A", "b"}, rest: hmsreq.Args()},
		{name: "a list where a name belongs", method: "get_table",
			args: hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Strings(2, "t")), db: "db", bad: true},
		{name: "a string where a name list belongs", method: "get_table_objects_by_name",
			args: hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "t")), db: "db", bad: true},
		{name: "batch list of another type is no list", method: "get_partitions_by_names",
			args: hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), hmsreq.Str(3, "p=1")),
			db:   "db", tables: []string{"t"}, rest: hmsreq.Args(hmsreq.Str(3, "p=1")), cut: hmsreq.Args(hmsreq.Str(3, "p=1"))[:10]},
	}
	var r Resolved // reused, as a connection does
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := byName[tc.method].Resolve(&r, tc.args); err != nil {
				t.Fatal(err)
			}
			if r.Bad != tc.bad {
				t.Fatalf("Bad = %v; want %v", r.Bad, tc.bad)
			}
			if tc.bad {
				return
			}
			if string(r.Cat) != tc.cat || string(r.DB) != tc.db {
				t.Errorf("Cat, DB = %q, %q; want %q, %q", r.Cat, r.DB, tc.cat, tc.db)
			}
			if got := fmt.Sprint(strs(r.Tables)); got != fmt.Sprint(tc.tables) {
				t.Errorf("Tables = %s; want %v", got, tc.tables)
			}
			if got := fmt.Sprint(strs(r.List)); got != fmt.Sprint(tc.list) {
				t.Errorf("List = %s; want %v", got, tc.list)
			}
			if tc.rest != nil && !bytes.Equal(r.Rest, tc.rest) {
				t.Errorf("Rest = %x; want %x", r.Rest, tc.rest)
			}
			var cut []byte
			for _, c := range r.Cuts {
				cut = append(cut, r.Rest[c.From:c.To]...)
			}
			if !bytes.Equal(cut, tc.cut) {
				t.Errorf("Cuts cover %x; want %x", cut, tc.cut)
			}
		})
	}
}

// TestResolveMalformed: a truncated struct is an error, not a guess.
func TestResolveMalformed(t *testing.T) {
	args := hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"))
	var r Resolved
	if err := byName["get_table"].Resolve(&r, args[:len(args)-3]); err == nil {
		t.Fatal("Resolve of a truncated struct: no error")
	}
}

// TestBatchAppendRequest: the surgery keeps every other field, in every
// occurrence of the request struct, and asks for the new names only.
func TestBatchAppendRequest(t *testing.T) {
	for _, method := range []string{"get_partitions_by_names", "get_partitions_by_names_req", "get_table_objects_by_name_req"} {
		t.Run(method, func(t *testing.T) {
			m := byName[method]
			fields := []hmsreq.Field{hmsreq.Str(9, "keep"), hmsreq.Strings(m.Batch.Names[len(m.Batch.Names)-1], "a", "b", "c"), hmsreq.I32(8, 7)}
			args := hmsreq.Args(fields...)
			if m.Batch.InStruct {
				args = hmsreq.Req(fields...)
			}
			hdr := wire.AppendHeader(nil, wire.Call, []byte(method), 3)
			out := m.Batch.AppendRequest(nil, hdr, args, []string{"b"})
			msg, err := wire.Parse(out, wire.Limits{})
			if err != nil {
				t.Fatalf("AppendRequest = %x: %v", out, err)
			}
			var got []string
			Walk(msg.Body(), append(m.Batch.Names[:len(m.Batch.Names):len(m.Batch.Names)], Each), func(_ byte, v []byte) bool {
				got = append(got, string(v))
				return true
			})
			if fmt.Sprint(got) != "[b]" {
				t.Errorf("names asked = %v; want [b]", got)
			}
			prefix := m.Batch.Names[: len(m.Batch.Names)-1 : len(m.Batch.Names)-1]
			for _, p := range []Path{append(prefix, 9), append(prefix, 8)} {
				n := 0
				Walk(msg.Body(), p, func(byte, []byte) bool { n++; return true })
				if n != 1 {
					t.Errorf("field %v visited %d times; want kept once", p, n)
				}
			}
		})
	}
}
