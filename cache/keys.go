package cache

import (
	"bytes"
	"encoding/binary"

	"github.com/hmsproxy/hmsproxy/internal/hms"
	"github.com/hmsproxy/hmsproxy/internal/wire"
)

// Names are the normalised catalog, database and table names a request
// or a write refers to. HMS lower-cases identifiers before use, so keys and
// entities do too; partition values are case-sensitive and stay as sent.
type Names struct {
	Cat, DB string
	Tables  []string
	// HasDB: the request named a database (a missing name widens an
	// invalidation).
	HasDB bool
	// Prefixed: the database string came as "@cat#db". A 3.0+ metastore
	// splits it; a 2.3 one takes it as a literal, unknown name. Keys keep
	// it apart, so a reply is shared only between requests every
	// metastore answers alike; invalidation goes by Cat and DB, so a
	// write in either form still reaches entries of both.
	Prefixed bool
}

// Scope is what, besides the request, decides whose entry a reply is.
type Scope struct {
	// Upstream names the metastore group: entries are never shared
	// across groups (promise 6).
	Upstream string
	// PerUser keys entries by User. Scoped and shared keys never meet:
	// a client that never called set_ugi (User "") is an identity too,
	// not the shared scope.
	PerUser bool
	// User is the identity when PerUser is set, else "".
	User string
}

// lowerASCII lower-cases ASCII letters, as HMS's identifier normalisation
// does for the names that matter here.
func lowerASCII(b []byte) string {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			out := make([]byte, len(b))
			for i, c := range b {
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				out[i] = c
			}
			return string(out)
		}
	}
	return string(b)
}

// splitCatDB splits the "@cat#db" form that 3.x/4.0 clients fold into a
// db argument of legacy methods. "@cat#" stands for a null db, "@cat#!"
// for an empty one.
func splitCatDB(v []byte) (cat []byte, db []byte, null bool) {
	if len(v) == 0 || v[0] != '@' {
		return nil, v, false
	}
	i := bytes.IndexByte(v, '#')
	if i < 0 {
		return nil, v, false
	}
	cat, db = v[1:i], v[i+1:]
	switch {
	case len(db) == 0:
		return cat, nil, true
	case len(db) == 1 && db[0] == '!':
		return cat, db[:0], false
	}
	return cat, db, false
}

// ExtractNames reads the names at e's paths in args. defaultCat fills in
// a missing catalog, as the server does.
func ExtractNames(e *hms.Effect, args []byte, defaultCat string) (Names, error) {
	n := Names{Cat: defaultCat}
	if e.Cat != nil {
		if err := hms.Walk(args, e.Cat, func(typ byte, v []byte) bool {
			if typ == wire.TString {
				n.Cat = lowerASCII(v)
			}
			return false
		}); err != nil {
			return n, err
		}
	}
	if e.DB != nil {
		if err := hms.Walk(args, e.DB, func(typ byte, v []byte) bool {
			if typ != wire.TString {
				return true
			}
			if e.DBInName {
				cat, db, null := splitCatDB(v)
				if cat != nil {
					n.Cat = lowerASCII(cat)
					n.Prefixed = true
				}
				if null {
					return false
				}
				v = db
			}
			if e.Scope == hms.ScopeCatalog {
				// A database *pattern* (get_databases, get_table_meta):
				// HMS turns it into a case-insensitive regex, where \W
				// still is not \w: keep it as sent (issue 10 fuzzing).
				n.DB, n.HasDB = string(v), true
				return false
			}
			n.DB, n.HasDB = lowerASCII(v), true
			return false
		}); err != nil {
			return n, err
		}
	}
	if e.Table != nil {
		if err := hms.Walk(args, e.Table, func(typ byte, v []byte) bool {
			if typ == wire.TString {
				n.Tables = append(n.Tables, lowerASCII(v))
			}
			return true
		}); err != nil {
			return n, err
		}
	}
	return n, nil
}

// AppendKey appends the cache key of a read: scope, method, normalised
// names (and whether the database came as "@cat#db", which metastores
// before 3.0 answer differently), then the args with the name fields
// removed, so that every other
// field that can change the reply (snapshots, capabilities, engine,
// filters, partition values, limits) is part of the key as sent.
//
// Scope and names are length-prefixed, not terminated: they come from the
// network (set_ugi, db and table names) and may hold any byte, and with
// terminators get_table("a\x00b", <no table>) and get_table("a", "b")
// would share a key. A name field of an unexpected wire type (a list
// where a string belongs) is not cached (ok false): the server ignores
// such a field, so keying it as the name it seems to hold would mix the
// reply for a missing name into the entry of a real one.
func AppendKey(dst []byte, sc Scope, m *hms.Method, n *Names, args []byte) ([]byte, bool) {
	dst = appendString(dst, sc.Upstream)
	if sc.PerUser {
		dst = append(dst, 1)
	} else {
		dst = append(dst, 0)
	}
	dst = appendString(dst, sc.User)
	dst = appendString(dst, m.Name)
	dst = appendString(dst, n.Cat)
	var form byte // bit 0: a database is named; bit 1: as "@cat#db"
	if n.HasDB {
		form |= 1
	}
	if n.Prefixed {
		form |= 2
	}
	dst = append(dst, form)
	if n.HasDB {
		dst = appendString(dst, n.DB)
	}
	dst = binary.AppendUvarint(dst, uint64(len(n.Tables)))
	for _, t := range n.Tables {
		dst = appendString(dst, t)
	}
	var drop [3]namePath
	nd := 0
	for _, p := range []hms.Path{m.Target.Cat, m.Target.DB, m.Target.Table} {
		if len(p) == 0 {
			continue
		}
		want := wire.TString
		if p[len(p)-1] == hms.Each {
			p = p[:len(p)-1] // the whole list is in the names above
			want = wire.TList
		}
		for _, step := range p {
			if step == hms.Each {
				// Names inside a list of structs: keep the args whole.
				return append(dst, args...), true
			}
		}
		drop[nd] = namePath{p, want}
		nd++
	}
	d := wire.NewDecoder(args)
	bad := false
	dst = appendWithout(dst, args, d, drop[:nd], &bad)
	return dst, d.Err() == nil && !bad
}

// appendString appends s with its length in front.
func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// namePath is a name field to leave out of a key, and its wire type.
type namePath struct {
	p    hms.Path
	want byte // TString, or TList for a list of names (a set is accepted too)
}

// appendWithout copies a struct from d, leaving out the fields at paths.
// It sets *bad when a field at the end of a path has an unexpected type.
func appendWithout(dst, src []byte, d *wire.Decoder, paths []namePath, bad *bool) []byte {
	for {
		start := d.Pos()
		typ, id := d.FieldBegin()
		if d.Err() != nil {
			return dst
		}
		if typ == wire.TStop {
			return append(dst, wire.TStop)
		}
		leaf, inner := false, false
		var sub [3]namePath
		ns := 0
		for _, p := range paths {
			if p.p[0] != int16(id) {
				continue
			}
			if len(p.p) == 1 {
				leaf = true
				if typ != p.want && !(p.want == wire.TList && typ == wire.TSet) {
					*bad = true
				}
			} else {
				inner = true
				sub[ns] = namePath{p.p[1:], p.want}
				ns++
			}
		}
		switch {
		case leaf:
			d.Skip(typ)
		case inner && typ == wire.TStruct:
			dst = append(dst, src[start:d.Pos()]...)
			dst = appendWithout(dst, src, d, sub[:ns], bad)
		default:
			d.Skip(typ)
			dst = append(dst, src[start:d.Pos()]...)
		}
	}
}

// notFound maps the point lookups whose not-found answer may be cached
// (negative caching) to the result field id of that declared exception.
// Other declared exceptions, MetaException above all, are never cached:
// they report trouble, not state.
var notFound = map[string]int16{
	"get_database":          1,
	"get_database_req":      1,
	"get_table":             2,
	"get_table_req":         2,
	"get_partition":         2,
	"get_partition_by_name": 2,
	"get_partition_req":     2,
	"get_fields":            2,
	"get_schema":            2,
}

// NotFoundField is the result field id of m's cacheable not-found
// exception, or 0 when m has none.
func NotFoundField(method string) int16 { return notFound[method] }
