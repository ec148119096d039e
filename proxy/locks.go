package proxy

import (
	"context"
	"fmt"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// A granted write lock is a freshness point (promise 10). Table formats
// and Hive ACID commit through the metastore's locks: Iceberg takes an
// exclusive lock on the table, reads it (get_table), checks that its
// metadata location is still the one it based its commit on, alters it
// and unlocks. A writer that bypasses the proxy commits under the same
// lock, and the notification log tells the proxy of that commit only a
// poll later: a get_table answered from the cache inside the lock could
// then pass the check with the state before the other commit, and the
// commit would overwrite it.
//
// So when the metastore grants a lock that announces a write (shared
// write, exclusive, exclusive write; not shared read), the proxy
// invalidates what the lock covers, across the fleet and with the
// read-your-writes wait of a write, before the client learns of the
// grant: the table (its partitions, their names and statistics) for a
// table lock, the table's partitions for a partition lock, the database
// for a database lock. Whatever the lock holder reads afterwards was
// loaded after the grant, so after every commit made under the lock
// before it. The connection also remembers the locks it holds, and its
// reads of what they cover go to the metastore until it unlocks.

// Lock types and states of the metastore's lock API.
const (
	lockSharedRead = 1
	lockAcquired   = 1
	lockWaiting    = 2
	lockLevelDB    = 1
	lockLevelTable = 2
)

// maxHeldLocks bounds the locks a connection remembers: a client may
// take any number of locks; past the bound the oldest are forgotten (the
// invalidation at their grant stays done).
const maxHeldLocks = 256

// heldLock is a write lock of the connection: what it covers, and
// whether the metastore granted it yet.
type heldLock struct {
	id      int64
	ents    []cache.Entity
	granted bool
}

// lockCall forwards lock, check_lock or unlock and keeps the locks of
// the connection; a grant of a write lock invalidates what it covers
// before the client sees it.
func (c *clientConn) lockCall(meth *hms.Method, m wire.Message) error {
	k := c.rt.cache
	sink := &lockSink{c: c, method: meth.Name}
	switch meth.Name {
	case "lock":
		ents, txn := lockEntities(m.Body(), k.DefaultCatalog)
		sink.ents = ents
		if txn > 0 && len(ents) > 0 {
			// A transaction's commit or abort changes what its readers
			// see of the tables it locked for writing.
			k.txns.Locked(txn, ents)
		}
	case "check_lock", "unlock":
		sink.id, sink.known = lockIDArg(m.Body())
	}
	return c.forward(upstream.Call{Session: c.sess, Class: upstream.Write, Msg: m}, sink)
}

// lockSink sees the metastore's answer to a lock call before the client.
type lockSink struct {
	c      *clientConn
	method string
	ents   []cache.Entity // lock: what the request's write components cover
	id     int64          // check_lock, unlock: the lock named
	known  bool
}

func (s *lockSink) BorrowsReply() {}

func (s *lockSink) Reply(m wire.Message) error {
	c := s.c
	switch s.method {
	case "lock":
		if id, state, ok := lockResponse(m); ok && len(s.ents) > 0 {
			l := c.rememberLock(id, s.ents)
			if state == lockAcquired {
				c.granted(l)
			}
		}
	case "check_lock":
		if _, state, ok := lockResponse(m); ok && state == lockAcquired && s.known {
			l := c.heldLock(s.id)
			if l == nil {
				// Taken on another connection (or forgotten): ask the
				// metastore what it covers.
				ents, err := c.rt.cache.lockedBy(c.s.ctx, c.rt.up, s.id)
				if err != nil {
					c.s.log.Warn("a granted lock's objects are unknown: everything cached for the group is invalidated", "lock", s.id, "err", err)
					ents = []cache.Entity{{Level: cache.LevelAll}}
				}
				if len(ents) > 0 {
					l = c.rememberLock(s.id, ents)
				}
			}
			if l != nil && !l.granted {
				c.granted(l)
			}
		}
	case "unlock":
		if s.known && upstream.Succeeded(m) {
			c.forgetLock(s.id)
		}
	}
	return c.Reply(m)
}

// granted invalidates what a newly granted write lock covers, on every
// node, before the grant reaches the client. A lock on everything (no
// database named) spends the client's flush budget like any other
// cache-wide write.
func (c *clientConn) granted(l *heldLock) {
	l.granted = true
	c.invalidate(l.ents)
}

func (c *clientConn) rememberLock(id int64, ents []cache.Entity) *heldLock {
	if l := c.heldLock(id); l != nil {
		return l
	}
	if len(c.locks) >= maxHeldLocks {
		c.locks = append(c.locks[:0], c.locks[1:]...)
	}
	c.locks = append(c.locks, heldLock{id: id, ents: ents})
	return &c.locks[len(c.locks)-1]
}

func (c *clientConn) heldLock(id int64) *heldLock {
	for i := range c.locks {
		if c.locks[i].id == id {
			return &c.locks[i]
		}
	}
	return nil
}

func (c *clientConn) forgetLock(id int64) {
	for i := range c.locks {
		if c.locks[i].id == id {
			c.locks = append(c.locks[:i], c.locks[i+1:]...)
			return
		}
	}
}

// underLock reports whether a read of names touches what a write lock
// of the connection covers: such a read goes to the metastore.
func (c *clientConn) underLock(n *cache.Names) bool {
	for i := range c.locks {
		if !c.locks[i].granted {
			continue
		}
		for _, e := range c.locks[i].ents {
			if covers(&e, n) {
				return true
			}
		}
	}
	return false
}

// covers reports whether entity e may change the answer of a read of n.
func covers(e *cache.Entity, n *cache.Names) bool {
	switch {
	case e.Level == cache.LevelAll:
		return true
	case e.Cat != n.Cat:
		return false
	case !n.HasDB:
		return true // a listing of the catalog
	case e.DB != n.DB:
		return false
	case e.Level == cache.LevelDatabase || len(n.Tables) == 0:
		return true
	}
	for _, t := range n.Tables {
		if t == e.Table {
			return true
		}
	}
	return false
}

// lockEntities reads a LockRequest (arg 1): what its write components
// cover, and its transaction (0: none).
func lockEntities(args []byte, defaultCat string) (ents []cache.Entity, txn int64) {
	d := wire.NewDecoder(args)
	d.Fields(func(id int16, typ byte) bool {
		if id != 1 || typ != wire.TStruct {
			return false
		}
		d.Fields(func(id int16, typ byte) bool {
			switch {
			case id == 1 && typ == wire.TList:
				et, n := d.ListBegin()
				for i := 0; i < n && d.Err() == nil; i++ {
					if et != wire.TStruct {
						d.Skip(et)
						continue
					}
					if e, ok := lockComponent(d, defaultCat); ok {
						ents = append(ents, e)
					}
				}
			case id == 2 && typ == wire.TI64:
				txn = d.I64()
			default:
				return false
			}
			return true
		})
		return true
	})
	if d.Err() != nil && len(ents) == 0 {
		return nil, 0
	}
	if d.Err() != nil {
		// A malformed request the metastore will refuse; should it not,
		// the proxy cannot tell what it locks.
		return []cache.Entity{{Level: cache.LevelAll}}, txn
	}
	return ents, txn
}

// lockComponent reads one LockComponent; ok false for a shared read.
func lockComponent(d *wire.Decoder, defaultCat string) (cache.Entity, bool) {
	var typ, level int32
	var db, tbl []byte
	var hasDB, hasTbl bool
	d.Fields(func(id int16, t byte) bool {
		switch {
		case id == 1 && t == wire.TI32:
			typ = d.I32()
		case id == 2 && t == wire.TI32:
			level = d.I32()
		case id == 3 && t == wire.TString:
			db, hasDB = d.Bytes(), true
		case id == 4 && t == wire.TString:
			tbl, hasTbl = d.Bytes(), true
		default:
			return false
		}
		return true
	})
	if typ == lockSharedRead {
		return cache.Entity{}, false
	}
	e := cache.Entity{Cat: defaultCat, DB: hms.Normalize(db)}
	switch {
	case !hasDB:
		e = cache.Entity{Level: cache.LevelAll}
	case level == lockLevelDB || !hasTbl:
		e.Level = cache.LevelDatabase
	case level == lockLevelTable:
		e.Level, e.Table = cache.LevelTable, hms.Normalize(tbl)
	default:
		// A partition lock: the table's partitions and their lists, not
		// the table object.
		e.Level, e.Table = cache.LevelPartitions, hms.Normalize(tbl)
	}
	return e, true
}

// lockIDArg reads the lockid of a CheckLockRequest or UnlockRequest.
func lockIDArg(args []byte) (id int64, ok bool) {
	d := wire.NewDecoder(args)
	d.Fields(func(fid int16, typ byte) bool {
		if fid != 1 || typ != wire.TStruct {
			return false
		}
		d.Fields(func(fid int16, typ byte) bool {
			if fid == 1 && typ == wire.TI64 {
				id, ok = d.I64(), true
				return true
			}
			return false
		})
		return true
	})
	return id, ok && d.Err() == nil
}

// lockResponse reads a reply holding a LockResponse (lockid, state).
func lockResponse(m wire.Message) (id int64, state int32, ok bool) {
	if m.Type != wire.Reply {
		return 0, 0, false
	}
	d := wire.NewDecoder(m.Body())
	found := false
	d.Fields(func(fid int16, typ byte) bool {
		if fid != 0 || typ != wire.TStruct {
			return false
		}
		found = true
		id, state = hms.ReadLockResponse(d)
		return true
	})
	return id, state, found && d.Err() == nil
}

// lockedBy asks the metastore (show_locks) what lock id covers, for a
// grant of a lock this node did not see taken. Shared reads cover
// nothing.
func (k *cacher) lockedBy(ctx context.Context, up Forwarder, id int64) ([]cache.Entity, error) {
	e := wire.Encoder{B: wire.AppendHeader(nil, wire.Call, []byte("show_locks"), 1)}
	e.FieldBegin(wire.TStruct, 1)
	e.Stop()
	e.Stop()
	m, err := wire.Parse(e.B, wire.Limits{})
	if err != nil {
		return nil, err
	}
	var sink captureSink
	if err := up.Do(ctx, upstream.Call{Session: upstream.NoSession, Class: upstream.Read, Msg: m}, &sink); err != nil {
		return nil, fmt.Errorf("proxy: show_locks: %w", err)
	}
	if sink.res.typ != wire.Reply {
		return nil, fmt.Errorf("proxy: show_locks: message type %d", sink.res.typ)
	}
	var ents []cache.Entity
	found := false
	d := wire.NewDecoder(sink.res.body)
	d.Fields(func(fid int16, typ byte) bool {
		if fid != 0 || typ != wire.TStruct {
			return false
		}
		d.Fields(func(fid int16, typ byte) bool {
			if fid != 1 || typ != wire.TList {
				return false
			}
			et, n := d.ListBegin()
			for i := 0; i < n && d.Err() == nil; i++ {
				if et != wire.TStruct {
					d.Skip(et)
					continue
				}
				var lid int64
				var lc lockElem
				d.Fields(func(fid int16, typ byte) bool {
					switch {
					case fid == 1 && typ == wire.TI64:
						lid = d.I64()
					case fid == 2 && typ == wire.TString:
						lc.db, lc.hasDB = d.Bytes(), true
					case fid == 3 && typ == wire.TString:
						lc.tbl = d.Bytes()
					case fid == 4 && typ == wire.TString:
						lc.part = d.Bytes()
					case fid == 6 && typ == wire.TI32:
						lc.typ = d.I32()
					default:
						return false
					}
					return true
				})
				if lid == id {
					found = true
					if e, ok := lc.entity(k.DefaultCatalog); ok {
						ents = append(ents, e)
					}
				}
			}
			return true
		})
		return true
	})
	if d.Err() != nil {
		return nil, fmt.Errorf("proxy: show_locks reply: %w", d.Err())
	}
	if !found {
		return nil, fmt.Errorf("proxy: lock %d not among the metastore's locks", id)
	}
	return ents, nil
}

// lockElem is one component of a lock as show_locks lists it.
type lockElem struct {
	typ           int32
	db, tbl, part []byte
	hasDB         bool
}

func (l *lockElem) entity(defaultCat string) (cache.Entity, bool) {
	if l.typ == lockSharedRead {
		return cache.Entity{}, false
	}
	if !l.hasDB {
		return cache.Entity{Level: cache.LevelAll}, true
	}
	e := cache.Entity{Level: cache.LevelDatabase, Cat: defaultCat, DB: hms.Normalize(l.db)}
	switch {
	case len(l.tbl) > 0 && len(l.part) > 0:
		e.Level, e.Table = cache.LevelPartitions, hms.Normalize(l.tbl)
	case len(l.tbl) > 0:
		e.Level, e.Table = cache.LevelTable, hms.Normalize(l.tbl)
	}
	return e, true
}
