package cache

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// argTree builds an args struct from values placed at hms.Paths, so a test
// can fill in any method-table entry: a string at the end of a path, a
// one-element list where the path says Each.
type argTree map[int16]any // string, []string, argTree, []argTree

func (tr argTree) set(p hms.Path, v string) {
	id, rest := p[0], p[1:]
	switch {
	case len(rest) == 0:
		tr[id] = v
	case rest[0] == hms.Each && len(rest) == 1:
		tr[id] = []string{v}
	case rest[0] == hms.Each:
		l, _ := tr[id].([]argTree)
		if l == nil {
			l = []argTree{{}}
		}
		l[0].set(rest[1:], v)
		tr[id] = l
	default:
		sub, _ := tr[id].(argTree)
		if sub == nil {
			sub = argTree{}
		}
		sub.set(rest, v)
		tr[id] = sub
	}
}

func (tr argTree) encode(e *wire.Encoder) {
	ids := make([]int, 0, len(tr))
	for id := range tr {
		ids = append(ids, int(id))
	}
	sort.Ints(ids)
	for _, i := range ids {
		id := int16(i)
		switch v := tr[id].(type) {
		case string:
			e.StringField(id, v)
		case []string:
			e.StringListField(id, v)
		case argTree:
			e.FieldBegin(wire.TStruct, id)
			v.encode(e)
			e.Stop()
		case []argTree:
			e.FieldBegin(wire.TList, id)
			e.ListBegin(wire.TStruct, len(v))
			for _, x := range v {
				x.encode(e)
				e.Stop()
			}
		}
	}
}

// argsFor fills e's name paths: db at DB (and NewDB: a rename to the same
// names), "Orders" at Table and NewTable, "Hive" at Cat.
func argsFor(e *hms.Effect, db string) []byte {
	tr := argTree{}
	if e.Cat != nil {
		tr.set(e.Cat, "Hive")
	}
	tr.set(e.DB, db)
	for _, p := range []hms.Path{e.Table, e.NewTable} {
		if p != nil {
			tr.set(p, "Orders")
		}
	}
	if e.NewDB != nil {
		tr.set(e.NewDB, "sales")
	}
	var enc wire.Encoder
	tr.encode(&enc)
	enc.Stop()
	return enc.B
}

// TestPrefixedNamesEveryEntry (issue 10) walks every method-table entry
// that names a database, through the same resolver the proxy uses:
//
//   - where the table says the db string may carry the catalog, a write
//     sent as "@hive#Sales" changes exactly what one sent as "sales"
//     changes, and a read's dependencies are the same, so either form of
//     write invalidates either form of read; its key stays apart (a 2.3
//     metastore answers the two differently);
//   - elsewhere "@hive#Sales" is a literal name and stays one.
func TestPrefixedNamesEveryEntry(t *testing.T) {
	s := newTestStore(t, Config{})
	n := 0
	for _, m := range hms.All() {
		var entries []*hms.Effect
		if m.Class == hms.Read && m.Target.DB != nil {
			entries = append(entries, &m.Target)
		}
		for i := range m.Effects {
			if m.Effects[i].DB != nil {
				entries = append(entries, &m.Effects[i])
			}
		}
		for i, e := range entries {
			n++
			t.Run(fmt.Sprintf("%s/%d", m.Name, i), func(t *testing.T) {
				pre, plain := argsFor(e, "@hive#Sales"), argsFor(e, "sales")
				np, err := ExtractNames(e, pre, "hive")
				if err != nil {
					t.Fatal(err)
				}
				if !e.DBInName {
					if np.DB != "@hive#sales" || np.Prefixed {
						t.Errorf("names %+v; want the literal db \"@hive#sales\"", np)
					}
					return
				}
				wantDB := "sales"
				if e.Scope == hms.ScopeCatalog {
					wantDB = "Sales" // a pattern, kept as sent
				}
				if np.Cat != "hive" || np.DB != wantDB || !np.HasDB || !np.Prefixed {
					t.Errorf("names %+v; want cat hive, db %s, prefixed", np, wantDB)
				}
				if m.Class == hms.Write {
					// Effects resolve one at a time here: a method with
					// two (rename_partition) is checked per effect.
					one := *m
					one.Effects = []hms.Effect{*e}
					gp := WriteEntities(nil, &one, pre, "hive")
					gw := WriteEntities(nil, &one, plain, "hive")
					if !slices.Equal(gp, gw) || len(gp) == 0 || gp[0].DB != "sales" || gp[0].Cat != "hive" {
						t.Errorf("write entities %+v (prefixed) vs %+v (plain); want equal, naming hive.sales", gp, gw)
					}
					return
				}
				nw, _ := ExtractNames(e, plain, "hive")
				dp, okp := s.ReadDeps(nil, scA, m, &np)
				dw, okw := s.ReadDeps(nil, scA, m, &nw)
				if okp != okw || !slices.Equal(dp, dw) {
					t.Errorf("read deps %v %v (prefixed) vs %v %v (plain); want equal", dp, okp, dw, okw)
				}
				kp, okp := AppendKey(nil, scA, m, &np, pre)
				kw, okw := AppendKey(nil, scA, m, &nw, plain)
				if okp && okw && bytes.Equal(kp, kw) {
					t.Errorf("prefixed and plain requests share key %q", kp)
				}
			})
		}
	}
	if n < 60 {
		t.Errorf("checked %d entries; the table walk is broken", n)
	}
}

// TestTruncateTableReqPrefixedInvalidates (issue 10): a Hive 4 client's
// truncate_table_req names the database "@hive#sales"; the cached
// get_table of sales.orders must not survive it.
func TestTruncateTableReqPrefixedInvalidates(t *testing.T) {
	s := newTestStore(t, Config{})
	for _, read := range []req{getTable("sales", "orders"), getTable("@hive#sales", "orders"), getTableReq("sales", "orders", "", "")} {
		snap := snapOf(t, s, read)
		m := method(t, "truncate_table_req")
		ents := WriteEntities(nil, m, hmsreq.Req(hmsreq.Str(1, "@hive#sales"), hmsreq.Str(2, "orders")), "hive")
		s.Apply("a", ents)
		if s.Gens().Current(&snap) {
			t.Errorf("%s %x: still current after truncate_table_req(@hive#sales.orders) changed %+v", read.meth, read.args, ents)
		}
	}
}
