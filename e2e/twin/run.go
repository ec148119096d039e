package twin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/hmsclient"
	"github.com/hmsproxy/hmsproxy/internal/wire"
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
}

func (d *Diff) String() string {
	if d.Why != "" {
		return fmt.Sprintf("%s (%s, session %d via %s): %s", d.Method, d.Step.Gen, d.Step.S, d.Step.Via, d.Why)
	}
	return fmt.Sprintf("%s (%s, session %d): proxy %s; metastore %s", d.Method, d.Step.Gen, d.Step.S, d.Proxy, d.Direct)
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
	st    state
	locks []Via // the path of each lock in st.locks
	// ice is the metadata location the session last saw of each Iceberg
	// table: the base of its next commit.
	ice map[string]string
}

// runner runs steps against one fleet and one metastore.
type runner struct {
	ms    *Metastore
	fleet *Fleet
	ns    string
	allow *allower

	sessions []*session
	ctl      *hmsclient.Client // the twin's own connection to the metastore
	ctlMu    sync.Mutex        // guards ctl

	// rw orders reads against writes: a read holds it shared, a write
	// exclusively, so that the two calls of a read see one state.
	rw sync.RWMutex
	// writesBegun and writesActive tell a racy read whether a write
	// overlapped it.
	writesBegun, writesActive atomic.Int64

	mu      sync.Mutex // guards history, at, diffs, crashed, pending, unlogged, ledger, stats, seen
	history []Step
	at      []time.Time // when each step of history began
	diffs   []*Diff
	// restartMu makes one session at a time restart a dead node.
	restartMu sync.Mutex
	crashAt   atomic.Int64 // unix nanos of the last node found dead
	// pending holds, per database base ("*" for the listings), the
	// newest notification event of a direct write: reads of it wait until
	// every node applied that event.
	pending map[string]int64
	// unlogged holds, per database base, when a direct write the
	// notification log does not record ended: reads of it may differ
	// within the bound of allow.go.
	unlogged map[string]time.Time
	ledger   map[string]string // Iceberg tables: the metadata location last committed
	// doubt holds, per touch, until when a write the twin stopped
	// waiting for may still land.
	doubt map[string]time.Time
	stats Stats
	// seen are direct writes whose event not every node has applied yet,
	// for the visibility figures.
	seen []directWrite

	applied []atomic.Int64 // per node, refreshed by watchApplied
	commits atomic.Int64   // Iceberg commits made, to name their metadata files
}

type directWrite struct {
	id int64
	at time.Time
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
	r := &runner{ms: ms, fleet: f, ns: ns, allow: newAllower(ms.Version),
		pending: map[string]int64{}, unlogged: map[string]time.Time{}, ledger: map[string]string{}, doubt: map[string]time.Time{},
		stats: Stats{ByMethod: map[string]int{}, ByGen: map[string]int{}, Allowed: map[string]int{},
			Time: map[string]time.Duration{}},
		applied: make([]atomic.Int64, len(f.Nodes))}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if r.ctl, err = hmsclient.Dial(ctx, ms.Addr, wire.Buffered); err != nil {
		return nil, err
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
	if s.pc != nil {
		s.pc.Close()
		s.dc.Close()
	}
	s.st, s.locks, s.ice = state{}, nil, nil
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var pc, dc *hmsclient.Client
		if pc, err = hmsclient.Dial(ctx, r.fleet.Nodes[s.node].Addr, wire.Buffered); err == nil {
			if dc, err = hmsclient.Dial(ctx, r.ms.Addr, wire.Buffered); err == nil {
				cancel()
				s.pc, s.dc = pc, dc
				return nil
			}
			pc.Close()
		}
		cancel()
		if time.Now().After(deadline) {
			return err
		}
		r.dead() // a node that crashed is started again
	}
}

func (r *runner) close() {
	for _, s := range r.sessions {
		if s.pc != nil {
			s.pc.Close()
			s.dc.Close()
		}
	}
	r.ctl.Close()
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
		time.Sleep(st.Wait)
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
	e := enc{ns: r.ns}
	if !st.Op.Args(&e, &s.st) {
		return nil
	}
	e.Stop()
	switch st.Op.Class() {
	case Write:
		return r.write(s, st, e.B)
	default:
		return r.read(s, st, e.B)
	}
}

func isReconnect(o Op) bool { _, ok := o.(Reconnect); return ok }

// read makes a read (or session call) both ways and compares.
func (r *runner) read(s *session, st Step, args []byte) *Diff {
	if st.Op.Class() == Read {
		r.waitVisible(st.Op.Touches())
	}
	if !st.Racy {
		r.rw.RLock()
	}
	begun, active := r.writesBegun.Load(), r.writesActive.Load()
	method := st.Op.Method()
	var rp, rd reply
	if rand.IntN(2) == 0 {
		rd = call(s.dc, method, args)
		rp = call(s.pc, method, args)
	} else {
		rp = call(s.pc, method, args)
		rd = call(s.dc, method, args)
	}
	raced := st.Racy && (active > 0 || r.writesBegun.Load() != begun || r.writesActive.Load() > 0)
	var again reply
	same := rp.equal(rd)
	if !same && !raced && rd.err == nil {
		// Does the metastore itself answer alike twice?
		again = call(s.dc, method, args)
	}
	if !st.Racy {
		r.rw.RUnlock()
	}
	r.reconnectBroken(s, rp, rd)
	if same {
		r.record(st, nil)
		return nil
	}
	d := &Diff{Proxy: rp.String(), Direct: rd.String(), Fallout: rp.err != nil && r.crashedLately(),
		Kinds: rp.kind() + "/" + rd.kind()}
	switch {
	case raced:
		d.Allowed = "raced"
	case !again.equal(rd):
		d.Allowed = "metastore-varies"
	default:
		d.Allowed = r.allow.reply(r, st, rp, rd)
	}
	return r.record(st, d)
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
func (r *runner) write(s *session, st Step, args []byte) *Diff {
	r.rw.Lock()
	r.writesBegun.Add(1)
	r.writesActive.Add(1)
	c := s.pc
	if st.Via == Direct {
		c = s.dc
	}
	rp := callWithin(c, st.Op.Method(), args, writeTimeout)
	var d *Diff
	if st.Via == Direct {
		r.directWrote(st.Op)
	}
	if errors.Is(rp.err, os.ErrDeadlineExceeded) {
		r.inDoubt(st.Op)
	}
	r.writesActive.Add(-1)
	r.rw.Unlock()
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
func (r *runner) directWrote(op Op) {
	at := time.Now()
	id, err := r.latestEvent()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.seen = append(r.seen, directWrite{id: id, at: at})
	}
	for _, db := range op.Touches() {
		if err == nil && id > r.pending[db] {
			r.pending[db] = id
		}
		if r.allow.unloggedOp(op) {
			r.unlogged[db] = time.Now()
		}
	}
}

func (r *runner) latestEvent() (int64, error) {
	r.ctlMu.Lock()
	defer r.ctlMu.Unlock()
	rp := call(r.ctl, "get_current_notificationEventId", []byte{wire.TStop})
	if rp.err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.ctl.Close()
		r.ctl, _ = hmsclient.Dial(ctx, r.ms.Addr, wire.Buffered)
		return 0, rp.err
	}
	d := wire.NewDecoder(rp.body)
	var id int64
	d.Fields(func(fid int16, typ byte) bool {
		if fid != 0 || typ != wire.TStruct {
			return false
		}
		d.Fields(func(fid int16, typ byte) bool {
			if fid == 1 && typ == wire.TI64 {
				id = d.I64()
				return true
			}
			return false
		})
		return true
	})
	return id, d.Err()
}

// visibleWithin bounds the wait for a direct write to reach every node;
// longer is a difference of its own.
const visibleWithin = 15 * time.Second

// waitVisible waits until every node applied the newest event of the
// direct writes to the databases a read touches.
func (r *runner) waitVisible(touch []string) {
	need := r.needs(touch)
	if need == 0 {
		return
	}
	start := time.Now()
	for !r.appliedAll(need) {
		if time.Since(start) > visibleWithin {
			r.mu.Lock()
			r.diffs = append(r.diffs, &Diff{Method: "notification log", Why: fmt.Sprintf(
				"a direct write's event %d not applied by every node within %v (applied: %v)", need, visibleWithin, r.appliedNow())})
			for db, id := range r.pending {
				if id <= need {
					delete(r.pending, db)
				}
			}
			r.mu.Unlock()
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.mu.Lock()
	for db, id := range r.pending {
		if id <= need {
			delete(r.pending, db)
		}
	}
	r.mu.Unlock()
}

// needs is the newest event of the direct writes to what touch names
// that not every node may have applied; 0 for none.
func (r *runner) needs(touch []string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var need int64
	for db, id := range r.pending {
		if id > need && overlapsAny([]string{db}, touch) {
			need = id
		}
	}
	return need
}

// ready reports whether a step can run without waiting for a direct
// write to reach every node.
func (r *runner) ready(st Step) bool {
	if st.Op.Class() != Read {
		return true
	}
	need := r.needs(st.Op.Touches())
	return need == 0 || r.appliedAll(need)
}

func (r *runner) appliedAll(id int64) bool {
	for i := range r.applied {
		if r.applied[i].Load() < id {
			return false
		}
	}
	return true
}

func (r *runner) appliedNow() []int64 {
	out := make([]int64, len(r.applied))
	for i := range r.applied {
		out[i] = r.applied[i].Load()
	}
	return out
}

// watchApplied keeps the nodes' applied event ids fresh until ctx ends.
func (r *runner) watchApplied(ctx context.Context) {
	for {
		low := int64(1<<63 - 1)
		for i, n := range r.fleet.Nodes {
			v := n.AppliedEvent(ctx)
			r.applied[i].Store(v)
			low = min(low, v)
		}
		now := time.Now()
		r.mu.Lock()
		keep := r.seen[:0]
		for _, w := range r.seen {
			if w.id <= low {
				r.stats.Visibility = append(r.stats.Visibility, now.Sub(w.at))
				continue
			}
			keep = append(keep, w)
		}
		r.seen = keep
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
