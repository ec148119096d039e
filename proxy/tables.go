package proxy

import (
	"context"
	"errors"
	"fmt"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// Table objects by name are cached per table only where the reply can be
// assembled exactly as the metastore builds it. Against real metastores
// (2.3, 3.1, 4.0; e2e TestTableObjectsOrderReal) the list comes in the
// backing database's row order: not the order asked, not name order, and
// not the same from version to version for the same creations. Nothing in
// the request or the Table structs tells that order, so a request naming
// two or more distinct tables keeps the whole-reply path (one entry per
// request). A request naming one table (after lower-casing; duplicates
// and case variants fold into it, as the metastore folds them) is served
// from that table's own entry: its reply is a list of that one table.

// tableRead serves a table-objects read of one distinct table from its
// per-table entry, from the request resolved in c.res. It reports false
// when the request does not fit, so the caller caches the reply whole.
func (c *clientConn) tableRead(meth *hms.Method, m wire.Message, sc cache.Scope) (bool, error) {
	k := c.rt.cache
	r := &c.res
	if r.Bad || len(r.Tables) == 0 {
		// The name list must be what the metastore reads as one (a list
		// of strings).
		return false, nil
	}
	one := cache.ReadNames(meth, r, k.DefaultCatalog)
	if !one.HasDB {
		return false, nil
	}
	tbl := one.Tables[0]
	for _, t := range one.Tables[1:] {
		if t != tbl {
			return false, nil // the metastore's order is its database's: see above
		}
	}
	args := m.Body()
	// The entry's key: the request without its name list, then the table.
	key, ok := cache.EntryKeyPrefix(c.key[:0], sc, meth, r, k.DefaultCatalog)
	if !ok {
		return false, nil
	}
	key = append(key, tbl...)
	c.key = key
	one.Tables = one.Tables[:1]
	deps, ok := k.Store.ReadDeps(c.deps[:0], sc, meth, &one)
	c.deps = deps
	if !ok {
		return false, nil
	}
	// A hit sampled for shadow validation: generations from before the
	// lookup (see cachedRead).
	var shadowSnap cache.Snapshot
	sampled := k.shadow.sample()
	if sampled {
		shadowSnap, sampled = k.Store.Gens().Take(deps)
	}
	if e, st := k.Store.Get(key, meth.Kind); st != cache.Miss {
		if st == cache.HitRefresh && k.Store.StartRefresh(key) {
			k.enqueue(refreshJob{sess: c.sess, meth: meth, msg: append([]byte(nil), m.Buf...),
				key: append([]byte(nil), key...), names: one, batch: meth.Batch, due: []string{tbl}})
		}
		if sampled && k.shadow.admit(meth.Kind) {
			k.shadow.enqueue(shadowJob{sess: c.sess, meth: meth, msg: append([]byte(nil), m.Buf...),
				key: append([]byte(nil), key...), want: e.Body(), snap: shadowSnap, batch: meth.Batch, name: tbl})
		}
		c.outcome = OutcomeHit
		c.hdr = wire.AppendHeader(c.hdr[:0], wire.Reply, m.Name(), m.SeqID)
		c.objs = append(c.objs[:0], e.Body())
		c.iov, c.frame = meth.Batch.AppendReply(append(c.iov[:0], c.hdr), c.frame, c.objs)
		err := c.writeParts(c.iov)
		clear(c.iov) // don't keep cached entries alive through the buffers
		clear(c.objs)
		if err != nil {
			return true, errors.Join(errClientWrite, err)
		}
		return true, nil
	}
	snap, ok := k.Store.Gens().Take(deps)
	if !ok {
		return false, nil
	}
	// A miss: the request itself is the one table to fetch. The client
	// gets the metastore's own answer; its table, when the answer is one
	// this code can take apart, becomes the entry. Identical requests
	// missing together share the load; one after an invalidation never
	// joins a load from before it.
	own, joined := k.entries.claim(append(append(key[:len(key):len(key)], 0xff), args...), &snap, oneFlight)
	defer k.entries.abandon(own)
	if len(joined.flights) == 1 {
		if k.joinHook != nil {
			k.joinHook(1)
		}
		f := joined.flights[0]
		select {
		case <-f.done:
		case <-c.s.ctx.Done():
			return true, fmt.Errorf("proxy: wait for a table load: %w", c.s.ctx.Err())
		}
		if f.ok {
			c.outcome = OutcomeCoalesced
			return true, c.replyWith(m, f.res.typ, f.res.body)
		}
		// That load failed: this request's own answer decides.
	}
	res, err := k.fetchTable(c.s.ctx, c.rt.up, c.sess, m, meth, key, tbl, &snap)
	if err != nil {
		return true, err
	}
	if len(own.flights) == 1 {
		k.entries.finishReply(own.flights[0], res)
	}
	c.outcome = OutcomeMiss
	return true, c.replyWith(m, res.typ, res.body)
}

// oneFlight names the one flight of a one-table read: its key is the
// request itself.
var oneFlight = []string{""}

// fetchTable sends a one-table request upstream and admits its table.
func (k *cacher) fetchTable(ctx context.Context, up Forwarder, sess *upstream.Session, m wire.Message, meth *hms.Method, key []byte, tbl string, snap *cache.Snapshot) (loaded, error) {
	started := k.Store.Now()
	var sink captureSink
	if err := up.Do(ctx, upstream.Call{Session: sess, Class: upstream.Read, Msg: m}, &sink); err != nil {
		return loaded{}, err
	}
	if body, ok := meth.Batch.SplitTable(sink.res.typ, sink.res.body, tbl); ok && body != nil {
		k.Store.Put(key, meth.Kind, body, snap, started, false)
	}
	return sink.res, nil
}

// refreshTable reloads one per-table entry.
func (k *cacher) refreshTable(ctx context.Context, up Forwarder, j refreshJob, snap *cache.Snapshot) {
	m, err := wire.Parse(j.msg, wire.Limits{MaxMessage: len(j.msg)})
	if err != nil {
		return
	}
	if _, err := k.fetchTable(ctx, up, j.sess, m, j.meth, j.key, j.due[0], snap); err != nil {
		k.log.Debug("refresh failed", "method", j.meth.Name, "err", err)
	}
}
