// Package cache is the proxy's byte-budgeted store of metastore reply
// bytes: keys built from normalised requests, per-kind TTL, refresh-ahead
// and negative caching, and invalidation by entity generations.
//
// A read's key and names are built from what hms.Method.Resolve found in
// one walk of its args (ReadKey, EntryKeyPrefix, ReadNames): the cache
// normalises names (case, "@cat#db"), it does not decode requests.
package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
	"weak"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

// KindConfig is the policy of one cache kind.
type KindConfig struct {
	// TTL is how long an entry may be served; 0 disables the kind.
	TTL time.Duration
	// RefreshAfter: a hit on an entry older than this is served and
	// reloaded in the background. 0 disables refresh-ahead.
	RefreshAfter time.Duration
	// Negative admits declared not-found replies (NoSuchObjectException,
	// UnknownDBException, ...).
	Negative bool
}

// NumKinds bounds hms.Kind values.
const NumKinds = 16

// Config configures a Store.
type Config struct {
	// MaxBytes is the budget of all kinds together, entries' own overhead
	// included. Default 512 MiB.
	MaxBytes int64
	// Kinds is the policy per hms.Kind; a zero KindConfig leaves the kind
	// uncached. DefaultKinds gives the documented defaults.
	Kinds [NumKinds]KindConfig
	// GenerationBits sizes the invalidation counter array (2^bits counters
	// of 4 bytes). Default 18; at most 30 (more is taken as 30).
	GenerationBits uint
	// Now is the clock; a seam for tests. Default time.Now.
	Now func() time.Time
}

// DefaultKinds are the policies used when none are configured, close to
// Trino's hive.metastore-cache-ttl / refresh-interval practice: objects
// change rarely and every write through the proxy invalidates at once; the
// TTL bounds staleness for writes that bypass it.
func DefaultKinds() [NumKinds]KindConfig {
	var k [NumKinds]KindConfig
	obj := KindConfig{TTL: 10 * time.Minute, RefreshAfter: 5 * time.Minute, Negative: true}
	list := KindConfig{TTL: 5 * time.Minute, RefreshAfter: 2 * time.Minute}
	k[hms.KindDatabase] = obj
	k[hms.KindDatabaseNames] = list
	k[hms.KindTable] = obj
	k[hms.KindTableNames] = list
	k[hms.KindPartition] = KindConfig{TTL: 10 * time.Minute, RefreshAfter: 5 * time.Minute}
	k[hms.KindPartitions] = list
	k[hms.KindPartitionNames] = list
	k[hms.KindPartitionFilter] = list
	k[hms.KindStatistics] = list
	k[hms.KindFunction] = obj
	k[hms.KindConfig] = KindConfig{TTL: 10 * time.Minute}
	k[hms.KindConstraints] = obj
	return k
}

// Status is the outcome of a lookup.
type Status uint8

const (
	Miss Status = iota
	Hit
	// HitRefresh is a hit old enough to be reloaded in the background.
	HitRefresh
)

// Entry is one cached reply, viewed in place in a single allocation: a
// small header (load time, kind, flags, the generation snapshot) and then
// the reply body. The key is not kept: the store tells keys apart by two
// independent 64-bit hashes.
type Entry struct {
	b    []byte
	body int
	ss   *segSet // nil: the body is all in b
}

// segSet is the shared segments the body kept in an entry leaves out,
// and where in it each goes: pointers the collector must see, so they
// cannot live in the entry's bytes. p is the entry's first byte: a Ref
// to an entry with segments holds its set alone, weakly (see Ref).
type segSet struct {
	p    *byte
	segs [maxSegs]*segment
	at   [maxSegs]uint32
}

// record is what the store keeps of an entry: its first byte (see
// entryOf) and its segments.
type record struct {
	p  *byte
	ss *segSet
}

const (
	// hdrLen is a uint32 (native order, read and written atomically):
	// the entry's length, since the store keeps only a pointer to it,
	// and in goneBit whether it has left the store (see Ref).
	hdrLen    = 0
	hdrLoaded = 4 // uint32, seconds from the store's epoch to when its load began
	hdrKind   = 8 // the kind, with flagNeg set for a not-found answer
	hdrSnap   = 9
	flagNeg   = 0x80
	goneBit   = 1 << 31
)

// Body is the reply struct bytes (after the message header). An entry
// with shared segments is joined into a new slice: the hit path writes
// AppendPieces instead.
func (e Entry) Body() []byte {
	if e.ss == nil {
		return e.b[e.body:]
	}
	out := make([]byte, 0, e.Len())
	for _, p := range e.AppendPieces(make([][]byte, 0, 2*maxSegs+1)) {
		out = append(out, p...)
	}
	return out
}

// Len is the length of the body.
func (e Entry) Len() int {
	n := len(e.b) - e.body
	if e.ss != nil {
		for _, sg := range e.ss.segs {
			if sg != nil {
				n += len(sg.b)
			}
		}
	}
	return n
}

// AppendPieces appends the body to iov as the slices it is kept in, in
// order, without copying: for one writev (net.Buffers). The slices are
// the store's and never written; iov holding them keeps them alive, so
// clear it once written.
func (e Entry) AppendPieces(iov [][]byte) [][]byte {
	own := e.b[e.body:]
	if e.ss == nil {
		return append(iov, own)
	}
	from := 0
	for i, sg := range e.ss.segs {
		if sg == nil {
			break
		}
		if at := int(e.ss.at[i]); at > from {
			iov = append(iov, own[from:at])
			from = at
		}
		iov = append(iov, sg.b)
	}
	if from < len(own) || len(iov) == 0 {
		iov = append(iov, own[from:])
	}
	return iov
}

func (e Entry) kind() hms.Kind { return hms.Kind(e.b[hdrKind] &^ flagNeg) }

// Store holds reply bytes under one byte budget.
type Store struct {
	rc    *ristretto.Cache[[]byte, record]
	segs  *segTable
	max   int64 // the budget: ristretto's MaxCost less the segments' bytes
	gens  *Generations
	kinds [NumKinds]KindConfig
	now   func() time.Time
	epoch time.Time // entries keep their load time as seconds from here
	stats [NumKinds]KindStats
	// ttlCap, when positive, bounds every kind's TTL (and refresh age)
	// at lookup: entries cached before it was set age out by it too.
	// scopeCap does the same while entries are keyed by identity, and
	// kindCaps each kind's own (see their setters).
	ttlCap   atomic.Int64
	scopeCap atomic.Int64
	kindCaps [NumKinds]atomic.Int64

	// reserved is what Reserve charged to the budget beyond entries and
	// segments.
	reserved atomic.Int64
	// exits counts entries leaving the store (and Clears): unchanged,
	// every entry found stored before is stored still (Settled).
	exits atomic.Uint64
	// groupExits count the entries with segments leaving the store by
	// their table group (hashed into exitShards), and clears the Clears:
	// a table's Epoch is not ended by other tables' entries leaving.
	groupExits [exitShards]atomic.Uint64
	clears     atomic.Uint64

	refreshMu  sync.Mutex          // guards refreshing
	refreshing map[uint64]struct{} // key hashes with a refresh in flight

	clearMu sync.Mutex // serialises Clear and Close: ristretto's stop their worker

	// setHook, if set, stands in for ristretto's Set: a seam for tests
	// only, to drop a Set as ristretto does under contention.
	setHook func(key []byte, r record, cost int64) bool
	// getHook, if set, is told of each key GetAt asks ristretto for: a
	// seam for tests only, showing the accesses ristretto's admission
	// and eviction policy sees.
	getHook func(key []byte)
}

// KindStats are counters of one kind.
type KindStats struct {
	Hits, Misses, Stale, Admitted, Rejected, Evicted, Invalidated atomic.Uint64
	Bytes, Entries                                                atomic.Int64
}

// ErrBadConfig is returned for an unusable Config.
var ErrBadConfig = errors.New("cache: bad config")

// New builds a Store.
func New(cfg Config) (*Store, error) {
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 512 << 20
	}
	if cfg.MaxBytes < 1<<20 {
		return nil, fmt.Errorf("%w: max bytes %d is below 1 MiB", ErrBadConfig, cfg.MaxBytes)
	}
	if cfg.GenerationBits == 0 {
		cfg.GenerationBits = 18
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Store{gens: NewGenerations(cfg.GenerationBits), kinds: cfg.Kinds, now: cfg.Now, epoch: cfg.Now(),
		refreshing: map[uint64]struct{}{}, max: cfg.MaxBytes}
	// Segments may take half the budget: the entries using them need
	// room too.
	s.segs = newSegTable(cfg.MaxBytes/2, func(b int64) { s.rc.UpdateMaxCost(s.max - b - s.reserved.Load()) })
	rc, err := ristretto.NewCache(&ristretto.Config[[]byte, record]{
		// Ten counters per entry that fits, at an assumed 1 KiB minimum.
		NumCounters: max(cfg.MaxBytes/100, 10_000),
		MaxCost:     cfg.MaxBytes,
		BufferItems: 64,
		OnEvict: func(it *ristretto.Item[record]) {
			if v := entryOf(it.Value.p); v != nil {
				s.stats[v[hdrKind]&^flagNeg].Evicted.Add(1)
			}
		},
		OnReject: func(it *ristretto.Item[record]) {
			if v := entryOf(it.Value.p); v != nil {
				s.stats[v[hdrKind]&^flagNeg].Rejected.Add(1)
			}
		},
		// Every way out of the store (eviction, rejection, delete,
		// replacement) passes here, once for each value a Set took, so
		// the byte gauge follows the store and the last entry using a
		// segment gives its bytes back.
		OnExit: func(r record) {
			if v := entryOf(r.p); v != nil {
				st := &s.stats[v[hdrKind]&^flagNeg]
				st.Bytes.Add(-int64(len(v)))
				st.Entries.Add(-1)
			}
			markGone(r.p)
			s.exited(&r)
			s.release(&r)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	s.rc = rc
	return s, nil
}

// Close releases the store's goroutines. Safe to call twice.
func (s *Store) Close() {
	s.clearMu.Lock()
	defer s.clearMu.Unlock()
	if s.rc != nil {
		s.rc.Close()
	}
}

// Wait blocks until pending admissions are applied (for tests and the
// bench; the request path never waits).
func (s *Store) Wait() { s.rc.Wait() }

// Gens is the store's invalidation counters.
func (s *Store) Gens() *Generations { return s.gens }

// Policy is the configuration of kind k.
func (s *Store) Policy(k hms.Kind) KindConfig {
	if int(k) >= NumKinds {
		return KindConfig{}
	}
	return s.kinds[k]
}

// SetTTLCap bounds the TTL of every kind by d, for entries already cached
// too, until called again; d <= 0 lifts the bound. The event-log health
// check sets it when writes that bypass the proxy cannot be seen.
func (s *Store) SetTTLCap(d time.Duration) { s.ttlCap.Store(int64(max(d, 0))) }

// TTLCap is the bound set by SetTTLCap; 0 when none.
func (s *Store) TTLCap() time.Duration { return time.Duration(s.ttlCap.Load()) }

// SetScopeTTLCap bounds the TTL of every kind by d while called with a
// positive d; d <= 0 lifts it. The cache sets it while entries are keyed
// by identity: grants and revokes made straight to the metastore, and
// the policy changes of an external authoriser, leave no event, so an
// identity's entries are bounded by cache.user_scope_ttl.
func (s *Store) SetScopeTTLCap(d time.Duration) { s.scopeCap.Store(int64(max(d, 0))) }

// CapKindTTL bounds kind k's TTL by d, for entries already cached too.
// A cap only ever comes down: several groups with one store ask, and
// the shortest holds. d <= 0 is ignored. The cache sets it for the kinds
// that writes the metastore's notification log does not record change.
func (s *Store) CapKindTTL(k hms.Kind, d time.Duration) {
	if d <= 0 || int(k) >= NumKinds {
		return
	}
	c := &s.kindCaps[k]
	for {
		old := c.Load()
		if old > 0 && old <= int64(d) || c.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// KindTTLCap is kind k's bound set by CapKindTTL; 0 when none.
func (s *Store) KindTTLCap(k hms.Kind) time.Duration { return time.Duration(s.kindCaps[k].Load()) }

// policy is kind k's policy under the TTL caps: a capped kind refreshes
// at half its capped TTL at the latest.
func (s *Store) policy(k hms.Kind) KindConfig {
	pol := s.kinds[k]
	for _, c := range [...]time.Duration{time.Duration(s.ttlCap.Load()), time.Duration(s.scopeCap.Load()), time.Duration(s.kindCaps[k].Load())} {
		if c > 0 && pol.TTL > c {
			pol.TTL = c
			if pol.RefreshAfter > 0 {
				pol.RefreshAfter = min(pol.RefreshAfter, c/2)
			}
		}
	}
	return pol
}

// Stats are the counters of kind k.
func (s *Store) Stats(k hms.Kind) *KindStats { return &s.stats[k] }

// Get looks up key. A hit is current: no dependency was invalidated since
// its load began and it is within its kind's TTL.
func (s *Store) Get(key []byte, kind hms.Kind) (Entry, Status) {
	return s.GetAt(key, kind, s.now())
}

// GetAt is Get with the clock read once by the caller (Now): a batch of
// lookups reads it once, not once per entry. An entry's age is taken at
// now, so now must not be older than the lookup's request.
func (s *Store) GetAt(key []byte, kind hms.Kind, now time.Time) (Entry, Status) {
	st := &s.stats[kind]
	if s.getHook != nil {
		s.getHook(key)
	}
	r, ok := s.rc.Get(key)
	v := entryOf(r.p)
	if !ok || v == nil || hms.Kind(v[hdrKind]&^flagNeg) != kind {
		st.Misses.Add(1)
		return Entry{}, Miss
	}
	pol := s.policy(kind)
	// The load time was rounded down, so the age errs on the old side.
	age := now.Sub(s.epoch) - time.Duration(binary.LittleEndian.Uint32(v[hdrLoaded:]))*time.Second
	current, size := s.gens.currentEncoded(v[hdrSnap:])
	if !current || age >= pol.TTL {
		st.Stale.Add(1)
		st.Misses.Add(1)
		s.rc.Del(key)
		return Entry{}, Miss
	}
	st.Hits.Add(1)
	e := Entry{b: v, body: hdrSnap + size, ss: r.ss}
	if pol.RefreshAfter > 0 && age >= pol.RefreshAfter {
		return e, HitRefresh
	}
	return e, Hit
}

// Put admits a reply body loaded under snap, unless a dependency was
// invalidated since the load began: such a reply may already be stale
// (promise 3). It reports whether the entry was offered to the store.
func (s *Store) Put(key []byte, kind hms.Kind, body []byte, snap *Snapshot, started time.Time, negative bool) bool {
	return s.put(key, kind, body, nil, nil, snap, started, negative)
}

// PutShared is Put for a body whose runs (in order, as hms.SharedRuns
// gives them) are likely the same bytes in other entries of group: the
// partitions of one table, named by TableGroup. Each run is kept once
// per group, in a segment the entries holding the same bytes share, and
// counted in the budget once. Runs too short, or past the segments'
// share of the budget (half), stay in the entry. Get and AppendPieces
// give the body back byte for byte.
func (s *Store) PutShared(key []byte, kind hms.Kind, group []byte, body []byte, runs []hms.Run, snap *Snapshot, started time.Time) bool {
	return s.put(key, kind, body, group, runs, snap, started, false)
}

func (s *Store) put(key []byte, kind hms.Kind, body, group []byte, runs []hms.Run, snap *Snapshot, started time.Time, negative bool) bool {
	pol := s.Policy(kind)
	if pol.TTL <= 0 || (negative && !pol.Negative) || len(body) >= goneBit/2 {
		return false // the last: its length would not fit the length word
	}
	if !s.gens.Current(snap) {
		s.stats[kind].Invalidated.Add(1)
		return false
	}
	if s.now().Sub(started) >= s.policy(kind).TTL {
		return false
	}
	var r record
	var ss segSet
	own := len(body)
	if len(runs) > 0 && validRuns(runs, len(body)) {
		g := maphash.Bytes(s.segs.seed, group)
		for _, run := range runs {
			if sg := s.segs.intern(g, body[run.Start:run.End]); sg != nil {
				i := 0
				for ss.segs[i] != nil {
					i++
				}
				ss.segs[i], ss.at[i] = sg, uint32(run.Start)
				own -= len(sg.b)
			}
		}
	}
	// At least 16 bytes: never a tiny allocation, so the length word is
	// aligned for atomic access.
	v := make([]byte, 0, max(hdrSnap+snapshotSize(int(snap.n))+own, 16))
	v = append(v, 0, 0, 0, 0) // the length word: stored below
	v = binary.LittleEndian.AppendUint32(v, uint32(max(s.seconds(started), 0)))
	k := byte(kind)
	if negative {
		k |= flagNeg
	}
	v = append(v, k)
	v = appendSnapshot(v, snap)
	// The body less its segments; each segment's place becomes its
	// offset in what is kept.
	body0, from := len(v), 0
	for i, sg := range ss.segs {
		if sg == nil {
			break
		}
		start := int(ss.at[i])
		v = append(v, body[from:start]...)
		ss.at[i] = uint32(len(v) - body0)
		from = start + len(sg.b)
	}
	v = append(v, body[from:]...)
	if ss.segs[0] != nil {
		kept := ss // only entries with segments allocate a set
		kept.p = &v[0]
		r.ss = &kept
	}
	lenWord(&v[0]).Store(uint32(len(v)))
	r.p = &v[0]
	st := &s.stats[kind]
	st.Bytes.Add(int64(len(v)))
	st.Entries.Add(1)
	set := s.rc.Set
	if s.setHook != nil {
		set = s.setHook
	}
	if !set(key, r, int64(len(v))+entryOverhead) {
		// Dropped under contention, never stored: ristretto will not call
		// OnExit for it.
		st.Bytes.Add(-int64(len(v)))
		st.Entries.Add(-1)
		st.Rejected.Add(1)
		markGone(r.p)
		s.exited(&r)
		s.release(&r)
		return false
	}
	st.Admitted.Add(1)
	return true
}

// StartRefresh reports whether the caller should refresh the entry under
// key: true for one caller at a time until EndRefresh.
func (s *Store) StartRefresh(key []byte) bool {
	h := maphash.Bytes(s.gens.seed, key)
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	if _, busy := s.refreshing[h]; busy {
		return false
	}
	s.refreshing[h] = struct{}{}
	return true
}

// EndRefresh allows another refresh of key.
func (s *Store) EndRefresh(key []byte) {
	h := maphash.Bytes(s.gens.seed, key)
	s.refreshMu.Lock()
	delete(s.refreshing, h)
	s.refreshMu.Unlock()
}

// Delete drops the entry under key, if any: one that shadow validation
// found to differ from the metastore.
func (s *Store) Delete(key []byte) { s.rc.Del(key) }

// Clear drops every entry. Generations are left alone: callers bump the
// counters they mean to invalidate, which also stops loads in flight.
func (s *Store) Clear() {
	s.clearMu.Lock()
	defer s.clearMu.Unlock()
	s.rc.Clear()
	s.clears.Add(1)
	s.exits.Add(1)
}

// exitShards is how many counters the table groups' exits hash into:
// two tables sharing one only end each other's Epochs more often.
const exitShards = 1024

// exited counts the exit of r's entry.
func (s *Store) exited(r *record) {
	if r.ss != nil && r.ss.segs[0] != nil {
		s.groupExits[r.ss.segs[0].key.group%exitShards].Add(1)
	}
	s.exits.Add(1)
}

// entryOf turns the pointer the store keeps back into the entry. A
// pointer instead of a slice header saves 16 bytes in each of ristretto's
// item records; the entry's first 4 bytes hold its length, and the
// pointer to its first byte keeps the whole allocation alive.
func entryOf(p *byte) []byte {
	if p == nil {
		return nil
	}
	n := lenWord(p).Load() &^ goneBit
	if n < hdrSnap+1 {
		return nil
	}
	return unsafe.Slice(p, n)
}

// lenWord is the length word of the entry starting at p.
func lenWord(p *byte) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(p)) }

// markGone records that the entry at p (if any) has left the store:
// evicted, replaced, deleted, cleared or never admitted. A Ref to it
// then finds nothing.
func markGone(p *byte) {
	if p != nil {
		lenWord(p).Or(goneBit)
	}
}

// Ref is a weak reference to an entry a Get returned, for a caller that
// looks the same entries up again and again (the partitions a prune
// serves, held by the table's name index): Again gives the entry back
// without building its key or searching the store for it. A Ref does not
// keep the entry alive, nor its shared segments: held outside the
// budget, it holds no bytes the budget no longer counts.
type Ref struct {
	// One of the two: the entry's segment set when it has one (which
	// leads to the entry, and lives as long as the entry is stored), else
	// the entry itself. One weak pointer per Ref: each costs the runtime
	// a handle and a record per object it points at.
	p  weak.Pointer[byte]
	ss weak.Pointer[segSet]
	// n counts the Agains through the Ref: every againLookup-th is a
	// Miss (see Again).
	n atomic.Uint32
	// checked is one more than the store's count of generation bumps
	// read before Again last found the entry's generations current:
	// while no bump came since, they still are, and Again skips
	// reading them (scattered counters, a cache miss each).
	checked atomic.Uint64
}

// againLookup: one Again in this many through a Ref answers Miss, so
// that the caller's lookup of the key tells ristretto's admission and
// eviction policy (TinyLFU, which counts Gets) the entry is in use.
// Entries served only by Again would otherwise look as cold as entries
// never read again and be evicted first under budget pressure. 16 keeps
// a hot entry's counted accesses well above a cold one's at a sixteenth
// of the cost of a lookup per Again.
const againLookup = 16

// Ref returns a weak reference to e; nil for the zero Entry.
func (e Entry) Ref() *Ref {
	if len(e.b) == 0 {
		return nil
	}
	if e.ss != nil {
		return &Ref{ss: weak.Make(e.ss)}
	}
	return &Ref{p: weak.Make(&e.b[0])}
}

// entry returns the first byte of the entry r refers to and its segment
// set; nil once the collector took it.
func (r *Ref) entry() (*byte, *segSet) {
	if r.ss != (weak.Pointer[segSet]{}) {
		ss := r.ss.Value()
		if ss == nil {
			return nil, nil
		}
		return ss.p, ss
	}
	return r.p.Value(), nil
}

// RefAgain is r when r refers to e, else e.Ref(): a caller that looked
// up the key of a Ref that Again missed keeps the Ref it has when the
// lookup found the same entry.
func (e Entry) RefAgain(r *Ref) *Ref {
	if r != nil && len(e.b) > 0 {
		if p, _ := r.entry(); p == &e.b[0] {
			return r
		}
	}
	return e.Ref()
}

// Again returns the entry r refers to, as GetAt would, when a GetAt of
// its key would return that very entry at now: it is still in the store
// (not evicted, replaced, deleted, cleared: each of those marks it gone
// before the call that removed it returns), no dependency of it was
// invalidated, and it is within its kind's TTL. Otherwise Miss, and the
// caller looks its key up. Every againLookup-th call through r is a Miss
// too, whatever the entry: the caller's lookup then counts as an access
// of the entry for the store's eviction policy, which Again bypasses.
func (s *Store) Again(r *Ref, kind hms.Kind, now time.Time) (Entry, Status) {
	if r == nil {
		return Entry{}, Miss
	}
	p, ss := r.entry()
	if p == nil {
		return Entry{}, Miss
	}
	w := lenWord(p).Load()
	if w&goneBit != 0 || w < hdrSnap+1 {
		return Entry{}, Miss
	}
	v := unsafe.Slice(p, w)
	if hms.Kind(v[hdrKind]&^flagNeg) != kind {
		return Entry{}, Miss
	}
	pol := s.policy(kind)
	age := now.Sub(s.epoch) - time.Duration(binary.LittleEndian.Uint32(v[hdrLoaded:]))*time.Second
	if age >= pol.TTL {
		return Entry{}, Miss
	}
	size := snapshotSize(int(v[hdrSnap]))
	// A bump increments its counter before the count, so a count read
	// before the check that has not moved since vouches for it.
	if b := s.gens.bumps.Load(); r.checked.Load() != b+1 {
		current, _ := s.gens.currentEncoded(v[hdrSnap:])
		if !current {
			return Entry{}, Miss
		}
		r.checked.Store(b + 1)
	}
	if r.n.Add(1)%againLookup == 0 {
		return Entry{}, Miss
	}
	s.stats[kind].Hits.Add(1)
	e := Entry{b: v, body: hdrSnap + size, ss: ss}
	if pol.RefreshAfter > 0 && age >= pol.RefreshAfter {
		return e, HitRefresh
	}
	return e, Hit
}

// Epoch is a reading of what can make stored entries stop being hits
// before their age does: entries leaving the store, and generations
// being bumped. A caller that found many entries current together (the
// partitions of a batch read answered before) asks Settled whether they
// still are, instead of checking each one again.
//
// A store's Epoch counts every exit and every bump; a table's (TableEpoch)
// only its own: the exits of entries sharing its segments, and the
// counters of the dependencies a read of it takes, so the churn of other
// tables (evictions, refreshes, writes) does not end it. Entries it does
// not cover (Covers) need the store's.
type Epoch struct {
	exits, bumps uint64 // the store's
	table        bool
	slot         uint32   // a table's: its group's exit counter
	slotExits    uint64   // and its reading
	clears       uint64   // the store's Clears
	group        uint64   // the table group's hash, as its segments have it
	snap         Snapshot // the dependencies its entries depend within
}

// Epoch reads the store's epoch: take it before the lookups it is to
// vouch for.
func (s *Store) Epoch() Epoch { return Epoch{exits: s.exits.Load(), bumps: s.gens.bumps.Load()} }

// TableEpoch reads the epoch of the entries that share segments in group
// (TableGroup) and depend on nothing but snap's dependencies (a read's,
// taken before it looked up the entries: Existing for partitions).
func (s *Store) TableEpoch(group []byte, snap *Snapshot) Epoch {
	g := maphash.Bytes(s.segs.seed, group)
	e := Epoch{table: true, slot: uint32(g % exitShards), group: g, snap: *snap}
	e.clears = s.clears.Load()
	e.slotExits = s.groupExits[e.slot].Load()
	return e
}

// Covers reports whether e vouches for en (found current after e was
// read): a store's epoch covers every entry; a table's those with the
// table's segments and none but its dependencies.
func (s *Store) Covers(e *Epoch, en Entry) bool {
	if !e.table {
		return true
	}
	if en.ss == nil || en.ss.segs[0] == nil || en.ss.segs[0].key.group != e.group {
		return false
	}
	b := en.b[hdrSnap:]
	for i := 0; i < int(b[0]); i++ {
		d := Dep(binary.LittleEndian.Uint32(b[1+8*i:])) & depIndex
		found := false
		for j := uint8(0); j < e.snap.n; j++ {
			found = found || e.snap.deps[j]&depIndex == d
		}
		if !found {
			return false
		}
	}
	return true
}

// Settled reports whether entries of kind that were all hits (not due
// for a refresh) in lookups made after e was read, each covered by it
// (Covers), the oldest of them loaded at oldest (Entry.Loaded), are all
// hits at now still: none has left the store and none of their
// generations was bumped since e, and the oldest is younger than its
// kind's refresh age and TTL. Then Held gives each back as GetAt would.
// false: look at each (Again, GetAt).
func (s *Store) Settled(e *Epoch, kind hms.Kind, oldest uint32, now time.Time) bool {
	if e.table {
		if s.clears.Load() != e.clears || s.groupExits[e.slot].Load() != e.slotExits || !s.gens.Current(&e.snap) {
			return false
		}
	} else if s.exits.Load() != e.exits || s.gens.bumps.Load() != e.bumps {
		return false
	}
	pol := s.policy(kind)
	age := now.Sub(s.epoch) - time.Duration(oldest)*time.Second
	return age < pol.TTL && (pol.RefreshAfter <= 0 || age < pol.RefreshAfter)
}

// Held returns the entry r refers to while it is in the store, without
// Again's checks of its generations and age, and counts no hit: only for
// a caller whose Settled just vouched for it, which counts the hits
// itself (CountHits).
func (s *Store) Held(r *Ref) (Entry, bool) {
	if r == nil {
		return Entry{}, false
	}
	p, ss := r.entry()
	if p == nil {
		return Entry{}, false
	}
	w := lenWord(p).Load()
	if w&goneBit != 0 || w < hdrSnap+1 {
		return Entry{}, false
	}
	v := unsafe.Slice(p, w)
	return Entry{b: v, body: hdrSnap + snapshotSize(int(v[hdrSnap])), ss: ss}, true
}

// CountHits counts n hits of kind served through Held.
func (s *Store) CountHits(kind hms.Kind, n int) { s.stats[kind].Hits.Add(uint64(n)) }

// Loaded is when the entry's load began, in the store's seconds: for
// Settled.
func (e Entry) Loaded() uint32 { return binary.LittleEndian.Uint32(e.b[hdrLoaded:]) }

// seconds is t as whole seconds from the store's epoch: entries keep
// their age to the second, 4 bytes each (an entry may live 136 years).
func (s *Store) seconds(t time.Time) int64 { return int64(t.Sub(s.epoch) / time.Second) }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }

// entryOverhead is what an entry costs beyond its bytes in the store's own
// maps (its segment set included: 32 bytes); ristretto adds the size of
// its item record on top.
const entryOverhead = 72

// release gives back r's hold on its segments.
func (s *Store) release(r *record) {
	if r.ss == nil {
		return
	}
	for _, sg := range r.ss.segs {
		if sg != nil {
			s.segs.release(sg)
		}
	}
}

// validRuns reports whether runs are in order, apart, and within a body
// of n bytes, at most maxSegs of them.
func validRuns(runs []hms.Run, n int) bool {
	if len(runs) > maxSegs {
		return false
	}
	end := 0
	for _, r := range runs {
		if r.Start < end || r.End < r.Start || r.End > n {
			return false
		}
		end = r.End
	}
	return true
}

// TableGroup appends the group that the entries of the partitions of
// table cat.db.tbl, read from upstream, share segments in (PutShared).
func TableGroup(dst []byte, upstream, cat, db, tbl string) []byte {
	for _, s := range [...]string{upstream, cat, db, tbl} {
		dst = append(dst, s...)
		dst = append(dst, 0)
	}
	return dst
}

// Segments are the count and cost (bytes and records) of the segments
// entries share, all charged to the budget.
func (s *Store) Segments() (n, bytes int64) { return s.segs.count.Load(), s.segs.bytes.Load() }

// Cost is the part of the byte budget in use: what the store charges its
// entries, ristretto's own record of each included.
func (s *Store) Cost() int64 {
	return s.rc.MaxCost() - s.rc.RemainingCost() + s.segs.bytes.Load() + s.reserved.Load()
}

// maxReservedShare: Reserve takes at most this share of the budget, so
// entries always keep most of it.
const maxReservedShare = 8

// Reserve charges n bytes the caller keeps outside the store (a reply
// assembled from entries, kept ready to write) to the budget, which
// evicts entries to make room for them. It refuses (false) what would
// take the reservations past an eighth of the budget. The caller gives
// the bytes back with Unreserve once it drops them.
func (s *Store) Reserve(n int64) bool {
	if n <= 0 {
		return n == 0
	}
	if s.reserved.Add(n) > s.max/maxReservedShare {
		s.reserved.Add(-n)
		return false
	}
	s.segs.recharge()
	return true
}

// Unreserve gives back n bytes of a Reserve.
func (s *Store) Unreserve(n int64) {
	if n > 0 {
		s.reserved.Add(-n)
		s.segs.recharge()
	}
}

// Reserved is what Reserve holds charged now.
func (s *Store) Reserved() int64 { return s.reserved.Load() }
