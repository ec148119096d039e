package cache

import (
	"cmp"
	"errors"
	"slices"
	"sync"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Level is how much of a metastore's catalog an Entity covers.
type Level uint8

const (
	// LevelAll is everything cached for the upstream.
	LevelAll Level = iota + 1
	// LevelDatabase is a database, its lists and everything in it.
	LevelDatabase
	// LevelTable is a table, its partitions and statistics, and the
	// table lists of its database.
	LevelTable
	// LevelPartitions is the partitions (and their names, filters and
	// statistics) of a table, not the table object. With Entity.Added it
	// is narrower: see there.
	LevelPartitions
	// LevelFunction is the functions of a database.
	LevelFunction
)

func (l Level) String() string {
	switch l {
	case LevelAll:
		return "all"
	case LevelDatabase:
		return "database"
	case LevelTable:
		return "table"
	case LevelPartitions:
		return "partitions"
	case LevelFunction:
		return "function"
	}
	return "unknown"
}

// Entity is one thing a write changed, in a form that can be sent to other
// proxies.
type Entity struct {
	Level          Level
	Cat, DB, Table string
	// Added narrows a LevelPartitions entity to a write that only added
	// partitions (hms.Effect.Adds): the table's partition set changed,
	// so its partition lists, names, filter and count replies,
	// statistics over several partitions and every not-found answer go,
	// but the entries of partitions that exist stay, since an add never
	// changes one. Whatever reads only Level takes the entity as
	// LevelPartitions and invalidates more, never less: old bus nodes
	// and the change stream do.
	Added bool
}

// Counter names. Reads depend on some of them, writes bump some of them.
const (
	ctrGlobal byte = iota + 1
	ctrDBList
	ctrDB
	ctrTableList
	ctrTable
	ctrParts
	ctrFuncs
	ctrFuncsAll
	ctrTablesAll // every table of a catalog: cross-database table lists
	ctrPartSet   // which partitions a table has (bumped by adds too)
)

// depScratch is where dep names counters: on the caller's stack, so
// that a read names its counters without allocating. A name too long for
// arr is built in long, grown once for all the caller's names.
type depScratch struct {
	arr  [256]byte
	long []byte
}

// dep returns the counter of one entity, naming it in scratch.
func (s *Store) dep(scratch *depScratch, ctr byte, up string, n ...string) Dep {
	size := 1 + len(up)
	for _, x := range n {
		size += 1 + len(x)
	}
	b := scratch.arr[:0]
	if size > len(scratch.arr) {
		if cap(scratch.long) < size {
			scratch.long = make([]byte, 0, size)
		}
		b = scratch.long[:0]
	}
	b = append(b, ctr)
	b = append(b, up...)
	for _, x := range n {
		b = append(b, 0)
		b = append(b, x...)
	}
	return s.gens.Of(b)
}

// ReadDeps lists the counters the reply of m for names n depends on. It
// returns false when the reply depends on more than an entry can track.
func (s *Store) ReadDeps(dst []Dep, sc Scope, m *hms.Method, n *Names) ([]Dep, bool) {
	var b depScratch
	up := sc.Upstream
	dst = append(dst[:0], s.dep(&b, ctrGlobal, up))
	t := &m.Target
	switch t.Scope {
	case hms.ScopeAll:
		if m.Kind == hms.KindFunction {
			dst = append(dst, s.dep(&b, ctrFuncsAll, up, n.Cat))
		}
	case hms.ScopeCatalog:
		dst = append(dst, s.dep(&b, ctrDBList, up, n.Cat))
		if m.Kind != hms.KindDatabaseNames {
			// get_table_meta lists tables across databases.
			dst = append(dst, s.dep(&b, ctrTablesAll, up, n.Cat))
		}
	case hms.ScopeDatabase:
		if !n.HasDB {
			dst = append(dst, s.dep(&b, ctrDBList, up, n.Cat))
			break
		}
		dst = append(dst, s.dep(&b, ctrDB, up, n.Cat, n.DB))
		if m.Kind != hms.KindDatabase {
			dst = append(dst, s.dep(&b, ctrTableList, up, n.Cat, n.DB))
		}
	case hms.ScopeTable, hms.ScopePartition:
		if !n.HasDB {
			return dst, false
		}
		dst = append(dst, s.dep(&b, ctrDB, up, n.Cat, n.DB))
		if len(n.Tables) == 0 {
			dst = append(dst, s.dep(&b, ctrTableList, up, n.Cat, n.DB))
		}
		room := maxDeps - 1
		if t.Scope == hms.ScopePartition {
			room-- // the partitions and the partition set
		}
		if len(dst)+len(n.Tables) > room {
			return dst, false
		}
		for _, tbl := range n.Tables {
			dst = append(dst, s.dep(&b, ctrTable, up, n.Cat, n.DB, tbl))
		}
		if t.Scope == hms.ScopePartition && len(n.Tables) == 1 {
			// Every partition read depends on the partition set too, its
			// snapshot included: an entry that holds one existing
			// partition drops it on admission (Snapshot.Existing), a
			// not-found answer or a list keeps it, and loads before and
			// after an add never share a flight.
			dst = append(dst, s.dep(&b, ctrParts, up, n.Cat, n.DB, n.Tables[0]),
				s.dep(&b, ctrPartSet, up, n.Cat, n.DB, n.Tables[0])|depPartSet)
		}
	case hms.ScopeFunction:
		dst = append(dst, s.dep(&b, ctrFuncs, up, n.Cat, n.DB), s.dep(&b, ctrFuncsAll, up, n.Cat))
	default:
		return dst, false
	}
	return dst, true
}

// Apply bumps the counters of entities for upstream up.
func (s *Store) Apply(up string, ents []Entity) {
	var b depScratch
	for _, e := range ents {
		switch e.Level {
		case LevelDatabase:
			s.gens.Bump(s.dep(&b, ctrDB, up, e.Cat, e.DB))
			s.gens.Bump(s.dep(&b, ctrDBList, up, e.Cat))
			s.gens.Bump(s.dep(&b, ctrTableList, up, e.Cat, e.DB))
			s.gens.Bump(s.dep(&b, ctrFuncs, up, e.Cat, e.DB))
			s.gens.Bump(s.dep(&b, ctrFuncsAll, up, e.Cat))
			s.gens.Bump(s.dep(&b, ctrTablesAll, up, e.Cat))
		case LevelTable:
			s.gens.Bump(s.dep(&b, ctrTable, up, e.Cat, e.DB, e.Table))
			s.gens.Bump(s.dep(&b, ctrTableList, up, e.Cat, e.DB))
			s.gens.Bump(s.dep(&b, ctrTablesAll, up, e.Cat))
		case LevelPartitions:
			if e.Added {
				s.gens.Bump(s.dep(&b, ctrPartSet, up, e.Cat, e.DB, e.Table))
				break
			}
			// Every read of the partition set depends on ctrParts too.
			s.gens.Bump(s.dep(&b, ctrParts, up, e.Cat, e.DB, e.Table))
		case LevelFunction:
			s.gens.Bump(s.dep(&b, ctrFuncs, up, e.Cat, e.DB))
			s.gens.Bump(s.dep(&b, ctrFuncsAll, up, e.Cat))
		default:
			s.gens.Bump(s.dep(&b, ctrGlobal, up))
		}
	}
}

// WriteEntities lists what a write changes. A name the request does not
// carry widens the entity: no table means its whole database, no
// database means everything.
func WriteEntities(dst []Entity, m *hms.Method, args []byte, defaultCat string) []Entity {
	n := len(dst)
	dst = writeEntities(dst, m, args, defaultCat)
	return append(dst[:n], dedupe(dst[n:])...)
}

func writeEntities(dst []Entity, m *hms.Method, args []byte, defaultCat string) []Entity {
	for i := range m.Effects {
		e := &m.Effects[i]
		n, err := ExtractNames(e, args, defaultCat)
		if errors.Is(err, ErrMixedNames) && (e.Scope == hms.ScopeTable || e.Scope == hms.ScopePartition) {
			// Which table is in which database is not read: every
			// database the list names, whole.
			dst = append(dst, mixedDatabases(e, args, defaultCat)...)
			continue
		}
		if err != nil {
			return append(dst, Entity{Level: LevelAll})
		}
		if e.Optional && !n.HasDB && len(n.Tables) == 0 {
			continue // a list left out or empty: nothing named, nothing changed
		}
		switch e.Scope {
		case hms.ScopeNone, hms.ScopeTxn:
			// Transactions are resolved by TxnTracker.
		case hms.ScopeDatabase:
			dst = append(dst, dbOrAll(n))
		case hms.ScopeTable, hms.ScopePartition:
			lvl := LevelTable
			if e.Scope == hms.ScopePartition {
				lvl = LevelPartitions
			}
			if !n.HasDB || len(n.Tables) == 0 {
				dst = append(dst, dbOrAll(n))
				break
			}
			added := e.Scope == hms.ScopePartition && e.Adds
			for _, t := range n.Tables {
				dst = append(dst, Entity{Level: lvl, Cat: n.Cat, DB: n.DB, Table: t, Added: added})
			}
			if e.NewTable != nil {
				nn, err := ExtractNames(&hms.Effect{DB: e.NewDB, Table: e.NewTable}, args, n.Cat)
				if err != nil {
					return append(dst, Entity{Level: LevelAll})
				}
				db := n.DB
				if nn.HasDB {
					db = nn.DB
				}
				for _, t := range nn.Tables {
					dst = append(dst, Entity{Level: LevelTable, Cat: n.Cat, DB: db, Table: t})
				}
			}
		case hms.ScopeFunction:
			if !n.HasDB {
				dst = append(dst, Entity{Level: LevelAll})
				break
			}
			dst = append(dst, Entity{Level: LevelFunction, Cat: n.Cat, DB: n.DB})
		default:
			dst = append(dst, Entity{Level: LevelAll})
		}
	}
	return dst
}

// dedupe drops repeated entities (add_partitions names its table once
// per partition), keeping the first of each.
func dedupe(ents []Entity) []Entity {
	out := ents[:0]
	for _, e := range ents {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// maxMixedDatabases bounds the databases one mixed list invalidates one
// by one; a list naming more (a hostile client's) invalidates everything
// in one entity rather than flood the bus with thousands.
const maxMixedDatabases = 64

// mixedDatabases are the database entities of every catalog and database
// e's paths name in args: each catalog with each database, as elements
// pair them in ways ExtractNames does not read.
func mixedDatabases(e *hms.Effect, args []byte, defaultCat string) []Entity {
	cats := map[string]bool{}
	dbs := map[[2]string]bool{}
	named, elements := 0, 0 // the elements naming a catalog, a database
	if e.Cat != nil {
		hms.Walk(args, e.Cat, func(typ byte, v []byte) bool {
			if typ == wire.TString {
				cats[hms.Normalize(v)] = true
				named++
			}
			return len(cats) <= maxMixedDatabases
		})
	}
	hms.Walk(args, e.DB, func(typ byte, v []byte) bool {
		if typ != wire.TString {
			return true
		}
		elements++
		cat := ""
		if e.DBInName {
			c, db, null := splitCatDB(v)
			if null {
				return true
			}
			if c != nil {
				cat = hms.Normalize(c)
			}
			v = db
		}
		dbs[[2]string{cat, normDB(e.Scope, v)}] = true
		return len(dbs) <= maxMixedDatabases
	})
	if len(cats) == 0 || partlyCataloged(e, named, elements) {
		cats[defaultCat] = true
	}
	var out []Entity
	for d := range dbs {
		for c := range cats {
			if d[0] != "" {
				c = d[0]
			}
			out = append(out, Entity{Level: LevelDatabase, Cat: c, DB: d[1]})
		}
	}
	if len(out) == 0 || len(out) > maxMixedDatabases || len(cats) > maxMixedDatabases {
		return []Entity{{Level: LevelAll}}
	}
	slices.SortFunc(out, func(a, b Entity) int { return cmp.Or(cmp.Compare(a.Cat, b.Cat), cmp.Compare(a.DB, b.DB)) })
	return out
}

func dbOrAll(n Names) Entity {
	if !n.HasDB {
		return Entity{Level: LevelAll}
	}
	return Entity{Level: LevelDatabase, Cat: n.Cat, DB: n.DB}
}

// TxnTracker remembers which tables each open transaction allocated write
// ids for or locked, so that its commit or abort invalidates them.
type TxnTracker struct {
	mu    sync.Mutex // guards txns, order
	txns  map[int64][]Entity
	order []int64 // insertion order, to bound memory
	max   int
}

// NewTxnTracker remembers up to max transactions (oldest forgotten first);
// max below 1 means 1.
func NewTxnTracker(max int) *TxnTracker {
	// With max 0, add would forget the transaction before storing it and
	// the map would grow without bound.
	if max < 1 {
		max = 1
	}
	return &TxnTracker{txns: map[int64][]Entity{}, max: max}
}

// Observe learns from a call whether it ties tables to transactions, and
// for commit_txn/abort_txn returns the tables to invalidate.
func (t *TxnTracker) Observe(method string, args []byte, defaultCat string) []Entity {
	switch method {
	case "allocate_table_write_ids":
		// AllocateTableWriteIdsRequest: 1 dbName, 2 tableName, 3 txnIds.
		var db, tbl string
		var ids []int64
		d := wire.NewDecoder(args)
		walkReq(d, func(id int16, typ byte) bool {
			switch {
			case id == 1 && typ == wire.TString:
				db = string(d.Bytes())
			case id == 2 && typ == wire.TString:
				tbl = string(d.Bytes())
			case id == 3 && typ == wire.TList:
				et, n := d.ListBegin()
				for i := 0; i < n && d.Err() == nil; i++ {
					if et == wire.TI64 {
						ids = append(ids, d.I64())
					} else {
						d.Skip(et)
					}
				}
			default:
				return false
			}
			return true
		})
		cat, dbb, _ := splitCatDB([]byte(db))
		c := defaultCat
		if cat != nil {
			c = hms.Normalize(cat)
		}
		e := Entity{Level: LevelTable, Cat: c, DB: hms.Normalize(dbb), Table: hms.NormalizeString(tbl)}
		t.mu.Lock()
		for _, id := range ids {
			t.add(id, e)
		}
		t.mu.Unlock()
	case "commit_txn", "abort_txn":
		// CommitTxnRequest / AbortTxnRequest: 1 txnid.
		var txn int64
		found := false
		d := wire.NewDecoder(args)
		walkReq(d, func(id int16, typ byte) bool {
			if id == 1 && typ == wire.TI64 {
				txn, found = d.I64(), true
				return true
			}
			return false
		})
		if !found {
			return nil
		}
		t.mu.Lock()
		ents := t.txns[txn]
		delete(t.txns, txn)
		t.mu.Unlock()
		return ents
	}
	return nil
}

// Locked learns that transaction txn took write locks covering ents:
// its commit or abort invalidates them.
func (t *TxnTracker) Locked(txn int64, ents []Entity) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range ents {
		t.add(txn, e)
	}
}

func (t *TxnTracker) add(txn int64, e Entity) {
	if _, ok := t.txns[txn]; !ok {
		t.order = append(t.order, txn)
		if len(t.order) > t.max {
			delete(t.txns, t.order[0])
			t.order = t.order[1:]
		}
	}
	for _, x := range t.txns[txn] {
		if x == e {
			return
		}
	}
	t.txns[txn] = append(t.txns[txn], e)
}

// walkReq visits the fields of the request struct at arg 1; fn consumes
// the value and returns true, or returns false to have it skipped.
func walkReq(d *wire.Decoder, fn func(id int16, typ byte) bool) {
	d.Fields(func(id int16, typ byte) bool {
		if id != 1 || typ != wire.TStruct {
			return false
		}
		d.Fields(fn)
		return true
	})
}
