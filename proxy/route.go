package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// Federation: one endpoint in front of several upstream groups (package
// federation decides where each call goes). Each group is a route of its
// own: its Forwarder (own pools) and its own cache machinery (own
// Upstream name in keys, own coherence), so nothing is shared across
// groups but the store's byte budget. Without a Router the server has
// one route and the call path is the single-group one.

// Backend is a federated upstream group besides the primary (the Forwarder
// given to New and Config.Cache).
type Backend struct {
	// Name is the group's name in logs.
	Name string
	// Up takes the group's calls. Required.
	Up Forwarder
	// Cache, if set, caches the group's reads, as Config.Cache does the
	// primary's; its Upstream must differ from every other group's.
	Cache *Caching
}

// Router sends each call of a federated server to one group. It runs on
// every call but set_ugi, setMetaConf and oneway calls, which go to the
// primary (the session state reaches the other groups by replay on
// their connections).
type Router interface {
	// Route says where a call goes.
	Route(meth *hms.Method, m wire.Message) Route
	// FanOut answers a call that Route sent to every group (listings):
	// the reply's type and body. It asks each group through read, which
	// answers from that group's cache where the method is a cached read,
	// so that each group's part is kept fresh by that group's own
	// invalidations and the merge is made afresh on every call. An error
	// is a transport failure: the client's connection is closed.
	FanOut(ctx context.Context, sess *upstream.Session, meth *hms.Method, m wire.Message, read GroupReader) (typ byte, body []byte, err error)
}

// GroupReader asks group i (0 the primary) a read on behalf of sess,
// from the group's cache when the read is cached: the group's reply, in
// the group's names. The body is the caller's to keep, never to change.
type GroupReader func(ctx context.Context, i int, sess *upstream.Session, meth *hms.Method, m wire.Message) (typ byte, body []byte, err error)

// Route is where one call goes.
type Route struct {
	// Group is 0 for the primary, i for Config.Federated[i-1].
	Group int
	// FanOut: every group answers, through Router.FanOut.
	FanOut bool
	// Refuse, when set, answers the call with a MetaException carrying
	// it (a TApplicationException where the method declares none); the
	// call reaches no metastore.
	Refuse string
	// Msg, when its Buf is set, is sent to the group instead of the
	// client's message (the same name and seqid, names rewritten), and
	// Reply rewrites the body of the group's REPLY before the client sees
	// it. Such a call is cached by the group as any other, under Msg and
	// with the group's reply bytes: Reply runs on every answer, hit or
	// miss, so it must be a pure function of its input.
	Msg   wire.Message
	Reply func(dst []byte, typ byte, body []byte) ([]byte, error)
}

// route is one group as the call path sees it.
type route struct {
	up    Forwarder
	cache *cacher // nil: the group is not cached
	// calls counts the calls the group answered, by outcome: its own,
	// and its parts of listings that ask every group (refusals are no
	// group's). A pointer: routes are copied into the slice.
	calls *[numOutcomes]atomic.Uint64
}

// route applies the router's decision to a call; handled: the call was
// answered here, else it continues on c.rt as the message returned: the
// client's, or the one the router renamed for the group, whose replies
// c.rename then shows under the client's names. A renamed call takes the
// group's cache like any other: its entries are keyed by the group's
// request and hold the group's reply bytes, so the group's own
// invalidations (its writes, event log and bus, all in its names) reach
// them, and every answer, hit or miss, is rewritten alike.
func (c *clientConn) route(r Router, meth *hms.Method, m wire.Message) (wire.Message, bool, error) {
	d := r.Route(meth, m)
	switch {
	case d.Refuse != "":
		c.outcome = OutcomeError
		c.rt = nil // no group's call
		return m, true, c.refuse(meth, m, d.Refuse)
	case d.FanOut:
		c.rt = nil // every group's
		typ, body, err := r.FanOut(c.s.ctx, c.sess, meth, m, c.s.groupRead)
		if err != nil {
			return m, true, err
		}
		return m, true, c.replyWith(m, typ, body)
	case d.Group <= 0 || d.Group >= len(c.s.routes):
		return m, false, nil
	}
	c.rt = &c.s.routes[d.Group]
	if d.Msg.Buf == nil {
		return m, false, nil
	}
	c.rename = d.Reply
	return d.Msg, false, nil
}

// renamed is body as the client sees it: rewritten when the call was
// renamed and body is a REPLY's.
func (c *clientConn) renamed(typ byte, body []byte) ([]byte, error) {
	if c.rename == nil || typ != wire.Reply {
		return body, nil
	}
	b, err := c.rename(c.rbuf[:0], typ, body)
	if err != nil {
		// The reply cannot be shown under the client's names: a
		// transport failure, never a half-rewritten answer.
		return nil, fmt.Errorf("%w: %w", errRename, err)
	}
	c.rbuf = b
	return b, nil
}

var errRename = errors.New("proxy: rewrite a reply under the client's names")

// writeParts writes a REPLY assembled from pieces (batches and prunes
// answered from the cache), the header first. A renamed call's body is
// gathered and rewritten first: the pieces are the group's bytes.
func (c *clientConn) writeParts(iov [][]byte) error {
	if c.rename == nil {
		return c.w.Write(iov...)
	}
	flat := c.flat[:0]
	for _, p := range iov[1:] {
		flat = append(flat, p...)
	}
	c.flat = flat
	body, err := c.renamed(wire.Reply, flat)
	if err != nil {
		return err
	}
	return c.w.Write(iov[0], body)
}

// buildRoutes makes the server's routes: the primary, then each
// federated group in order.
func (s *Server) buildRoutes(cfg Config, up Forwarder) error {
	s.routes = make([]route, 1, 1+len(cfg.Federated))
	s.routes[0] = route{up: up, cache: s.cache, calls: new([numOutcomes]atomic.Uint64)}
	if len(cfg.Federated) > 0 && cfg.Router == nil {
		return fmt.Errorf("proxy: %d federated groups without a router", len(cfg.Federated))
	}
	names := map[string]bool{}
	if s.cache != nil {
		names[s.cache.Upstream] = true
	}
	for i, g := range cfg.Federated {
		if g.Up == nil {
			return fmt.Errorf("proxy: federated group %d (%s) has no upstream", i, g.Name)
		}
		rt := route{up: g.Up, calls: new([numOutcomes]atomic.Uint64)}
		if g.Cache != nil {
			if g.Cache.Store == nil {
				return fmt.Errorf("proxy: federated group %s: caching without a store", g.Name)
			}
			k := newCacher(*g.Cache, s.log.With("group", g.Name))
			if names[k.Upstream] {
				// Shared keys would let one group's entries answer another's calls.
				return fmt.Errorf("proxy: federated group %s: cache upstream name %q is used by another group", g.Name, k.Upstream)
			}
			names[k.Upstream] = true
			rt.cache = k
		}
		s.routes = append(s.routes, rt)
	}
	s.router = cfg.Router
	for _, rt := range s.routes[1:] {
		if rt.cache != nil {
			rt.cache.start(rt.up, s.ctx)
		}
	}
	return nil
}

// GroupCache is one federated group's cache as the layers that keep it
// coherent see it (the invalidation bus, the event-log poller, admin
// flushes): the single-group Server methods of the same names, for that
// group alone.
type GroupCache struct{ k *cacher }

// FederatedCache is the cache of Config.Federated[i-1] (i ≥ 1), nil when
// that group is not cached or i is out of range. Index 0 is the
// primary, whose cache the Server's own methods serve.
func (s *Server) FederatedCache(i int) *GroupCache {
	if i < 1 || i >= len(s.routes) || s.routes[i].cache == nil {
		return nil
	}
	return &GroupCache{k: s.routes[i].cache}
}

// Flush invalidates entities of the group as a write would.
func (g *GroupCache) Flush(ctx context.Context, ents []cache.Entity) error {
	g.k.invalidate(ctx, ents)
	return nil
}

// ApplyRemote applies another node's invalidations of the group.
func (g *GroupCache) ApplyRemote(ents []cache.Entity) { g.k.Store.Apply(g.k.Upstream, ents) }

// DropAll drops everything cached for the group: its generations move,
// so none of its entries is served again and no load in flight is
// admitted. The store is shared with the other groups, whose entries
// stay (Server.DropAll also clears the store, all groups' entries).
func (g *GroupCache) DropAll(reason string) {
	g.k.Store.Apply(g.k.Upstream, []cache.Entity{{Level: cache.LevelAll}})
	g.k.log.Warn("cache dropped: invalidations may have been missed", "reason", reason, "upstream", g.k.Upstream)
}

// UpstreamName is the group's name in keys and invalidations.
func (g *GroupCache) UpstreamName() string { return g.k.Upstream }

// CacheStore is the store the group's entries live in.
func (g *GroupCache) CacheStore() *cache.Store { return g.k.Store }

// PruneStats are the group's local prune counts.
func (g *GroupCache) PruneStats() *PruneStats { return &g.k.prune }

// GroupCalls is how many calls group i (0 the primary, i for
// Config.Federated[i-1]) answered with outcome o: its own, and its parts
// of listings that ask every group (hit, miss or coalesced); calls the
// router refused are counted by no group. 0 when i is out of range.
func (s *Server) GroupCalls(i int, o Outcome) uint64 {
	if i < 0 || i >= len(s.routes) || o >= numOutcomes {
		return 0
	}
	if s.router == nil {
		// One group answers every call: the call stats are its count,
		// and the connection loop keeps no second one.
		return s.stats.Outcome(o)
	}
	return s.routes[i].calls[o].Load()
}

// groupRead implements GroupReader: a cached read of group i outside any
// client connection (a listing's part), with the keys, generation checks
// and flights of cachedRead. It neither refreshes ahead nor samples for
// shadow validation: a part's entry lives out its TTL.
func (s *Server) groupRead(ctx context.Context, i int, sess *upstream.Session, meth *hms.Method, m wire.Message) (byte, []byte, error) {
	if i < 0 || i >= len(s.routes) {
		return 0, nil, fmt.Errorf("proxy: no upstream group %d", i)
	}
	rt := &s.routes[i]
	forward := func() (byte, []byte, error) {
		var sink captureSink
		if err := rt.up.Do(ctx, upstream.Call{Session: sess, Class: upstream.Read, Msg: m}, &sink); err != nil {
			return 0, nil, err
		}
		return sink.res.typ, sink.res.body, nil
	}
	k := rt.cache
	if k == nil || meth == nil || meth.Class != hms.Read || !meth.Cacheable || meth.Batch != nil ||
		k.Store.Policy(meth.Kind).TTL <= 0 || (k.Coherence != nil && !k.Coherence.Synced()) || k.catalogMismatch() {
		return forward()
	}
	var r hms.Resolved
	if err := meth.Resolve(&r, m.Body()); err != nil || r.Bad {
		return forward()
	}
	names := cache.ReadNames(meth, &r, k.DefaultCatalog)
	if !k.allowed(&names) {
		return forward()
	}
	sc := k.scope(sess)
	key, _ := cache.ReadKey(nil, sc, meth, &r, k.DefaultCatalog)
	r.Forget()
	if e, st := k.Store.Get(key, meth.Kind); st != cache.Miss {
		rt.calls[OutcomeHit].Add(1)
		return wire.Reply, e.Body(), nil
	}
	deps, ok := k.Store.ReadDeps(nil, sc, meth, &names)
	if !ok {
		return forward()
	}
	snap, ok := k.Store.Gens().Take(deps)
	if !ok {
		return forward()
	}
	res, err, shared := k.flights.Do(string(snap.AppendKey(key)), func() (any, error) {
		return k.load(ctx, rt.up, sess, meth, m, key, &snap)
	})
	if err != nil {
		return 0, nil, err
	}
	if shared {
		rt.calls[OutcomeCoalesced].Add(1)
	} else {
		rt.calls[OutcomeMiss].Add(1)
	}
	ld := res.(loaded)
	return ld.typ, ld.body, nil
}
