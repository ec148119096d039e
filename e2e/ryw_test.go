package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestClusterReadYourWritesReal (issue 10, item 5): three proxies on one
// Redis in front of a real metastore, no notification-log poller. One
// client writes through node A (alter, rename, create and drop tables,
// create and drop databases, chosen at random); clients on B and C read
// the same names. No read issued after the writer's client got its answer
// may return the state from before that write: not the old table, not a
// table under its old name, not "no such database" for one just created.
func TestClusterReadYourWritesReal(t *testing.T) {
	for _, v := range versions(t) {
		if v != "3.1" {
			continue // one version is enough; the property is the proxy's
		}
		t.Run(v, func(t *testing.T) { runReadYourWritesReal(t, v) })
	}
}

// rywState is the metastore as the writer knows it: the value of table
// parameter v per table name (absent: no such table) and the databases.
type rywState struct {
	tables map[string]int
	dbs    map[string]bool
}

// rywKey is what a reader asks: a table of the main database, or a
// database.
type rywKey struct {
	table bool
	name  string
}

// sig is the answer the metastore gives for k in this state.
func (s rywState) sig(k rywKey) string {
	if k.table {
		if v, ok := s.tables[k.name]; ok {
			return "v=" + strconv.Itoa(v)
		}
		return "ex2" // NoSuchObjectException of get_table
	}
	if s.dbs[k.name] {
		return "ok"
	}
	return "ex1" // NoSuchObjectException of get_database
}

// rywHistory is the sequence of states, each with the time its write was
// answered; state 0 is the start.
type rywHistory struct {
	mu       sync.Mutex // guards states, answered
	states   []rywState
	answered []time.Time // answered[i]: when the write making states[i] returned; [0] zero
}

// allowed reports whether sig is a state's answer for k at or after the
// last write answered before begin, and, when not, the state it shows.
func (h *rywHistory) allowed(k rywKey, sig string, begin time.Time) (bool, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// The last state whose write had been answered when the read began.
	last := sort.Search(len(h.answered), func(i int) bool { return i > 0 && !h.answered[i].Before(begin) }) - 1
	for i := last; i < len(h.states); i++ {
		if h.states[i].sig(k) == sig {
			return true, i
		}
	}
	for i := last - 1; i >= 0; i-- {
		if h.states[i].sig(k) == sig {
			return false, i
		}
	}
	return false, -1
}

// tornRename reports whether a table answer is one the metastore itself
// gives while a rename of that table is in flight: HMS reads a table in
// two statements under read-committed isolation (the TBLS row by name,
// then TABLE_PARAMS by its id: parameters are a map in a table of its
// own in package.jdo), so a read that finds the row by the old name just
// before the rename commits reads the parameters the rename set. The
// reply then names the asked table and carries v=s, where write s renamed
// that table away and had not been answered when the read began. A direct
// client sees the same answer; the proxy passes it on as it came
// (promise 1), and its cache never serves it after write s was answered
// (the invalidation is fenced). Any other never-existing answer, a reply
// naming another table above all, is still a failure.
func (h *rywHistory) tornRename(k rywKey, sig, replyName string, begin time.Time) bool {
	v, ok := strings.CutPrefix(sig, "v=")
	if !k.table || !ok || replyName != k.name {
		return false
	}
	s, err := strconv.Atoi(v)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil || s < 1 || s >= len(h.states) || !h.answered[s].After(begin) {
		return false
	}
	_, before := h.states[s-1].tables[k.name]
	_, after := h.states[s].tables[k.name]
	return before && !after && len(h.states[s].tables) == len(h.states[s-1].tables)
}

// answeredBy is how many writes had been answered at t.
func (h *rywHistory) answeredBy(t time.Time) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return sort.Search(len(h.answered), func(i int) bool { return i > 0 && !h.answered[i].Before(t) }) - 1
}

// replyTable is the name of the table in a get_table reply body: what
// tells a reply filed under the wrong name from a stale one.
func replyTable(body []byte) string {
	var name string
	hms.Walk(body, hms.Path{0, 1}, func(_ byte, v []byte) bool {
		name = string(v)
		return false
	})
	return name
}

func runReadYourWritesReal(t *testing.T, v string) {
	ms := start(t, v)
	nodes := startBusNodes(t, ms, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := "e2e_ryw"
	direct := dial(t, ms.addr)
	const tables, databases = 4, 2
	dbName := func(i int) string { return db + "_d" + strconv.Itoa(i) }
	for i := range databases {
		dropDatabase(t, direct, dbName(i))
	}
	clDatabase(t, direct, db)
	state := rywState{tables: map[string]int{}, dbs: map[string]bool{}}
	names := make([]string, 0, 2*tables)
	for i := range tables {
		name := "t" + strconv.Itoa(i)
		clMustOK(t, "create_table", call(t, direct, "create_table", hmsreq.Args(clTable(db, name, map[string]string{"v": "0"}).Field(1))))
		state.tables[name] = 0
		names = append(names, name, name+"_r")
	}
	keys := make([]rywKey, 0, len(names)+databases)
	for _, n := range names {
		keys = append(keys, rywKey{table: true, name: n})
	}
	for i := range databases {
		keys = append(keys, rywKey{name: dbName(i)})
	}
	h := &rywHistory{states: []rywState{state}, answered: []time.Time{{}}}

	const (
		minOps    = 10_000
		minWrites = 150
		maxRun    = 90 * time.Second
	)
	var ops, writes, stale, hits, torn atomic.Int64
	runCtx, stop := context.WithTimeout(ctx, maxRun)
	defer stop()
	var rwg sync.WaitGroup
	errs := make(chan string, 100)
	for _, n := range nodes[1:] {
		for reader := range 2 {
			rwg.Go(func() {
				c, err := hmsclient.Dial(ctx, n.addr, wire.Buffered)
				if err != nil {
					errs <- err.Error()
					return
				}
				defer c.Close()
				rng := rand.New(rand.NewPCG(uint64(reader), uint64(len(n.addr))))
				for runCtx.Err() == nil && (ops.Load() < minOps || writes.Load() < minWrites) {
					k := keys[rng.IntN(len(keys))]
					begin := time.Now()
					var m wire.Message
					if k.table {
						m, err = c.Call(ctx, "get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, k.name)))
					} else {
						m, err = c.Call(ctx, "get_database", hmsreq.Args(hmsreq.Str(1, k.name)))
					}
					if err != nil {
						errs <- err.Error()
						return
					}
					sig := replySig(m.Buf, k.table)
					if ok, was := h.allowed(k, sig, begin); !ok && k.table && h.tornRename(k, sig, replyTable(m.Body()), begin) {
						torn.Add(1)
						t.Logf("node %s: %v answered %s while the rename setting it was in flight: a torn read of the metastore (read took %v)",
							n.addr, k, sig, time.Since(begin))
					} else if !ok {
						if stale.Add(1) <= 10 {
							errs <- fmt.Sprintf("node %s: %v answered %s (state %d; table %q in the reply; read took %v, began when %d writes were answered), older than the last answered write",
								n.addr, k, sig, was, replyTable(m.Body()), time.Since(begin), h.answeredBy(begin))
						}
					}
					ops.Add(1)
					// Paced: unpaced readers on cache hits take the CPU
					// the writer and the metastore need on a small machine,
					// and the run ends with too few writes to mean much.
					time.Sleep(200 * time.Microsecond)
				}
			})
		}
	}

	// The writer, on node A.
	w := dial(t, nodes[0].addr)
	rng := rand.New(rand.NewPCG(1, 2))
	seq := 0
	for runCtx.Err() == nil && (ops.Load() < minOps || writes.Load() < minWrites) {
		seq++
		next := rywState{tables: map[string]int{}, dbs: map[string]bool{}}
		for k, v := range state.tables {
			next.tables[k] = v
		}
		for k, v := range state.dbs {
			next.dbs[k] = v
		}
		var method string
		var args []byte
		name := names[rng.IntN(len(names))]
		_, exists := state.tables[name]
		switch op := rng.IntN(10); {
		case op < 2:
			d := dbName(rng.IntN(databases))
			if state.dbs[d] {
				method, args = "drop_database", hmsreq.Args(hmsreq.Str(1, d), hmsreq.Bool(2, false), hmsreq.Bool(3, true))
				delete(next.dbs, d)
			} else {
				method, args = "create_database", hmsreq.Args(hmsreq.Database{Name: d, Location: "file:///tmp/hmsproxy-e2e/" + d}.Field(1))
				next.dbs[d] = true
			}
		case !exists:
			method, args = "create_table", hmsreq.Args(clTable(db, name, map[string]string{"v": strconv.Itoa(seq)}).Field(1))
			next.tables[name] = seq
		case op < 5:
			method, args = "alter_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, name), clTable(db, name, map[string]string{"v": strconv.Itoa(seq)}).Field(3))
			next.tables[name] = seq
		case op < 8:
			other := name + "_r"
			if len(name) > 2 && name[len(name)-2:] == "_r" {
				other = name[:len(name)-2]
			}
			if _, taken := state.tables[other]; taken {
				method, args = "drop_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, name), hmsreq.Bool(3, false))
				delete(next.tables, name)
				break
			}
			method, args = "alter_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, name), clTable(db, other, map[string]string{"v": strconv.Itoa(seq)}).Field(3))
			delete(next.tables, name)
			next.tables[other] = seq
		default:
			method, args = "drop_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, name), hmsreq.Bool(3, false))
			delete(next.tables, name)
		}
		// The new state may show as soon as the write begins.
		h.mu.Lock()
		h.states = append(h.states, next)
		h.answered = append(h.answered, time.Now().Add(time.Hour))
		h.mu.Unlock()
		reply := call(t, w, method, args)
		answered := time.Now()
		if o := outcome(t, reply); o != "ok" {
			t.Fatalf("write %d %s: metastore answered %s", seq, method, o)
		}
		h.mu.Lock()
		h.answered[len(h.answered)-1] = answered
		h.mu.Unlock()
		state = next
		writes.Add(1)
		ops.Add(1)
	}
	rwg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for _, n := range nodes[1:] {
		hits.Add(int64(n.srv.Stats().Method("get_table", 0) + n.srv.Stats().Method("get_database", 0)))
	}
	var waits []time.Duration
	waits = append(waits, nodes[0].bus.Stats().PublishWaits()...)
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	fmt.Printf("e2e: HMS %s read-your-writes over 3 nodes: %d operations (%d writes through A), %d cache hits on B and C, %d stale reads, %d torn metastore reads mid-rename; bus wait per write p50 %v p99 %v\n",
		v, ops.Load(), writes.Load(), hits.Load(), stale.Load(), torn.Load(), waits[len(waits)/2], waits[len(waits)*99/100])
	if ops.Load() < minOps || writes.Load() < minWrites {
		t.Fatalf("only %d operations, %d writes in %v", ops.Load(), writes.Load(), maxRun)
	}
	if stale.Load() > 0 {
		t.Fatalf("%d reads returned the state from before a write whose client already had its answer", stale.Load())
	}
	if hits.Load() == 0 {
		t.Fatal("no cache hits on the readers' nodes: the run did not exercise the cache")
	}
}

// replySig is a reader's answer: v=<param> for a table, ok for a
// database, or the declared exception's field ("ex2", "ex1").
func replySig(reply []byte, table bool) string {
	m, err := wire.Parse(reply, wire.Limits{MaxMessage: 1 << 30})
	if err != nil || m.Type == wire.Exception {
		return "bad"
	}
	f, err := wire.ResultField(m.Body())
	switch {
	case err != nil:
		return "bad"
	case f > 0:
		return "ex" + strconv.Itoa(int(f))
	case table:
		return "v=" + clParam(reply, "v")
	}
	return "ok"
}
