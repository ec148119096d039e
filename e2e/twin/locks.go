package twin

import (
	"fmt"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Locks, transactions and table-format commits: calls whose replies name
// ids later calls use, so they run as compound steps that read their own
// replies.
type compound interface {
	Op
	run(r *runner, s *session, st Step) *Diff
}

// Lock types and levels of the metastore's lock API.
const (
	SharedRead  int32 = 1
	SharedWrite int32 = 2
	Exclusive   int32 = 3
	ExclWrite   int32 = 4

	LevelDB        int32 = 1
	LevelTable     int32 = 2
	LevelPartition int32 = 3

	lockAcquired int32 = 1
	lockWaiting  int32 = 2
)

// pathCall makes a call that changes server state once, through via
// (straight: to the metastore of database base db), ordered like a write
// against the reads of what it touches.
func (r *runner) pathCall(s *session, via Via, db string, touches []string, method string, args []byte) reply {
	defer r.order.acquire(writeTouches(touches), true)()
	return r.lockCall(s, via, db, method, args)
}

// lockCall makes a call of the lock API once, through via (straight: to
// the metastore of database base db). Locks change no metadata a read
// returns, so they are not ordered against reads: a session polling for
// a lock must not hold every read back.
func (r *runner) lockCall(s *session, via Via, db, method string, args []byte) reply {
	if r.ms.Version == "4.0" {
		r.txnMu.Lock()
		defer r.txnMu.Unlock()
	}
	c := s.pc
	if via == Direct {
		c = r.dcFor(s, db)
	}
	return call(c, method, args)
}

// result positions a decoder on a successful reply's result struct; nil
// for an exception or a failure.
func result(rp reply) *wire.Decoder {
	if rp.err != nil || rp.typ != wire.Reply {
		return nil
	}
	d := wire.NewDecoder(rp.body)
	typ, id := d.FieldBegin()
	if d.Err() != nil || id != 0 || typ != wire.TStruct {
		return nil
	}
	return d
}

// lockResponse reads a LockResponse.
func lockResponse(rp reply) (id int64, state int32, ok bool) {
	d := result(rp)
	if d == nil {
		return 0, 0, false
	}
	id, state = hms.ReadLockResponse(d)
	return id, state, d.Err() == nil
}

// Lock is lock(LockRequest) of one component. Txn, when not negative,
// is the session's transaction it runs in (an index from its newest).
type Lock struct {
	DB    DBName
	Table Name // Base "": a database lock
	Part  string
	Type  int32
	Level int32
	Txn   int
	// Hold is how many more steps of the session's own the lock is held
	// in a random run before the twin unlocks it (a step of the history):
	// the test bed's metastore runs no housekeeping, so a lock left alone
	// would never time out.
	Hold int
}

func (Lock) Method() string         { return "lock" }
func (Lock) Class() Class           { return Write }
func (Lock) Args(*enc, *state) bool { return false }
func (o Lock) Touches() []string {
	if o.Table.Base == "" {
		return []string{o.DB.Base}
	}
	return []string{o.DB.Base + "/" + o.Table.Base}
}

func (o Lock) encode(e *enc, s *state) {
	e.begin(1)
	e.FieldBegin(wire.TList, 1)
	e.ListBegin(wire.TStruct, 1)
	e.I32Field(1, o.Type)
	e.I32Field(2, o.Level)
	e.db(3, o.DB)
	if o.Table.Base != "" {
		e.name(4, o.Table)
	}
	if o.Part != "" {
		e.str(5, o.Part)
	}
	e.I32Field(6, 5) // UNSET
	e.end()
	if t, ok := s.txn(o.Txn); ok {
		e.I64Field(2, t)
	}
	e.str(3, "twin")
	e.str(4, "localhost")
	e.end()
}

func (s *state) txn(which int) (int64, bool) {
	if which < 0 || which >= len(s.txns) {
		return 0, false
	}
	return s.txns[len(s.txns)-1-which], true
}

func (o Lock) run(r *runner, s *session, st Step) *Diff {
	e := r.enc(st.Via == Direct)
	o.encode(&e, &s.st)
	e.Stop()
	rp := r.lockCall(s, st.Via, o.DB.Base, "lock", e.B)
	if id, state, ok := lockResponse(rp); ok && o.Txn < 0 {
		// A transaction's locks go with its commit or abort.
		s.st.locks = append(s.st.locks, lockHeld{id: id, acquired: state == lockAcquired, db: o.DB.Base, tbl: o.Table.Base, hold: o.Hold})
		s.locks = append(s.locks, st.Via)
	}
	return r.afterPath(s, st, rp)
}

// afterPath records a path call's step; a failed connection is replaced.
func (r *runner) afterPath(s *session, st Step, rps ...reply) *Diff {
	var d *Diff
	for _, rp := range rps {
		if rp.err != nil {
			if st.Via != Direct && r.nodeDead(s.node) {
				d = &Diff{Why: "proxy node died"}
			}
			r.connect(s)
			break
		}
	}
	return r.record(st, d)
}

// CheckLock is check_lock of one of the session's locks (an index from
// its newest), through the path the lock took.
type CheckLock struct{ Which int }

func (CheckLock) Method() string         { return "check_lock" }
func (CheckLock) Class() Class           { return Write }
func (CheckLock) Args(*enc, *state) bool { return false }
func (CheckLock) Touches() []string      { return nil }

func (o CheckLock) run(r *runner, s *session, st Step) *Diff {
	i := len(s.st.locks) - 1 - o.Which
	if i < 0 || i >= len(s.st.locks) {
		return nil
	}
	st.Via = s.locks[i]
	var e enc
	e.begin(1)
	e.I64Field(1, s.st.locks[i].id)
	e.end()
	e.Stop()
	rp := r.lockCall(s, st.Via, s.st.locks[i].db, "check_lock", e.B)
	if _, state, ok := lockResponse(rp); ok && state == lockAcquired {
		s.st.locks[i].acquired = true
	}
	return r.afterPath(s, st, rp)
}

// Unlock is unlock of one of the session's locks, through its path.
type Unlock struct{ Which int }

func (Unlock) Method() string         { return "unlock" }
func (Unlock) Class() Class           { return Write }
func (Unlock) Args(*enc, *state) bool { return false }
func (Unlock) Touches() []string      { return nil }

func (o Unlock) run(r *runner, s *session, st Step) *Diff {
	i := len(s.st.locks) - 1 - o.Which
	if i < 0 || i >= len(s.st.locks) {
		return nil
	}
	st.Via = s.locks[i]
	rp := r.unlock(s, i)
	return r.afterPath(s, st, rp)
}

func (r *runner) unlock(s *session, i int) reply {
	var e enc
	e.begin(1)
	e.I64Field(1, s.st.locks[i].id)
	e.end()
	e.Stop()
	rp := r.lockCall(s, s.locks[i], s.st.locks[i].db, "unlock", e.B)
	s.st.locks = append(s.st.locks[:i], s.st.locks[i+1:]...)
	s.locks = append(s.locks[:i], s.locks[i+1:]...)
	return rp
}

// OpenTxn is open_txns of one transaction.
type OpenTxn struct{}

func (OpenTxn) Method() string         { return "open_txns" }
func (OpenTxn) Class() Class           { return Write }
func (OpenTxn) Args(*enc, *state) bool { return false }
func (OpenTxn) Touches() []string      { return nil }

func (OpenTxn) run(r *runner, s *session, st Step) *Diff {
	var e enc
	e.begin(1)
	e.I32Field(1, 1)
	e.str(2, "twin")
	e.str(3, "localhost")
	e.end()
	e.Stop()
	rp := r.pathCall(s, st.Via, "", nil, "open_txns", e.B)
	if d := result(rp); d != nil {
		d.Fields(func(fid int16, typ byte) bool {
			if fid != 1 || typ != wire.TList {
				return false
			}
			_, n := d.ListBegin()
			for i := 0; i < n && d.Err() == nil; i++ {
				s.st.txns = append(s.st.txns, d.I64())
			}
			return true
		})
	}
	return r.afterPath(s, st, rp)
}

// AllocWriteIDs is allocate_table_write_ids for one of the session's
// transactions and one table (3.0+).
type AllocWriteIDs struct {
	Txn   int
	DB    DBName
	Table Name
}

func (AllocWriteIDs) Method() string         { return "allocate_table_write_ids" }
func (AllocWriteIDs) Class() Class           { return Write }
func (AllocWriteIDs) Args(*enc, *state) bool { return false }
func (o AllocWriteIDs) Touches() []string    { return []string{o.DB.Base + "/" + o.Table.Base} }

func (o AllocWriteIDs) run(r *runner, s *session, st Step) *Diff {
	t, ok := s.st.txn(o.Txn)
	if !ok {
		return nil
	}
	e := r.enc(st.Via == Direct)
	e.begin(1)
	e.db(1, o.DB)
	e.name(2, o.Table)
	e.FieldBegin(wire.TList, 3)
	e.ListBegin(wire.TI64, 1)
	e.I64(t)
	e.end()
	e.Stop()
	return r.afterPath(s, st, r.pathCall(s, st.Via, o.DB.Base, o.Touches(), "allocate_table_write_ids", e.B))
}

// EndTxn is commit_txn, or with Abort abort_txn, of one of the session's
// transactions.
type EndTxn struct {
	Txn   int
	Abort bool
}

func (o EndTxn) Method() string {
	if o.Abort {
		return "abort_txn"
	}
	return "commit_txn"
}
func (EndTxn) Class() Class           { return Write }
func (EndTxn) Args(*enc, *state) bool { return false }
func (EndTxn) Touches() []string      { return []string{"*"} }

func (o EndTxn) run(r *runner, s *session, st Step) *Diff {
	t, ok := s.st.txn(o.Txn)
	if !ok {
		return nil
	}
	var e enc
	e.begin(1)
	e.I64Field(1, t)
	e.end()
	e.Stop()
	rp := r.pathCall(s, st.Via, "", o.Touches(), o.Method(), e.B)
	for i, x := range s.st.txns {
		if x == t {
			s.st.txns = append(s.st.txns[:i], s.st.txns[i+1:]...)
			break
		}
	}
	return r.afterPath(s, st, rp)
}

// IcebergCommit is a table-format commit as Iceberg's HiveCatalog makes
// it, through one path: an exclusive table lock (check_lock until it is
// granted), get_table, a check that the table's metadata_location is
// the one the session last saw, alter_table_with_environment_context to
// a new location, unlock. The get_table under the lock is also made
// straight to the metastore and compared, with no allowance: a granted
// write lock is a freshness point. The twin keeps the chain of the
// locations committed; a commit whose base is not the last one committed
// overwrote a commit (a lost commit).
type IcebergCommit struct {
	DB    DBName
	Table Name
	Spec  TableSpec
}

func (IcebergCommit) Method() string         { return "lock" }
func (IcebergCommit) Class() Class           { return Write }
func (IcebergCommit) Args(*enc, *state) bool { return false }
func (o IcebergCommit) Touches() []string    { return []string{o.DB.Base + "/" + o.Table.Base} }

// iceLocation is the parameter an Iceberg table keeps its current
// metadata file in.
const iceLocation = "metadata_location"

func (o IcebergCommit) run(r *runner, s *session, st Step) *Diff {
	lk := Lock{DB: o.DB, Table: o.Table, Type: Exclusive, Level: LevelTable, Txn: -1}
	e := r.enc(st.Via == Direct)
	lk.encode(&e, &s.st)
	e.Stop()
	rp := r.lockCall(s, st.Via, o.DB.Base, "lock", e.B)
	id, state, ok := lockResponse(rp)
	if !ok {
		return r.afterPath(s, st, rp)
	}
	s.st.locks = append(s.st.locks, lockHeld{id: id, db: o.DB.Base, tbl: o.Table.Base})
	s.locks = append(s.locks, st.Via)
	held := len(s.st.locks) - 1
	defer func() {
		if held < len(s.st.locks) && s.st.locks[held].id == id {
			r.unlock(s, held)
		}
	}()
	// A client polling check_lock until the lock is granted, as an
	// Iceberg commit does.
	var unexpected *Diff
	wait.Poll(3*time.Second, 5*time.Millisecond, func() bool {
		if state != lockWaiting {
			return true
		}
		var c enc
		c.begin(1)
		c.I64Field(1, id)
		c.end()
		c.Stop()
		rp = r.lockCall(s, st.Via, o.DB.Base, "check_lock", c.B)
		if _, state, ok = lockResponse(rp); !ok {
			unexpected = r.afterPath(s, st, rp)
			return true
		}
		return state != lockWaiting
	})
	if unexpected != nil {
		return unexpected
	}
	if state != lockAcquired {
		return r.record(st, nil)
	}
	// The read under the lock, both ways when the lock went through the
	// proxy (a lock taken straight at the metastore is nothing the proxy
	// saw: its reads then follow the notification log, like any other).
	// 4.0 has no get_table: an Iceberg client there reads with
	// get_table_req.
	var get Op = GetTable{DB: o.DB, Table: o.Table}
	req := r.ms.Version == "4.0"
	if req {
		get = GetTableReq{DB: o.DB.Name, Table: o.Table}
	}
	pg, dg := r.enc(false), r.enc(true)
	get.Args(&pg, &s.st)
	get.Args(&dg, &s.st)
	pg.Stop()
	dg.Stop()
	release := r.order.acquire(get.Touches(), false)
	rdirect := call(r.dcFor(s, o.DB.Base), get.Method(), dg.B)
	if r.fed.member(o.DB.Base) && rdirect.err == nil {
		rdirect.body = r.fed.clientNames(r.ns, rdirect.body)
	}
	rproxy := rdirect
	if st.Via != Direct {
		rproxy = call(s.pc, get.Method(), pg.B)
	}
	release()
	mine := rproxy
	if rproxy.err != nil || rdirect.err != nil {
		return r.afterPath(s, st, rproxy, rdirect)
	}
	current, found := tableParam(mine, iceLocation, req)
	truth, _ := tableParam(rdirect, iceLocation, req)
	key := Canon(r.ns, o.DB.Base) + "." + Canon(r.ns, o.Table.Base)
	base := s.iceBase(key)
	if !found {
		return r.record(st, nil)
	}
	if base == "" || current != base {
		// What a client that refreshed would see: a conflict, retried
		// after a refresh. The session now knows the current location.
		s.setIceBase(key, current)
		var d *Diff
		if !rproxy.equal(rdirect) {
			d = &Diff{Proxy: rproxy.String(), Direct: rdirect.String(),
				Why: fmt.Sprintf("get_table under a granted exclusive lock answered metadata_location %q through the proxy, %q by the metastore", current, truth)}
		}
		return r.record(st, d)
	}
	next := fmt.Sprintf("%s/metadata/%05d-%d.json", key, r.iceSeq(), s.id)
	spec := o.Spec
	spec.Params = map[string]string{"table_type": "ICEBERG", iceLocation: next, "previous_metadata_location": base}
	a := r.enc(st.Via == Direct)
	AlterTable{DB: o.DB, Table: o.Table, NewName: Name{Base: o.Table.Base}, Spec: spec, Location: iceLocationRoot}.Args(&a, &s.st)
	a.Stop()
	rw := r.pathCall(s, st.Via, o.DB.Base, o.Touches(), "alter_table_with_environment_context", a.B)
	if st.Via == Direct {
		r.directWrote(AlterTable{DB: o.DB, Table: o.Table}, max(r.storeOf([]string{o.DB.Base}), 0))
	}
	var d *Diff
	if rw.err == nil && rw.typ == wire.Reply && isVoidSuccess(rw.body) {
		s.setIceBase(key, next)
		r.mu.Lock()
		last := r.ledger[key]
		r.ledger[key] = next
		r.mu.Unlock()
		if last != "" && last != base {
			d = &Diff{Proxy: rproxy.String(), Direct: rdirect.String(), Why: fmt.Sprintf(
				"lost commit: %s committed %s over base %s, but the last commit was %s (the metastore had %s under the lock)",
				st.Via, next, base, last, truth)}
		}
	}
	if d == nil && !rproxy.equal(rdirect) {
		d = &Diff{Proxy: rproxy.String(), Direct: rdirect.String(),
			Why: "get_table under a granted exclusive lock differs from the metastore's"}
	}
	if rw.err != nil {
		return r.afterPath(s, st, rw)
	}
	return r.record(st, d)
}

func (r *runner) iceSeq() int64 { return r.commits.Add(1) }

func (s *session) iceBase(key string) string {
	if s.ice == nil {
		return ""
	}
	return s.ice[key]
}

func (s *session) setIceBase(key, loc string) {
	if s.ice == nil {
		s.ice = map[string]string{}
	}
	s.ice[key] = loc
}

// isVoidSuccess reports whether a reply body is a void method's success:
// an empty result struct.
func isVoidSuccess(body []byte) bool { return len(body) == 1 && body[0] == wire.TStop }

// tableParam reads one parameter of the Table a get_table reply holds
// (with req, a get_table_req reply: the Table in field 1 of the result).
func tableParam(rp reply, key string, req bool) (string, bool) {
	d := result(rp)
	if d == nil {
		return "", false
	}
	if req {
		typ, id := d.FieldBegin()
		if d.Err() != nil || id != 1 || typ != wire.TStruct {
			return "", false
		}
	}
	var v string
	found := false
	d.Fields(func(fid int16, typ byte) bool {
		if fid != 9 || typ != wire.TMap {
			return false
		}
		_, _, n := d.MapBegin()
		for i := 0; i < n && d.Err() == nil; i++ {
			k, val := d.String(), d.String()
			if k == key {
				v, found = val, true
			}
		}
		return true
	})
	return v, found && d.Err() == nil
}
