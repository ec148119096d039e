package dbname

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

const prefix = "pfx_"

var errForeign = errors.New("test: not this group's database")

// strip is a prefixed group's request mapping: its databases carry the
// prefix; any other name is refused.
func strip(db string) (string, error) {
	if !strings.HasPrefix(db, prefix) {
		return "", fmt.Errorf("%w: %q", errForeign, db)
	}
	return db[len(prefix):], nil
}

func add(db string) string { return prefix + db }

func same(db string) (string, error) { return db, nil }

func lookup(t testing.TB, name string) *hms.Method {
	t.Helper()
	m := hms.Lookup([]byte(name))
	if m == nil {
		t.Fatalf("hms has no method %s", name)
	}
	return m
}

// TestEveryMethodClassified: every method of the hms table has a shape
// here, and one with no names on either side says why. A method added to
// hms fails this test until it is classified.
func TestEveryMethodClassified(t *testing.T) {
	known := map[string]bool{}
	for _, m := range hms.All() {
		known[m.Name] = true
		sh, ok := methods[m.Name]
		if !ok {
			t.Errorf("%s: not classified in dbname.methods (where are its database names?)", m.Name)
			continue
		}
		if sh.args == nil && sh.result == nil && sh.why == "" {
			t.Errorf("%s: no names on either side and no reason given", m.Name)
		}
	}
	for name := range methods {
		if !known[name] {
			t.Errorf("%s: classified here but not in the hms table", name)
		}
	}
}

// TestCoversHMSNamePaths checks the schemas here against an independent
// source, the hms method table: every database path of every Effect and
// Target there (where the cache finds a write's or a read's database)
// must be rewritten by Args, with and without a catalog part where the
// method takes one.
func TestCoversHMSNamePaths(t *testing.T) {
	n := 0
	for _, m := range hms.All() {
		type loc struct {
			p        hms.Path
			inName   bool
			sameName bool
		}
		var locs []loc
		for _, e := range m.Effects {
			locs = append(locs, loc{e.DB, e.DBInName, false}, loc{e.NewDB, false, false})
		}
		if m.Target.Scope != hms.ScopeCatalog { // a catalog-wide read's DB path is a pattern
			locs = append(locs, loc{m.Target.DB, m.Target.DBInName, false})
		}
		for _, l := range locs {
			if len(l.p) == 0 {
				continue
			}
			names := []string{"pfx_sales"}
			if l.inName {
				names = append(names, "@hive#pfx_sales")
			}
			for _, name := range names {
				want := strings.Replace(name, "pfx_", "", 1)
				args := hmsreq.Args(atPath(l.p, name))
				out, err := Args(nil, m, args, wire.Limits{}, strip)
				if err != nil {
					t.Errorf("%s %v %q: %v", m.Name, l.p, name, err)
					continue
				}
				var got []string
				if err := hms.Walk(out, l.p, func(_ byte, v []byte) bool { got = append(got, string(v)); return true }); err != nil {
					t.Fatalf("%s: walk: %v", m.Name, err)
				}
				if len(got) != 1 || got[0] != want {
					t.Errorf("%s: db at %v %q: got %q; want %q", m.Name, l.p, name, got, want)
				}
				n++
			}
		}
	}
	t.Logf("%d name locations checked", n)
}

// atPath is a field holding the string v at path p: structs for field
// ids, a one-element list for Each.
func atPath(p hms.Path, v string) hmsreq.Field {
	id, rest := p[0], p[1:]
	switch {
	case len(rest) == 0:
		return hmsreq.Str(id, v)
	case rest[0] == hms.Each && len(rest) == 1:
		return hmsreq.Strings(id, v)
	case rest[0] == hms.Each:
		return hmsreq.StructList(id, []hmsreq.Field{atPath(rest[1:], v)})
	default:
		return hmsreq.Struct(id, atPath(rest, v))
	}
}

// gen encodes a struct of schema s with every name field set to a
// prefixed name (and a field no schema knows, holding a prefixed string
// that must not change), lists of two elements; the Table cycle stops
// after a few levels.
type gen struct {
	e      wire.Encoder
	n      int
	names  []string // every name written, in order
	inView []string // those written in view text
}

func (g *gen) name() string {
	g.n++
	s := fmt.Sprintf("pfx_db%d", g.n)
	g.names = append(g.names, s)
	return s
}

func (g *gen) structBody(s *schema, depth int) {
	if s.variant != nil {
		s = sDynParts30
	}
	g.e.StringField(999, "pfx_not_a_name") // unknown: copied as is
	for i := range s.fields {
		f := &s.fields[i]
		if f.k == kStruct && depth > 3 {
			continue
		}
		switch {
		case f.mapKeys:
			g.e.FieldBegin(wire.TMap, f.id)
			g.e.MapBegin(wire.TString, wire.TI64, 2)
			for j := 0; j < 2; j++ {
				g.e.String(g.str(f.k))
				g.e.I64(int64(j))
			}
		case f.list:
			et := wire.TString
			if f.k == kStruct {
				et = wire.TStruct
			}
			g.e.FieldBegin(wire.TList, f.id)
			g.e.ListBegin(et, 2)
			for j := 0; j < 2; j++ {
				g.elem(f, depth)
			}
		default:
			et := wire.TString
			if f.k == kStruct {
				et = wire.TStruct
			}
			g.e.FieldBegin(et, f.id)
			g.elem(f, depth)
		}
	}
	g.e.Stop()
}

func (g *gen) elem(f *field, depth int) {
	if f.k == kStruct {
		g.structBody(f.sub, depth+1)
		return
	}
	g.e.String(g.str(f.k))
}

func (g *gen) str(k kind) string {
	switch k {
	case kDB:
		if g.n%3 == 1 {
			return "@hive#" + g.name()
		}
		return g.name()
	case kQualified:
		return g.name() + ".t1:5:3::"
	case kTxnWriteIDs:
		return "12:" + "$" + g.name() + ".t1:5:3::$" + g.name() + ".t2:1:1::"
	case kView:
		a, b := g.name(), g.name()
		g.inView = append(g.inView, a, b)
		return fmt.Sprintf("SELECT `t1`.`a` FROM `%s`.`t1` JOIN %s.t2 ON t1.a = t2.a -- from pfx_c.x\n WHERE s = 'from pfx_d.y'", a, b)
	}
	panic("kind")
}

func generate(s *schema) (*gen, []byte) {
	g := &gen{}
	g.structBody(s, 0)
	return g, g.e.B
}

// TestRoundTripEveryShape: for every method, args and a reply with names
// everywhere its schema says: stripping then adding the prefix gives back
// the very bytes; stripping leaves no prefixed name but the unknown
// field's; an identity rewrite is byte-equal.
func TestRoundTripEveryShape(t *testing.T) {
	for _, m := range hms.All() {
		sh := methods[m.Name]
		for _, side := range []struct {
			name string
			s    *schema
		}{{"args", sh.args}, {"reply", sh.result}} {
			if side.s == nil {
				continue
			}
			t.Run(m.Name+"/"+side.name, func(t *testing.T) {
				g, in := generate(side.s)
				if len(g.names) == 0 {
					t.Fatalf("schema %s carries no name", side.s.name)
				}
				var stripped []byte
				var err error
				if side.name == "args" {
					stripped, err = Args(nil, m, in, wire.Limits{}, strip)
				} else {
					stripped, err = rewrite(nil, side.s, in, rewriter{fn: strip})
				}
				if err != nil {
					t.Fatal(err)
				}
				// Left prefixed: the unknown fields, and the decoys in
				// view text (a comment, a string literal).
				keep := bytes.Count(in, []byte("pfx_not_a_name")) + bytes.Count(in, []byte("pfx_c.")) + bytes.Count(in, []byte("pfx_d."))
				if c := bytes.Count(stripped, []byte("pfx_")); c != keep {
					t.Errorf("after strip: %d prefixed strings left; want only the %d unknown fields and view decoys", c, keep)
				}
				back, err := rewrite(nil, side.s, stripped, rewriter{reply: add})
				if side.name == "reply" {
					back, err = Reply(nil, m, wire.Reply, stripped, add)
				}
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(back, in) {
					t.Errorf("strip then add:\n got %q\nwant %q", back, in)
				}
				id, err := rewrite(nil, side.s, in, rewriter{fn: same})
				if err != nil || !bytes.Equal(id, in) {
					t.Errorf("identity rewrite changed the bytes (err %v)", err)
				}
			})
		}
	}
}

func TestArgsRefusal(t *testing.T) {
	m := lookup(t, "get_table")
	args := hmsreq.Args(hmsreq.Str(1, "other"), hmsreq.Str(2, "t"))
	dst := []byte("keep")
	out, err := Args(dst, m, args, wire.Limits{}, strip)
	if !errors.Is(err, errForeign) {
		t.Fatalf("got %v; want errForeign", err)
	}
	if string(out) != "keep" {
		t.Errorf("dst on error: got %q; want it unchanged", out)
	}
}

func TestCatalogForms(t *testing.T) {
	m := lookup(t, "get_databases") // pattern: untouched
	for _, tc := range []struct{ method, in, want string }{
		{"get_database", "pfx_a", "a"},
		{"get_database", "@hive#pfx_a", "@hive#a"},
		{"get_database", "@spark#pfx_a", "@spark#a"},
		{"get_all_tables", "@hive#", "@hive#"},   // no database: left alone
		{"get_all_tables", "@hive#!", "@hive#!"}, // the empty name
		{"get_all_tables", "@hive#pfx_", "@hive#!"},
	} {
		out, err := Args(nil, lookup(t, tc.method), hmsreq.Args(hmsreq.Str(1, tc.in)), wire.Limits{}, strip)
		if err != nil {
			t.Errorf("%s %q: %v", tc.method, tc.in, err)
			continue
		}
		if want := hmsreq.Args(hmsreq.Str(1, tc.want)); !bytes.Equal(out, want) {
			t.Errorf("%s %q: got %q; want %q", tc.method, tc.in, out, want)
		}
	}
	in := hmsreq.Args(hmsreq.Str(1, "@hive#pfx_*"))
	if out, err := Args(nil, m, in, wire.Limits{}, strip); err != nil || !bytes.Equal(out, in) {
		t.Errorf("get_databases pattern: got %q, %v; want it as sent", out, err)
	}
}

// reply builds a REPLY body whose success (field 0) is written by f.
func reply(f hmsreq.Field) []byte { return hmsreq.Args(f) }

func TestReplies(t *testing.T) {
	tbl := hmsreq.Table{DB: "sales", Name: "orders", Owner: "me", SD: hmsreq.TextSD("/w/sales.db/orders", hmsreq.Column{Name: "id", Type: "int"})}
	tblWant := tbl
	tblWant.DB = "pfx_sales"
	part := hmsreq.Partition{DB: "sales", Table: "orders", Values: []string{"2024"}, SD: tbl.SD}
	partWant := part
	partWant.DB = "pfx_sales"
	for _, tc := range []struct {
		method   string
		in, want []byte
	}{
		{"get_all_databases", reply(hmsreq.Strings(0, "default", "sales")), reply(hmsreq.Strings(0, "pfx_default", "pfx_sales"))},
		{"get_databases", reply(hmsreq.Strings(0, "sales")), reply(hmsreq.Strings(0, "pfx_sales"))},
		{"get_table", reply(tbl.Field(0)), reply(tblWant.Field(0))},
		{"get_table_req", reply(hmsreq.Struct(0, tbl.Field(1), hmsreq.Bool(2, true))), reply(hmsreq.Struct(0, tblWant.Field(1), hmsreq.Bool(2, true)))},
		{"get_partitions", reply(hmsreq.Partitions(0, part, part)), reply(hmsreq.Partitions(0, partWant, partWant))},
		{"get_database", reply(hmsreq.Database{Name: "sales", Location: "/w"}.Field(0)), reply(hmsreq.Database{Name: "pfx_sales", Location: "/w"}.Field(0))},
		{"get_table_meta", reply(hmsreq.StructList(0, []hmsreq.Field{hmsreq.Str(1, "sales"), hmsreq.Str(2, "t"), hmsreq.Str(3, "MANAGED_TABLE"), hmsreq.Str(5, "hive")})),
			reply(hmsreq.StructList(0, []hmsreq.Field{hmsreq.Str(1, "pfx_sales"), hmsreq.Str(2, "t"), hmsreq.Str(3, "MANAGED_TABLE"), hmsreq.Str(5, "hive")}))},
		{"get_foreign_keys", reply(hmsreq.Struct(0, hmsreq.StructList(1, []hmsreq.Field{hmsreq.Str(1, "a"), hmsreq.Str(2, "p"), hmsreq.Str(4, "b"), hmsreq.Str(5, "c")}))),
			reply(hmsreq.Struct(0, hmsreq.StructList(1, []hmsreq.Field{hmsreq.Str(1, "pfx_a"), hmsreq.Str(2, "p"), hmsreq.Str(4, "pfx_b"), hmsreq.Str(5, "c")})))},
		{"get_next_notification", reply(hmsreq.Struct(0, hmsreq.StructList(1, []hmsreq.Field{hmsreq.I64(1, 7), hmsreq.Str(3, "CREATE_TABLE"), hmsreq.Str(4, "sales"), hmsreq.Str(6, `{"db":"sales"}`)}))),
			reply(hmsreq.Struct(0, hmsreq.StructList(1, []hmsreq.Field{hmsreq.I64(1, 7), hmsreq.Str(3, "CREATE_TABLE"), hmsreq.Str(4, "pfx_sales"), hmsreq.Str(6, `{"db":"sales"}`)})))},
		// A declared exception is copied: its message is text.
		{"get_table", reply(hmsreq.Struct(2, hmsreq.Str(1, "sales.orders table not found"))), reply(hmsreq.Struct(2, hmsreq.Str(1, "sales.orders table not found")))},
		// A method whose reply names no database.
		{"get_all_tables", reply(hmsreq.Strings(0, "sales")), reply(hmsreq.Strings(0, "sales"))},
	} {
		got, err := Reply(nil, lookup(t, tc.method), wire.Reply, tc.in, add)
		if err != nil {
			t.Errorf("%s: %v", tc.method, err)
			continue
		}
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.method, got, tc.want)
		}
	}
	// A TApplicationException is never touched.
	ex := wire.AppendApplicationException(nil, "get_table", 1, wire.ExInternalError, "sales")
	msg, err := wire.Parse(ex, wire.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := Reply(nil, lookup(t, "get_table"), wire.Exception, msg.Body(), add); !bytes.Equal(got, msg.Body()) {
		t.Errorf("exception: got %q; want it unchanged", got)
	}
}

// TestRequests pins a few request layouts written independently of the
// schemas (hmsreq's encoders and the IDL's field ids).
func TestRequests(t *testing.T) {
	tbl := hmsreq.Table{DB: "pfx_sales", Name: "v", TableType: "VIRTUAL_VIEW"}
	tblWant := tbl
	tblWant.DB = "sales"
	for _, tc := range []struct {
		method   string
		in, want []byte
	}{
		{"get_table", hmsreq.Args(hmsreq.Str(1, "@hive#pfx_sales"), hmsreq.Str(2, "pfx_t")), hmsreq.Args(hmsreq.Str(1, "@hive#sales"), hmsreq.Str(2, "pfx_t"))},
		{"get_table_req", hmsreq.Req(hmsreq.Str(1, "pfx_sales"), hmsreq.Str(2, "t"), hmsreq.Str(4, "hive"), hmsreq.Str(6, "pfx_sales.t:5:5::")),
			hmsreq.Req(hmsreq.Str(1, "sales"), hmsreq.Str(2, "t"), hmsreq.Str(4, "hive"), hmsreq.Str(6, "sales.t:5:5::"))},
		{"create_table", hmsreq.Args(tbl.Field(1)), hmsreq.Args(tblWant.Field(1))},
		{"alter_table_with_environment_context", hmsreq.Args(hmsreq.Str(1, "pfx_sales"), hmsreq.Str(2, "t"), tbl.Field(3)),
			hmsreq.Args(hmsreq.Str(1, "sales"), hmsreq.Str(2, "t"), tblWant.Field(3))},
		{"exchange_partition", hmsreq.Args(hmsreq.Map(1, map[string]string{"k": "pfx_v"}), hmsreq.Str(2, "pfx_a"), hmsreq.Str(3, "t"), hmsreq.Str(4, "pfx_b"), hmsreq.Str(5, "u")),
			hmsreq.Args(hmsreq.Map(1, map[string]string{"k": "pfx_v"}), hmsreq.Str(2, "a"), hmsreq.Str(3, "t"), hmsreq.Str(4, "b"), hmsreq.Str(5, "u"))},
		{"lock", hmsreq.Req(hmsreq.StructList(1, []hmsreq.Field{hmsreq.I32(1, 1), hmsreq.I32(2, 2), hmsreq.Str(3, "pfx_sales"), hmsreq.Str(4, "t")}), hmsreq.Str(3, "me")),
			hmsreq.Req(hmsreq.StructList(1, []hmsreq.Field{hmsreq.I32(1, 1), hmsreq.I32(2, 2), hmsreq.Str(3, "sales"), hmsreq.Str(4, "t")}), hmsreq.Str(3, "me"))},
		{"compact2", hmsreq.Req(hmsreq.Str(1, "pfx_sales"), hmsreq.Str(2, "t"), hmsreq.I32(4, 2)), hmsreq.Req(hmsreq.Str(1, "sales"), hmsreq.Str(2, "t"), hmsreq.I32(4, 2))},
		{"get_valid_write_ids", hmsreq.Req(hmsreq.Strings(1, "pfx_sales.t", "pfx_x.u"), hmsreq.Str(2, "9:1::")),
			hmsreq.Req(hmsreq.Strings(1, "sales.t", "x.u"), hmsreq.Str(2, "9:1::"))},
		// 2.3 AddDynamicPartitions: dbname 2, tablename 3; 3.0+: writeid 2, dbname 3, tablename 4.
		{"add_dynamic_partitions", hmsreq.Req(hmsreq.I64(1, 1), hmsreq.Str(2, "pfx_sales"), hmsreq.Str(3, "pfx_t")),
			hmsreq.Req(hmsreq.I64(1, 1), hmsreq.Str(2, "sales"), hmsreq.Str(3, "pfx_t"))},
		{"add_dynamic_partitions", hmsreq.Req(hmsreq.I64(1, 1), hmsreq.I64(2, 4), hmsreq.Str(3, "pfx_sales"), hmsreq.Str(4, "pfx_t")),
			hmsreq.Req(hmsreq.I64(1, 1), hmsreq.I64(2, 4), hmsreq.Str(3, "sales"), hmsreq.Str(4, "pfx_t"))},
		// A field of an unexpected type is copied, not read as a name.
		{"get_table", hmsreq.Args(hmsreq.I32(1, 5), hmsreq.Str(2, "pfx_t")), hmsreq.Args(hmsreq.I32(1, 5), hmsreq.Str(2, "pfx_t"))},
	} {
		got, err := Args(nil, lookup(t, tc.method), tc.in, wire.Limits{}, strip)
		if err != nil {
			t.Errorf("%s: %v", tc.method, err)
			continue
		}
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.method, got, tc.want)
		}
	}
}

func TestMalformed(t *testing.T) {
	m := lookup(t, "get_table")
	in := hmsreq.Args(hmsreq.Str(1, "pfx_sales"), hmsreq.Str(2, "t"))
	for i := 0; i < len(in); i++ {
		if _, err := Args(nil, m, in[:i], wire.Limits{}, strip); err == nil {
			t.Errorf("truncated at %d: no error", i)
		}
	}
	// A Table nested in itself past the depth bound, well formed: only
	// the rewriter's own bound stops it.
	var e wire.Encoder
	e.FieldBegin(wire.TStruct, 0)
	for i := 0; i < 64; i++ {
		e.FieldBegin(wire.TStruct, 16) // creationMetadata
		e.FieldBegin(wire.TList, 7)    // sourceTables
		e.ListBegin(wire.TStruct, 1)
		e.FieldBegin(wire.TStruct, 1) // table
	}
	e.StringField(2, "sales")
	for i := 0; i < 3*64+2; i++ {
		e.Stop()
	}
	if _, err := Reply(nil, lookup(t, "get_table"), wire.Reply, e.B, add); !errors.Is(err, ErrTooDeep) {
		t.Errorf("deep nesting: got %v; want ErrTooDeep", err)
	}
}

func TestUnknownMethod(t *testing.T) {
	in := hmsreq.Args(hmsreq.Str(1, "pfx_sales"))
	out, err := Args(nil, nil, in, wire.Limits{}, strip)
	if err != nil || !bytes.Equal(out, in) {
		t.Errorf("nil method: got %q, %v; want the args unchanged", out, err)
	}
}
