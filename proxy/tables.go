package proxy

import (
	"context"
	"errors"
	"fmt"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/hms"
	"github.com/hmsproxy/hmsproxy/internal/wire"
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

var tableShapes = map[string]listShape{
	"get_table_objects_by_name":     {names: hms.Path{2}},
	"get_table_objects_by_name_req": {names: hms.Path{1, 2}, inStruct: true},
}

// tableRead serves a table-objects read of one distinct table from its
// per-table entry. It reports false when the request does not fit, so the
// caller caches the reply whole.
func (c *clientConn) tableRead(meth *hms.Method, m wire.Message, shape listShape, names *cache.Names, sc cache.Scope) (bool, error) {
	k := c.s.cache
	if !names.HasDB || len(names.Tables) == 0 {
		return false, nil
	}
	tbl := names.Tables[0]
	for _, t := range names.Tables[1:] {
		if t != tbl {
			return false, nil // the metastore's order is its database's: see above
		}
	}
	args := m.Body()
	// The name list must be what the metastore reads as one (a list of
	// strings); AppendKey refuses anything else.
	key, ok := cache.AppendKey(c.key[:0], sc, meth, names, args)
	c.key = key
	if !ok {
		return false, nil
	}
	one := cache.Names{Cat: names.Cat, DB: names.DB, HasDB: true, Prefixed: names.Prefixed}
	// The entry's key: the request without its name list, then the table.
	key, ok = cache.AppendKey(c.key[:0], sc, meth, &one, dropField(args, shape.names))
	if !ok {
		return false, nil
	}
	key = append(key, 0xff)
	key = append(key, tbl...)
	c.key = key
	one.Tables = []string{tbl}
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
				key: append([]byte(nil), key...), names: one, table: &shape, tableName: tbl})
		}
		if sampled && k.shadow.admit(meth.Kind) {
			k.shadow.enqueue(shadowJob{sess: c.sess, meth: meth, msg: append([]byte(nil), m.Buf...),
				key: append([]byte(nil), key...), want: e.Body(), snap: shadowSnap, table: &shape, name: tbl})
		}
		c.outcome = OutcomeHit
		c.hdr = wire.AppendHeader(c.hdr[:0], wire.Reply, m.Name(), m.SeqID)
		c.iov, c.frame = partsReply(append(c.iov[:0], c.hdr), c.frame, []namedPart{{name: tbl, body: e.Body()}}, shape.inStruct)
		err := c.w.Write(c.iov...)
		clear(c.iov) // don't keep cached entries alive through the buffer
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
	res, err := k.fetchTable(c.s.ctx, c.s.up, c.sess, m, meth, key, tbl, shape, &snap)
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
func (k *cacher) fetchTable(ctx context.Context, up Forwarder, sess *upstream.Session, m wire.Message, meth *hms.Method, key []byte, tbl string, shape listShape, snap *cache.Snapshot) (loaded, error) {
	started := k.Store.Now()
	var sink captureSink
	if err := up.Do(ctx, upstream.Call{Session: sess, Class: upstream.Read, Msg: m}, &sink); err != nil {
		return loaded{}, err
	}
	if body, ok := splitTable(sink.res, shape.inStruct, tbl); ok && body != nil {
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
	if _, err := k.fetchTable(ctx, up, j.sess, m, j.meth, j.key, j.tableName, *j.table, snap); err != nil {
		k.log.Debug("refresh failed", "method", j.meth.Name, "err", err)
	}
}

// splitTable takes the one Table struct out of a table-objects reply to a
// request for table tbl. ok is false when the reply is not a plain success
// this code understands: an exception, result fields beyond the list,
// more than one table, or a table not named tbl (a projection without
// names, say). body is nil when the table does not exist.
func splitTable(r loaded, inStruct bool, tbl string) (body []byte, ok bool) {
	d, et, n, ok := openList(r, inStruct)
	if !ok || n > 1 || (n == 1 && et != wire.TStruct) {
		return nil, false
	}
	if n == 1 {
		start := d.Pos()
		if name, named := tableName(d); d.Err() != nil || !named || name != tbl {
			return nil, false // a table we cannot name: don't guess
		}
		body = r.body[start:d.Pos()]
	}
	if !closesList(r, d, inStruct) {
		return nil, false
	}
	return body, true
}

// tableName reads a Table struct, returning its tableName (field 1).
func tableName(d *wire.Decoder) (name string, ok bool) {
	for {
		typ, id := d.FieldBegin()
		if typ == wire.TStop || d.Err() != nil {
			return name, ok
		}
		if id == 1 && typ == wire.TString && !ok {
			name, ok = d.String(), true
			continue
		}
		d.Skip(typ)
	}
}
