package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/limits/flushgate"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// Caching turns on the cache for a Server. The zero value of each field
// selects the default in its comment; Store is required. New copies it:
// the Caching, and the collaborators it names, are not read again from
// the caller's value, so everything must be set before New (a field
// assigned afterwards is silently ignored; this is how the change stream
// once lost every write made through the proxy).
type Caching struct {
	Store *cache.Store
	// Upstream names the metastore group in keys and invalidations, so
	// entries never cross groups. Default "default".
	Upstream string
	// Scope says whether entries are shared across set_ugi identities.
	// Default ScopeAuto: keyed by identity when the metastore has a filter
	// hook or pre-event listeners, or cannot tell; shared otherwise.
	Scope ScopeMode
	// ScopeInterval is how often ScopeAuto asks the metastore again.
	// Default 10m.
	ScopeInterval time.Duration
	// PerUser is the deprecated form of Scope: ScopeUser; when true it wins.
	PerUser bool
	// DefaultCatalog fills in requests that name no catalog, as the
	// server's metastore.catalog.default. Default "hive".
	DefaultCatalog string
	// Policy decides which databases and tables may be cached. Nil: all.
	Policy Allower
	// RefreshWorkers bounds concurrent refresh-ahead loads. Default 4.
	RefreshWorkers int
	// BatchChunk bounds the names per upstream call when batch calls are
	// split into cached entries. Default 500.
	BatchChunk int
	// KnownReads are methods outside the method table that only read:
	// they pass through untouched. Every other unknown method is treated
	// as a write that may change anything: once answered, it invalidates
	// everything cached for the upstream group. Default none.
	KnownReads []string
	// Coherence keeps this node in step with the other nodes (the Redis
	// invalidation bus). Nil: this node alone, always in sync.
	Coherence Coherence
	// Writes is told of every write after it (the change-event stream).
	// Nil: nobody.
	Writes WriteObserver
	// PruneOff turns local pruning off: filters and partial specs are
	// then cached as whole replies under their exact text. Default false:
	// what the proxy evaluates exactly is answered from the table's
	// cached partition names and per-partition entries (prune.go).
	PruneOff bool
	// Shadow re-reads a sample of cache hits from the metastore to prove
	// the cache fresh. The zero value samples 0.1 % of hits, at most 20
	// a second.
	Shadow Shadow
	// TTLUnlogged bounds the TTL of the kinds that the writes the
	// metastore's notification log does not record change
	// (cache.ttl_without_eventlog): such writes, made straight to the
	// metastore, reach the cache only when entries expire. 0: no bound.
	TTLUnlogged time.Duration
	// UnloggedWrites, when not nil, replaces the table of those writes
	// for the metastore's version (hms.UnloggedWrites).
	UnloggedWrites []string
	// UserScopeTTL bounds every TTL while entries are keyed by identity
	// (cache.user_scope_ttl): grants and revokes made straight to the
	// metastore, and an external authoriser's policy changes, leave no
	// event. 0: no bound.
	UserScopeTTL time.Duration
	// Flushes bounds how often each client identity may invalidate
	// everything cached for the group (a method outside the method
	// table, flushCache): past its budget, its calls wait for a shared,
	// periodic flush made before their replies (limits/flushgate).
	Flushes FlushBudget
}

// FlushBudget is Caching.Flushes. The zero value of each field selects
// the default in its comment. An identity is the authenticated user
// where the listener authenticated one, else the client's address, never
// a set_ugi claim.
type FlushBudget struct {
	// Burst is the flushes an identity may cause at once. Default 10.
	Burst int
	// Rate refills an identity's burst, in flushes a second. Default 1.
	Rate float64
	// Interval is the shortest time between the shared flushes of the
	// calls past their budget, and the longest such a call waits.
	// Default 1s; negative: no budget, every call flushes at once.
	Interval time.Duration
}

// Coherence is what the proxy needs of the layer that keeps many nodes'
// caches coherent.
type Coherence interface {
	// Publish hands the other nodes what a write changed. It is called
	// after the local invalidation and before the writing client gets its
	// reply, and returns once the live peers applied it or its bound
	// passed; an error is logged, and the peers learn of the loss
	// themselves (a gap in this node's numbers).
	Publish(ctx context.Context, ents []cache.Entity) error
	// Synced reports whether this node can trust its cache: false while
	// it may be missing other nodes' invalidations, and then reads go to
	// the metastore.
	Synced() bool
	// Abandon is called when a shutdown cut off a write to the group: it
	// may still land on the metastore after every invalidation this node
	// publishes, so the node must leave its peers as a crash would, never
	// with a clean goodbye.
	Abandon()
}

// WriteObserver watches the writes that pass through the proxy.
type WriteObserver interface {
	// Wrote is told of a write once the metastore answered it (or its
	// outcome became unknown): the method, what it changed and whether
	// the metastore accepted it. It runs on the client's path, so it must
	// not block, nor keep ents after it returns.
	Wrote(method string, ents []cache.Entity, ok bool)
}

// RequestObserver is a WriteObserver that is also told of each write's
// request and who made it (the change feed describes the objects a
// write sets). It runs on the client's path right after Wrote: it must
// not block, nor keep args after it returns.
type RequestObserver interface {
	WroteRequest(method string, args []byte, user string, ok bool)
}

// Allower is the never-cache policy (filter.Patterns implements it).
type Allower interface {
	Allowed(db, table string) bool
}

// cacher is a Server's cache machinery.
type cacher struct {
	Caching
	flights singleflight.Group // single-entry loads, by key and generations
	entries entryFlights       // batch entries and one-table reads in flight

	// joinHook, if set, is told when a batch or one-table read waits for
	// n entries another request is loading. A seam for tests only: it
	// shows a request could have gone upstream but shared instead.
	joinHook func(n int)
	shadow   *shadower // nil: shadow validation off
	prune    PruneStats
	pruneIdx nameIndexes
	// postHits counts prunes answered from a posting memo's flat copy.
	// A seam for tests only: it shows the memo could have answered.
	postHits atomic.Uint64
	// batchRepeats counts by-names requests answered by repeatedBatch.
	// A seam for tests only, as postHits.
	batchRepeats atomic.Uint64
	pruneExprs   exprCache
	memos        *batchMemos // by-names requests answered from the cache lately
	// pruneTableReq: the metastore answers get_table_req where get_table
	// failed: prunes read the table that way.
	pruneTableReq atomic.Bool
	// answered holds the names of the methods the metastore answered
	// with a reply (not UNKNOWN_METHOD): a prune answers a 4.0 request
	// form only once the metastore proved it knows it.
	answered sync.Map
	// pruneHook, if set, runs when a prune has assembled its reply and
	// not yet checked its generations. A seam for tests only: an
	// invalidation there is one that races the prune.
	pruneHook func()
	// statsUnproven: a partition statistics reply came in an order
	// this proxy would not lay out; such reads are cached whole.
	statsUnproven atomic.Bool
	scoper        *scoper
	unknown       *unknownMethods
	// flushes gates the invalidations of everything in the group that
	// clients cause; nil: each is made at once.
	flushes *flushgate.Gate
	// flushHook, if set, is told of each such invalidation once made,
	// and whether it waited for a shared flush. A seam for tests only.
	flushHook func(coalesced bool)
	txns      *cache.TxnTracker
	log       *slog.Logger

	jobs chan refreshJob
	// Refresh jobs queued, and those finished. Tests wait until they are
	// equal: then every refresh a hit asked for has reached the metastore,
	// and a count of upstream calls is final.
	queued, settled atomic.Int64
	wg              sync.WaitGroup // refresh workers
	stop            chan struct{}
	once            sync.Once
}

func newCacher(c Caching, log *slog.Logger) *cacher {
	if c.Upstream == "" {
		c.Upstream = "default"
	}
	if c.DefaultCatalog == "" {
		c.DefaultCatalog = "hive"
	}
	if c.RefreshWorkers <= 0 {
		c.RefreshWorkers = 4
	}
	if c.BatchChunk <= 0 {
		c.BatchChunk = 500
	}
	if c.PerUser {
		c.Scope = ScopeUser
	}
	k := &cacher{Caching: c, txns: cache.NewTxnTracker(100_000), log: log, memos: newBatchMemos(c.Store),
		jobs: make(chan refreshJob, 1024), stop: make(chan struct{}),
		shadow: newShadower(c.Shadow, c.Store, log)}
	k.scoper = newScoper(c.Scope, c.ScopeInterval, log, func() {
		k.Store.Apply(k.Upstream, []cache.Entity{{Level: cache.LevelAll}})
		k.Store.Clear()
	})
	k.scoper.defaultCatalog, k.scoper.checked = c.DefaultCatalog, k.checked
	k.unknown = newUnknownMethods(c.KnownReads, log)
	if f := c.Flushes; f.Interval >= 0 {
		k.flushes = flushgate.New(flushgate.Config{Burst: f.Burst, Rate: f.Rate, Interval: f.Interval},
			func(ctx context.Context) { k.invalidate(ctx, flushAllEntities) })
	}
	return k
}

var flushAllEntities = []cache.Entity{{Level: cache.LevelAll}}

func (k *cacher) start(up Forwarder, ctx context.Context) {
	for i := 0; i < k.RefreshWorkers; i++ {
		k.wg.Add(1)
		go k.refreshLoop(up, ctx)
	}
	// The metastore's settings are read in every scope mode; in auto mode
	// the same check decides the scope.
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		k.scoper.run(ctx, up, k.stop)
	}()
	if k.shadow != nil {
		k.shadow.start(ctx, up)
	}
}

func (k *cacher) close() {
	k.once.Do(func() { close(k.stop) })
	k.wg.Wait()
	if k.shadow != nil {
		k.shadow.close()
	}
}

// scope is whose entry a read of sess is. Keyed by identity, the key and
// so the flight of a load carry the user: a load is never shared across
// identities, nor its exception. Likewise the session's setMetaConf
// overrides that can change an answer (confScope). In auto mode it waits
// for the first decision.
func (k *cacher) scope(sess *upstream.Session) cache.Scope {
	sc := cache.Scope{Upstream: k.Upstream, Conf: confScope(sess)}
	if k.scoper.scoped(k.stop) {
		sc.PerUser, sc.User = true, sess.User()
	}
	return sc
}

// harmlessConf are the setMetaConf keys that change no answer of the
// metastore: the client's own socket timeout, which the metastore keeps
// as a setting but never reads for a reply. Every other key the
// metastore accepts for a session does change answers:
//   - try.direct.sql(.ddl): the JDO path refuses filters on keys that are
//     not strings, and words its not-found messages otherwise;
//   - client.capability.check: whether insert-only tables are refused to
//     clients that do not declare the capability;
//   - partition.name.whitelist.pattern, disallow.incompatible.col.type.changes:
//     which writes are refused, and partition_name_has_valid_characters;
//   - partition.order.expr, expression.proxy (4.0): order and evaluation
//     of partition expressions.
var harmlessConf = map[string]bool{
	"hive.metastore.client.socket.timeout": true,
	"metastore.client.socket.timeout":      true,
}

// confScope stands for the session's overrides that can change an
// answer: "" for a session without any, else a digest of them, sorted,
// so that sessions share entries only with sessions whose overrides are
// the same.
func confScope(sess *upstream.Session) string {
	if !sess.HasConf() {
		return ""
	}
	var kvs []string
	sess.EachConf(func(k, v string) {
		if !harmlessConf[k] {
			kvs = append(kvs, k+"\x00"+v)
		}
	})
	if len(kvs) == 0 {
		return ""
	}
	slices.Sort(kvs)
	h := sha256.New()
	for _, kv := range kvs {
		h.Write([]byte(kv))
		h.Write([]byte{0xff})
	}
	return string(h.Sum(nil))
}

// loaded is the outcome of one upstream load, shared by every caller that
// joined the flight.
type loaded struct {
	typ  byte
	body []byte
}

// captureSink keeps a reply for the cache and the clients of a flight.
// It does not borrow: upstream hands it a buffer of its own, so the
// cache-fill path copies the body once, into the store.
type captureSink struct{ res loaded }

func (s *captureSink) Reply(m wire.Message) error {
	s.res = loaded{typ: m.Type, body: m.Body()}
	return nil
}

// readUp sends req, a whole call framed as a client sent it, upstream as
// a read under sess and returns the metastore's reply.
func readUp(ctx context.Context, up Forwarder, sess *upstream.Session, req []byte) (loaded, error) {
	msg, err := wire.Parse(req, wire.Limits{MaxMessage: len(req)})
	if err != nil {
		return loaded{}, err
	}
	var sink captureSink
	if err := up.Do(ctx, upstream.Call{Session: sess, Class: upstream.Read, Msg: msg}, &sink); err != nil {
		return loaded{}, err
	}
	return sink.res, nil
}

// takeGens records the generations of everything a read of names under
// sc depends on, before any lookup: a load stores its reply only if they
// are still current at the end. It reports false when the read cannot be
// cached (its dependencies are unknown or too many).
func (c *clientConn) takeGens(sc cache.Scope, meth *hms.Method, names *cache.Names) (cache.Snapshot, bool) {
	k := c.rt.cache
	deps, ok := k.Store.ReadDeps(c.deps[:0], sc, meth, names)
	c.deps = deps
	if !ok {
		return cache.Snapshot{}, false
	}
	return k.Store.Gens().Take(deps)
}

// cachedRead serves a cacheable read: from the store when current, else
// from one upstream load shared by identical concurrent misses.
func (c *clientConn) cachedRead(meth *hms.Method, m wire.Message) error {
	k := c.rt.cache
	if k.Store.Policy(meth.Kind).TTL <= 0 || (k.Coherence != nil && !k.Coherence.Synced()) || k.catalogMismatch() {
		return c.forward(upstream.Call{Session: c.sess, Class: upstream.Read, Msg: m}, c)
	}
	sampled := k.shadow.sample()
	// The session's scope is read once per call (with setMetaConf
	// overrides it is a digest of them), and only where needed: it waits
	// for the scope decision while the proxy starts.
	var sc cache.Scope
	scoped := false
	if !sampled && c.repeatsLast(meth, m) {
		sc, scoped = k.scope(c.sess), true
		if sc == c.lastScope {
			if handled, err := c.repeatedHit(meth, m); handled {
				return err
			}
		}
	}
	if !sampled && meth.Batch != nil && c.lastBatch.memo != nil {
		if !scoped {
			sc, scoped = k.scope(c.sess), true
		}
		if handled, err := c.repeatedBatch(meth, m, sc); handled {
			return err
		}
	}
	// The one walk over the args: everything below uses its result.
	r := &c.res
	defer r.Forget() // r aliases the request, which the reader may drop
	if err := meth.Resolve(r, m.Body()); err != nil || r.Bad || namesPastColumns(meth, r) {
		return c.forward(upstream.Call{Session: c.sess, Class: upstream.Read, Msg: m}, c)
	}
	// Names as strings cost allocations: made only when needed (a
	// policy, a miss, a sampled or due hit, a batch).
	var names cache.Names
	named := false
	if k.Policy != nil {
		names, named = cache.ReadNames(meth, r, k.DefaultCatalog), true
		if !k.allowed(&names) {
			return c.forward(upstream.Call{Session: c.sess, Class: upstream.Read, Msg: m}, c)
		}
	}
	if len(c.locks) > 0 {
		if !named {
			names, named = cache.ReadNames(meth, r, k.DefaultCatalog), true
		}
		if c.underLock(&names) {
			// The client holds a write lock on what it reads: the
			// metastore answers (locks.go).
			return c.forward(upstream.Call{Session: c.sess, Class: upstream.Read, Msg: m}, c)
		}
	}
	if !scoped {
		sc = k.scope(c.sess)
	}
	if handled, err := c.pruneRead(meth, m, sc); handled {
		return err
	}
	if meth.PartStats != nil {
		if handled, err := c.statsRead(meth, m, sc); handled {
			return err
		}
	}
	if b := meth.Batch; b != nil {
		read := c.batchRead
		if b.Of == hms.BatchTables {
			read = c.tableRead
		}
		if handled, err := read(meth, m, sc); handled {
			return err
		}
	}
	key, _ := cache.ReadKey(c.key[:0], sc, meth, r, k.DefaultCatalog)
	c.key = key
	if s := meth.PartStats; s != nil && s.Parts == nil {
		key = c.columnSetKey(meth, r, sc, key)
	}
	// A hit sampled for shadow validation needs the generations of its
	// dependencies from before the lookup: an invalidation after it then
	// explains any difference the re-read finds.
	var shadowSnap cache.Snapshot
	if sampled {
		if !named {
			names, named = cache.ReadNames(meth, r, k.DefaultCatalog), true
		}
		deps, ok := k.Store.ReadDeps(c.deps[:0], sc, meth, &names)
		c.deps = deps
		if shadowSnap, ok = k.Store.Gens().Take(deps); !ok {
			sampled = false
		}
	}
	if e, st := c.lookup(key, meth.Kind); st != cache.Miss {
		if st == cache.HitRefresh && k.Store.StartRefresh(key) {
			if !named {
				names = cache.ReadNames(meth, r, k.DefaultCatalog)
			}
			k.enqueueRefresh(c.sess, meth, m, key, &names)
		}
		if sampled && k.shadow.admit(meth.Kind) {
			k.shadow.enqueue(shadowJob{sess: c.sess, meth: meth, msg: append([]byte(nil), m.Buf...),
				key: append([]byte(nil), key...), want: e.Body(), snap: shadowSnap})
		}
		c.outcome = OutcomeHit
		c.remember(meth, m, sc)
		return c.replyWith(m, wire.Reply, e.Body())
	}
	if !named {
		names = cache.ReadNames(meth, r, k.DefaultCatalog)
	}
	snap, ok := c.takeGens(sc, meth, &names)
	if !ok {
		return c.forward(upstream.Call{Session: c.sess, Class: upstream.Read, Msg: m}, c)
	}
	// Loads that began under other generations are other flights: a miss
	// after an invalidation never joins a load from before it.
	flight := string(snap.AppendKey(key))
	res, err, shared := k.flights.Do(flight, func() (any, error) {
		return k.load(c.s.ctx, c.rt.up, c.sess, meth, m, key, &snap)
	})
	if err != nil {
		return err
	}
	if shared {
		c.outcome = OutcomeCoalesced
	} else {
		c.outcome = OutcomeMiss
	}
	ld := res.(loaded)
	return c.replyWith(m, ld.typ, ld.body)
}

// repeatsLast reports whether m is, byte for byte, the request of the
// connection's last single-entry hit, on the same route, and nothing
// but the scope (which the caller compares) can make its answer another
// one's: then its key is that hit's, and repeatedHit may serve it
// without decoding it again (planners ask for one table again and
// again). A policy or a lock held by the client depends on more than
// the request's bytes.
func (c *clientConn) repeatsLast(meth *hms.Method, m wire.Message) bool {
	return c.lastRef != nil && c.lastMeth == meth && c.lastRoute == c.rt && c.rt.cache.Policy == nil &&
		len(c.locks) == 0 && bytes.Equal(c.lastBody, m.Body())
}

// repeatedHit answers a repeated request from the entry of the last hit,
// while Store.Again finds it current; it reports false otherwise (the
// entry changed or left, or Again sends this one to the store's lookup),
// and the request goes the whole way.
func (c *clientConn) repeatedHit(meth *hms.Method, m wire.Message) (bool, error) {
	k := c.rt.cache
	e, st := k.Store.Again(c.lastRef, meth.Kind, k.Store.Now())
	switch st {
	case cache.Miss:
		return false, nil
	case cache.HitRefresh:
		if k.Store.StartRefresh(c.lastKey) {
			r := &c.res
			defer r.Forget()
			if err := meth.Resolve(r, m.Body()); err == nil && !r.Bad {
				names := cache.ReadNames(meth, r, k.DefaultCatalog)
				k.enqueueRefresh(c.sess, meth, m, c.lastKey, &names)
			}
		}
	}
	c.outcome = OutcomeHit
	return true, c.replyWith(m, wire.Reply, e.Body())
}

// remember notes the request of a single-entry hit, for repeatsLast.
func (c *clientConn) remember(meth *hms.Method, m wire.Message, sc cache.Scope) {
	if len(m.Body()) > maxKeptLastKey || !bytes.Equal(c.key, c.lastKey) {
		c.lastMeth = nil // lookup kept no Ref of this key
		return
	}
	c.lastMeth, c.lastRoute, c.lastScope = meth, c.rt, sc
	c.lastBody = append(c.lastBody[:0], m.Body()...)
}

// lookup is Store.Get of a single-entry read, through the Ref of the
// connection's last hit when key is that hit's key again.
func (c *clientConn) lookup(key []byte, kind hms.Kind) (cache.Entry, cache.Status) {
	st := c.rt.cache.Store
	now := st.Now()
	if !bytes.Equal(key, c.lastKey) {
		e, s := st.GetAt(key, kind, now)
		if s != cache.Miss && len(key) <= maxKeptLastKey {
			c.lastKey, c.lastRef = append(c.lastKey[:0], key...), nil
		}
		return e, s
	}
	if e, s := st.Again(c.lastRef, kind, now); s != cache.Miss {
		return e, s
	}
	e, s := st.GetAt(key, kind, now)
	if s != cache.Miss {
		c.lastRef = e.RefAgain(c.lastRef) // hit twice in a row: worth a Ref
	}
	return e, s
}

// maxKeptLastKey bounds the key a connection keeps of its last hit (a
// key quoting megabyte names is looked up each time).
const maxKeptLastKey = 4 << 10

// namesPastColumns reports whether a read names a catalog, database,
// table or partition longer than the metastore's column for it
// (hms.MaxDatabaseName...). Such a name names nothing, so the answer is
// "not found" or an error; it is forwarded and never cached, or a client
// could fill the cache with not-found answers quoting 30 MiB names and
// evict everyone else's entries (issue 22). Bytes are counted: a longer
// name in bytes than the column in characters is either past it or not
// ASCII, which no stored name is.
func namesPastColumns(meth *hms.Method, r *hms.Resolved) bool {
	db := hms.MaxDatabaseName
	if len(r.DB) > 0 && r.DB[0] == '@' {
		db += hms.MaxCatalogName + 2 // "@cat#db", as Hive 3 clients send it
	}
	if meth.Target.Scope == hms.ScopeCatalog {
		db = math.MaxInt // a pattern over database names, not a name
	}
	if len(r.Cat) > hms.MaxCatalogName || len(r.DB) > db {
		return true
	}
	for _, t := range r.Tables {
		if len(t) > hms.MaxTableName {
			return true
		}
	}
	for _, p := range r.List {
		if len(p) > hms.MaxPartitionName {
			return true
		}
	}
	return false
}

func (k *cacher) allowed(n *cache.Names) bool {
	if k.Policy == nil {
		return true
	}
	tbl := ""
	if len(n.Tables) > 0 {
		tbl = n.Tables[0]
	}
	if !k.Policy.Allowed(n.DB, tbl) {
		return false
	}
	for _, t := range n.Tables[min(1, len(n.Tables)):] {
		if !k.Policy.Allowed(n.DB, t) {
			return false
		}
	}
	return true
}

// load forwards m upstream and admits the reply if it may be cached.
func (k *cacher) load(ctx context.Context, up Forwarder, sess *upstream.Session, meth *hms.Method, m wire.Message, key []byte, snap *cache.Snapshot) (loaded, error) {
	started := k.Store.Now()
	var sink captureSink
	if err := up.Do(ctx, upstream.Call{Session: sess, Class: upstream.Read, Msg: m}, &sink); err != nil {
		return loaded{}, err
	}
	k.admit(meth, key, sink.res, snap, started)
	return sink.res, nil
}

// admit stores a successful reply, or a declared not-found where negative
// caching is on.
func (k *cacher) admit(meth *hms.Method, key []byte, r loaded, snap *cache.Snapshot, started time.Time) {
	if r.typ != wire.Reply {
		return
	}
	if _, ok := k.answered.Load(meth.Name); !ok {
		k.answered.Store(meth.Name, struct{}{})
	}
	field, err := wire.ResultField(r.body)
	if err != nil {
		return
	}
	switch {
	case field <= 0 && meth.Kind == hms.KindPartition:
		// One partition that exists: adds of others cannot change it.
		ex := snap.Existing()
		k.Store.Put(key, meth.Kind, r.body, &ex, started, false)
	case field <= 0:
		k.Store.Put(key, meth.Kind, r.body, snap, started, false)
	case field == cache.NotFoundField(meth.Name):
		k.Store.Put(key, meth.Kind, r.body, snap, started, true)
	}
}

// replyWith answers m with a reply body under the client's own name and
// seqid: the bytes the metastore would have sent.
func (c *clientConn) replyWith(m wire.Message, typ byte, body []byte) error {
	body, err := c.renamed(typ, body)
	if err != nil {
		return err
	}
	c.hdr = wire.AppendHeader(c.hdr[:0], typ, m.Name(), m.SeqID)
	if err := c.w.Write(c.hdr, body); err != nil {
		return errors.Join(errClientWrite, err)
	}
	return nil
}

var errClientWrite = errors.New("proxy: write reply to client")

// write forwards a write and invalidates what it changes once the
// metastore answered, success or not, before the client sees the answer.
// When the outcome is unknown (the connection broke), it invalidates too.
func (c *clientConn) write(meth *hms.Method, m wire.Message) error {
	k := c.rt.cache
	ents := cache.WriteEntities(c.ents[:0], meth, m.Body(), k.DefaultCatalog)
	for i := range meth.Effects {
		if meth.Effects[i].Scope == hms.ScopeTxn {
			ents = append(ents, k.txns.Observe(meth.Name, m.Body(), k.DefaultCatalog)...)
			break
		}
	}
	c.ents = ents
	sink := invalidatingSink{c: c, ents: ents}
	err := c.forward(upstream.Call{Session: c.sess, Class: upstream.Write, Msg: m}, &sink)
	if !sink.done {
		// No reply reached the sink: the call failed, or it was sent with
		// nothing to pair a reply with (a ONEWAY-typed unknown method,
		// whose connection upstream closes). Either way the metastore may
		// have changed.
		c.invalidate(ents)
	}
	if k.Writes != nil && len(ents) > 0 {
		k.Writes.Wrote(meth.Name, ents, sink.ok)
		if ro, ok := k.Writes.(RequestObserver); ok {
			ro.WroteRequest(meth.Name, m.Body(), c.sess.User(), sink.ok)
		}
	}
	return err
}

type invalidatingSink struct {
	c    *clientConn
	ents []cache.Entity
	done bool
	ok   bool
}

func (s *invalidatingSink) Reply(m wire.Message) error {
	s.c.invalidate(s.ents)
	s.done = true
	s.ok = upstream.Succeeded(m)
	return s.c.Reply(m)
}

func (s *invalidatingSink) BorrowsReply() {}

// invalidate applies what a write (or a write lock's grant) of this
// connection's client changed, before the client sees its reply.
// Invalidating everything in the group goes through the client
// identity's flush budget: past it, the call
// waits for the next shared flush, which begins after the write was
// answered, so nothing cached before it is served afterwards either way.
func (c *clientConn) invalidate(ents []cache.Entity) {
	k := c.rt.cache
	if k.flushes == nil || !slices.ContainsFunc(ents, func(e cache.Entity) bool { return e.Level == cache.LevelAll }) {
		k.invalidate(c.s.ctx, ents)
		return
	}
	coalesced, err := k.flushes.Flush(c.s.ctx, c.flushID())
	if err != nil {
		// Shutdown gave up on the calls in flight; the flush is made
		// all the same, by the round's first caller.
		k.log.Debug("flush round not awaited", "err", err)
	}
	if k.flushHook != nil {
		k.flushHook(coalesced)
	}
}

// flushID is whose flush budget this connection's calls spend: the
// authenticated user, else the client's address (IP, not port: a client
// reconnecting is the same client). A set_ugi name is a claim anyone can
// make, so it never names a budget.
func (c *clientConn) flushID() string {
	if c.budgetID == "" {
		// Who the connection is charged to, as for its rate limits: the
		// identity it authenticated, else its source address, never a
		// set_ugi claim.
		if c.caller.User != "" {
			c.budgetID = "user:" + c.caller.User
		} else {
			c.budgetID = "addr:" + c.caller.Addr.String()
		}
	}
	return c.budgetID
}

func (k *cacher) invalidate(ctx context.Context, ents []cache.Entity) {
	if len(ents) == 0 {
		return
	}
	k.Store.Apply(k.Upstream, ents)
	if k.Coherence != nil {
		if err := k.Coherence.Publish(ctx, ents); err != nil {
			k.log.Warn("invalidation not published", "err", err)
		}
	}
}

// Refresh-ahead: a hit past its kind's refresh age is served at once and
// reloaded here, by a bounded set of workers, one upstream call per entry.
type refreshJob struct {
	sess  *upstream.Session
	meth  *hms.Method
	msg   []byte // the request, header and args, owned by the job
	key   []byte // the entry's key; for a batch, the key prefix of its entries
	names cache.Names

	// For the entries of a batch read: its shape, and the names of the
	// entries due (one table for a table-objects read).
	batch *hms.Batch
	due   []string
}

func (k *cacher) enqueueRefresh(sess *upstream.Session, meth *hms.Method, m wire.Message, key []byte, n *cache.Names) {
	k.enqueue(refreshJob{sess: sess, meth: meth, msg: append([]byte(nil), m.Buf...),
		key: append([]byte(nil), key...), names: *n})
}

// endRefresh lets the job's entries be refreshed again.
func (k *cacher) endRefresh(j *refreshJob) {
	if j.batch == nil || j.batch.Of == hms.BatchTables {
		k.Store.EndRefresh(j.key)
		return
	}
	for _, name := range j.due {
		k.Store.EndRefresh(append(j.key[:len(j.key):len(j.key)], name...))
	}
}

func (k *cacher) enqueue(j refreshJob) {
	k.queued.Add(1) // before the send: a worker may settle it at once
	select {
	case k.jobs <- j:
	default:
		k.queued.Add(-1)
		// Saturated: the entries stay until their TTL.
		k.endRefresh(&j)
		k.log.Debug("refresh queue full; skipped", "method", j.meth.Name)
	}
}

func (k *cacher) refreshLoop(up Forwarder, ctx context.Context) {
	defer k.wg.Done()
	var deps []cache.Dep
	for {
		select {
		case <-k.stop:
			return
		case j := <-k.jobs:
			deps = k.refresh(ctx, up, j, deps)
			k.settled.Add(1)
		}
	}
}

func (k *cacher) refresh(ctx context.Context, up Forwarder, j refreshJob, deps []cache.Dep) []cache.Dep {
	defer k.endRefresh(&j)
	deps, ok := k.Store.ReadDeps(deps[:0], k.scope(j.sess), j.meth, &j.names)
	if !ok {
		return deps
	}
	snap, ok := k.Store.Gens().Take(deps)
	if !ok {
		return deps
	}
	switch {
	case j.batch == nil:
	case j.batch.Of == hms.BatchTables:
		k.refreshTable(ctx, up, j, &snap)
		return deps
	default:
		k.refreshBatch(ctx, up, j, &snap)
		return deps
	}
	m, err := wire.Parse(j.msg, wire.Limits{MaxMessage: len(j.msg)})
	if err != nil {
		return deps
	}
	if _, err := k.load(ctx, up, j.sess, j.meth, m, j.key, &snap); err != nil {
		k.log.Debug("refresh failed", "method", j.meth.Name, "user", j.sess.User(), "err", err)
	}
	return deps
}

// ErrNoCache is returned by Flush on a server without a cache.
var ErrNoCache = errors.New("proxy: caching is off")

// Flush invalidates entities as a write would (admin flushes, and
// invalidations learnt from other proxies or the event log).
func (s *Server) Flush(ctx context.Context, ents []cache.Entity) error {
	if s.cache == nil {
		return ErrNoCache
	}
	s.cache.invalidate(ctx, ents)
	return nil
}

// ApplyRemote applies invalidations that another proxy node published;
// unlike Flush it does not publish them again.
func (s *Server) ApplyRemote(ents []cache.Entity) {
	if s.cache != nil {
		s.cache.Store.Apply(s.cache.Upstream, ents)
	}
}

// DropAll drops everything cached for the upstream: the node may have
// missed invalidations. Loads in flight are refused admission too.
func (s *Server) DropAll(reason string) {
	if s.cache == nil {
		return
	}
	s.cache.Store.Apply(s.cache.Upstream, []cache.Entity{{Level: cache.LevelAll}})
	s.cache.Store.Clear()
	s.log.Warn("cache dropped: invalidations may have been missed", "reason", reason)
}

// SettingsRead waits until the first check of each group's metastore
// settings ended (read or not), or ctx ends: until then prunes and other
// local answers are forwarded. For tests, and for a start-up that wants
// its first answers local.
func (s *Server) SettingsRead(ctx context.Context) error {
	for _, r := range s.routes {
		if r.cache == nil {
			continue
		}
		select {
		case <-r.cache.scoper.read:
		case <-ctx.Done():
			return fmt.Errorf("proxy: waiting for the metastore settings: %w", ctx.Err())
		}
	}
	return nil
}

// CacheScope is the cache's scope decision; false without caching.
func (s *Server) CacheScope() (ScopeStatus, bool) {
	if s.cache == nil {
		return ScopeStatus{}, false
	}
	return s.cache.scoper.status(), true
}

// ShadowStats are the server's shadow validation counts, nil without
// caching or with shadow validation off.
func (s *Server) ShadowStats() *ShadowStats {
	if s.cache == nil || s.cache.shadow == nil {
		return nil
	}
	return s.cache.shadow.stats
}

// CacheStore is the server's store, nil without caching.
func (s *Server) CacheStore() *cache.Store {
	if s.cache == nil {
		return nil
	}
	return s.cache.Store
}

// UpstreamName is the metastore group's name in keys and invalidations.
func (s *Server) UpstreamName() string {
	if s.cache == nil {
		return ""
	}
	return s.cache.Upstream
}
