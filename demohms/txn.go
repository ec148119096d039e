package demohms

import (
	"runtime"
	"slices"
	"strconv"
	"sync"
	"weak"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Transactions and compactions, minimal in-memory semantics (§6): open,
// heartbeat, commit and abort; committed transactions disappear,
// aborted ones stay listed by get_open_txns_info, as in TXNS. There is no
// timeout reaper (the demo is not a standalone service). Locks: locks.go.
// show_compact lists what SeedCompaction added.

// Declared exception kinds of the txn methods.
const (
	exNoSuchTxn exKind = 100 + iota
	exTxnAborted
	exNoSuchLock
	exTxnOpen
)

// TxnState values (§6.3).
const (
	txnAborted int32 = 2
	txnOpen    int32 = 3
)

var (
	thCommitTxn = []exKind{exNoSuchTxn, exTxnAborted}
	thAbortTxn  = []exKind{exNoSuchTxn}
	thHeartbeat = []exKind{exNoSuchLock, exNoSuchTxn, exTxnAborted}
)

type txn struct {
	id                int64
	state             int32
	user, host, agent string
	started, lastBeat int64 // epoch ms
	beats             int32
}

// Compaction is one show_compact element the demo reports.
type Compaction struct {
	DB, Table, Partition string
	Type                 int32  // CompactionType: 1 minor, 2 major
	State                string // "initiated", "working", "failed", ...
}

type txnState struct {
	// mu guards all fields.
	mu          sync.Mutex
	txns        map[int64]*txn
	next        int64
	compactions []Compaction
	locks       map[int64]*demoLock // locks.go
	nextLock    int64
}

// txnStates holds each Server's transaction state, kept beside the
// Server so that the catalog code is untouched; entries go with their
// Server.
var txnStates struct {
	mu sync.Mutex // guards m
	m  map[weak.Pointer[Server]]*txnState
}

func (s *Server) txnState() *txnState {
	txnStates.mu.Lock()
	defer txnStates.mu.Unlock()
	if txnStates.m == nil {
		txnStates.m = map[weak.Pointer[Server]]*txnState{}
	}
	wp := weak.Make(s)
	if st := txnStates.m[wp]; st != nil {
		return st
	}
	st := &txnState{txns: map[int64]*txn{}, next: 1}
	txnStates.m[wp] = st
	runtime.AddCleanup(s, func(wp weak.Pointer[Server]) {
		txnStates.mu.Lock()
		delete(txnStates.m, wp)
		txnStates.mu.Unlock()
	}, wp)
	return st
}

// SeedCompaction adds an element to what show_compact returns.
func (s *Server) SeedCompaction(c Compaction) {
	st := s.txnState()
	st.mu.Lock()
	st.compactions = append(st.compactions, c)
	st.mu.Unlock()
}

// TxnState reports a transaction's state: "open", "aborted", or ""
// when it is committed or unknown.
func (s *Server) TxnState(id int64) string {
	st := s.txnState()
	st.mu.Lock()
	defer st.mu.Unlock()
	t := st.txns[id]
	switch {
	case t == nil:
		return ""
	case t.state == txnOpen:
		return "open"
	default:
		return "aborted"
	}
}

// open_txns(OpenTxnRequest{1 num_txns, 2 user, 3 hostname, 4 agentInfo})
func hOpenTxns(c *conn, a *tval, e *wire.Encoder) error {
	r := a.sub(1)
	n := r.integer(1, 0)
	if n <= 0 || n > 1000 {
		return metaErr("Invalid number of transactions: " + strconv.FormatInt(n, 10))
	}
	st, unlock := c.s.lockedTxnState()
	defer unlock()
	now := c.s.nowMillis()
	agent, ok := r.strOK(4)
	if !ok {
		agent = "Unknown"
	}
	ids := make([]int64, 0, n)
	for range n {
		t := &txn{id: st.next, state: txnOpen, user: r.str(2), host: r.str(3), agent: agent, started: now, lastBeat: now}
		st.txns[t.id] = t
		st.next++
		ids = append(ids, t.id)
	}
	e.FieldBegin(wire.TStruct, 0)
	e.FieldBegin(wire.TList, 1)
	e.ListBegin(wire.TI64, len(ids))
	for _, id := range ids {
		e.I64(id)
	}
	e.Stop()
	return nil
}

// get_open_txns_info() -> GetOpenTxnsInfoResponse{1 hwm, 2 list<TxnInfo>}
func hGetOpenTxnsInfo(c *conn, a *tval, e *wire.Encoder) error {
	st, unlock := c.s.lockedTxnState()
	defer unlock()
	ids := make([]int64, 0, len(st.txns))
	for id := range st.txns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	e.FieldBegin(wire.TStruct, 0)
	e.I64Field(1, st.next-1)
	e.FieldBegin(wire.TList, 2)
	e.ListBegin(wire.TStruct, len(ids))
	for _, id := range ids {
		t := st.txns[id]
		e.I64Field(1, t.id)
		e.I32Field(2, t.state)
		e.StringField(3, t.user)
		e.StringField(4, t.host)
		e.StringField(5, t.agent)
		e.I32Field(6, t.beats)
		e.I64Field(8, t.started)
		e.I64Field(9, t.lastBeat)
		e.Stop()
	}
	e.Stop()
	return nil
}

// lockedTxnState returns the server's transaction state with its mutex
// held, and the func that releases it.
func (s *Server) lockedTxnState() (*txnState, func()) {
	st := s.txnState()
	st.mu.Lock()
	return st, st.mu.Unlock
}

// open returns transaction id if it is open, or what the metastore
// answers for an unknown (committed) or aborted one. st.mu is held.
func (st *txnState) open(id int64) (*txn, error) {
	t := st.txns[id]
	switch {
	case t == nil:
		return nil, &hmsError{exNoSuchTxn, "No such transaction " + txnName(id)}
	case t.state == txnAborted:
		return nil, &hmsError{exTxnAborted, "Transaction " + txnName(id) + " already aborted"}
	}
	return t, nil
}

// commit_txn(CommitTxnRequest{1 txnid})
func hCommitTxn(c *conn, a *tval, e *wire.Encoder) error {
	id := a.sub(1).integer(1, 0)
	st, unlock := c.s.lockedTxnState()
	defer unlock()
	if _, err := st.open(id); err != nil {
		return err
	}
	delete(st.txns, id)
	return nil
}

// abort_txn(AbortTxnRequest{1 txnid})
func hAbortTxn(c *conn, a *tval, e *wire.Encoder) error {
	return c.s.txnState().abort([]int64{a.sub(1).integer(1, 0)})
}

// abort_txns(AbortTxnsRequest{1 list<i64> txn_ids})
func hAbortTxns(c *conn, a *tval, e *wire.Encoder) error {
	var ids []int64
	for _, v := range a.sub(1).list(1) {
		ids = append(ids, v.i)
	}
	return c.s.txnState().abort(ids)
}

// abort aborts open transactions; as TxnHandler, an unknown (committed)
// one fails the call after the others were aborted.
func (st *txnState) abort(ids []int64) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	var missing []int64
	for _, id := range ids {
		t := st.txns[id]
		if t == nil {
			missing = append(missing, id)
			continue
		}
		t.state = txnAborted
	}
	if len(missing) > 0 {
		return &hmsError{exNoSuchTxn, "No such transaction " + txnName(missing[0])}
	}
	return nil
}

// heartbeat(HeartbeatRequest{1 lockid, 2 txnid})
func hHeartbeat(c *conn, a *tval, e *wire.Encoder) error {
	r := a.sub(1)
	if lock := r.integer(1, 0); lock != 0 {
		return &hmsError{exNoSuchLock, "No such lock lockid:" + strconv.FormatInt(lock, 10)}
	}
	id := r.integer(2, 0)
	st, unlock := c.s.lockedTxnState()
	defer unlock()
	t, err := st.open(id)
	if err != nil {
		return err
	}
	t.lastBeat = c.s.nowMillis()
	t.beats++
	return nil
}

// show_compact(ShowCompactRequest) -> ShowCompactResponse{1 list<element>}
func hShowCompact(c *conn, a *tval, e *wire.Encoder) error {
	st, unlock := c.s.lockedTxnState()
	defer unlock()
	e.FieldBegin(wire.TStruct, 0)
	e.FieldBegin(wire.TList, 1)
	e.ListBegin(wire.TStruct, len(st.compactions))
	for i, x := range st.compactions {
		e.StringField(1, x.DB)
		e.StringField(2, x.Table)
		if x.Partition != "" {
			e.StringField(3, x.Partition)
		}
		e.I32Field(4, x.Type)
		e.StringField(5, x.State)
		e.I64Field(13, int64(i+1))
		e.Stop()
	}
	e.Stop()
	return nil
}

func txnName(id int64) string { return "txnid:" + strconv.FormatInt(id, 10) }
