package cache

import (
	"bytes"
	"encoding/binary"
	"errors"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Names are the normalised catalog, database and table names a request
// or a write refers to: what the metastore reads them as (hms.Normalize:
// trim, then lower-case), so that every spelling of one object is one
// entity to dependencies and invalidations. Keys keep the names as sent
// (see AppendKey). Partition values are case-sensitive and stay as sent.
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
	// Conf stands for the session's setMetaConf overrides that can change
	// an answer (a digest); "" for a session with none. Sessions share
	// entries only with sessions of the same overrides.
	Conf string
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

// ErrMixedNames: a write's list names objects of more than one database
// (or catalog) at a path where ExtractNames reads one. Its writer widens
// what it invalidates to everything rather than pair each table with a
// database it is not in.
var ErrMixedNames = errors.New("cache: a list names more than one database")

// ExtractNames reads the names at e's paths in args. defaultCat fills in
// a missing catalog, as the server does. A path through a list (Each)
// gives one catalog and database for all its elements, so elements
// naming different ones give ErrMixedNames: the metastore refuses most
// such lists (add_partitions takes one table), but not all (the foreign
// keys of a create may reference tables of several databases).
func ExtractNames(e *hms.Effect, args []byte, defaultCat string) (Names, error) {
	n := Names{Cat: defaultCat}
	mixed := false
	catSeen := false
	cats, dbs := 0, 0 // the elements naming a catalog, a database
	if e.Cat != nil {
		var first []byte
		if err := hms.Walk(args, e.Cat, func(typ byte, v []byte) bool {
			if typ == wire.TString {
				cats++
			}
			if typ == wire.TString && !(catSeen && bytes.Equal(v, first)) {
				first = v
				c := hms.Normalize(v)
				if catSeen && c != n.Cat {
					mixed = true
					return false
				}
				n.Cat, catSeen = c, true
			}
			return true
		}); err != nil {
			return n, err
		}
	}
	if e.DB != nil {
		dbSeen := false
		var first []byte // the first element's name as sent: most lists repeat it
		base := n.Cat    // an element's catalog unless its name carries one
		if err := hms.Walk(args, e.DB, func(typ byte, v []byte) bool {
			if typ == wire.TString {
				dbs++
			}
			if typ != wire.TString || (dbSeen && bytes.Equal(v, first)) {
				return true
			}
			if !dbSeen {
				first = v
			}
			cat, prefixed := base, false
			if e.DBInName {
				c, db, null := splitCatDB(v)
				if c != nil {
					cat, prefixed = hms.Normalize(c), true
				}
				if null {
					// No database: the catalog alone is named (widened
					// by the caller).
					if !dbSeen {
						n.Cat, n.Prefixed = cat, prefixed
					}
					return false
				}
				v = db
			}
			db := normDB(e.Scope, v)
			if dbSeen && (db != n.DB || cat != n.Cat) {
				mixed = true
				return false
			}
			n.Cat, n.DB, n.HasDB, dbSeen = cat, db, true, true
			n.Prefixed = n.Prefixed || prefixed
			return true
		}); err != nil {
			return n, err
		}
	}
	if mixed || partlyCataloged(e, cats, dbs) {
		return n, ErrMixedNames
	}
	if e.Table != nil {
		if err := hms.Walk(args, e.Table, func(typ byte, v []byte) bool {
			if typ == wire.TString {
				n.Tables = append(n.Tables, hms.Normalize(v))
			}
			return true
		}); err != nil {
			return n, err
		}
	}
	return n, nil
}

// partlyCataloged reports whether some elements of a list name their
// catalog and others leave it out: those may be in another catalog than
// the named one (the default, or the first element's, as the server
// decides), so the list names more than one.
func partlyCataloged(e *hms.Effect, cats, dbs int) bool {
	return cats > 0 && cats < dbs && sameList(e.Cat, e.DB)
}

// sameList reports whether paths a and b run through one list: the same
// fields up to an Each.
func sameList(a, b hms.Path) bool {
	for i := 0; i < len(a) && i < len(b) && a[i] == b[i]; i++ {
		if a[i] == hms.Each {
			return true
		}
	}
	return false
}

// AppendKey appends the cache key of a read: scope, method, the names as
// sent, then the args with the name fields removed, so that every other
// field that can change the reply (snapshots, capabilities, engine,
// filters, partition values, limits) is part of the key as sent. Names
// are keyed as sent, not normalised: the metastore finds one object for
// "T1 " and "t1", but its not-found answers quote the name as it came
// ("hive.db.T1  table not found"), so only identical spellings may share
// an entry. It is ReadKey for names n found by ExtractNames (whose names
// are normalised: equal to the spelling only for plain names); the
// request path uses ReadKey.
//
// Scope and names are length-prefixed, not terminated: they come from the
// network (set_ugi, db and table names) and may hold any byte, and with
// terminators get_table("a\x00b", <no table>) and get_table("a", "b")
// would share a key. A name field of an unexpected wire type (a list
// where a string belongs) is not cached (ok false): the server ignores
// such a field, so keying it as the name it seems to hold would mix the
// reply for a missing name into the entry of a real one.
func AppendKey(dst []byte, sc Scope, m *hms.Method, n *Names, args []byte) ([]byte, bool) {
	var r hms.Resolved
	if err := m.Resolve(&r, args); err != nil || r.Bad {
		return dst, false
	}
	defCat := n.Cat
	if n.Prefixed || r.Cat != nil {
		// n.Cat is the catalog the request named, not the default one,
		// which the request's own names then override anyway.
		defCat = ""
	}
	return ReadKey(dst, sc, m, &r, defCat)
}

// ReadKey appends the cache key of a read whose args m.Resolve resolved
// into r: the key AppendKey builds from ExtractNames' names, without
// decoding the args again or allocating. ok is false for a request that
// must not be cached (see AppendKey).
func ReadKey(dst []byte, sc Scope, m *hms.Method, r *hms.Resolved, defaultCat string) ([]byte, bool) {
	if r.Bad {
		return dst, false
	}
	kn := resolvedNames(m, r, defaultCat)
	dst = appendPrefix(dst, sc, m, &kn, len(kn.tables))
	return append(dst, r.Rest...), true
}

// EntryKeyPrefix appends the key prefix of the entries of a batch read
// (m.Batch): the read's key without its list of names, then 0xff. An
// entry's key is the prefix and its name: a partition name as sent, or a
// table name normalised (a table-objects reply lists the tables found,
// with no trace of how they were asked for).
func EntryKeyPrefix(dst []byte, sc Scope, m *hms.Method, r *hms.Resolved, defaultCat string) ([]byte, bool) {
	if r.Bad {
		return dst, false
	}
	kn := resolvedNames(m, r, defaultCat)
	if m.Batch != nil && m.Batch.Of == hms.BatchTables {
		// The tables are the entries: keyed by the rest of the request,
		// so that one entry serves every request naming that table.
		dst = appendPrefix(dst, sc, m, &kn, 0)
		dst = append(dst, r.Rest...)
		return append(dst, 0xff), true
	}
	dst = appendPrefix(dst, sc, m, &kn, len(kn.tables))
	from := 0
	for _, c := range r.Cuts {
		dst = append(dst, r.Rest[from:c.From]...)
		from = c.To
	}
	dst = append(dst, r.Rest[from:]...)
	return append(dst, 0xff), true
}

// AppendTableName appends a table name as entry keys hold it.
func AppendTableName(dst, tbl []byte) []byte { return hms.AppendNormalized(dst, tbl) }

// keyNames are a read's names as found, before normalising: cat nil
// stands for defCat, taken as it is.
type keyNames struct {
	cat, db         []byte
	defCat          string
	hasDB, prefixed bool
	tables          [][]byte
}

// resolvedNames reads the names of a resolved read as ExtractNames does.
func resolvedNames(m *hms.Method, r *hms.Resolved, defaultCat string) keyNames {
	kn := keyNames{cat: r.Cat, defCat: defaultCat, tables: r.Tables}
	if v := r.DB; v != nil {
		if m.Target.DBInName {
			cat, db, null := splitCatDB(v)
			if cat != nil {
				kn.cat, kn.prefixed = cat, true
			}
			v = db
			if null {
				v = nil
			}
		}
		kn.db, kn.hasDB = v, v != nil
	}
	return kn
}

// ReadNames are the normalised names of a resolved read: what its
// dependencies, the never-cache policy and refresh jobs go by.
func ReadNames(m *hms.Method, r *hms.Resolved, defaultCat string) Names {
	kn := resolvedNames(m, r, defaultCat)
	n := Names{Cat: defaultCat, HasDB: kn.hasDB, Prefixed: kn.prefixed}
	if kn.cat != nil {
		n.Cat = hms.Normalize(kn.cat)
	}
	if kn.hasDB {
		n.DB = normDB(m.Target.Scope, kn.db)
	}
	if len(kn.tables) > 0 {
		n.Tables = make([]string, len(kn.tables))
		for i, t := range kn.tables {
			n.Tables[i] = hms.Normalize(t)
		}
	}
	return n
}

// normDB normalises a database name. A database *pattern* (ScopeCatalog:
// get_databases, get_table_meta) is turned by HMS into a
// case-insensitive regex, where \W still is not \w: it stays as sent
// (issue 10 fuzzing).
func normDB(sc hms.Scope, db []byte) string {
	if sc == hms.ScopeCatalog {
		return string(db)
	}
	return hms.Normalize(db)
}

// appendPrefix appends the scope, method, and the names as sent: the
// catalog, the database and the first nt tables of kn.
func appendPrefix(dst []byte, sc Scope, m *hms.Method, kn *keyNames, nt int) []byte {
	dst = sc.Append(dst)
	dst = appendString(dst, m.Name)
	if kn.cat != nil {
		dst = appendBytes(dst, kn.cat)
	} else {
		dst = appendString(dst, kn.defCat)
	}
	// bit 0: a database is named; bit 1: as "@cat#db"; bit 2: a request
	// struct leaves its catalog field out. Hive 4.0 does not read an
	// absent catalog as the default one everywhere: on some paths (a
	// filter its direct SQL does not take) it fails with "catName is
	// null" where the same request naming the catalog is answered, so
	// the two never share an entry.
	var form byte
	if kn.hasDB {
		form |= 1
	}
	if kn.prefixed {
		form |= 2
	}
	if kn.cat == nil && m.Target.Cat != nil {
		form |= 4
	}
	dst = append(dst, form)
	if kn.hasDB {
		dst = appendBytes(dst, kn.db)
	}
	dst = binary.AppendUvarint(dst, uint64(nt))
	for _, t := range kn.tables[:nt] {
		dst = appendBytes(dst, t)
	}
	return dst
}

// Append appends the scope to a key: each part length-prefixed, so that
// no two scopes meet.
func (sc *Scope) Append(dst []byte) []byte {
	dst = appendString(dst, sc.Upstream)
	if sc.PerUser {
		dst = append(dst, 1)
	} else {
		dst = append(dst, 0)
	}
	dst = appendString(dst, sc.User)
	return appendString(dst, sc.Conf)
}

// appendString appends s with its length in front.
func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// appendBytes appends b with its length in front.
func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
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
