package proxy

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// Partition statistics (get_partitions_statistics_req) are cached per
// partition, as by-names reads are: a planner asks for the statistics of
// the partitions a query reads, a set that changes from query to query
// and comes in any order, so whole replies would rarely be asked for
// again. Each partition's entry is its entry of the reply's map for the
// request's set of columns (their order, case and repeats aside), or
// nothing when the metastore holds no statistics of those columns for
// it; the reply is laid out again in the order the metastore's own
// java.util.HashMap writes it (hms.JavaHashOrder). The order of the
// columns inside an entry is the database's (HMS 3.1 on Derby lists them
// in descending name order, and the table's in ascending), which is why
// an entry holds a set of columns as the metastore answered it rather
// than one column each.
//
// The layout is checked on every load: a reply whose map is not in the
// order this proxy would lay it out stops the per-partition answers for
// good (statsUnproven), loudly; such reads are then cached whole.

// statsRead serves a partition statistics read per partition, from the
// request resolved in c.res. It reports false when the request does not
// fit, or the metastore's reply to it is not one this code takes apart:
// the caller then answers it whole, and caches it so.
func (c *clientConn) statsRead(meth *hms.Method, m wire.Message, sc cache.Scope) (bool, error) {
	k := c.rt.cache
	r, shape := &c.res, meth.PartStats
	if len(r.List) == 0 || len(r.List) > hms.MaxStatsNames || len(r.Tables) != 1 || k.statsUnproven.Load() {
		return false, nil
	}
	base, ok := cache.EntryKeyPrefix(c.ekey[:0], sc, meth, r, k.DefaultCatalog)
	if ok {
		base, ok = hms.AppendColumnSet(base, r.Cols)
	}
	c.ekey = base
	if !ok {
		return false, nil
	}
	base = append(base, 0xff)
	c.ekey = base
	base = base[:len(base):len(base)] // entry keys are appended to copies
	want := make([]string, 0, len(r.List))
	for _, p := range r.List {
		if !hms.StoredPartName(string(p)) {
			// The metastore converts such a name (its keys lower-cased)
			// and answers under the stored one: only it can say which.
			return false, nil
		}
		want = append(want, string(p))
	}
	slices.Sort(want)
	want = slices.Compact(want)
	names := cache.ReadNames(meth, r, k.DefaultCatalog)
	snap, ok := c.takeGens(sc, meth, &names)
	if !ok {
		return false, nil
	}
	started := k.Store.Now()

	var parts []namedPart // partitions with statistics, in any order
	var missing []string
	for _, name := range want {
		key := append(c.key[:0], base...)
		key = append(key, name...)
		c.key = key
		e, st := k.Store.GetAt(key, hms.KindStatistics, started)
		switch {
		case st == cache.Miss:
			missing = append(missing, name)
		case e.Len() > 0: // an empty entry: no statistics of these columns
			parts = append(parts, namedPart{name: []byte(name), hit: e})
		}
	}
	defer clear(parts) // don't keep cached entries alive
	if len(missing) > 0 && c.wholeCached(meth, sc) {
		return false, nil // a reply not taken apart before, cached whole
	}
	outcome := OutcomeHit
	if len(missing) > 0 {
		outcome = OutcomeCoalesced
	}
	own, joined := k.claimMissing(base, &snap, missing)
	defer k.entries.abandon(own) // those not finished below: their waiters load them themselves
	// load fetches names. It returns whether it answered the request
	// itself (an error, or the metastore's refusal), or found that the
	// request must be answered whole (a success it does not take apart).
	load := func(chunkOf []string, flights []*entryFlight) (answered, whole bool, err error) {
		for len(chunkOf) > 0 {
			outcome = OutcomeMiss
			chunk := chunkOf[:min(len(chunkOf), k.BatchChunk)]
			chunkOf = chunkOf[len(chunk):]
			req := shape.AppendRequest(nil, m.Header(), m.Body(), chunk)
			got, failed, err := k.fetchStats(c.s.ctx, c.rt.up, c.sess, req, chunk)
			if err != nil {
				return true, false, err
			}
			if failed != nil {
				if f, err := wire.ResultField(failed.body); failed.typ == wire.Reply && err == nil && f <= 0 {
					return false, true, nil
				}
				// The metastore refused: the client gets its answer, as it
				// would have for the whole request.
				c.outcome = OutcomeMiss
				return true, false, c.replyWith(m, failed.typ, failed.body)
			}
			k.putStats(base, chunk, got, &snap, started)
			if flights != nil {
				k.entries.finish(flights[:len(chunk)], chunk, got)
				flights = flights[len(chunk):]
			}
			for _, p := range got {
				parts = append(parts, namedPart{name: []byte(p.Name), body: p.Body})
			}
		}
		return false, false, nil
	}
	// Neither answered nor whole: on to the next step.
	if answered, whole, err := load(own.names, own.flights); answered || whole {
		return answered, err
	}
	parts, retry, err := c.awaitJoined(joined, parts)
	if err != nil {
		return true, err
	}
	if answered, whole, err := load(retry, nil); answered || whole {
		return answered, err
	}
	slices.SortFunc(parts, func(a, b namedPart) int { return bytes.Compare(a.name, b.name) })
	keys := make([]string, len(parts))
	for i := range parts {
		keys[i] = string(parts[i].name)
	}
	order, ok := hms.JavaHashOrder(keys)
	if !ok {
		// A map the metastore turns into trees: its order is its own,
		// and the request is answered whole.
		return false, nil
	}
	c.outcome = outcome
	return true, c.writeStatsReply(m, parts, order)
}

// columnSetKey is the key of a table statistics read: the request with
// its column names as the set the metastore reads them as, so that a
// planner asking for them in another order, case or with repeats hits
// the same entry; key (the request as sent) when the names do not fit
// (hms.AppendColumnSet).
func (c *clientConn) columnSetKey(meth *hms.Method, r *hms.Resolved, sc cache.Scope, key []byte) []byte {
	set, ok := cache.EntryKeyPrefix(c.ekey[:0], sc, meth, r, c.rt.cache.DefaultCatalog)
	if ok {
		set, ok = hms.AppendColumnSet(set, r.Cols)
	}
	c.ekey = set
	if !ok {
		return key
	}
	return set
}

// writeStatsReply sends parts, in the order given, as the reply to m.
func (c *clientConn) writeStatsReply(m wire.Message, parts []namedPart, order []int) error {
	head, tail, frame := hms.PartStatsFrame(c.frame, len(parts))
	c.frame = frame
	return c.writeFramed(m, head, tail, parts, order)
}

// fetchStats sends a partition statistics request and returns the
// entries of its reply, or the reply when that was not a success this
// code takes apart. A reply whose map is not in the order an assembled
// one would be in turns per-partition answers off.
func (k *cacher) fetchStats(ctx context.Context, up Forwarder, sess *upstream.Session, req []byte, names []string) ([]hms.Object, *loaded, error) {
	res, err := readUp(ctx, up, sess, req)
	if err != nil {
		return nil, nil, err
	}
	got, ok := hms.SplitPartStats(res.typ, res.body, names)
	if !ok {
		return nil, &res, nil
	}
	keys := make([]string, len(got))
	for i := range got {
		keys[i] = got[i].Name
	}
	if !hms.JavaOrdered(keys) {
		if k.statsUnproven.CompareAndSwap(false, true) {
			k.log.Warn("the metastore's partition statistics are not in the order this proxy lays them out: they are cached whole from now on",
				"partitions", len(keys))
		}
		return nil, &res, nil
	}
	return got, nil, nil
}

// putStats admits the entries of names loaded under snap: each
// partition's map entry, or an empty entry for a partition the reply
// left out (no statistics of the columns, or no such partition). Both
// depend on the table's partition set: an added partition may be one
// that was absent.
func (k *cacher) putStats(base []byte, names []string, got []hms.Object, snap *cache.Snapshot, started time.Time) {
	found := make(map[string][]byte, len(got))
	for _, p := range got {
		found[p.Name] = p.Body
	}
	for _, name := range names {
		k.Store.Put(append(base, name...), hms.KindStatistics, found[name], snap, started, false)
	}
}
