package demohms

import (
	"strconv"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Locks, as the metastore's lock manager grants them, in memory: a lock
// is acquired at once unless an earlier lock on an overlapping object
// conflicts with it, and then waits (check_lock acquires it once those
// are gone). Shared reads conflict only with exclusive locks; shared
// writes with exclusive and exclusive-write ones; exclusive locks with
// everything. Locks never time out (no housekeeping runs).

// LockType and LockState values (§6.3).
const (
	lockSharedRead  int32 = 1
	lockSharedWrite int32 = 2
	lockExclusive   int32 = 3
	lockExclWrite   int32 = 4

	lockAcquired int32 = 1
	lockWaiting  int32 = 2
)

var (
	thLock      = []exKind{exNoSuchTxn, exTxnAborted}
	thCheckLock = []exKind{exNoSuchTxn, exTxnAborted, exNoSuchLock}
	thUnlock    = []exKind{exNoSuchLock, exTxnOpen}
)

type lockComp struct {
	typ           int32
	db, tbl, part string
}

type demoLock struct {
	id         int64
	state      int32
	comps      []lockComp
	txn        int64
	user, host string
}

// overlaps reports whether two components lock a common object.
func (a lockComp) overlaps(b lockComp) bool {
	switch {
	case a.db != b.db:
		return false
	case a.tbl == "" || b.tbl == "":
		return true
	case a.tbl != b.tbl:
		return false
	}
	return a.part == "" || b.part == "" || a.part == b.part
}

func conflicts(a, b int32) bool {
	switch {
	case a == lockExclusive || b == lockExclusive:
		return true
	case a == lockSharedRead || b == lockSharedRead:
		return false
	}
	return a == lockExclWrite || b == lockExclWrite
}

// blocked reports whether an earlier lock conflicts with l. st.mu is held.
func (st *txnState) blocked(l *demoLock) bool {
	for _, o := range st.locks {
		if o.id >= l.id {
			continue
		}
		for _, a := range l.comps {
			for _, b := range o.comps {
				if a.overlaps(b) && conflicts(a.typ, b.typ) {
					return true
				}
			}
		}
	}
	return false
}

// lock(LockRequest{1 component, 2 txnid, 3 user, 4 hostname}) -> LockResponse{1 lockid, 2 state}
func hLock(c *conn, a *tval, e *wire.Encoder) error {
	r := a.sub(1)
	st, unlock := c.s.lockedTxnState()
	defer unlock()
	l := &demoLock{txn: r.integer(2, 0), user: r.str(3), host: r.str(4)}
	if l.txn > 0 {
		if _, err := st.open(l.txn); err != nil {
			return err
		}
	}
	for _, comp := range r.list(1) {
		l.comps = append(l.comps, lockComp{typ: int32(comp.integer(1, 0)), db: hms.NormalizeString(comp.str(3)),
			tbl: hms.NormalizeString(comp.str(4)), part: comp.str(5)})
	}
	if st.locks == nil {
		st.locks = map[int64]*demoLock{}
	}
	st.nextLock++
	l.id = st.nextLock
	l.state = lockAcquired
	if st.blocked(l) {
		l.state = lockWaiting
	}
	st.locks[l.id] = l
	return lockResponse(e, l)
}

// check_lock(CheckLockRequest{1 lockid}) -> LockResponse
func hCheckLock(c *conn, a *tval, e *wire.Encoder) error {
	return c.s.onNamedLock(a, func(st *txnState, l *demoLock) error {
		if l.state == lockWaiting && !st.blocked(l) {
			l.state = lockAcquired
		}
		return lockResponse(e, l)
	})
}

// unlock(UnlockRequest{1 lockid})
func hUnlock(c *conn, a *tval, e *wire.Encoder) error {
	return c.s.onNamedLock(a, func(st *txnState, l *demoLock) error {
		if l.txn > 0 {
			return &hmsError{exTxnOpen, "Unlocking locks associated with transaction not permitted. " + txnName(l.txn)}
		}
		delete(st.locks, l.id)
		return nil
	})
}

// onNamedLock runs fn, holding the transaction state's lock, on the lock
// that the lockid of a CheckLockRequest or UnlockRequest (arg 1) names;
// when there is none it returns the metastore's NoSuchLockException.
func (s *Server) onNamedLock(a *tval, fn func(st *txnState, l *demoLock) error) error {
	st, unlock := s.lockedTxnState()
	defer unlock()
	id := a.sub(1).integer(1, 0)
	l := st.locks[id]
	if l == nil {
		return &hmsError{exNoSuchLock, "No such lock lockid:" + strconv.FormatInt(id, 10)}
	}
	return fn(st, l)
}

// show_locks(ShowLocksRequest) -> ShowLocksResponse{1 list<ShowLocksResponseElement>}
func hShowLocks(c *conn, a *tval, e *wire.Encoder) error {
	st, unlock := c.s.lockedTxnState()
	defer unlock()
	n := 0
	for _, l := range st.locks {
		n += len(l.comps)
	}
	e.FieldBegin(wire.TStruct, 0)
	e.FieldBegin(wire.TList, 1)
	e.ListBegin(wire.TStruct, n)
	for _, l := range st.locks {
		for _, comp := range l.comps {
			e.I64Field(1, l.id)
			e.StringField(2, comp.db)
			if comp.tbl != "" {
				e.StringField(3, comp.tbl)
			}
			if comp.part != "" {
				e.StringField(4, comp.part)
			}
			e.I32Field(5, l.state)
			e.I32Field(6, comp.typ)
			e.I64Field(8, 0)
			e.StringField(10, l.user)
			e.StringField(11, l.host)
			e.Stop()
		}
	}
	e.Stop()
	return nil
}

func lockResponse(e *wire.Encoder, l *demoLock) error {
	e.FieldBegin(wire.TStruct, 0)
	e.I64Field(1, l.id)
	e.I32Field(2, l.state)
	e.Stop()
	return nil
}
