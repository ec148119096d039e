package twin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Via is the path of a step.
type Via uint8

const (
	// Both: a read, made through the proxy and straight to the metastore.
	Both Via = iota
	// Proxy: a write through the proxy.
	Proxy
	// Direct: a write straight to the metastore, bypassing every proxy.
	Direct
)

func (v Via) String() string {
	switch v {
	case Proxy:
		return "proxy"
	case Direct:
		return "direct"
	}
	return "both"
}

// Step is one operation of a sequence: session S makes Op through Via.
type Step struct {
	S   int
	Via Via
	Op  Op
	// Gen names the generator that made the step, for the coverage
	// summary; Racy marks a read made without waiting for writes in
	// flight (its difference is allowed when one overlapped it).
	Gen  string
	Racy bool
	// Wait, before the step, sleeps this long: a replayed sequence keeps
	// the pauses that time-bound behaviour (TTLs, bounds) depends on.
	Wait time.Duration
}

// Diff is a difference between the proxy and the metastore.
type Diff struct {
	Step    Step
	Index   int // in the run's history
	Method  string
	Proxy   string // what the proxy answered, shortened
	Direct  string // what the metastore answered
	Why     string // for differences that are not replies (a lost commit, a crash)
	Allowed string // the rule of allow.go that allows it; "" for a real difference
	// Fallout marks a proxy's transport failure around a crash of its
	// node: counted, never minimised (the crash is).
	Fallout bool
	// Kinds are the outcomes of the two replies ("ok", "ex2", "app1",
	// "transport"): with Method, what a minimised sequence must still
	// end in.
	Kinds string
	// Session is the session's set_ugi and setMetaConf state when the
	// step ran ("" for none): an answer that depends on it is a session
	// class of difference.
	Session string
}

func (d *Diff) String() string {
	if d.Why != "" {
		return fmt.Sprintf("%s (%s, session %d via %s): %s", d.Method, d.Step.Gen, d.Step.S, d.Step.Via, d.Why)
	}
	var sess string
	if d.Session != "" {
		sess = " [" + d.Session + "]"
	}
	return fmt.Sprintf("%s (%s, session %d%s): proxy %s; metastore %s", d.Method, d.Step.Gen, d.Step.S, sess, d.Proxy, d.Direct)
}

// reply is one call's outcome as compared: the message type, name and
// body, or the transport failure.
type reply struct {
	typ  byte
	name string
	body []byte
	err  error
}

func (r reply) equal(o reply) bool {
	if (r.err != nil) != (o.err != nil) {
		return false
	}
	if r.err != nil {
		return true // both connections failed: the metastore closed it too
	}
	return r.typ == o.typ && r.name == o.name && bytes.Equal(r.body, o.body)
}

// kind is the reply's outcome: "ok", "ex<field>" for a declared
// exception, "app<code>" for a TApplicationException, or "transport".
func (r reply) kind() string {
	switch {
	case r.err != nil:
		return "transport"
	case r.typ == wire.Exception:
		if ex, err := wire.DecodeApplicationException(r.body); err == nil {
			return fmt.Sprintf("app%d", ex.Code)
		}
		return "app"
	}
	if f, err := wire.ResultField(r.body); err == nil && f > 0 {
		return fmt.Sprintf("ex%d", f)
	}
	return "ok"
}

func (r reply) String() string {
	if r.err != nil {
		return "transport error: " + r.err.Error()
	}
	return describe(r.typ, r.body)
}

// session is one client of the twin: a connection to a proxy node and
// one straight to the metastore, carrying the same session state.
type session struct {
	id    int
	node  int
	pc    *hmsclient.Client // through the proxy
	dc    *hmsclient.Client // straight to the metastore
	dm    *hmsclient.Client // straight to the federation's member; nil without one
	st    state
	locks []Via // the path of each lock in st.locks
	// ice is the metadata location the session last saw of each Iceberg
	// table: the base of its next commit.
	ice map[string]string
	// claims are the session's set_ugi and setMetaConf calls since it
	// connected, as a difference reports them.
	claims []string
}

// runner runs steps against one fleet and one metastore.
type runner struct {
	ms    *Metastore
	fleet *Fleet
	ns    string
	allow *allower

	fed *federation // nil: the fleet has one metastore
	// stores are the metastores: the primary, then the member.
	stores []*store

	sessions []*session

	// order orders reads against the writes that touch what they read,
	// so that the two calls of a read see one state.
	order *order

	mu      sync.Mutex // guards history, at, diffs, crashed, pending, unlogged, ledger, stats, seen
	history []Step
	at      []time.Time // when each step of history began
	diffs   []*Diff
	// txnMu, held on 4.0 around each call of the lock and transaction
	// API, keeps two of them from overlapping in the metastore. 4.0 runs
	// those calls under one JVM-wide mutex when its database is Derby,
	// and a lock call writes its HIVE_LOCKS rows in a transaction it
	// commits only after checking the lock under that mutex again; a
	// check that scans HIVE_LOCKS meanwhile waits for those rows while
	// their writer waits for the mutex. Derby cannot see that cycle:
	// each of the server's retries waits out Derby's lock timeout while
	// still holding the mutex, so the call fails after ten of them
	// (10 minutes at Derby's default, 30 s at the test bed's) and every
	// other lock call waits as long. Servers on the databases production
	// uses take row locks instead, so this is the test bed's cycle, not
	// the proxy's, and the twin stays out of it.
	txnMu sync.Mutex
	// restartMu makes one session at a time restart a dead node.
	restartMu sync.Mutex
	crashAt   atomic.Int64 // unix nanos of the last node found dead
	// pending holds, per database base ("*" for the listings), the
	// newest notification event of a direct write: reads of it wait until
	// every node applied that event.
	pending map[string]int64
	// unlogged holds, per touch and kind of answer, when a direct write
	// the notification log does not record ended: reads of that kind of
	// answer about what it touched may differ within the bound of
	// allow.go.
	unlogged map[unloggedKey]time.Time
	ledger   map[string]string // Iceberg tables: the metadata location last committed
	// doubt holds, per touch, until when a write the twin stopped
	// waiting for may still land.
	doubt map[string]time.Time
	stats Stats
	// seen are direct writes whose event not every node has applied yet,
	// for the visibility figures.
	seen []directWrite

	commits atomic.Int64 // Iceberg commits made, to name their metadata files
}

type directWrite struct {
	store int
	id    int64
	at    time.Time
}

// Stats count what a run did.
type Stats struct {
	Ops      int
	ByMethod map[string]int
	ByGen    map[string]int
	// Visibility is how long after a direct write returned every node
	// had applied its notification event.
	Visibility []time.Duration
	Allowed    map[string]int
	// Time is the time spent per kind of step.
	Time map[string]time.Duration
}

func newRunner(ms *Metastore, f *Fleet, ns string, sessions int) (*runner, error) {
	r := &runner{ms: ms, fleet: f, ns: ns, allow: newAllower(ms.Version), fed: f.fed, order: newOrder(),
		pending: map[string]int64{}, unlogged: map[unloggedKey]time.Time{}, ledger: map[string]string{}, doubt: map[string]time.Time{},
		stats: Stats{ByMethod: map[string]int{}, ByGen: map[string]int{}, Allowed: map[string]int{},
			Time: map[string]time.Duration{}}}
	st, err := newStore(ms, "hmsproxy_eventlog_applied_event_id", len(f.Nodes))
	if err != nil {
		return nil, err
	}
	r.stores = append(r.stores, st)
	if r.fed != nil {
		if st, err = newStore(r.fed.ms, `hmsproxy_group_eventlog_applied_event_id{group="member"}`, len(f.Nodes)); err != nil {
			r.stores[0].close()
			return nil, err
		}
		r.stores = append(r.stores, st)
	}
	for i := 0; i < sessions; i++ {
		s := &session{id: i, node: i % len(f.Nodes)}
		if err := r.connect(s); err != nil {
			r.close()
			return nil, err
		}
		r.sessions = append(r.sessions, s)
	}
	return r, nil
}

// connect opens the session's connections afresh (its state starts
// over), retrying while a node restarts.
func (r *runner) connect(s *session) error {
	s.closeConns()
	s.st, s.locks, s.ice, s.claims = state{}, nil, nil, nil
	var err error
	wait.Poll(30*time.Second, 100*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var pc, dc, dm *hmsclient.Client
		if pc, err = hmsclient.Dial(ctx, r.fleet.Nodes[s.node].Addr, wire.Buffered); err == nil {
			if dc, err = hmsclient.Dial(ctx, r.ms.Addr, wire.Buffered); err == nil {
				if r.fed != nil {
					dm, err = hmsclient.Dial(ctx, r.fed.ms.Addr, wire.Buffered)
				}
				if err == nil {
					s.pc, s.dc, s.dm = pc, dc, dm
					return true
				}
				dc.Close()
			}
			pc.Close()
		}
		r.dead() // a node that crashed is started again
		return false
	})
	return err
}

func (s *session) closeConns() {
	for _, c := range []*hmsclient.Client{s.pc, s.dc, s.dm} {
		if c != nil {
			c.Close()
		}
	}
}

// direct is the session's connection straight to metastore i.
func (s *session) direct(i int) *hmsclient.Client {
	if i == 1 {
		return s.dm
	}
	return s.dc
}

func (r *runner) close() {
	for _, s := range r.sessions {
		s.closeConns()
	}
	for _, st := range r.stores {
		st.close()
	}
}

// enc starts the args of a call made through the proxy, or straight.
func (r *runner) enc(direct bool) enc { return enc{ns: r.ns, fed: r.fed, direct: direct} }

// dcFor is the session's connection straight to the metastore of
// database base db.
func (r *runner) dcFor(s *session, db string) *hmsclient.Client {
	if r.fed.member(db) {
		return s.dm
	}
	return s.dc
}

// callTimeout bounds one call; a metastore answers the twin's calls in
// milliseconds.
const callTimeout = 30 * time.Second

func call(c *hmsclient.Client, method string, args []byte) reply {
	return callWithin(c, method, args, callTimeout)
}

// writeTimeout bounds the twin's wait for a write. The metastore retries
// a write its database refuses for 20 seconds (RetryingHMSHandler), and
// every read would wait for it; the twin stops waiting instead, and
// takes the write's outcome for unknown until it must have ended.
const writeTimeout = 4 * time.Second

func callWithin(c *hmsclient.Client, method string, args []byte, within time.Duration) reply {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	m, err := c.Call(ctx, method, args)
	if err != nil {
		return reply{err: err}
	}
	return reply{typ: m.Type, name: string(m.Name()), body: append([]byte(nil), m.Body()...)}
}

// do runs one step and returns the difference it found, if any.
func (r *runner) do(s *session, st Step) *Diff {
	if st.Wait > 0 {
		time.Sleep(st.Wait) // the step's pause, part of the recorded client's behaviour
	}
	start := time.Now()
	defer func() {
		took := time.Since(start)
		r.mu.Lock()
		r.stats.Time[fmt.Sprintf("%T", st.Op)] += took
		r.mu.Unlock()
		if took > 5*time.Second {
			fmt.Printf("twin: slow step (%v): session %d %s %#v\n", took.Round(time.Millisecond), st.S, st.Via, st.Op)
		}
	}()
	if c, ok := st.Op.(compound); ok {
		return c.run(r, s, st)
	}
	if isReconnect(st.Op) {
		if err := r.connect(s); err != nil {
			return r.record(st, &Diff{Why: "reconnect: " + err.Error()})
		}
		r.record(st, nil)
		return nil
	}
	pe, de := r.enc(false), r.enc(true)
	if !st.Op.Args(&pe, &s.st) {
		return nil
	}
	st.Op.Args(&de, &s.st)
	pe.Stop()
	de.Stop()
	switch st.Op.Class() {
	case Write:
		return r.write(s, st, pe.B, de.B)
	default:
		return r.read(s, st, pe.B, de.B)
	}
}

func isReconnect(o Op) bool { _, ok := o.(Reconnect); return ok }

// read makes a read (or session call) both ways and compares: args
// through the proxy, dargs straight.
func (r *runner) read(s *session, st Step, args, dargs []byte) *Diff {
	begun := time.Now()
	release, racing := r.begin(st)
	method := st.Op.Method()
	idx := r.storeOf(st.Op.Touches())
	if st.Op.Class() == Session {
		idx = 0
		if s.dm != nil {
			call(s.dm, method, dargs) // the member's connection takes the session state too
		}
	}
	straight := func() reply {
		if idx < 0 {
			return r.fanOut(s, method, dargs)
		}
		rd := call(s.direct(idx), method, dargs)
		if idx == 1 && rd.err == nil {
			rd.body = r.fed.clientNames(r.ns, rd.body)
		}
		return rd
	}
	var rp, rd reply
	if rand.IntN(2) == 0 {
		rd = straight()
		rp = call(s.pc, method, args)
	} else {
		rp = call(s.pc, method, args)
		rd = straight()
	}
	if idx < 0 {
		rp = sortedList(rp)
	}
	raced := st.Racy && racing()
	var again reply
	same := rp.equal(rd)
	if !same && !raced && rd.err == nil {
		// Does the metastore itself answer alike twice?
		again = straight()
	}
	if release != nil {
		release()
	}
	r.reconnectBroken(s, rp, rd)
	claims := strings.Join(s.claims, " ")
	switch o := st.Op.(type) {
	case SetUGI:
		s.claims = append(s.claims, "set_ugi "+o.User)
	case SetMetaConf:
		s.claims = append(s.claims, "setMetaConf "+o.Key+"="+o.Value)
	}
	if same {
		r.record(st, nil)
		return nil
	}
	d := &Diff{Proxy: rp.String(), Direct: rd.String(), Fallout: rp.err != nil && r.crashedLately(),
		Kinds: rp.kind() + "/" + rd.kind(), Session: claims}
	switch {
	case raced:
		d.Allowed = "raced"
	case !again.equal(rd):
		d.Allowed = "metastore-varies"
	default:
		d.Allowed = r.allow.reply(r, st, rp, rd, begun)
	}
	return r.record(st, d)
}

// begin orders a read after the writes over what it touches: it waits
// until every node applied the direct writes to them, then for the
// writes in flight (a racy read instead watches for them). A direct
// write that ended between the two is waited for again.
func (r *runner) begin(st Step) (release func(), racing func() bool) {
	touches := st.Op.Touches()
	for {
		if st.Op.Class() == Read {
			r.waitVisible(touches)
		}
		if st.Racy {
			racing = r.order.watchRacy(touches)
		} else {
			release = r.order.acquire(touches, false)
		}
		if st.Op.Class() != Read || r.appliedAll(r.needs(touches)) {
			return release, racing
		}
		if racing != nil {
			racing()
		} else {
			release()
		}
	}
}

// reconnectBroken opens new connections for a session whose connection
// failed: both are replaced, so that their session states stay equal.
func (r *runner) reconnectBroken(s *session, replies ...reply) {
	for _, rp := range replies {
		if rp.err != nil {
			r.connect(s)
			return
		}
	}
}

// write makes a write once, through the step's path.
func (r *runner) write(s *session, st Step, args, dargs []byte) *Diff {
	release := r.order.acquire(writeTouches(st.Op.Touches()), true)
	c := s.pc
	idx := max(r.storeOf(st.Op.Touches()), 0)
	if st.Via == Direct {
		c, args = s.direct(idx), dargs
	}
	rp := callWithin(c, st.Op.Method(), args, writeTimeout)
	var d *Diff
	if st.Via == Direct {
		r.directWrote(st.Op, idx)
	}
	if errors.Is(rp.err, os.ErrDeadlineExceeded) {
		r.inDoubt(st.Op)
	}
	release()
	if rp.err != nil {
		r.connect(s)
		if st.Via == Proxy && r.nodeDead(s.node) {
			d = &Diff{Why: "proxy node died"}
		}
	}
	return r.record(st, d)
}

// inDoubt notes a write the twin stopped waiting for: it may still land
// (the metastore retries for 20 seconds, the proxy invalidates once it
// answers), so reads of what it touches may differ until it must have
// ended (allow.go).
func (r *runner) inDoubt(op Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	until := time.Now().Add(inDoubtFor)
	for _, t := range op.Touches() {
		r.doubt[t] = until
	}
}

// directWrote notes a write that bypassed the proxies: reads of what it
// touched wait until every node applied the metastore's newest event,
// and those the notification log does not record may differ within the
// bound allow.go gives them.
func (r *runner) directWrote(op Op, store int) {
	at := time.Now()
	id, err := r.stores[store].latestEvent()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.seen = append(r.seen, directWrite{store: store, id: id, at: at})
	}
	for _, db := range op.Touches() {
		if err == nil && id > r.pending[db] {
			r.pending[db] = id
		}
		if db != "*" && r.allow.unloggedOp(op) {
			r.unlogged[unloggedKey{db, answerOfWrite(op.Method())}] = time.Now()
		}
	}
}

// visibleWithin bounds the wait for a direct write to reach every node;
// longer is a difference of its own.
const visibleWithin = 15 * time.Second

// waitVisible waits until every node applied the newest event of the
// direct writes to the databases a read touches.
func (r *runner) waitVisible(touch []string) {
	need := r.needs(touch)
	if !wait.Until(visibleWithin, func() bool { return r.appliedAll(need) }) {
		r.mu.Lock()
		r.diffs = append(r.diffs, &Diff{Method: "notification log", Why: fmt.Sprintf(
			"a direct write's event %v not applied by every node within %v", need, visibleWithin)})
		r.settle(need)
		r.mu.Unlock()
		return
	}
	r.mu.Lock()
	r.settle(need)
	r.mu.Unlock()
}

// settle forgets the direct writes need covers. r.mu is held.
func (r *runner) settle(need [2]int64) {
	for t, id := range r.pending {
		if id <= need[max(r.storeOf([]string{t}), 0)] {
			delete(r.pending, t)
		}
	}
}

// needs is, per metastore, the newest event of the direct writes to what
// touch names that not every node may have applied; 0 for none.
func (r *runner) needs(touch []string) [2]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var need [2]int64
	for t, id := range r.pending {
		i := max(r.storeOf([]string{t}), 0)
		if id > need[i] && overlapsAny([]string{t}, touch) {
			need[i] = id
		}
	}
	return need
}

// ready reports whether a step can run without waiting for a direct
// write to reach every node.
func (r *runner) ready(st Step) bool {
	return st.Op.Class() != Read || r.appliedAll(r.needs(st.Op.Touches()))
}

func (r *runner) appliedAll(need [2]int64) bool {
	for i, st := range r.stores {
		if need[i] > 0 && !st.appliedAll(need[i]) {
			return false
		}
	}
	return true
}

// watchApplied keeps the nodes' applied event ids fresh until ctx ends.
func (r *runner) watchApplied(ctx context.Context) {
	metrics := make([]string, len(r.stores))
	for i, st := range r.stores {
		metrics[i] = st.metric
	}
	for {
		// Scraping a node's /metrics costs it more CPU than most calls
		// do: only while a direct write awaits its nodes.
		r.mu.Lock()
		waiting := len(r.pending) > 0 || len(r.seen) > 0
		r.mu.Unlock()
		if !waiting {
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		var low [2]int64
		low[0], low[1] = 1<<63-1, 1<<63-1
		for i, n := range r.fleet.Nodes {
			for j, v := range n.AppliedEvents(ctx, metrics) {
				r.stores[j].applied[i].Store(v)
				low[j] = min(low[j], v)
			}
		}
		now := time.Now()
		r.mu.Lock()
		keep := r.seen[:0]
		for _, w := range r.seen {
			if w.id <= low[w.store] {
				r.stats.Visibility = append(r.stats.Visibility, now.Sub(w.at))
				continue
			}
			keep = append(keep, w)
		}
		r.seen = keep
		r.settle(low)
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// crashedLately reports whether a node died in the last few seconds (or
// is dead now): a transport failure then is the crash's fallout.
func (r *runner) crashedLately() bool {
	for i := range r.fleet.Nodes {
		if r.nodeDead(i) {
			return true
		}
	}
	return time.Since(time.Unix(0, r.crashAt.Load())) < 5*time.Second
}

func (r *runner) nodeDead(i int) bool {
	dead, _ := r.fleet.Nodes[i].Dead()
	return dead
}

// record appends a step to the history, with its difference.
func (r *runner) record(st Step, d *Diff) *Diff {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.history = append(r.history, st)
	r.at = append(r.at, time.Now())
	r.stats.Ops++
	m := st.Op.Method()
	if _, ok := st.Op.(compound); ok {
		m = fmt.Sprintf("%T", st.Op)
		m = m[strings.LastIndex(m, ".")+1:]
	}
	r.stats.ByMethod[m]++
	r.stats.ByGen[st.Gen]++
	if d == nil {
		return nil
	}
	d.Step, d.Index, d.Method = st, len(r.history)-1, m
	if d.Allowed != "" {
		r.stats.Allowed[d.Allowed]++
		return nil
	}
	r.diffs = append(r.diffs, d)
	return d
}

// Summary prints the coverage of a run.
func (s *Stats) Summary() string {
	var b strings.Builder
	row := func(title string, m map[string]int) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "%s:\n", title)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %-48s %d\n", k, m[k])
		}
	}
	row("by method", s.ByMethod)
	row("by generator", s.ByGen)
	if len(s.Time) > 0 {
		t := map[string]int{}
		for k, v := range s.Time {
			t[k] = int(v.Milliseconds())
		}
		row("milliseconds by step type", t)
	}
	if len(s.Allowed) > 0 {
		row("differences allowed (allow.go)", s.Allowed)
	}
	if v := s.Visibility; len(v) > 0 {
		sorted := append([]time.Duration(nil), v...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		q := func(p float64) time.Duration { return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))] }
		fmt.Fprintf(&b, "direct writes seen by every node: %d waits, p50 %v, p99 %v, max %v\n",
			len(v), q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond))
	}
	return b.String()
}

// fanOut answers a listing of every database straight: both
// metastores' lists (listing), as a sorted list reply.
func (r *runner) fanOut(s *session, method string, args []byte) reply {
	names, err := r.listing(s, method, args)
	if err != nil {
		return reply{err: err}
	}
	var e wire.Encoder
	e.StringListField(0, names)
	e.Stop()
	return reply{typ: wire.Reply, name: method, body: e.B}
}

// sortedList is a list reply with its names sorted: a merged listing's
// order is the proxy's to choose.
func sortedList(rp reply) reply {
	names, ok := stringList(rp)
	if !ok {
		return rp
	}
	slices.Sort(names)
	var e wire.Encoder
	e.StringListField(0, names)
	e.Stop()
	rp.body = e.B
	return rp
}
