package cache

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

var fuzzMethods = []string{"get_table", "get_table_req", "get_partitions_by_names_req", "get_table_objects_by_name"}

// FuzzAppendKey feeds random args to the key builder of a few reads: it
// must not panic, and must be deterministic.
func FuzzAppendKey(f *testing.F) {
	seeds := []req{
		getTable("@hive#DB0", "t1"), getTable("db0", "t1"), getTableReq("db0", "t1", "HIVE", "db0.t1:5:"),
		byNamesReq("@spark#db0", "t1", "p=1", "p=2"), objectsByName("db0", "a", "b"),
		{"get_table", hmsreq.Args(hmsreq.Strings(1, "db0"), hmsreq.Str(2, "t1")), scA},
	}
	for i, s := range seeds {
		f.Add(uint8(i), s.args)
	}
	f.Add(uint8(0), []byte{0x0c, 0, 1, 0x0b, 0, 1, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, sel uint8, a []byte) {
		m := method(t, fuzzMethods[int(sel)%len(fuzzMethods)])
		n, err := ExtractNames(&m.Target, a, "hive")
		k1, ok1 := AppendKey(nil, Scope{Upstream: "u"}, m, &n, a)
		k2, ok2 := AppendKey(nil, Scope{Upstream: "u"}, m, &n, a)
		if ok1 != ok2 || !bytes.Equal(k1, k2) {
			t.Fatalf("AppendKey not deterministic: %q %v / %q %v", k1, ok1, k2, ok2)
		}
		if err == nil && ok1 && len(k1) == 0 {
			t.Fatalf("AppendKey ok with an empty key")
		}
		// The request path resolves the args in one walk: it must build
		// the very key of ExtractNames and AppendKey, and the same names.
		var r hms.Resolved
		rerr := m.Resolve(&r, a)
		if (rerr == nil) != (err == nil) {
			t.Fatalf("Resolve error %v; ExtractNames error %v", rerr, err)
		}
		if err != nil {
			return
		}
		k3, ok3 := ReadKey(nil, Scope{Upstream: "u"}, m, &r, "hive")
		if ok3 != ok1 || ok1 && !bytes.Equal(k1, k3) {
			t.Fatalf("ReadKey = %q %v; AppendKey = %q %v", k3, ok3, k1, ok1)
		}
		if n3 := ReadNames(m, &r, "hive"); ok1 && fmt.Sprint(n3) != fmt.Sprint(n) {
			t.Fatalf("ReadNames = %+v; ExtractNames = %+v", n3, n)
		}
	})
}

// collisionMethods cover every shape of name paths a key is built from:
// positional legacy args, request structs with and without a catalog
// field, name lists, catalog patterns, none at all.
var collisionMethods = []string{
	"get_table", "get_database", "get_databases", "get_table_meta", "get_table_req",
	"get_table_objects_by_name", "get_table_objects_by_name_req", "get_partitions_by_names_req",
	"get_partition", "get_fields_req", "get_all_databases", "get_function", "get_partitions_by_names",
}

// FuzzKeyCollision (issue 10): two requests that get one key must be the
// same request once normalised, i.e. the metastore answers them alike. The
// requests are generated from the fuzz input over a small alphabet (case
// variants, "@cat#" forms, NULs, regex escapes), with name fields absent,
// duplicated or of the wrong wire type, and extra fields, so that equal
// keys are common. canonicalRequest is an independent statement of what
// the key must tell apart; an equal key with unequal canonical forms is a
// collision: one client would be served another's reply.
func FuzzKeyCollision(f *testing.F) {
	f.Add([]byte{0, 1, 1, 2, 0, 1, 2}, []byte{5, 1})
	f.Add([]byte{2, 1, 3, 2, 7, 8}, []byte{4, 8})
	f.Add([]byte{4, 1, 3, 1, 2, 3, 4, 1, 2}, []byte{8, 9})
	f.Add([]byte{5, 1, 4, 2, 3, 1, 2, 3}, []byte{6, 3, 7, 2})
	f.Add([]byte{7, 3, 3, 1, 2, 6}, []byte{5, 5})
	f.Fuzz(func(t *testing.T, a, edits []byte) {
		// The second request is the first with a few generation choices
		// changed (edits: position, new value pairs), so that pairs of
		// near-identical requests, whose keys are often equal, are what
		// the fuzzer explores.
		b := append([]byte(nil), a...)
		for i := 0; i+1 < len(edits) && len(b) > 0; i += 2 {
			b[int(edits[i])%len(b)] = edits[i+1]
		}
		ra, rb := genRequest(a), genRequest(b)
		ka, oka := ra.key()
		kb, okb := rb.key()
		if !oka || !okb || !bytes.Equal(ka, kb) {
			return
		}
		ca, cb := ra.canonical(), rb.canonical()
		if ca.refused || cb.refused {
			t.Fatalf("key built for a request the model refuses:\n%s\n%s", ca, cb)
		}
		if ca.String() != cb.String() {
			t.Fatalf("key collision %q:\n a %s\n b %s\n args a %x\n args b %x", ka, ca, cb, ra.args, rb.args)
		}
	})
}

// fuzzReq is one generated read.
type fuzzReq struct {
	m    *hms.Method
	sc   Scope
	args []byte
}

// key is the key the request path builds: one Resolve, then ReadKey.
func (r fuzzReq) key() ([]byte, bool) {
	var res hms.Resolved
	if err := r.m.Resolve(&res, r.args); err != nil {
		return nil, false
	}
	return ReadKey(nil, r.sc, r.m, &res, "hive")
}

// gen reads generation choices from fuzz bytes; past the end it reads 0.
type gen struct {
	b []byte
	i int
}

func (g *gen) next() int {
	if g.i >= len(g.b) {
		return 0
	}
	g.i++
	return int(g.b[g.i-1])
}

// word is a short string over an alphabet that makes normalisation
// matter: case, '@' '#' '!' of the catalog form, NUL, regex escapes.
func (g *gen) word() string {
	const alpha = "dD@#!hH\x00\\wWs"
	n := g.next() % 6
	var sb strings.Builder
	for range n {
		sb.WriteByte(alpha[g.next()%len(alpha)])
	}
	return sb.String()
}

// name is a word, or a word in one of the "@cat#" forms. The form is one
// choice and the catalog and word are read whatever it is, so that a
// one-byte edit turns "@hive#w" into "w" and nothing else.
func (g *gen) name() string {
	form := g.next() % 5
	cat := [...]string{"hive", "HIVE", "spark", ""}[g.next()%4]
	w := g.word()
	switch form {
	case 2:
		return "@" + cat + "#" + w
	case 3:
		return "@" + cat + "#" // a null database
	case 4:
		return "@" + cat + "#!" // the empty one
	}
	return w
}

// field is one encoded field of a struct, in wire order.
type field struct {
	id  int16
	typ byte
	val any // string, []string, int32, []field
}

func encodeFields(e *wire.Encoder, fs []field) {
	for _, f := range fs {
		e.FieldBegin(f.typ, f.id)
		switch v := f.val.(type) {
		case string:
			e.String(v)
		case []string:
			e.ListBegin(wire.TString, len(v))
			for _, s := range v {
				e.String(s)
			}
		case int32:
			e.I32(v)
		case []field:
			encodeFields(e, v)
			e.Stop()
		}
	}
	e.Stop()
}

// genRequest builds a read from fuzz bytes: the method, the scope, and for
// each name path of its Target a value that is absent, a string, a list,
// an i32, or a string with an earlier duplicate; then extra fields; then a
// shuffle of the top-level and nested fields.
func genRequest(b []byte) fuzzReq {
	g := &gen{b: b}
	m := hms.Lookup([]byte(collisionMethods[g.next()%len(collisionMethods)]))
	r := fuzzReq{m: m, sc: Scope{Upstream: "u"}}
	if g.next()%4 == 0 {
		r.sc.User = g.name()
	}
	var top, inner []field
	put := func(p hms.Path, f field) {
		if len(p) == 1 {
			top = append(top, f)
		} else {
			inner = append(inner, f)
		}
	}
	for _, p := range []hms.Path{m.Target.Cat, m.Target.DB, m.Target.Table} {
		if p == nil {
			continue
		}
		list := p[len(p)-1] == hms.Each
		if list {
			p = p[:len(p)-1]
		}
		id := p[len(p)-1]
		switch g.next() % 6 {
		case 0: // absent
		case 1, 2:
			if list {
				names := make([]string, g.next()%3)
				for i := range names {
					names[i] = g.name()
				}
				put(p, field{id, wire.TList, names})
			} else {
				put(p, field{id, wire.TString, g.name()})
			}
		case 3: // the other shape: a list for a string, a string for a list
			if list {
				put(p, field{id, wire.TString, g.name()})
			} else {
				put(p, field{id, wire.TList, []string{g.name()}})
			}
		case 4:
			put(p, field{id, wire.TI32, int32(g.next())})
		case 5: // a duplicate before the real one
			if list {
				put(p, field{id, wire.TList, []string{g.name()}})
				put(p, field{id, wire.TList, []string{g.name(), g.name()}})
			} else {
				put(p, field{id, wire.TString, g.name()})
				put(p, field{id, wire.TString, g.name()})
			}
		}
	}
	// Extra fields: snapshots, engines, limits, filters, partition values.
	for range g.next() % 3 {
		f := field{int16(1 + g.next()%10), wire.TString, g.name()}
		if g.next()%2 == 0 {
			f = field{f.id, wire.TI32, int32(g.next() % 3)}
		}
		if g.next()%2 == 0 {
			top = append(top, f)
		} else {
			inner = append(inner, f)
		}
	}
	shuffle := func(fs []field) {
		for i := len(fs) - 1; i > 0; i-- {
			j := g.next() % (i + 1)
			fs[i], fs[j] = fs[j], fs[i]
		}
	}
	shuffle(inner)
	if len(inner) > 0 || g.next()%3 == 0 {
		top = append(top, field{1, wire.TStruct, inner})
	}
	shuffle(top)
	var e wire.Encoder
	encodeFields(&e, top)
	r.args = e.B
	return r
}

// canonical is what a key must tell apart, stated apart from the key
// code: the scope, the method, the names as the metastore normalises
// them, and every other field as sent. Stated as the rules of
// hms-protocol.md §1.11 and the Thrift readers:
//
//   - a struct field read is the last occurrence whose wire type can carry
//     the path (a generated reader skips a field of another type);
//   - a name field of the wrong type, anywhere, is refused (not cached);
//   - identifiers are lower-cased (ASCII), patterns and partition values
//     are not; a missing catalog is "hive";
//   - a DBInName db "@cat#rest" names catalog cat, "@cat#" no database,
//     "@cat#!" the empty one, and stays apart from the plain form (2.3
//     takes it literally).
type canonical struct {
	refused          bool
	user, method     string
	cat              string
	catAbsent        bool
	hasDB, prefixed  bool
	db               string
	tables           []string
	rest             []byte // the args without the name fields
	restErr, nameErr string
}

func (c canonical) String() string {
	return fmt.Sprintf("refused=%v user=%q method=%s cat=%q catAbsent=%v hasDB=%v prefixed=%v db=%q tables=%q rest=%x%s%s",
		c.refused, c.user, c.method, c.cat, c.catAbsent, c.hasDB, c.prefixed, c.db, c.tables, c.rest, c.restErr, c.nameErr)
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// rawField is one field of a decoded struct: its type and its bytes (the
// value alone).
type rawField struct {
	id  int16
	typ byte
	val []byte
}

func rawFields(b []byte) ([]rawField, bool) {
	d := wire.NewDecoder(b)
	var out []rawField
	for {
		typ, id := d.FieldBegin()
		if d.Err() != nil {
			return nil, false
		}
		if typ == wire.TStop {
			return out, true
		}
		from := d.Pos()
		d.Skip(typ)
		if d.Err() != nil {
			return nil, false
		}
		out = append(out, rawField{id, typ, b[from:d.Pos()]})
	}
}

// at returns the value at path p (a struct field per step, the last one
// that fits), its type, and whether any occurrence of the leaf field had a
// type other than want.
func at(b []byte, p hms.Path, want byte) (val []byte, typ byte, found, wrong bool) {
	fs, ok := rawFields(b)
	if !ok {
		return nil, 0, false, false
	}
	step := p[0]
	if len(p) == 1 {
		for _, f := range fs {
			if f.id != step {
				continue
			}
			if f.typ != want && !(want == wire.TList && f.typ == wire.TSet) {
				wrong = true
			}
			val, typ, found = f.val, f.typ, true
		}
		return val, typ, found, wrong
	}
	var sub []byte
	for _, f := range fs {
		if f.id == step && f.typ == wire.TStruct {
			sub = f.val
		}
	}
	// An earlier struct occurrence may hold a wrong-typed leaf too.
	for _, f := range fs {
		if f.id == step && f.typ == wire.TStruct {
			if _, _, _, w := at(f.val, p[1:], want); w {
				wrong = true
			}
		}
	}
	if sub == nil {
		return nil, 0, false, wrong
	}
	val, typ, found, w := at(sub, p[1:], want)
	return val, typ, found, wrong || w
}

// without copies struct b leaving out every occurrence of the leaves at
// paths, descending only into struct fields.
func without(b []byte, paths []hms.Path) []byte {
	fs, _ := rawFields(b)
	var e wire.Encoder
	for _, f := range fs {
		drop := false
		var sub []hms.Path
		for _, p := range paths {
			if p[0] != f.id {
				continue
			}
			if len(p) == 1 {
				drop = true
			} else {
				sub = append(sub, p[1:])
			}
		}
		switch {
		case drop:
		case len(sub) > 0 && f.typ == wire.TStruct:
			e.FieldBegin(f.typ, f.id)
			e.B = append(e.B, without(f.val, sub)...)
		default:
			e.FieldBegin(f.typ, f.id)
			e.B = append(e.B, f.val...)
		}
	}
	e.Stop()
	return e.B
}

func (r fuzzReq) canonical() canonical {
	t := &r.m.Target
	c := canonical{user: r.sc.User, method: r.m.Name, cat: "hive"}
	str := func(v []byte) string { return string(v[4:]) } // past the length
	var drop []hms.Path
	if t.Cat != nil {
		v, typ, found, wrong := at(r.args, t.Cat, wire.TString)
		c.refused = c.refused || wrong
		if found && typ == wire.TString {
			c.cat = str(v)
		} else if !found {
			c.catAbsent = true // Hive 4.0 may fail where "hive" is answered
		}
		drop = append(drop, t.Cat)
	}
	if t.DB != nil {
		v, typ, found, wrong := at(r.args, t.DB, wire.TString)
		c.refused = c.refused || wrong
		if found && typ == wire.TString {
			db := str(v)
			c.hasDB = true
			if i := strings.IndexByte(db, '#'); t.DBInName && strings.HasPrefix(db, "@") && i >= 0 {
				c.cat, c.prefixed, db = db[1:i], true, db[i+1:]
				c.catAbsent = false // the name carries it
				switch db {
				case "":
					c.hasDB = false
				case "!":
					db = ""
				}
			}
			c.db = db // keys hold names as sent (cache.AppendKey)
			if !c.hasDB {
				c.db = ""
			}
		}
		drop = append(drop, t.DB)
	}
	if p := t.Table; p != nil {
		want := wire.TString
		if p[len(p)-1] == hms.Each {
			p, want = p[:len(p)-1], wire.TList
		}
		v, typ, found, wrong := at(r.args, p, want)
		c.refused = c.refused || wrong
		if found && typ == want && want == wire.TString {
			c.tables = []string{str(v)}
		}
		if found && typ == want && want == wire.TList {
			d := wire.NewDecoder(v)
			et, n := d.ListBegin()
			for i := 0; i < n && et == wire.TString; i++ {
				c.tables = append(c.tables, d.String())
			}
		}
		drop = append(drop, p)
	}
	c.rest = without(r.args, drop)
	return c
}

// TestKeyCollisionModel: the canonical model tells apart what issue 10
// was about, and agrees with the key on a few known pairs, so the fuzz
// target's oracle is not vacuous.
func TestKeyCollisionModel(t *testing.T) {
	mk := func(meth string, args []byte) fuzzReq {
		return fuzzReq{m: method(t, meth), sc: scA, args: args}
	}
	for _, tc := range []struct {
		name string
		a, b fuzzReq
		same bool
	}{
		// Names are keyed as sent: the metastore's not-found answers quote them.
		{"case", mk("get_table", getTable("DB", "T").args), mk("get_table", getTable("db", "t").args), false},
		{"blank", mk("get_table", getTable("db", "t ").args), mk("get_table", getTable("db", "t").args), false},
		{"same", mk("get_table", getTable("db", "t").args), mk("get_table", getTable("db", "t").args), true},
		{"prefix", mk("get_table", getTable("@hive#db", "t").args), mk("get_table", getTable("db", "t").args), false},
		{"prefix case", mk("get_table", getTable("@HIVE#db", "t").args), mk("get_table", getTable("@hive#DB", "t").args), false},
		{"pattern escapes", mk("get_databases", getDatabases("\\W*").args), mk("get_databases", getDatabases("\\w*").args), false},
		{"cat unset", mk("get_table_req", getTableReq("db", "t", "", "").args), mk("get_table_req", getTableReq("db", "t", "hive", "").args), false}, // 4.0: "catName is null" on some paths
		{"cat case", mk("get_table_req", getTableReq("db", "t", "", "").args), mk("get_table_req", getTableReq("db", "t", "HIVE", "").args), false},
		{"snapshot", mk("get_table_req", getTableReq("db", "t", "", "x").args), mk("get_table_req", getTableReq("db", "t", "", "y").args), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ka, _ := tc.a.key()
			kb, _ := tc.b.key()
			ca, cb := tc.a.canonical(), tc.b.canonical()
			if got := ca.String() == cb.String(); got != tc.same {
				t.Errorf("model: same = %v; want %v\n a %s\n b %s", got, tc.same, ca, cb)
			}
			if got := bytes.Equal(ka, kb); got != tc.same {
				t.Errorf("key: same = %v; want %v", got, tc.same)
			}
		})
	}
}
