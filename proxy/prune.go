package proxy

import (
	"bytes"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/filter"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Local pruning, Presto-style: a filter or partial spec over one table's
// partitions is answered from three cached things every client shares
// with plain reads: the table (get_table: its partition keys and their
// types), the table's partition names (get_partition_names, every name)
// and the per-partition entries of get_partitions_by_names. A new filter
// value then costs no upstream call at all, where a reply cached whole
// under its filter text misses on every new value.
//
// Only what the filter package evaluates exactly as the metastore does is
// answered here (filter.Expr.Exact); a partial spec only when its values
// are plain (see plainValue). Everything else, and every error the
// metastore would raise (a key that is not a partition key, a filter it
// cannot parse, too many values), is forwarded: the proxy never writes an
// exception of its own making.
//
// Order. Every metastore version returns the partitions of a filter, of a
// partial spec and the names of get_partition_names sorted by PART_NAME
// ascending (directSQL: "order by PART_NAME asc"; JDO: ordering
// "partitionName ascending"), so the reply keeps the order of the cached
// name list, which is the metastore's own. max_parts cuts that order
// (directSQL and JDO both apply it as a range over the ordered rows); a
// negative max_parts means all.
//
// Integral keys. With direct SQL (the default, and what every metastore
// tested here runs) a comparison of an integral key with an integer
// literal casts the stored value to a number, and the default partition
// to NULL: "hr = 7" matches "hr=07", and __HIVE_DEFAULT_PARTITION__
// matches neither "hr = 1" nor "hr != 1". Plain JDO (direct SQL off)
// refuses filters on non-string keys unless
// hive.metastore.integral.jdo.pushdown is set, and then compares the
// strings. filter.Eval follows direct SQL; a metastore running JDO gives
// an exception or a different answer for such filters, which the
// differential test (e2e TestPruneDifferential) would show: run it against
// a metastore configured like production before trusting integral keys.
//
// Consistency. The three kinds of entries depend on the same generations
// as the filter read itself (the database, the table, the table's
// partitions), except that a partition's own entry does not depend on the
// table's partition set: an add drops the name list and leaves the
// partitions that exist cached, so the next prune refetches the list and
// only the new partitions. A snapshot of them is taken before the first lookup and
// checked again once the reply is assembled: if an invalidation came in
// between, the name list and the partitions may come from either side of
// it, a combination the metastore never gave, and the request is
// forwarded instead. Partitions fetched for the prune must all come back:
// a name the metastore no longer has means the name list is older than
// the fetch, and the request is forwarded too.

// PruneStats count how pruning reads were answered.
type PruneStats struct {
	// Local: answered from the cache (possibly after fetching missing
	// entries).
	Local atomic.Uint64
	// Inexact: the expression is not one the proxy evaluates exactly;
	// the read was cached whole or forwarded.
	Inexact atomic.Uint64
	// Raced: an invalidation came while the reply was assembled, or a
	// fetched partition was gone; forwarded.
	Raced atomic.Uint64
	// Upstream: calls made to fill the table, the name list and the
	// partitions a prune needed.
	Upstream atomic.Uint64
	// results are the reads by PruneResult: the three totals above, and
	// why each forwarded one was (Count).
	results pruneCounts
}

// PruneStats are the server's pruning counts; nil without caching.
func (s *Server) PruneStats() *PruneStats {
	if s.cache == nil {
		return nil
	}
	return &s.cache.prune
}

// errPruneForward: the prune cannot answer; forward the request.
var errPruneForward = errors.New("proxy: prune: forward")

// pruneRead answers a pruning read (hms.DecodePrune) from the cache.
// handled false: the caller serves the request as any other read.
func (c *clientConn) pruneRead(meth *hms.Method, m wire.Message, sc cache.Scope) (bool, error) {
	k := c.rt.cache
	if !hms.Prunable(meth.Name) || k.PruneOff || sc.Conf != "" {
		// A session's overrides may change how the metastore evaluates
		// filters (hive.metastore.try.direct.sql=false refuses keys that
		// are not strings): only the metastore answers such a session.
		return false, nil
	}
	set := k.settings()
	if !set.Known || !set.DirectSQL {
		// What the filter means depends on settings not read yet, or on
		// a metastore that evaluates it without direct SQL.
		return false, nil
	}
	for _, kind := range [...]hms.Kind{hms.KindTable, hms.KindPartitionNames, hms.KindPartitions} {
		if k.Store.Policy(kind).TTL <= 0 {
			return false, nil // what a prune reads is not cached: it would cost three calls
		}
	}
	p, ok := hms.DecodePrune(meth.Name, m.Body(), k.DefaultCatalog)
	if !ok || len(p.DB) > maxPruneName || len(p.Table) > maxPruneName {
		// A name longer than the metastore's schema columns hold names
		// nothing: pruning it would only make the connection keep the
		// made-up reads of a hostile client's megabyte names.
		return false, nil
	}
	if _, known := k.answered.Load(meth.Name); p.Newer && !known {
		return false, nil
	}
	// The generations of everything the reply depends on, before any
	// lookup: checked again at the end.
	snap, ok := c.pruneGens(sc, meth, &p)
	if !ok {
		return false, nil
	}

	// One clock reading for every lookup of the prune.
	now := k.Store.Now()
	tbl, err := c.pruneTable(sc, &p, now)
	if err != nil {
		return c.pruneFallback("table", err)
	}
	tk, ok := c.pruneKeys(tbl)
	if !ok {
		return c.pruneFallback("partition keys", errPruneForward)
	}
	// Exactness first: an inexact request loads nothing.
	plan, ok := prunePlanOf(&p, tk, &k.pruneExprs, set.Version)
	if !ok {
		k.prune.count(PruneInexact)
		return false, nil
	}
	list, listKey, err := c.pruneEntry(sc, &p, synthNames, now)
	if err != nil {
		return c.pruneFallback("name list", err)
	}
	idx, ok := k.pruneIdx.get(listKey, list)
	if !ok || (idx.nkeys != len(tk.keys) && len(idx.names) > 0) {
		return c.pruneFallback("name index", errPruneForward)
	}
	for _, i := range plan.intKeys {
		if i < len(idx.odd) && idx.odd[i] {
			k.prune.count(PruneInexact)
			return false, nil
		}
	}
	pick, err := c.pruneSelect(plan, idx, p.MaxParts, p.Reply == hms.PrunePartitions)
	if err != nil {
		return c.pruneFallback("evaluation", err)
	}
	sel, selj, cands, by, posted := pick.sel, pick.selj, pick.cands, pick.by, pick.posted

	if p.Reply == hms.PrunePartitions && set.overLimit(len(sel), p.MaxParts) {
		// The metastore refuses a request for this many partitions
		// (hive.metastore.limit.partition.request): its answer, not one
		// made up here.
		k.prune.count(PruneOverLimit)
		return false, nil
	}
	var pieces [][]byte
	var selNames []string
	switch p.Reply {
	case hms.PruneNames, hms.PruneNamesInStruct:
		selNames = make([]string, len(sel))
		for j, i := range sel {
			selNames[j] = idx.names[i]
		}
	case hms.PrunePartitions:
		var pm *postMemo
		if posted {
			pm = idx.memos.memo(k.Store, by, plan.pins[by][0])
		}
		pieces, err = c.prunePartitions(sc, &p, idx, sel, cands, &snap, pm, selj, now)
		// Don't keep cached entries alive through the buffer.
		defer clear(pieces)
		if err != nil {
			return c.pruneFallback("partitions", err)
		}
	}
	if k.pruneHook != nil {
		k.pruneHook()
	}
	if !k.Store.Gens().Current(&snap) {
		return c.pruneFallback("generations", errPruneForward)
	}
	k.prune.count(PruneLocal)
	c.outcome = OutcomeHit
	c.hdr = wire.AppendHeader(c.hdr[:0], wire.Reply, m.Name(), m.SeqID)
	c.iov, c.frame = hms.AppendPruneReply(append(c.iov[:0], c.hdr), c.frame, p.Reply, pieces, len(sel), selNames)
	c.iov = c.joinSmall(c.iov)
	err = c.writeParts(c.iov)
	clear(c.iov) // don't keep cached entries alive through the buffers
	if err != nil {
		return true, errors.Join(errClientWrite, err)
	}
	return true, nil
}

// pruneFallback turns a reason not to prune (found at the step named at)
// into the answer of pruneRead: the request goes on as any other read (and so reaches the
// metastore, or its whole-reply entry), unless the client itself failed.
func (c *clientConn) pruneFallback(at string, err error) (bool, error) {
	if errors.Is(err, errPruneForward) {
		c.rt.cache.prune.count(pruneStep(at))
		c.rt.cache.log.Debug("prune forwarded", "at", at)
		return false, nil
	}
	return true, err
}

// plainValue matches the partial-spec values answered locally. The
// metastore matches a partial spec as a pattern over PART_NAME (the
// escaped value inside a regular expression that JDO turns into SQL
// LIKE), so a value holding a character either language treats
// specially (".", "_", "%", "*", ...) may match more than itself.
var plainValue = regexp.MustCompile(`^[A-Za-z0-9-]+$`)

// Partial specs (get_partitions_ps, get_partition_names_ps[_req]) are
// answered locally only when they name a value for every key, so that at
// most one partition matches. The differential test against 3.1 showed
// why: the metastore lists a partial spec's matches with a JDO query that
// has no ORDER BY, so they come in the database's own order (the order
// the partitions were added, on Derby), which no cache can know; and a
// spec shorter than the keys is matched as the pattern
// "k1=v1/k2=v2.*", so its last value matches as a prefix ("n=1" finds
// n=10 and n=100).

// prunePlan is how one request is evaluated over the partitions of
// tables with given keys (sig): worked out once per filter text and keys,
// so a filter sent again costs no parsing, no type checks and no
// allocation.
type prunePlan struct {
	sig     string      // tableKeys.sig of the keys it was made for
	version hms.Version // and the metastore version
	exact   bool        // false: not evaluated locally; the rest is unset
	bound   *filter.Bound
	spec    []string // a partial spec's values, when bound is nil
	// sans[i] is bound less the conjunct pinning key i (nil: none
	// does): what decides the candidates found by that key's pins.
	sans []*filter.Bound
	// pins are, by key position, the only values a matching partition
	// can have for that key (nil: no such key): the candidates to test.
	pins [][]string
	// intKeys are the positions of the integral keys the filter
	// compares (by =, IN, ranges or BETWEEN alike): exact only while
	// every stored value of them is canonical (nameIndex.odd).
	intKeys []int
	// sel, for a filter's plan, keeps its last selection.
	sel *selMemo
}

// tester is what decides the candidates that nameIndex.candidates found
// by the pins of key by (-1: all the names): the plan less that key's
// pinning conjunct, which holds for each of them.
func (pl *prunePlan) tester(by int) prunePlan {
	t := *pl
	if by >= 0 && by < len(pl.sans) && pl.sans[by] != nil {
		t.bound = pl.sans[by]
	}
	return t
}

// match tests one partition (its values in the table's key order).
func (pl *prunePlan) match(vals []string) (bool, error) {
	if pl.bound != nil {
		// An error (a value of an integral key that is not a number) is
		// where direct SQL fails and the metastore falls back to JDO:
		// its answer, not ours.
		return pl.bound.Eval(vals)
	}
	for i, want := range pl.spec {
		if vals[i] != want {
			return false, nil
		}
	}
	return true, nil
}

// pruneSelect returns which partitions of idx plan selects, at most
// maxParts of them when it is not negative: the candidates (by the pins
// of one key, or all), the positions in idx of those selected and, when
// the candidates are the posting list of one value (posted, and parts:
// the reply lists partitions), where the selected are in it. The
// selection of a filter's plan over one index is kept (see selMemo): its
// slices may be shared, and are not to be written.
func (c *clientConn) pruneSelect(plan *prunePlan, idx *nameIndex, maxParts int, parts bool) (selection, error) {
	if plan.sel != nil {
		if m := plan.sel.last.Load(); m != nil && m.idx == idx.id && m.maxParts == maxParts && m.parts == parts {
			return *m, nil
		}
	}
	s := selection{idx: idx.id, maxParts: maxParts, parts: parts, sel: c.psel[:0], selj: c.pselj[:0]}
	s.cands, s.by = idx.candidates(plan.pins)
	// The candidates of one pinned value: a posting list a memo may
	// hold ready (prunememo.go).
	s.posted = parts && s.by >= 0 && len(plan.pins[s.by]) == 1 && len(s.cands) <= maxPostCands
	test := plan.tester(s.by)
	for j, i := range s.cands {
		if maxParts >= 0 && len(s.sel) >= maxParts {
			break
		}
		ok, err := test.match(idx.valuesOf(i))
		if err != nil {
			return s, errPruneForward
		}
		if ok {
			s.sel = append(s.sel, i)
			if s.posted {
				s.selj = append(s.selj, int32(j))
			}
		}
	}
	c.psel, c.pselj = s.sel, s.selj
	if plan.sel != nil && len(s.cands) <= maxPostCands {
		// The candidates are the index's own (a posting list, or all
		// of a small table) or made for this selection: kept as they are.
		kept := s
		kept.sel, kept.selj = slices.Clone(s.sel), slices.Clone(s.selj)
		plan.sel.last.Store(&kept)
	}
	return s, nil
}

// selMemo keeps the last selection of a filter's plan: planners send
// the same filter again and again, and a selection depends only on the
// plan and the name index (both immutable), max_parts and the reply's
// shape. It is kept only for at most maxPostCands candidates: some 12
// KiB for each of the exprCache's filters at most.
type selMemo struct {
	last atomic.Pointer[selection]
}

// selection is the result of a pruneSelect over the index numbered idx.
type selection struct {
	idx       uint64
	maxParts  int
	parts     bool
	cands     []int32
	by        int
	posted    bool
	sel, selj []int32
}

// prunePlanOf returns the plan of p over a table with keys tk, and false
// when p is not evaluated exactly.
func prunePlanOf(p *hms.Prune, tk *tableKeys, exprs *exprCache, v hms.Version) (*prunePlan, bool) {
	if !p.ByFilter {
		if len(p.PartVals) != len(tk.keys) {
			return nil, false // see above; too many values: the metastore raises
		}
		pl := &prunePlan{sig: tk.sig, exact: true, spec: p.PartVals, pins: make([][]string, len(tk.keys))}
		for i, v := range p.PartVals {
			if !plainValue.MatchString(v) {
				return nil, false
			}
			pl.pins[i] = []string{v}
		}
		return pl, true
	}
	ent, err := exprs.parse(p.Filter)
	if err != nil {
		return nil, false
	}
	if pl := ent.plan.Load(); pl != nil && pl.sig == tk.sig && pl.version == v {
		return pl, pl.exact
	}
	pl := filterPlan(ent.e, tk, v)
	ent.plan.Store(pl) // the last table's: planners ask about one table at a time
	return pl, pl.exact
}

// filterPlan works out the plan of filter e over tables with keys tk,
// on a metastore of version v.
func filterPlan(e *filter.Expr, tk *tableKeys, v hms.Version) *prunePlan {
	pl := &prunePlan{sig: tk.sig, version: v}
	if !e.Exact(tk.typeOf) || !quirkFree(e, tk, v) {
		return pl
	}
	b, err := e.Bind(tk.lower, tk.types)
	if err != nil {
		return pl
	}
	for _, used := range e.Keys() {
		for i, key := range tk.lower {
			if key == used && filter.Integral(tk.types[i]) {
				pl.intKeys = append(pl.intKeys, i)
			}
		}
	}
	// Integral keys are pinned by canonical values: checked by the
	// caller against the name index (intKeys).
	if pinned := e.Pinned(tk.typeOf); len(pinned) > 0 {
		pl.pins = make([][]string, len(tk.keys))
		pl.sans = make([]*filter.Bound, len(tk.keys))
		for i, key := range tk.lower {
			if pl.pins[i] = pinned[key]; pl.pins[i] != nil {
				pl.sans[i] = b.Sans(key, tk.typeOf)
			}
		}
	}
	pl.exact, pl.bound, pl.sel = true, b, &selMemo{}
	return pl
}

// quirkFree reports whether the metastore of version v evaluates e over
// a table with keys tk as filter.Eval does (the rule is to answer as
// the metastore would, quirks included, so a filter its quirks touch is
// the metastore's to answer):
//   - 2.x and 3.x refuse filters on varchar and char keys (direct SQL
//     cannot push them down, JDO takes strings only), and on keys whose
//     name starts with '_' (their filter grammar's identifiers start with
//     a letter or digit);
//   - 4.x adds a PART_NAME clause to =, !=, <>, IN and NOT IN: an exact
//     name of the stored form for a single key (so an integral key's
//     "hr = 7" misses "hr=07"), a LIKE pattern for a table of several
//     keys, where '_' and '%' in the escaped literal (and every escaped
//     character is '%' and two digits) are wildcards.
func quirkFree(e *filter.Expr, tk *tableKeys, v hms.Version) bool {
	ok := true
	e.Comparisons(func(c filter.Comparison) {
		typ := strings.ToLower(tk.typeOf[c.Key])
		if v.Is(hms.Version2) || v.Is(hms.Version3) {
			if strings.HasPrefix(typ, "varchar") || strings.HasPrefix(typ, "char") || strings.HasPrefix(c.Key, "_") {
				ok = false
			}
		}
		if v.Is(hms.Version4) && !c.Between && (c.Op == filter.EQ || c.Op == filter.NE) {
			if filter.Integral(typ) {
				ok = false
			}
			for _, l := range c.Literals {
				if len(tk.keys) > 1 && strings.ContainsAny(l, "_%") || len(tk.keys) > 1 && hms.NeedsEscaping(l) {
					ok = false
				}
			}
		}
	})
	return ok
}

// tableKeys are a table's partition keys as a prune uses them, read out
// of its cached get_table reply once, not on each prune.
type tableKeys struct {
	src   unsafe.Pointer // the first byte of the body they were read from
	n     int            // and its length
	body  []byte         // keeps src alive, so its address is not reused
	keys  []hms.PartitionKey
	lower []string // the keys' names, lower-cased
	types []string
	// typeOf maps each lower-cased name to its type.
	typeOf map[string]string
	// sig tells key lists apart: names and types, in order.
	sig string
}

// pruneKeys returns the partition keys of the table whose get_table
// reply body is tbl, false for a table without any. The last table's are
// kept on the connection: a planner asks about one table at a time.
func (c *clientConn) pruneKeys(tbl []byte) (*tableKeys, bool) {
	if len(tbl) == 0 {
		return nil, false
	}
	ptr := unsafe.Pointer(unsafe.SliceData(tbl))
	if tk := c.ptk; tk != nil && tk.src == ptr && tk.n == len(tbl) {
		return tk, true
	}
	keys, ok := hms.TablePartitionKeys(tbl)
	if !ok || len(keys) == 0 {
		return nil, false
	}
	tk := &tableKeys{src: ptr, n: len(tbl), body: tbl, keys: keys,
		lower: make([]string, len(keys)), types: make([]string, len(keys)),
		typeOf: make(map[string]string, len(keys))}
	var sig strings.Builder
	for i, key := range keys {
		tk.lower[i] = strings.ToLower(key.Name)
		tk.types[i] = key.Type
		tk.typeOf[tk.lower[i]] = key.Type
		sig.WriteString(tk.lower[i])
		sig.WriteByte(0)
		sig.WriteString(key.Type)
		sig.WriteByte(0)
	}
	tk.sig = sig.String()
	c.ptk = tk
	return tk, true
}

// pruneEntry returns the cached success reply body of a synthesized read
// (which, of p's table) under scope sc, loading it on a miss. A reply that
// is not a plain success gives errPruneForward: the client's own request
// then gets the metastore's answer.
func (c *clientConn) pruneEntry(sc cache.Scope, p *hms.Prune, which int, now time.Time) (body []byte, key string, err error) {
	k := c.rt.cache
	meth := synthMethods[which]
	syn, err := c.pruneSynth(sc, p, which)
	if err != nil {
		return nil, "", err
	}
	m, kb, names := syn.m, syn.key, &syn.names
	// The entry found last time, while a lookup would still find it
	// (cache.Store.Again), saves building the key's hash and searching.
	e, st := k.Store.Again(syn.ref, meth.Kind, now)
	if st == cache.Miss {
		if e, st = k.Store.GetAt(kb, meth.Kind, now); st != cache.Miss {
			syn.ref = e.RefAgain(syn.ref)
		}
	}
	if st != cache.Miss {
		if st == cache.HitRefresh && k.Store.StartRefresh(kb) {
			k.enqueueRefresh(c.sess, meth, m, kb, names)
		}
		body, err = okBody(e.Body())
		return body, syn.keyStr, err
	}
	deps, ok := k.Store.ReadDeps(nil, sc, meth, names)
	if !ok {
		return nil, "", errPruneForward
	}
	snap, ok := k.Store.Gens().Take(deps)
	if !ok {
		return nil, "", errPruneForward
	}
	res, err, _ := k.flights.Do(string(snap.AppendKey(kb)), func() (any, error) {
		k.prune.Upstream.Add(1)
		return k.load(c.s.ctx, c.rt.up, c.sess, meth, m, kb, &snap)
	})
	if err != nil {
		return nil, "", err
	}
	ld := res.(loaded)
	if ld.typ != wire.Reply {
		return nil, "", errPruneForward
	}
	body, err = okBody(ld.body)
	return body, syn.keyStr, err
}

// pruneSynth is a read a prune makes up, ready to look up or send.
type pruneSynth struct {
	m      wire.Message // owns its buffer
	key    []byte       // its cache key; for a batch, its entries' key prefix
	keyStr string
	names  cache.Names
	ref    *cache.Ref // the entry a lookup found last (not for batches)
}

// maxPruneSynths bounds the made-up reads a connection keeps: a planner
// asks about a few tables over and over on one connection.
const maxPruneSynths = 64

// maxPruneName is the longest database or table name a prune takes: the
// metastore schema's name columns (DBS.NAME, TBLS.TBL_NAME) hold at most
// 256 characters, so with maxPruneSynths a connection keeps a few
// hundred KiB of made-up reads at most.
const maxPruneName = 256

// The reads a prune makes up, by what they read of a table.
const (
	synthTable    = iota // get_table
	synthTableReq        // get_table_req
	synthNames           // get_partition_names
	synthParts           // get_partitions_by_names: the partitions' entry key prefix
	numSynths
)

var synthMethods = [numSynths]*hms.Method{
	hms.Lookup([]byte("get_table")), hms.Lookup([]byte("get_table_req")),
	hms.Lookup([]byte("get_partition_names")), hms.Lookup([]byte("get_partitions_by_names")),
}

// prunedLast is the made-up reads of the table a connection pruned last,
// under its scope: a planner asks about one table at a time, and these
// are found without building psynth's key (some 200 ns a prune).
type prunedLast struct {
	sc      cache.Scope
	db, tbl []byte
	syn     [numSynths]*pruneSynth
	// deps are the dependencies of a prune of the table by meth (nil:
	// none found yet): what its names give, found once.
	meth *hms.Method
	deps []cache.Dep
}

// prunedLastOf is the connection's prunedLast, made anew unless it is
// p's table's under sc.
func (c *clientConn) prunedLastOf(sc cache.Scope, p *hms.Prune) *prunedLast {
	l := &c.plast
	if l.sc != sc || !bytes.Equal(l.db, p.DB) || !bytes.Equal(l.tbl, p.Table) || l.db == nil {
		*l = prunedLast{sc: sc, db: append(l.db[:0], p.DB...), tbl: append(l.tbl[:0], p.Table...), deps: l.deps[:0]}
	}
	return l
}

// pruneGens is takeGens for the prune p (meth, resolved in c.res) under
// sc, its dependencies worked out once for the table on the connection.
func (c *clientConn) pruneGens(sc cache.Scope, meth *hms.Method, p *hms.Prune) (cache.Snapshot, bool) {
	k := c.rt.cache
	l := c.prunedLastOf(sc, p)
	if l.meth != meth {
		names := cache.ReadNames(meth, &c.res, k.DefaultCatalog)
		deps, ok := k.Store.ReadDeps(l.deps[:0], sc, meth, &names)
		if !ok {
			l.meth, l.deps = nil, deps[:0]
			return cache.Snapshot{}, false
		}
		l.meth, l.deps = meth, deps
	}
	return k.Store.Gens().Take(l.deps)
}

// pruneSynth returns the made-up read which of p's table under sc.
func (c *clientConn) pruneSynth(sc cache.Scope, p *hms.Prune, which int) (*pruneSynth, error) {
	l := c.prunedLastOf(sc, p)
	if syn := l.syn[which]; syn != nil {
		return syn, nil
	}
	args := c.pargs[:0]
	switch which {
	case synthTable:
		args = hms.AppendTableArgs(args, p.DB, p.Table)
	case synthTableReq:
		args = hms.AppendTableReqArgs(args, p.DB, p.Table)
	case synthNames:
		args = hms.AppendPartitionNamesArgs(args, p.DB, p.Table)
	case synthParts:
		args = hms.AppendPartitionsByNamesArgs(args, p.DB, p.Table, nil)
	}
	c.pargs = args
	syn, err := c.pruneSynthOf(sc, synthMethods[which], args) // copies what it keeps
	if err == nil {
		l.syn[which] = syn
	}
	return syn, err
}

// pruneSynthOf returns the made-up read of meth with args under sc,
// building it (message, key, names) only the first time on this
// connection.
func (c *clientConn) pruneSynthOf(sc cache.Scope, meth *hms.Method, args []byte) (*pruneSynth, error) {
	// Everything the made-up read's key depends on beyond args: the
	// group (a member's table may have the primary's names, promise 6)
	// and the identity, each length-prefixed so no two scopes meet.
	memo := c.pmemo[:0]
	memo = append(memo, meth.Name...)
	memo = append(memo, 0)
	memo = sc.Append(memo)
	memo = append(memo, args...)
	c.pmemo = memo
	if syn, ok := c.psynth[string(memo)]; ok {
		return syn, nil
	}
	k := c.rt.cache
	msg := wire.AppendHeader(nil, wire.Call, []byte(meth.Name), 0)
	msg = append(msg, args...)
	m, err := wire.Parse(msg, wire.Limits{MaxMessage: len(msg)})
	if err != nil {
		return nil, errPruneForward
	}
	r := &c.pres
	defer r.Forget()
	if err := meth.Resolve(r, m.Body()); err != nil || r.Bad {
		return nil, errPruneForward
	}
	var kb []byte
	ok := true
	if meth.Batch != nil {
		// A batch's entries: key is their prefix.
		kb, ok = cache.EntryKeyPrefix(nil, sc, meth, r, k.DefaultCatalog)
	} else {
		kb, ok = cache.ReadKey(nil, sc, meth, r, k.DefaultCatalog)
	}
	if !ok {
		return nil, errPruneForward
	}
	syn := &pruneSynth{m: m, key: kb, keyStr: string(kb), names: cache.ReadNames(meth, r, k.DefaultCatalog)}
	if c.psynth == nil || len(c.psynth) >= maxPruneSynths {
		c.psynth = map[string]*pruneSynth{}
	}
	c.psynth[string(memo)] = syn
	return syn, nil
}

// pruneTable returns the table's cached get_table reply, or on a
// metastore without the legacy get_table (the 4.0 of the test bed answers
// it with UNKNOWN_METHOD) the get_table_req one; once the legacy form
// failed and the request form answered, only the latter is asked.
func (c *clientConn) pruneTable(sc cache.Scope, p *hms.Prune, now time.Time) ([]byte, error) {
	k := c.rt.cache
	if !k.pruneTableReq.Load() {
		body, _, err := c.pruneEntry(sc, p, synthTable, now)
		if !errors.Is(err, errPruneForward) {
			return body, err
		}
		if _, known := k.answered.Load("get_table"); known {
			return nil, err // the table's own answer (not found, say)
		}
	}
	body, _, err := c.pruneEntry(sc, p, synthTableReq, now)
	if err == nil && !k.pruneTableReq.Load() {
		k.pruneTableReq.Store(true)
	}
	return body, err
}

// okBody passes a result body that holds a success (field 0).
func okBody(b []byte) ([]byte, error) {
	if f, err := wire.ResultField(b); err != nil || f != 0 {
		return nil, errPruneForward
	}
	return b, nil
}

// prunePartitions returns the Partition structs of the selected names,
// in order, from the per-partition entries; the missing ones are fetched
// in bulk (chunks of BatchChunk names) and stored under snap. When some
// are missing, the missing candidates (the partitions of the pinned
// values, a day say) come in the same call, as Presto fetches a partial
// spec's partitions and evaluates the rest of the filter on them: the
// next filter over that day, with other regions, finds them cached.
//
// pm, when not nil, is the memo of the posting list cands, and selj the
// positions of sel in it: it answers, when it can, without looking at
// each entry, except every postLookup-th time, when each selected entry
// is looked up in the store (not taken back through its reference) so
// the store's eviction policy sees it used.
func (c *clientConn) prunePartitions(sc cache.Scope, p *hms.Prune, idx *nameIndex, sel, cands []int32, snap *cache.Snapshot, pm *postMemo, selj []int32, now time.Time) ([][]byte, error) {
	k := c.rt.cache
	meth := synthMethods[synthParts]
	syn, err := c.pruneSynth(sc, p, synthParts)
	if err != nil {
		return nil, err
	}
	base := syn.key[:len(syn.key):len(syn.key)] // entry keys are appended to copies
	lookup := false
	if pm != nil {
		if lookup = pm.uses.Add(1)%postLookup == 0; !lookup {
			tbl := ""
			if len(syn.names.Tables) > 0 {
				tbl = syn.names.Tables[0]
			}
			c.group = cache.TableGroup(c.group[:0], k.Upstream, syn.names.Cat, syn.names.DB, tbl)
			ex := snap.Existing()
			if pieces, ok := c.postedParts(pm, idx, cands, selj, base, c.group, &ex, now); ok {
				return pieces, nil
			}
		}
	}
	args := syn.m.Body()
	// A cached partition is served as its entry's pieces (its shared
	// storage-descriptor segments included, uncopied); a fetched one as
	// the bytes the metastore sent.
	parts := slices.Grow(c.pparts[:0], len(sel))[:len(sel)]
	c.pparts = parts
	defer clear(parts) // don't keep cached entries alive through the buffer
	var missing []string
	var at []int // where each missing name goes in parts
	for j, i := range sel {
		// The index remembers the entry each name was found at: while the
		// store still holds it, current, it is the entry a lookup of its
		// key would find (cache.Store.Again).
		// Refresh-ahead of per-partition entries is left to by-names
		// reads (see partitionEntry).
		ref := idx.refs[i].Load()
		if !lookup {
			if e, st := k.Store.Again(ref, hms.KindPartitions, now); st != cache.Miss {
				parts[j] = prunePart{e: e}
				continue
			}
		}
		key := append(c.key[:0], base...)
		key = append(key, idx.names[i]...)
		c.key = key
		if e, ok := k.partitionEntry(key, now); ok {
			parts[j] = prunePart{e: e}
			if r := e.RefAgain(ref); r != ref {
				idx.refs[i].Store(r)
			}
			continue
		}
		parts[j] = prunePart{}
		missing = append(missing, idx.names[i])
		at = append(at, j)
	}
	if len(missing) == 0 {
		return c.flattenParts(parts), nil
	}
	if len(cands) < len(idx.names) && len(cands) <= k.BatchChunk {
		// The candidates not selected, when missing too, ride along:
		// after the selected ones, so at[] still maps the first names.
		chosen := make(map[int32]bool, len(sel))
		for _, i := range sel {
			chosen[i] = true
		}
		for _, i := range cands {
			if chosen[i] {
				continue
			}
			key := append(c.key[:0], base...)
			key = append(key, idx.names[i]...)
			c.key = key
			if _, ok := k.partitionEntry(key, now); !ok {
				missing = append(missing, idx.names[i])
			}
		}
	}
	started := k.Store.Now()
	hdr := syn.m.Header()
	for len(missing) > 0 {
		chunk := missing[:min(len(missing), k.BatchChunk)]
		missing = missing[len(chunk):]
		k.prune.Upstream.Add(1)
		got, failed, err := k.fetchParts(c.s.ctx, c.rt.up, c.sess,
			meth.Batch.AppendRequest(nil, hdr, args, chunk), meth.Batch, chunk)
		if err != nil {
			return nil, err
		}
		if failed != nil || len(got) != len(chunk) {
			// An exception, a shape this code does not take apart, or a
			// partition gone since the name list was read.
			return nil, errPruneForward
		}
		k.putParts(base, meth.Kind, &syn.names, got, snap, started)
		found := make(map[string][]byte, len(got))
		for _, o := range got {
			found[o.Name] = o.Body
		}
		for _, name := range chunk {
			body, ok := found[name]
			if !ok {
				return nil, errPruneForward
			}
			if len(at) > 0 {
				parts[at[0]].body = body
				at = at[1:]
			}
		}
	}
	return c.flattenParts(parts), nil
}

// prunePart is one selected partition: a cached entry, or the bytes just
// fetched (body non-nil).
type prunePart struct {
	e    cache.Entry
	body []byte
}

// flattenParts lists the selected partitions' bytes in reply order, in
// the connection's buffer (cleared once the reply is written).
func (c *clientConn) flattenParts(parts []prunePart) [][]byte {
	pieces := slices.Grow(c.ppieces[:0], 3*len(parts))
	defer func() { c.ppieces = pieces }()
	for _, p := range parts {
		if p.body != nil {
			pieces = append(pieces, p.body)
			continue
		}
		pieces = p.e.AppendPieces(pieces)
	}
	return pieces
}

// partitionEntry is the one access of pruning to the per-partition cache:
// the entry of a Partition cached at an entry key of
// get_partitions_by_names, and whether there was one. Its bytes are
// written as its pieces (the table's shared storage-descriptor segments
// among them), never joined into one copy.
func (k *cacher) partitionEntry(key []byte, now time.Time) (cache.Entry, bool) {
	e, st := k.Store.GetAt(key, hms.KindPartitions, now)
	if st == cache.Miss {
		return cache.Entry{}, false
	}
	// Refresh-ahead of per-partition entries is left to by-names reads:
	// an entry past its refresh age is served until its TTL.
	return e, true
}

// exprCache keeps parsed filters by text: planners send the same filter
// again and again (and an Expr is immutable), so most prunes parse none.
type exprCache struct {
	mu sync.Mutex // guards m
	m  map[string]*keptExpr
}

// keptExpr is a parsed filter and its plan over the keys of the last
// table it was evaluated on.
type keptExpr struct {
	e    *filter.Expr
	plan atomic.Pointer[prunePlan]
}

// maxExprs bounds the filters kept, and maxKeptFilter the length of one
// (4 KiB: a planner's filter over a few keys; a longer one, an IN list of
// thousands of values say, is parsed on each call), so that the cache,
// shared by every client, holds at most 16 MiB of filter text.
const (
	maxExprs      = 4096
	maxKeptFilter = 4 << 10
)

func (x *exprCache) parse(s string) (*keptExpr, error) {
	x.mu.Lock()
	ke := x.m[s]
	x.mu.Unlock()
	if ke != nil {
		return ke, nil
	}
	e, err := filter.Parse(s)
	if err != nil {
		return nil, err
	}
	ke = &keptExpr{e: e}
	if len(s) > maxKeptFilter {
		return ke, nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = map[string]*keptExpr{}
	}
	if len(x.m) >= maxExprs {
		for k := range x.m { // any one
			delete(x.m, k)
			break
		}
	}
	x.m[s] = ke
	return ke, nil
}

// canonicalInt reports whether v is an integer written as strconv would
// write it back: no sign but '-', no leading zeros, fits 64 bits.
func canonicalInt(v string) bool {
	n, err := strconv.ParseInt(v, 10, 64)
	return err == nil && strconv.FormatInt(n, 10) == v
}

// nameIndex is a cached name list taken apart: each name and its values
// in key order. It is rebuilt only when the name list entry changes.
type nameIndex struct {
	id    uint64         // unique in the process (indexIDs)
	src   unsafe.Pointer // the first byte of the body it was built from
	n     int            // and its length
	body  []byte         // keeps src alive, so its address is not reused
	names []string
	// values are each name's values in key order, nkeys a name, one
	// after another: the values of neighbouring names (the candidates
	// of one day) lie together.
	values []string
	nkeys  int // values per name
	// odd[i]: some value of key i is not an integer as Go and the
	// metastore both write it (the default partition, "07", "x"). An
	// integral key with such a value is compared differently by direct
	// SQL, JDO and versions (2.3 casts every value and fails over to JDO,
	// which refuses integral keys; 3.1 and later read the default
	// partition as NULL), so filters on it are forwarded.
	odd []bool
	// post[i] lists, for each value of key i, the positions of the names
	// having it, ascending.
	post []map[string][]int32
	all  []int32 // every position
	// refs[i] is the cached entry of the partition names[i] was last
	// found at, held weakly (cache.Ref): an index outlives no entry.
	refs []atomic.Pointer[cache.Ref]
	// memos are its posting lists' entries, ready (prunememo.go).
	memos postMemos
}

// indexIDs numbers name indexes: a selection kept for one (selMemo)
// names it by number, so it keeps no index alive.
var indexIDs atomic.Uint64

// valuesOf is the values of names[i], in key order.
func (x *nameIndex) valuesOf(i int32) []string {
	from := int(i) * x.nkeys
	return x.values[from : from+x.nkeys : from+x.nkeys]
}

// candidates returns the positions of the names that can match, in name
// order: those having one of the pinned values of the most selective
// pinned key, and that key's position; or all, and -1.
func (x *nameIndex) candidates(pins [][]string) ([]int32, int) {
	best, bestN := -1, len(x.names)+1
	for i, vals := range pins {
		if vals == nil || i >= len(x.post) {
			continue
		}
		n := 0
		for _, v := range vals {
			if n += len(x.post[i][v]); n >= bestN {
				break // no better than the best so far: the rest need no lookup
			}
		}
		if n < bestN {
			best, bestN = i, n
		}
	}
	if best < 0 {
		return x.all, -1
	}
	vals := pins[best]
	if len(vals) == 1 {
		return x.post[best][vals[0]], best
	}
	out := make([]int32, 0, bestN)
	seen := make(map[string]bool, len(vals))
	for _, v := range vals {
		if !seen[v] {
			seen[v] = true
			out = append(out, x.post[best][v]...)
		}
	}
	slices.Sort(out)
	return out, best
}

// nameIndexes keep the index of each name list pruned lately, by the key
// of its entry, valid while that entry's body is the very one it was
// built from: entries are immutable, and an index holds its body, so an
// address seen again is the same bytes.
type nameIndexes struct {
	mu    sync.Mutex // guards m and names
	m     map[string]*nameIndex
	names int // names held by the indexes in m
}

// The indexes live outside the cache's byte budget (they hold the name
// list bodies too, which the cache may have evicted), so they are
// bounded on their own: at most maxNameIndexes tables and
// maxIndexedNames names in all (a few hundred bytes each), evicting
// arbitrary indexes; an evicted table is indexed again on its next prune.
const (
	maxNameIndexes  = 1024
	maxIndexedNames = 2_000_000
)

func (x *nameIndexes) get(key string, body []byte) (*nameIndex, bool) {
	if len(body) == 0 {
		return nil, false
	}
	ptr := unsafe.Pointer(unsafe.SliceData(body))
	x.mu.Lock()
	idx := x.m[key]
	x.mu.Unlock()
	if idx != nil && idx.src == ptr && idx.n == len(body) {
		return idx, true
	}
	names, ok := hms.NameList(body)
	if !ok {
		return nil, false
	}
	idx = &nameIndex{id: indexIDs.Add(1), src: ptr, n: len(body), body: body, names: names,
		refs: make([]atomic.Pointer[cache.Ref], len(names))}
	for i, name := range names {
		_, vals, err := filter.PartitionValues(name)
		if err != nil || (i > 0 && len(vals) != idx.nkeys) {
			return nil, false
		}
		if i == 0 {
			idx.nkeys = len(vals)
			idx.values = make([]string, 0, len(names)*len(vals))
		}
		idx.values = append(idx.values, vals...)
		if idx.odd == nil {
			idx.odd = make([]bool, len(vals))
		}
		if idx.post == nil {
			idx.post = make([]map[string][]int32, len(vals))
			for j := range idx.post {
				idx.post[j] = map[string][]int32{}
			}
		}
		for j, v := range vals {
			if !idx.odd[j] && !canonicalInt(v) {
				idx.odd[j] = true
			}
			idx.post[j][v] = append(idx.post[j][v], int32(i))
		}
		idx.all = append(idx.all, int32(i))
	}
	if len(names) > maxIndexedNames {
		return nil, false // too big to keep: such a table is forwarded
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = map[string]*nameIndex{}
	}
	if old := x.m[key]; old != nil {
		x.names -= len(old.names)
		delete(x.m, key)
		old.memos.drop()
	}
	for k, old := range x.m { // arbitrary ones: a table not pruned lately is rebuilt
		if len(x.m) < maxNameIndexes && x.names+len(names) <= maxIndexedNames {
			break
		}
		x.names -= len(old.names)
		delete(x.m, k)
		old.memos.drop()
	}
	x.m[key] = idx
	x.names += len(names)
	return idx, true
}

// maxJoined is the largest reply body joinSmall copies into one piece.
const maxJoined = 64 << 10

// maxUnjoined is the most pieces joinSmall leaves apart: a posting
// memo's reply (a few runs of its flat copy, prunememo.go) is written as
// it is, and copying it would cost more than the kernel's walk.
const maxUnjoined = 8

// joinSmall joins the body pieces of a reply of at most maxJoined bytes
// (iov[0] is its header) into one, in the connection's buffer: for a
// reply of a few kilobytes in dozens of pieces, the copy costs less than
// the kernel's walk over the pieces.
func (c *clientConn) joinSmall(iov [][]byte) [][]byte {
	if len(iov) <= maxUnjoined || c.rename != nil {
		return iov
	}
	n := 0
	for _, p := range iov[1:] {
		n += len(p)
	}
	if n > maxJoined {
		return iov
	}
	flat := c.flat[:0]
	for _, p := range iov[1:] {
		flat = append(flat, p...)
	}
	c.flat = flat
	clear(iov[1:])
	return append(iov[:1], flat)
}
