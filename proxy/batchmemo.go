package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Batch memos make a repeated by-names hit cost a lookup and a write. A
// planner asks for the same partitions of a table again and again; the
// first time every one is a hit, the request's entries are remembered,
// in the request's (sorted) order, as weak references (cache.Ref). The
// next identical request finds them with one lookup, and each entry is
// taken back with cache.Store.Again, which checks what a lookup would
// (still stored, no dependency invalidated, within its TTL) without
// building its key or searching the store: tens of nanoseconds a
// partition instead of a microsecond. An entry Again does not give back
// is looked up as before, and its reference replaced. So the memo is
// never the source of truth: it only says where the entries were.
//
// Memos live outside the cache's byte budget, like the prune's name
// indexes: they hold no reply bytes (a Ref keeps nothing alive), and are
// bounded on their own, in count and in references, evicting arbitrary
// ones. A request is memoised only once it was answered wholly from the
// cache, so one-off reads and fills (the memory a partition costs) make
// none.

// batchMemo is the entries one by-names request was answered from.
type batchMemo struct {
	// The request it answered: its entry key prefix and the wire bytes of
	// its name list as sent, compared whole, so a memo never answers
	// another request.
	base, list []byte
	// at is where each of the request's names, sorted and distinct, sits
	// in list (its length prefix): a request the memo answers is not
	// sorted again.
	at   []uint32
	refs []atomic.Pointer[cache.Ref] // by the names in that order
	// settled, when set, vouches for every ref: all were hits (none due
	// for a refresh) in lookups made after its epoch, the oldest loaded
	// at its oldest (cache.Store.Settled).
	settled atomic.Pointer[memoSettled]
	// uses counts the requests it answered: every memoLookup-th looks
	// each entry up in the store, so the store's eviction policy sees
	// them used (as cache.Store.Again does for one Ref).
	uses atomic.Uint32
	// dropped: no longer in the memos' map. A flat copy settled into it
	// afterwards is given back at once (settleFlat).
	dropped atomic.Bool
}

// memoSettled is a memo's entries found current together.
type memoSettled struct {
	epoch  cache.Epoch
	oldest uint32
	// flat, when set, is the entries' bytes joined in order: the reply's
	// list items ready to write as one piece. The ready copy is what
	// makes a large hit cost what the echo of its bytes costs: writing
	// a thousand entries' pieces scattered over the heap costs twice
	// that. Its length is charged to the store's budget (Reserve) for
	// as long as it is the memo's; it is written only while the store
	// vouches for the entries it was joined from (Settled), so it is
	// byte for byte what they are.
	flat []byte
}

// settle makes st (nil: none) the memo's settled state, and gives back
// the budget of a flat copy it replaces.
func (m *batchMemo) settle(st *memoSettled, store *cache.Store) {
	if old := m.settled.Swap(st); old != nil && old != st && old.flat != nil {
		store.Unreserve(int64(len(old.flat)))
	}
}

// settleFlat joins the bytes of parts, which st vouched for, into a flat
// copy and makes it the memo's, unless the budget refuses it or another
// request changed the memo's state meanwhile.
func (m *batchMemo) settleFlat(st *memoSettled, parts []namedPart, store *cache.Store, iov [][]byte) [][]byte {
	n := 0
	for i := range parts {
		n += parts[i].hit.Len()
	}
	if !store.Reserve(int64(n)) {
		return iov
	}
	flat := make([]byte, 0, n)
	for i := range parts {
		iov = parts[i].hit.AppendPieces(iov[:0])
		for _, p := range iov {
			flat = append(flat, p...)
		}
	}
	clear(iov)
	nst := &memoSettled{epoch: st.epoch, oldest: st.oldest, flat: flat}
	if !m.settled.CompareAndSwap(st, nst) {
		store.Unreserve(int64(n))
		return iov
	}
	if m.dropped.Load() {
		m.settle(nil, store) // dropped meanwhile: nobody else gives it back
	}
	return iov
}

// names appends the request's names, sorted and distinct, to dst: views
// of list, the request's own name list (equal to m.list).
func (m *batchMemo) names(dst [][]byte, list []byte) [][]byte {
	for _, at := range m.at {
		n := binary.BigEndian.Uint32(list[at:])
		dst = append(dst, list[at+4:at+4+n:at+4+n])
	}
	return dst
}

// batchMemos are the memos of the requests answered wholly from the
// cache lately, by a hash of their entry key prefix and name list.
type batchMemos struct {
	store *cache.Store // charged for the memos' flat copies
	seed  maphash.Seed
	mu    sync.Mutex // guards m and refs
	m     map[uint64]*batchMemo
	refs  int // references (and names) held by the memos in m
}

// Bounds of the memos: 2^18 references (some 100 bytes each with the
// runtime's weak handle and the name they are kept under: about 25 MiB),
// in at most 4096 memos, and none for a request of more names than a
// tenth of that.
const (
	maxMemoRefs  = 1 << 18
	maxMemos     = 4096
	maxMemoNames = maxMemoRefs / 10
	// minMemoNames: a request of fewer names costs little to look up.
	minMemoNames = 8
	// memoLookup: one use of a memo in this many looks each entry up,
	// as one Again in eight does (cache's againLookup): entries served
	// only from memos would otherwise look unused to the store's
	// eviction policy (TinyLFU counts lookups) and be evicted first.
	memoLookup = 8
)

func newBatchMemos(store *cache.Store) *batchMemos {
	return &batchMemos{store: store, seed: maphash.MakeSeed(), m: map[uint64]*batchMemo{}}
}

// key is the memo key of the name list list (wire bytes) under base.
func (x *batchMemos) key(base, list []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(x.seed)
	h.Write(base)
	h.Write(list)
	return h.Sum64()
}

// get returns the memo of list under base (hashed as k), nil when there
// is none.
func (x *batchMemos) get(k uint64, base, list []byte) *batchMemo {
	x.mu.Lock()
	m := x.m[k]
	x.mu.Unlock()
	if m == nil || !bytes.Equal(m.list, list) || !bytes.Equal(m.base, base) {
		return nil
	}
	return m
}

// put remembers the entries of parts (one hit per distinct name, in
// order, each name a view of list) as the answer to list under base
// (hashed as k).
func (x *batchMemos) put(k uint64, base, list []byte, parts []namedPart, settled *memoSettled) {
	if len(parts) < minMemoNames || len(parts) > maxMemoNames {
		return
	}
	m := &batchMemo{base: bytes.Clone(base), list: bytes.Clone(list), at: make([]uint32, len(parts)),
		refs: make([]atomic.Pointer[cache.Ref], len(parts))}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(list)))
	for i := range parts {
		at := uintptr(unsafe.Pointer(unsafe.SliceData(parts[i].name))) - 4 - start
		if at >= uintptr(len(list)) {
			return // not a view of list: no memo
		}
		m.at[i] = uint32(at)
		m.refs[i].Store(parts[i].hit.Ref())
	}
	m.settled.Store(settled)
	x.mu.Lock()
	defer x.mu.Unlock()
	if old := x.m[k]; old != nil {
		x.drop(k, old)
	}
	for key, old := range x.m { // arbitrary ones
		if len(x.m) < maxMemos && x.refs+len(m.refs) <= maxMemoRefs {
			break
		}
		x.drop(key, old)
	}
	x.m[k] = m
	x.refs += len(m.refs)
}

// drop forgets the memo m under k and gives back its flat copy's
// budget. x.mu is held.
func (x *batchMemos) drop(k uint64, m *batchMemo) {
	x.refs -= len(m.refs)
	delete(x.m, k)
	m.dropped.Store(true)
	m.settle(nil, x.store)
}

// listBytes is the wire bytes of a request's list of names, which alias
// body element after element (hms.Resolved.List): from the first one's
// length prefix to the last one's end. nil when they do not lie so.
func listBytes(body []byte, names [][]byte) []byte {
	if len(names) == 0 || len(names[0]) == 0 {
		return nil
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(body)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(names[0]))) - 4
	if at < start || at >= start+uintptr(len(body)) {
		return nil
	}
	from := int(at - start)
	pos := from
	for _, name := range names {
		pos += 4
		if len(name) == 0 || pos+len(name) > len(body) || unsafe.SliceData(name) != &body[pos] {
			return nil
		}
		pos += len(name)
	}
	return body[from:pos]
}

// batchNames returns the names of a by-names request (list, as
// resolved from body) sorted and distinct, and the memo of the request
// with its key and name list bytes when it may have one (list nil: it
// may not). A request a memo answers is not sorted again: its names are
// taken in the memo's order, as views of the request (in c.want).
func (c *clientConn) batchNames(base, body []byte, names [][]byte) (want [][]byte, memo *batchMemo, key uint64, list []byte) {
	k := c.rt.cache
	if len(names) >= minMemoNames && len(names) <= maxMemoNames {
		list = listBytes(body, names)
	}
	if list != nil {
		key = k.memos.key(base, list)
		if memo = k.memos.get(key, base, list); memo != nil {
			c.want = memo.names(c.want[:0], list)
			return c.want, memo, key, list
		}
	}
	if !sortedDistinct(names) {
		slices.SortFunc(names, bytes.Compare)
		names = slices.CompactFunc(names, bytes.Equal)
	}
	return names, nil, key, list
}

// flatHit answers a by-names request from its memo's flat copy, when the
// memo has one and the store vouches for the entries it was joined from.
// false: the request goes on per entry.
func (c *clientConn) flatHit(meth *hms.Method, m wire.Message, base []byte, memo *batchMemo, want [][]byte, snap cache.Snapshot, started time.Time) (bool, error) {
	k := c.rt.cache
	st := memo.settled.Load()
	if st == nil || st.flat == nil || !k.Store.Settled(&st.epoch, meth.Kind, st.oldest, started) {
		return false, nil
	}
	n := len(memo.refs)
	k.Store.CountHits(meth.Kind, n)
	if k.shadow.sample() && k.shadow.admit(meth.Kind) {
		i := rand.IntN(n)
		if e, ok := k.Store.Held(memo.refs[i].Load()); ok {
			c.shadowOnePart(meth, m, base, []namedPart{{name: want[i], hit: e}}, snap)
		}
	}
	return true, c.writeFlat(meth, m, n, st.flat)
}

// repeatBatch is a by-names request answered from a memo's flat copy,
// kept so that the same request again on the connection costs a compare
// and a write: no walk over its thousand names, no hash of them. Only
// the bytes around the name list are copied; the list is compared with
// the memo's own copy of it.
type repeatBatch struct {
	memo          *batchMemo // nil: none
	meth          *hms.Method
	route         *route
	scope         cache.Scope
	before, after []byte // the request body around its name list
}

// maxRepeatFrame bounds the bytes kept around a remembered request's
// list (a database and a table name, a few flags).
const maxRepeatFrame = 1 << 10

// rememberBatch notes that the request m (under sc, its name list at
// list, a view of m's body) was answered from memo's flat copy.
func (c *clientConn) rememberBatch(meth *hms.Method, m wire.Message, sc cache.Scope, memo *batchMemo, list []byte) {
	lb := &c.lastBatch
	lb.memo = nil
	body := m.Body()
	start := uintptr(unsafe.Pointer(unsafe.SliceData(body)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(list))) - start
	if at > uintptr(len(body)) || int(at)+len(list) > len(body) || len(body)-len(list) > maxRepeatFrame ||
		!bytes.Equal(list, memo.list) {
		return
	}
	from := int(at)
	lb.before = append(lb.before[:0], body[:from]...)
	lb.after = append(lb.after[:0], body[from+len(list):]...)
	lb.memo, lb.meth, lb.route, lb.scope = memo, meth, c.rt, sc
}

// repeatedBatch answers m from the flat copy of the memo of the
// connection's last by-names request answered so, when m repeats that
// request under the same scope and route and the store still vouches
// for the copy (as flatHit). false: the request goes the whole way.
func (c *clientConn) repeatedBatch(meth *hms.Method, m wire.Message, sc cache.Scope) (bool, error) {
	lb := &c.lastBatch
	k := c.rt.cache
	memo := lb.memo
	if memo == nil || lb.meth != meth || lb.route != c.rt || lb.scope != sc || k.Policy != nil || len(c.locks) > 0 ||
		memo.dropped.Load() || !lb.repeats(m.Body()) {
		return false, nil
	}
	if set := k.settings(); !set.Known || set.Version.Is(hms.Version4) && set.Limit >= 0 && len(memo.refs) > set.Limit {
		return false, nil
	}
	// Every memoLookup-th use goes the whole way, looking each entry up
	// (batchRead counts it).
	if (memo.uses.Load()+1)%memoLookup == 0 {
		return false, nil
	}
	st := memo.settled.Load()
	if st == nil || st.flat == nil || !k.Store.Settled(&st.epoch, meth.Kind, st.oldest, k.Store.Now()) {
		return false, nil
	}
	memo.uses.Add(1)
	k.batchRepeats.Add(1)
	n := len(memo.refs)
	k.Store.CountHits(meth.Kind, n)
	return true, c.writeFlat(meth, m, n, st.flat)
}

// repeats reports whether body is the remembered request's.
func (lb *repeatBatch) repeats(body []byte) bool {
	nb, nl := len(lb.before), len(lb.memo.list)
	return len(body) == nb+nl+len(lb.after) && bytes.Equal(body[:nb], lb.before) &&
		bytes.Equal(body[nb+nl:], lb.after) && bytes.Equal(body[nb:nb+nl], lb.memo.list)
}

// writeFlat sends a memo's flat copy of n entries as the reply to m.
func (c *clientConn) writeFlat(meth *hms.Method, m wire.Message, n int, flat []byte) error {
	c.outcome = OutcomeHit
	c.hdr = wire.AppendHeader(c.hdr[:0], wire.Reply, m.Name(), m.SeqID)
	head, tail, frame := meth.Batch.ReplyFrame(c.frame, n)
	c.frame = frame
	iov := append(c.iov[:0], c.hdr, head, flat, tail)
	err := c.writeParts(iov)
	clear(iov)
	c.iov = iov[:0]
	if err != nil {
		return errors.Join(errClientWrite, err)
	}
	return nil
}
