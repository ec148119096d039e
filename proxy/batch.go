package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

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
	if len(parts) > 0 && k.shadow.sample() && k.shadow.admit(meth.Kind) {
		// One of the hits is checked, under the generations read before
		// the lookups.
		p := parts[rand.IntN(len(parts))]
		k.shadow.enqueue(shadowJob{sess: c.sess, meth: meth, msg: buildByNames(m, shape, []string{p.name}),
			key: append(base[:len(base):len(base)], p.name...), want: p.body, snap: snap, batch: &shape, name: p.name})
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
	own, joined := k.entries.claim(base, &snap, missing)
	defer k.entries.abandon(own) // those not finished below: their waiters load them themselves
	if k.joinHook != nil && len(joined.names) > 0 {
		k.joinHook(len(joined.names))
	}
	load := func(names []string, flights []*entryFlight) (bool, error) {
		for len(names) > 0 {
			outcome = OutcomeMiss
			chunk := names[:min(len(names), k.BatchChunk)]
			names = names[len(chunk):]
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
			// Stored first, then handed over: a batch arriving after the
			// flight ends finds the entry instead.
			if flights != nil {
				k.entries.finish(flights[:len(chunk)], chunk, got)
				flights = flights[len(chunk):]
			}
			parts = append(parts, got...)
		}
		return false, nil
	}
	if done, err := load(own.names, own.flights); done {
		return true, err
	}
	// Only now wait for the others: a batch never waits while holding
	// loads others wait for, so batches cannot wait on each other in a
	// circle.
	var retry []string
	for i, f := range joined.flights {
		select {
		case <-f.done:
		case <-c.s.ctx.Done():
			return true, fmt.Errorf("proxy: wait for a partition load: %w", c.s.ctx.Err())
		}
		switch {
		case !f.ok:
			// Its load failed or was given up: the metastore's answer for
			// this client's own request decides.
			retry = append(retry, joined.names[i])
		case f.body != nil:
			parts = append(parts, namedPart{name: joined.names[i], body: f.body})
		}
	}
	if done, err := load(retry, nil); done {
		return true, err
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
func (f *entryFlights) finish(flights []*entryFlight, names []string, got []namedPart) {
	found := make(map[string][]byte, len(got))
	for _, p := range got {
		found[p.name] = p.body
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
