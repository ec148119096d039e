package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// Batch reads of partitions by name are cached per partition, as Trino
// does: hits come from their own entries, and only the missing names go
// upstream, chunked, in as few calls as possible. The reply is assembled
// as the metastore builds it: each partition once, ordered by name. The
// request and reply bytes are cut and laid out by hms.Batch; this file
// decides what is a hit, what is loaded and who waits for whom.

// namedPart is one partition of a reply being assembled.
type namedPart struct {
	name []byte
	body []byte      // Partition struct bytes, when loaded
	hit  cache.Entry // or the cached entry holding them
}

// appendPieces appends the partition's bytes to iov, without copying.
func (p *namedPart) appendPieces(iov [][]byte) [][]byte {
	if p.body != nil {
		return append(iov, p.body)
	}
	return p.hit.AppendPieces(iov)
}

// batchRead serves a by-names read per partition, from the request
// resolved in c.res. It reports false when the request does not fit the
// per-entry path, so the caller caches the reply whole.
func (c *clientConn) batchRead(meth *hms.Method, m wire.Message, sc cache.Scope) (bool, error) {
	k := c.rt.cache
	r, shape := &c.res, meth.Batch
	if len(r.List) == 0 || len(r.Tables) != 1 {
		return false, nil
	}
	if set := k.settings(); !set.Known || set.Version.Is(hms.Version4) && set.Limit >= 0 && len(r.List) > set.Limit {
		// 4.x refuses a by-names request naming more partitions than
		// hive.metastore.limit.partition.request, found or not: the
		// metastore's answer (or, settings unknown, whichever it is)
		// goes whole.
		return false, nil
	}
	// The key of every entry: the request without its name list, then
	// the partition name.
	base, ok := cache.EntryKeyPrefix(c.ekey[:0], sc, meth, r, k.DefaultCatalog)
	c.ekey = base
	if !ok {
		return false, nil
	}
	base = base[:len(base):len(base)] // entry keys are appended to copies
	names := cache.ReadNames(meth, r, k.DefaultCatalog)
	read := &names // the load below names its own chunks "names"
	snap, ok := c.takeGens(sc, meth, &names)
	if !ok {
		return false, nil
	}
	started := k.Store.Now()

	want, memo, memoKey, list := c.batchNames(base, m.Body(), r.List)
	if memo != nil {
		defer func() { clear(c.want); c.want = c.want[:0] }() // want's views of the request
	}
	again := memo != nil && memo.uses.Add(1)%memoLookup != 0
	if again {
		if done, err := c.flatHit(meth, m, base, memo, want, snap, started); done {
			if err == nil {
				c.rememberBatch(meth, m, sc, memo, list)
			}
			return true, err
		}
	}
	var tableEp *cache.Epoch
	if list != nil && len(names.Tables) == 1 {
		// Before the lookups: what a memo of them may vouch for.
		c.group = cache.TableGroup(c.group[:0], k.Upstream, names.Cat, names.DB, names.Tables[0])
		ex := snap.Existing()
		ep := k.Store.TableEpoch(c.group, &ex)
		tableEp = &ep
	}
	parts, missing, due, settled := c.lookupParts(base, want, meth.Kind, started, memo, again, tableEp)
	if list != nil && memo == nil && len(missing) == 0 {
		k.memos.put(memoKey, base, list, parts, settled)
	}
	defer func() { clear(parts); c.parts = parts[:0] }() // don't keep cached entries alive
	if len(missing) > 0 && c.wholeCached(meth, sc) {
		return false, nil // a reply not taken apart before, cached whole
	}
	if len(parts) > 0 && k.shadow.sample() && k.shadow.admit(meth.Kind) {
		c.shadowOnePart(meth, m, base, parts, snap)
	}
	// Due entries are refreshed in one job at the end; on any earlier
	// return they must be released, or they would never refresh again.
	enqueued := false
	defer func() {
		if !enqueued {
			for _, name := range due {
				k.Store.EndRefresh(append(base, name...))
			}
		}
	}()
	// Misses another batch is already loading under the same generations
	// are waited for, not loaded again: identical concurrent misses share
	// one load per entry, as single lookups do.
	outcome := OutcomeHit
	if len(missing) > 0 {
		outcome = OutcomeCoalesced
	}
	own, joined := k.claimMissing(base, &snap, missing)
	defer k.entries.abandon(own) // those not finished below: their waiters load them themselves
	load := func(names []string, flights []*entryFlight) (bool, error) {
		for len(names) > 0 {
			outcome = OutcomeMiss
			chunk := names[:min(len(names), k.BatchChunk)]
			names = names[len(chunk):]
			got, failed, err := k.fetchParts(c.s.ctx, c.rt.up, c.sess, shape.AppendRequest(nil, m.Header(), m.Body(), chunk), shape, chunk)
			if err != nil {
				return true, err
			}
			if failed != nil {
				c.outcome = OutcomeMiss
				if failed.typ == wire.Reply {
					if f, err := wire.ResultField(failed.body); err == nil && f <= 0 {
						// A success this code cannot take apart (a field it
						// does not know, a partition it cannot name): only
						// the metastore can answer the whole request, and
						// its answer is cached whole, so that the same
						// request again is a hit rather than a miss for
						// good.
						return false, errWhole
					}
				}
				// The metastore refused: the client gets its answer, as it
				// would have for the whole request.
				return true, c.replyWith(m, failed.typ, failed.body)
			}
			k.putParts(base, meth.Kind, read, got, &snap, started)
			// Stored first, then handed over: a batch arriving after the
			// flight ends finds the entry instead.
			if flights != nil {
				k.entries.finish(flights[:len(chunk)], chunk, got)
				flights = flights[len(chunk):]
			}
			for _, p := range got {
				parts = append(parts, namedPart{name: []byte(p.Name), body: p.Body})
			}
		}
		return false, nil
	}
	if done, err := load(own.names, own.flights); done || err != nil {
		return answered(done, err)
	}
	// Only now wait for the others: a batch never waits while holding
	// loads others wait for, so batches cannot wait on each other in a
	// circle.
	parts, retry, err := c.awaitJoined(joined, parts)
	if err != nil {
		return true, err
	}
	if done, err := load(retry, nil); done || err != nil {
		return answered(done, err)
	}
	if len(due) > 0 {
		// One bulk call for all of this request's due partitions.
		enqueued = true
		k.enqueue(refreshJob{sess: c.sess, meth: meth, msg: shape.AppendRequest(nil, m.Header(), m.Body(), due),
			key: slices.Clone(base), names: names, batch: shape, due: due})
	}
	c.outcome = outcome
	if outcome != OutcomeHit {
		// Hits come in name order; loaded partitions were appended.
		slices.SortFunc(parts, func(a, b namedPart) int { return bytes.Compare(a.name, b.name) })
	}
	return true, c.writeBatchReply(m, shape, parts)
}

// wholeCached reports whether the reply to the request resolved in
// c.res is cached whole: one the per-entry path could not take apart
// before. It is asked only when entries are missing, so a request all of
// whose entries hit never pays the lookup.
func (c *clientConn) wholeCached(meth *hms.Method, sc cache.Scope) bool {
	key, ok := cache.ReadKey(nil, sc, meth, &c.res, c.rt.cache.DefaultCatalog) // a miss path: one allocation
	if !ok {
		return false
	}
	_, st := c.rt.cache.Store.Get(key, meth.Kind)
	return st != cache.Miss
}

// errWhole says that a request is to be answered, and cached, whole.
var errWhole = errors.New("proxy: answer the request whole")

// answered is what batchRead reports for a load that answered the
// request (done) or failed: errWhole hands the request to the caller.
func answered(done bool, err error) (bool, error) {
	if errors.Is(err, errWhole) {
		return false, nil
	}
	return done, err
}

// lookupParts looks each of want (sorted, distinct) up under base, all at
// the one clock reading started. It returns the hits in name order (in
// c.parts' array), the names missing, the names due for a refresh whose
// refresh this request now owns, and, when every name was a hit not due
// for a refresh, what a memo needs to vouch for them.
//
// With a memo of the request (again: not its every memoLookup-th use,
// which looks each entry up so the store's eviction policy sees them
// used) that the store says is settled, the entries are taken as they
// are (heldParts), and joined into a flat copy for the next time.
// Otherwise each entry is first taken back through its reference
// (cache.Store.Again); one that is not is looked up, and its reference
// replaced.
func (c *clientConn) lookupParts(base []byte, want [][]byte, kind hms.Kind, started time.Time, memo *batchMemo, again bool, tableEp *cache.Epoch) (parts []namedPart, missing, due []string, settled *memoSettled) {
	k := c.rt.cache
	parts = slices.Grow(c.parts[:0], len(want))
	if again {
		if st := memo.settled.Load(); st != nil && k.Store.Settled(&st.epoch, kind, st.oldest, started) {
			if parts, ok := c.heldParts(parts, memo, want); ok {
				k.Store.CountHits(kind, len(parts))
				if st.flat == nil {
					c.iov = memo.settleFlat(st, parts, k.Store, c.iov)
				}
				return parts, nil, nil, st
			}
			clear(parts)
			parts = parts[:0]
		}
	}
	epoch, oldest, allHit := k.Store.Epoch(), uint32(math.MaxUint32), true
	covered := tableEp != nil // by the table's epoch, not only the store's
	for i, name := range want {
		var ref *cache.Ref
		if memo != nil {
			ref = memo.refs[i].Load()
		}
		if again {
			if e, st := k.Store.Again(ref, kind, started); st == cache.Hit {
				parts = append(parts, namedPart{name: name, hit: e})
				oldest = min(oldest, e.Loaded())
				covered = covered && k.Store.Covers(tableEp, e)
				continue
			}
		}
		key := append(c.key[:0], base...)
		key = append(key, name...)
		c.key = key
		// One clock read for the batch (started), not one per lookup.
		e, st := k.Store.GetAt(key, kind, started)
		if st == cache.Miss {
			missing = append(missing, string(name))
			allHit = false
			continue
		}
		parts = append(parts, namedPart{name: name, hit: e})
		oldest = min(oldest, e.Loaded())
		covered = covered && k.Store.Covers(tableEp, e)
		if memo != nil {
			if r := e.RefAgain(ref); r != ref {
				memo.refs[i].Store(r)
			}
		}
		if st == cache.HitRefresh {
			allHit = false
			if k.Store.StartRefresh(key) {
				due = append(due, string(name))
			}
		}
	}
	if allHit {
		if covered {
			epoch = *tableEp
		}
		settled = &memoSettled{epoch: epoch, oldest: oldest}
	}
	if memo != nil {
		if cur := memo.settled.Load(); settled != nil && cur != nil && k.Store.Settled(&cur.epoch, kind, cur.oldest, started) {
			settled = cur // still vouched for: its flat copy stays
		} else {
			memo.settle(settled, k.Store)
		}
	}
	return parts, missing, due, settled
}

// heldParts appends the entries of memo's references, which the store
// vouched for, to parts; false when one has left the store since.
func (c *clientConn) heldParts(parts []namedPart, memo *batchMemo, want [][]byte) ([]namedPart, bool) {
	st := c.rt.cache.Store
	for i := range memo.refs {
		e, ok := st.Held(memo.refs[i].Load())
		if !ok {
			return parts, false
		}
		parts = append(parts, namedPart{name: want[i], hit: e})
	}
	return parts, true
}

// sortedDistinct reports whether names are in ascending order, each
// once: as planners send them, so most requests need no sort.
func sortedDistinct(names [][]byte) bool {
	for i := 1; i < len(names); i++ {
		if bytes.Compare(names[i-1], names[i]) >= 0 {
			return false
		}
	}
	return true
}

// shadowOnePart checks one of the hits against the metastore, under the
// generations read before the lookups.
func (c *clientConn) shadowOnePart(meth *hms.Method, m wire.Message, base []byte, parts []namedPart, snap cache.Snapshot) {
	shape := meth.Batch
	p := parts[rand.IntN(len(parts))]
	c.rt.cache.shadow.enqueue(shadowJob{sess: c.sess, meth: meth, msg: shape.AppendRequest(nil, m.Header(), m.Body(), []string{string(p.name)}),
		key: append(base, p.name...), want: p.hit.Body(), snap: snap, batch: shape, name: string(p.name)})
}

// awaitJoined waits for the loads this batch joined and appends what they
// found to parts. It returns the names whose load failed or was given up:
// the metastore's answer for this client's own request decides those.
func (c *clientConn) awaitJoined(joined claimed, parts []namedPart) ([]namedPart, []string, error) {
	var retry []string
	for i, f := range joined.flights {
		select {
		case <-f.done:
		case <-c.s.ctx.Done():
			return parts, nil, fmt.Errorf("proxy: wait for a partition load: %w", c.s.ctx.Err())
		}
		switch {
		case !f.ok:
			retry = append(retry, joined.names[i])
		case f.body != nil:
			parts = append(parts, namedPart{name: []byte(joined.names[i]), body: f.body})
		}
	}
	return parts, retry, nil
}

// writeBatchReply sends parts (in name order) as the reply to m.
func (c *clientConn) writeBatchReply(m wire.Message, shape *hms.Batch, parts []namedPart) error {
	head, tail, frame := shape.ReplyFrame(c.frame, len(parts))
	c.frame = frame
	return c.writeFramed(m, head, tail, parts, nil)
}

// writeFramed sends parts between head and tail as the reply to m, in
// the order order gives or, where it is nil, as they stand: one writev
// of the header, the wrapper and each partition's pieces as the cache
// keeps them, so shared segments are not copied.
func (c *clientConn) writeFramed(m wire.Message, head, tail []byte, parts []namedPart, order []int) error {
	c.hdr = wire.AppendHeader(c.hdr[:0], wire.Reply, m.Name(), m.SeqID)
	// Sized once: grown by doubling, a large reply's buffer would be
	// allocated and copied several times over, and past maxKeptBuf it
	// is made anew for every reply.
	iov := append(slices.Grow(c.iov[:0], 3+piecesPerPart*len(parts)), c.hdr, head)
	if order == nil {
		for i := range parts {
			iov = parts[i].appendPieces(iov)
		}
	} else {
		for _, i := range order {
			iov = parts[i].appendPieces(iov)
		}
	}
	iov = append(iov, tail)
	err := c.writeParts(iov)
	clear(iov) // don't keep cached entries alive through the buffers
	c.iov = iov[:0]
	if err != nil {
		return errors.Join(errClientWrite, err)
	}
	return nil
}

// piecesPerPart is the most slices a cached partition is written as: its
// own bytes around each of its two shared segments.
const piecesPerPart = 5

// entryFlight is one entry being loaded by some request.
type entryFlight struct {
	key  string        // in entryFlights.m
	done chan struct{} // closed when the load ended
	// Set before done is closed, read after.
	ok   bool   // the load answered for this entry; false: load it yourself
	body []byte // a batch entry's bytes; nil when the metastore has no such partition
	res  loaded // a one-table read's reply
}

// entryFlights are the per-entry loads in flight of batch requests (and
// of one-table table-objects reads), keyed by entry key and the
// generations the load began under: a miss after an invalidation never
// joins a load from before it. Unlike a singleflight.Group it tells a
// request which entries it must load and which it only waits for, so a
// batch loads its own share in one call.
type entryFlights struct {
	mu sync.Mutex // guards m
	m  map[string]*entryFlight
}

// claimMissing claims the entries under base a read missed (see
// entryFlights.claim) and tells joinHook how many it joined.
func (k *cacher) claimMissing(base []byte, snap *cache.Snapshot, missing []string) (own, joined claimed) {
	own, joined = k.entries.claim(base, snap, missing)
	if k.joinHook != nil && len(joined.names) > 0 {
		k.joinHook(len(joined.names))
	}
	return own, joined
}

// claimed is a batch's share of its misses: names with their flights.
type claimed struct {
	names   []string
	flights []*entryFlight
}

// claim splits names (entries under base, loaded under snap) into those
// the caller must load (own, now in flight) and those another request is
// loading (joined). The caller ends each own flight with finish or
// abandon.
func (f *entryFlights) claim(base []byte, snap *cache.Snapshot, names []string) (own, joined claimed) {
	if len(names) == 0 {
		return own, joined
	}
	keys := make([]string, len(names))
	var b []byte
	for i, name := range names {
		b = snap.AppendKey(append(append(b[:0], base...), name...))
		keys[i] = string(b)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*entryFlight{}
	}
	for i, name := range names {
		if fl, ok := f.m[keys[i]]; ok {
			joined.names = append(joined.names, name)
			joined.flights = append(joined.flights, fl)
			continue
		}
		fl := &entryFlight{key: keys[i], done: make(chan struct{})}
		f.m[keys[i]] = fl
		own.names = append(own.names, name)
		own.flights = append(own.flights, fl)
	}
	return own, joined
}

// finish ends the flights of names with what the metastore returned for
// them: got holds the partitions found, in any order.
func (f *entryFlights) finish(flights []*entryFlight, names []string, got []hms.Object) {
	found := make(map[string][]byte, len(got))
	for _, p := range got {
		found[p.Name] = p.Body
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, fl := range flights {
		fl.ok, fl.body = true, found[names[i]]
		f.end(fl)
	}
}

// finishReply ends fl with the metastore's reply.
func (f *entryFlights) finishReply(fl *entryFlight, res loaded) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl.ok, fl.res = true, res
	f.end(fl)
}

// abandon ends every flight of own not yet finished: its waiters load
// the entry themselves.
func (f *entryFlights) abandon(own claimed) {
	if len(own.flights) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range own.flights {
		if f.m[fl.key] == fl {
			f.end(fl)
		}
	}
}

// end closes fl and forgets it. f.mu is held.
func (f *entryFlights) end(fl *entryFlight) {
	delete(f.m, fl.key)
	close(fl.done)
}

// fetchParts sends a by-names request and returns the partitions matched
// to the names asked for, or the metastore's reply when that was not a
// success.
func (k *cacher) fetchParts(ctx context.Context, up Forwarder, sess *upstream.Session, req []byte, shape *hms.Batch, names []string) ([]hms.Object, *loaded, error) {
	res, err := readUp(ctx, up, sess, req)
	if err != nil {
		return nil, nil, err
	}
	parts, ok := shape.SplitPartitions(res.typ, res.body, names)
	if !ok {
		return nil, &res, nil
	}
	return parts, nil, nil
}

// refreshBatch reloads a group of per-partition entries with one call.
func (k *cacher) refreshBatch(ctx context.Context, up Forwarder, j refreshJob, snap *cache.Snapshot) {
	started := k.Store.Now()
	got, failed, err := k.fetchParts(ctx, up, j.sess, j.msg, j.batch, j.due)
	if err != nil || failed != nil {
		return
	}
	k.putParts(j.key, j.meth.Kind, &j.names, got, snap, started)
}

// putParts admits partitions of the table names names loaded under snap,
// their entries keyed by base and name, sharing the runs of their storage
// descriptors with the table's other partitions.
func (k *cacher) putParts(base []byte, kind hms.Kind, names *cache.Names, got []hms.Object, snap *cache.Snapshot, started time.Time) {
	if len(got) == 0 {
		return
	}
	tbl := ""
	if len(names.Tables) > 0 {
		tbl = names.Tables[0]
	}
	group := cache.TableGroup(nil, k.Upstream, names.Cat, names.DB, tbl)
	// Each entry holds a partition the metastore returned: adds of
	// others cannot change it. (What was absent leaves no entry; the
	// flights of a load keep the full snapshot, so a request after an
	// add never takes a load from before it for an answer.)
	ex := snap.Existing()
	snap = &ex
	var runs []hms.Run
	base = base[:len(base):len(base)]
	for _, p := range got {
		runs = hms.SharedRuns(runs[:0], p.Body)
		k.Store.PutShared(append(base, p.Name...), kind, group, p.Body, runs, snap, started)
	}
}
