package proxy

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/filter"
	"github.com/hmsproxy/hmsproxy/internal/hms"
	"github.com/hmsproxy/hmsproxy/internal/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// Batch reads of partitions by name are cached per partition, as Trino
// does: hits come from their own entries, and only the missing names go
// upstream, chunked, in as few calls as possible. The reply is assembled
// as the metastore builds it: each partition once, ordered by name.

// listShape says where a by-names request keeps its list of names and
// how its reply wraps the list of objects (partitions or tables).
type listShape struct {
	names    hms.Path // the list of partition names in the args
	inStruct bool     // args and result are wrapped in a request/result struct at field 1 / 0
}

var batchShapes = map[string]listShape{
	"get_partitions_by_names":     {names: hms.Path{3}},
	"get_partitions_by_names_req": {names: hms.Path{1, 3}, inStruct: true},
}

type namedPart struct {
	name string
	body []byte // Partition struct bytes
}

// batchRead serves a by-names read per partition. It reports false when
// the request does not fit the per-entry path, so the caller caches the
// reply whole.
func (c *clientConn) batchRead(meth *hms.Method, m wire.Message, shape listShape, names *cache.Names, sc cache.Scope) (bool, error) {
	k := c.s.cache
	args := m.Body()
	var want []string
	if err := hms.Walk(args, append(shape.names[:len(shape.names):len(shape.names)], hms.Each), func(typ byte, v []byte) bool {
		if typ == wire.TString {
			want = append(want, string(v))
		}
		return true
	}); err != nil || len(want) == 0 || len(names.Tables) != 1 {
		return false, nil
	}
	// The key of every entry: the request without its name list, then
	// the partition name.
	base, ok := cache.AppendKey(nil, sc, meth, names, dropField(args, shape.names))
	if !ok {
		return false, nil
	}
	base = append(base, 0xff)
	deps, ok := k.Store.ReadDeps(c.deps[:0], sc, meth, names)
	c.deps = deps
	if !ok {
		return false, nil
	}
	snap, ok := k.Store.Gens().Take(deps)
	if !ok {
		return false, nil
	}
	started := k.Store.Now()

	slices.Sort(want)
	want = slices.Compact(want)
	parts := make([]namedPart, 0, len(want))
	var missing, due []string
	for _, name := range want {
		key := append(base, name...)
		e, st := k.Store.Get(key, meth.Kind)
		if st == cache.Miss {
			missing = append(missing, name)
			continue
		}
		parts = append(parts, namedPart{name: name, body: e.Body()})
		if st == cache.HitRefresh && k.Store.StartRefresh(key) {
			due = append(due, name)
		}
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
	outcome := OutcomeHit
	for len(missing) > 0 {
		outcome = OutcomeMiss
		chunk := missing[:min(len(missing), k.BatchChunk)]
		missing = missing[len(chunk):]
		got, failed, err := k.fetchParts(c.s.ctx, c.s.up, c.sess, buildByNames(m, shape, chunk), shape, chunk)
		if err != nil {
			return true, err
		}
		if failed != nil {
			c.outcome = OutcomeMiss
			if failed.typ == wire.Reply {
				if f, err := wire.ResultField(failed.body); err == nil && f <= 0 {
					// A success this code cannot take apart (a field it
					// does not know, a partition it cannot name): only
					// the metastore can answer the whole request.
					return true, c.forward(upstream.Call{Session: c.sess, Class: upstream.Read, Msg: m}, c)
				}
			}
			// The metastore refused: the client gets its answer, as it
			// would have for the whole request.
			return true, c.replyWith(m, failed.typ, failed.body)
		}
		for _, p := range got {
			k.Store.Put(append(base, p.name...), meth.Kind, p.body, &snap, started, false)
		}
		parts = append(parts, got...)
	}
	if len(due) > 0 {
		// One bulk call for all of this request's due partitions.
		enqueued = true
		k.enqueue(refreshJob{sess: c.sess, meth: meth, msg: buildByNames(m, shape, due), key: base,
			names: *names, batch: &shape, due: due})
	}
	c.outcome = outcome
	slices.SortFunc(parts, func(a, b namedPart) int { return strings.Compare(a.name, b.name) })
	c.hdr = wire.AppendHeader(c.hdr[:0], wire.Reply, m.Name(), m.SeqID)
	c.iov, c.frame = partsReply(append(c.iov[:0], c.hdr), c.frame, parts, shape.inStruct)
	err := c.w.Write(c.iov...)
	clear(c.iov) // don't keep cached entries alive through the buffer
	if err != nil {
		return true, errors.Join(errClientWrite, err)
	}
	return true, nil
}

// fetchParts sends a by-names request and returns the partitions matched
// to the names asked for, or the metastore's reply when that was not a
// success.
func (k *cacher) fetchParts(ctx context.Context, up Forwarder, sess *upstream.Session, req []byte, shape listShape, names []string) ([]namedPart, *loaded, error) {
	msg, err := wire.Parse(req, wire.Limits{MaxMessage: len(req)})
	if err != nil {
		return nil, nil, err
	}
	var sink captureSink
	if err := up.Do(ctx, upstream.Call{Session: sess, Class: upstream.Read, Msg: msg}, &sink); err != nil {
		return nil, nil, err
	}
	parts, ok := splitParts(sink.res, shape.inStruct, names)
	if !ok {
		return nil, &sink.res, nil
	}
	return parts, nil, nil
}

// buildByNames copies request m with its name list replaced by names.
func buildByNames(m wire.Message, shape listShape, names []string) []byte {
	out := append([]byte(nil), m.Header()...)
	var e wire.Encoder
	e.StringListField(shape.names[len(shape.names)-1], names)
	list := e.B
	args := m.Body()
	if !shape.inStruct {
		body := dropField(args, shape.names)
		out = append(out, body[:len(body)-1]...) // without STOP
		out = append(out, list...)
		return append(out, wire.TStop)
	}
	// The request struct at field 1: copy it without the list, add the
	// new list before its STOP.
	d := wire.NewDecoder(args)
	for {
		start := d.Pos()
		typ, id := d.FieldBegin()
		if typ == wire.TStop || d.Err() != nil {
			return append(out, wire.TStop)
		}
		if id != shape.names[0] || typ != wire.TStruct {
			d.Skip(typ)
			out = append(out, args[start:d.Pos()]...)
			continue
		}
		out = append(out, args[start:d.Pos()]...)
		inner := dropStructField(d, args, shape.names[1])
		out = append(out, inner[:len(inner)-1]...)
		out = append(out, list...)
		out = append(out, wire.TStop)
	}
}

// dropField copies args without the field at path (one or two steps).
func dropField(args []byte, path hms.Path) []byte {
	d := wire.NewDecoder(args)
	if len(path) == 1 {
		return dropStructField(d, args, path[0])
	}
	var out []byte
	for {
		start := d.Pos()
		typ, id := d.FieldBegin()
		if typ == wire.TStop || d.Err() != nil {
			return append(out, wire.TStop)
		}
		if id == path[0] && typ == wire.TStruct {
			out = append(out, args[start:d.Pos()]...)
			out = append(out, dropStructField(d, args, path[1])...)
			continue
		}
		d.Skip(typ)
		out = append(out, args[start:d.Pos()]...)
	}
}

// dropStructField copies the struct at d's position without field id.
func dropStructField(d *wire.Decoder, src []byte, id int16) []byte {
	var out []byte
	for {
		start := d.Pos()
		typ, fid := d.FieldBegin()
		if typ == wire.TStop || d.Err() != nil {
			return append(out, wire.TStop)
		}
		d.Skip(typ)
		if fid != id {
			out = append(out, src[start:d.Pos()]...)
		}
	}
}

// splitParts cuts a by-names reply into partitions matched to the names
// asked for. ok is false when the reply is not a plain success this code
// understands (an exception, or result fields beyond the list).
func splitParts(r loaded, inStruct bool, asked []string) ([]namedPart, bool) {
	d, et, n, ok := openList(r, inStruct)
	if !ok || (et != wire.TStruct && n > 0) {
		return nil, false
	}
	byValues := make(map[string]string, len(asked))
	for _, name := range asked {
		_, vals, err := filter.PartitionValues(name)
		if err != nil {
			continue
		}
		byValues[strings.Join(vals, "\x00")] = name
	}
	// n is a claimed count: size by what was asked, not by it.
	out := make([]namedPart, 0, min(n, len(asked)))
	for i := 0; i < n; i++ {
		start := d.Pos()
		vals := partValues(d)
		if d.Err() != nil {
			return nil, false
		}
		name, ok := byValues[strings.Join(vals, "\x00")]
		if !ok {
			return nil, false // a partition we cannot name: don't guess
		}
		out = append(out, namedPart{name: name, body: r.body[start:d.Pos()]})
	}
	if !closesList(r, d, inStruct) {
		return nil, false
	}
	return out, true
}

// openList positions a decoder on the elements of the list a batch reply
// carries: result field 0, or field 1 of the result struct at field 0.
// ok is false for an exception or any other shape.
func openList(r loaded, inStruct bool) (d *wire.Decoder, elem byte, n int, ok bool) {
	if r.typ != wire.Reply {
		return nil, 0, 0, false
	}
	d = wire.NewDecoder(r.body)
	typ, id := d.FieldBegin()
	if id != 0 || d.Err() != nil {
		return nil, 0, 0, false
	}
	if inStruct {
		if typ != wire.TStruct {
			return nil, 0, 0, false
		}
		if typ, id = d.FieldBegin(); id != 1 {
			return nil, 0, 0, false
		}
	}
	if typ != wire.TList {
		return nil, 0, 0, false
	}
	elem, n = d.ListBegin()
	return d, elem, n, d.Err() == nil
}

// closesList reports whether nothing but the wrappers' STOPs follows the
// list: a result field this code does not know means it cannot rebuild
// the reply.
func closesList(r loaded, d *wire.Decoder, inStruct bool) bool {
	want := []byte{wire.TStop}
	if inStruct {
		want = []byte{wire.TStop, wire.TStop}
	}
	return d.Err() == nil && bytes.Equal(r.body[d.Pos():], want)
}

// partValues reads a Partition struct, returning its values (field 1).
func partValues(d *wire.Decoder) []string {
	var vals []string
	for {
		typ, id := d.FieldBegin()
		if typ == wire.TStop || d.Err() != nil {
			return vals
		}
		if id == 1 && typ == wire.TList {
			_, n := d.ListBegin()
			for i := 0; i < n && d.Err() == nil; i++ {
				vals = append(vals, d.String())
			}
			continue
		}
		d.Skip(typ)
	}
}

// partsReply lays a by-names result struct out over the partitions' own
// bytes, without copying them: the wrapper bytes go in frame, and the
// whole reply body is iov, for one writev.
func partsReply(iov [][]byte, frame []byte, parts []namedPart, inStruct bool) ([][]byte, []byte) {
	e := wire.Encoder{B: frame[:0]}
	if inStruct {
		e.FieldBegin(wire.TStruct, 0)
		e.FieldBegin(wire.TList, 1)
	} else {
		e.FieldBegin(wire.TList, 0)
	}
	e.ListBegin(wire.TStruct, len(parts))
	pre := len(e.B)
	if inStruct {
		e.Stop()
	}
	e.Stop()
	iov = append(iov, e.B[:pre])
	for _, p := range parts {
		iov = append(iov, p.body)
	}
	return append(iov, e.B[pre:]), e.B
}

// refreshBatch reloads a group of per-partition entries with one call.
func (k *cacher) refreshBatch(ctx context.Context, up Forwarder, j refreshJob, snap *cache.Snapshot) {
	started := k.Store.Now()
	got, failed, err := k.fetchParts(ctx, up, j.sess, j.msg, *j.batch, j.due)
	if err != nil || failed != nil {
		return
	}
	for _, p := range got {
		k.Store.Put(append(j.key[:len(j.key):len(j.key)], p.name...), j.meth.Kind, p.body, snap, started, false)
	}
}
