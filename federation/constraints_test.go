package federation

import (
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// sf is one string field of a struct being encoded.
type sf struct {
	id int16
	s  string
}

// strStruct writes field id: a struct of string fields.
func strStruct(e *wire.Encoder, id int16, fs ...sf) {
	e.FieldBegin(wire.TStruct, id)
	for _, f := range fs {
		e.StringField(f.id, f.s)
	}
	e.Stop()
}

// structsField writes field id: a list of structs of string fields.
func structsField(e *wire.Encoder, id int16, elems ...[]sf) {
	e.FieldBegin(wire.TList, id)
	e.ListBegin(wire.TStruct, len(elems))
	for _, fs := range elems {
		for _, f := range fs {
			e.StringField(f.id, f.s)
		}
		e.Stop()
	}
}

// Where each constraint struct keeps its table's database: SQLPrimaryKey
// table_db 1; SQLForeignKey pktable_db 1 (parent), fktable_db 4 (child);
// SQLUnique/NotNull/Default/CheckConstraint table_db 2.
func pk(db string) []sf { return []sf{{1, db}, {2, "t"}, {3, "id"}} }
func fk(parent, child string) []sf {
	return []sf{{1, parent}, {2, "p"}, {3, "id"}, {4, child}, {5, "t"}, {6, "pid"}}
}
func cstr(db string) []sf { return []sf{{2, db}, {3, "t"}, {4, "id"}} }

// withConstraints is create_table_with_constraints' args: a table in
// tableDB, and one constraint list at arg id.
func withConstraints(tableDB string, id int16, elem []sf) []byte {
	var e wire.Encoder
	strStruct(&e, 1, sf{1, "t"}, sf{2, tableDB})
	structsField(&e, id, elem)
	e.Stop()
	return e.B
}

// createReq is create_table_req's args: CreateTableRequest with a table in
// tableDB and one constraint list at field id (3 primary keys ... 8 check).
func createReq(tableDB string, id int16, elem []sf) []byte {
	var e wire.Encoder
	e.FieldBegin(wire.TStruct, 1)
	strStruct(&e, 1, sf{1, "t"}, sf{2, tableDB})
	structsField(&e, id, elem)
	e.Stop()
	e.Stop()
	return e.B
}

// addReq is the args of add_primary_key, add_foreign_key and
// add_*_constraint: a request whose field 1 lists the constraints.
func addReq(elems ...[]sf) []byte {
	var e wire.Encoder
	e.FieldBegin(wire.TStruct, 1)
	structsField(&e, 1, elems...)
	e.Stop()
	e.Stop()
	return e.B
}

// TestConstraintDatabasesRouted guards issue 22: the metastore writes
// each constraint to its own table_db (both databases of a foreign key),
// whatever table the call creates, so the router resolves and checks
// every one of them. Lake is read-only; the primary (demo) read-write.
func TestConstraintDatabasesRouted(t *testing.T) {
	r := lakeRouter(t)
	const (
		spans    = "cannot span groups"
		readOnly = `group "lake" is read-only`
		primary  = ""
	)
	type tc struct {
		name, method string
		args         []byte
		want         string // a refusal containing it, or primary: routed to group 0
	}
	cases := []tc{
		{"add_primary_key in lake", "add_primary_key", addReq(pk("lake")), readOnly},
		{"add_primary_key in both", "add_primary_key", addReq(pk("demo"), pk("lake")), spans},
		{"add_primary_key in demo", "add_primary_key", addReq(pk("demo")), primary},
		{"add_foreign_key child in lake", "add_foreign_key", addReq(fk("demo", "lake")), spans},
		{"add_foreign_key parent in lake", "add_foreign_key", addReq(fk("lake", "demo")), spans},
		{"add_foreign_key in demo", "add_foreign_key", addReq(fk("demo", "demo")), primary},
		{"drop_constraint in lake", "drop_constraint", func() []byte {
			var e wire.Encoder
			strStruct(&e, 1, sf{1, "lake"}, sf{2, "t"}, sf{3, "c"})
			e.Stop()
			return e.B
		}(), readOnly},
	}
	for _, m := range []string{"add_unique_constraint", "add_not_null_constraint", "add_default_constraint", "add_check_constraint"} {
		cases = append(cases,
			tc{m + " in lake", m, addReq(cstr("lake")), readOnly},
			tc{m + " in both", m, addReq(cstr("demo"), cstr("lake")), spans},
			tc{m + " in demo", m, addReq(cstr("demo")), primary})
	}
	// create_table_with_constraints: args 2 primary keys, 3 foreign keys,
	// 4 unique, 5 not null, 6 default, 7 check; create_table_req: the same
	// lists at 3..8 of CreateTableRequest.
	lists := []struct {
		name string
		elem func(db string) []sf
	}{
		{"primary key", pk},
		{"foreign key child", func(db string) []sf { return fk("demo", db) }},
		{"foreign key parent", func(db string) []sf { return fk(db, "demo") }},
		{"unique", cstr}, {"not null", cstr}, {"default", cstr}, {"check", cstr},
	}
	for i, l := range lists {
		id := int16(i + 2)
		if i >= 2 {
			id = int16(i + 1) // both foreign-key cases are arg 3
		}
		cases = append(cases,
			tc{"create_table_with_constraints, " + l.name + " in lake", "create_table_with_constraints", withConstraints("demo", id, l.elem("lake")), spans},
			tc{"create_table_with_constraints, " + l.name + " in demo", "create_table_with_constraints", withConstraints("demo", id, l.elem("demo")), primary},
			tc{"create_table_req, " + l.name + " in lake", "create_table_req", createReq("demo", id+1, l.elem("lake")), spans},
			tc{"create_table_req, " + l.name + " in demo", "create_table_req", createReq("demo", id+1, l.elem("demo")), primary})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := r.Route(lookup(t, c.method), call(t, c.method, c.args))
			switch {
			case c.want == primary && (d.Refuse != "" || d.Group != 0 || d.FanOut):
				t.Errorf("got %+v; want routed to the primary", d)
			case c.want != primary && !strings.Contains(d.Refuse, c.want):
				t.Errorf("got %+v; want refused: %q", d, c.want)
			}
		})
	}
}

func lookup(t *testing.T, name string) *hms.Method {
	t.Helper()
	m := hms.Lookup([]byte(name))
	if m == nil {
		t.Fatalf("%s is not in the method table", name)
	}
	return m
}

// deepDropTable is drop_table's args naming db, with an extra field
// nested depth deep, which a metastore skips.
func deepDropTable(db string, depth int) []byte {
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "t0"), hmsreq.Nested(9, depth))
}

// TestRouterDecodesUnderConfiguredLimits guards issue 22: the router
// decodes a request under the limits the proxy read it with, and refuses
// one it cannot decode; it never forwards a call whose databases it did
// not check (a decode failure once sent the call to the primary
// unchecked).
func TestRouterDecodesUnderConfiguredLimits(t *testing.T) {
	up := proxytest.Group(t, upstream.Config{}, "127.0.0.1:1")
	newRouter := func(lim wire.Limits) *Router {
		r, err := New(Config{Limits: lim, Groups: []Member{
			{Name: "primary", Up: up, Access: ReadOnly},
			{Name: "lake", Up: up, Databases: []string{"lake"}, Access: ReadWrite},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	deep, def := newRouter(wire.Limits{MaxDepth: 100}), newRouter(wire.Limits{})
	drop := lookup(t, "drop_table")
	for _, tc := range []struct {
		name  string
		r     *Router
		args  []byte
		spoil func(body []byte) // makes a parsed body malformed, in place
		want  string            // refusal containing it; "" routed to lake
	}{
		{"deep, configured for it, primary", deep, deepDropTable("demo", 70), nil, `group "primary" is read-only`},
		{"deep, configured for it, lake", deep, deepDropTable("lake", 70), nil, ""},
		{"deep beyond the limits", def, deepDropTable("lake", 70), nil, "cannot be decoded"},
		// A body the reader would have refused, handed to Route anyway:
		// a string announced past the end, an unknown field type.
		{"string past the end", deep, deepDropTable("lake", 1), func(b []byte) { copy(b[3:7], []byte{0x7f, 0xff, 0xff, 0xff}) }, "cannot be decoded"},
		{"unknown field type", deep, deepDropTable("lake", 1), func(b []byte) { b[0] = 0x7f }, "cannot be decoded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := append(wire.AppendHeader(nil, wire.Call, []byte("drop_table"), 7), tc.args...)
			m, err := wire.Parse(b, wire.Limits{MaxMessage: len(b), MaxDepth: 100})
			if err != nil {
				t.Fatal(err)
			}
			if tc.spoil != nil {
				tc.spoil(m.Body())
			}
			d := tc.r.Route(drop, m)
			switch {
			case tc.want == "" && (d.Refuse != "" || d.Group != 1):
				t.Errorf("got %+v; want routed to lake", d)
			case tc.want != "" && !strings.Contains(d.Refuse, tc.want):
				t.Errorf("got %+v; want refused: %q", d, tc.want)
			}
		})
	}
}
