package proxy

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

// Posting memos make a repeated pruned hit cost what a batch memo's hit
// costs: a lookup and a write. A planner's filter pins one value of a
// key (a day, say) and selects among that value's partitions (some
// hours); its candidates are the posting list of that value in the
// table's name index. Without a memo, every candidate selected is taken
// back through its own reference (cache.Store.Again) and written as its
// entry's pieces: some four dependent loads from cold memory per
// partition (posting list, reference, entry, its bytes), most of a
// 10,000-partition table's prune.
//
// A posting memo holds the bytes of every candidate of one posting list,
// joined in name order into one flat copy, with where each ends: the
// selected ones are then written as runs of that copy. The copy is
// written only while the store vouches (cache.Store.Settled) for the
// entries it was joined from: all were hits, not due for a refresh, in
// lookups made after the epoch it keeps was read, and since then none
// left the store and none of their generations moved. So it is byte
// for byte what the per-entry path would write; anything else goes
// that way, as before. As with batch memos, the copy is charged to the
// store's budget (Reserve) while it is the memo's, it is made only for a
// posting list pruned before (the first prune records that its entries
// were all hits, the second joins them), and every postLookup-th use
// looks each selected entry up in the store so its eviction policy sees
// them used.
//
// A memo lives in the name index it was built for, and dies with it: an
// index is a name list of one scope (its key is the list's cache key),
// so a memo never serves another scope, nor another list of names.

// postMemo is what one posting list of a name index was found as.
type postMemo struct {
	settled atomic.Pointer[postSettled]
	uses    atomic.Uint32 // the prunes it was asked for (postLookup)
	// dropped: no longer in its index's memos, or the index no longer
	// in its nameIndexes. A flat copy settled into it afterwards is
	// given back at once.
	dropped atomic.Bool
}

// postSettled is a posting list's entries found current together.
type postSettled struct {
	epoch  cache.Epoch
	oldest uint32 // the oldest entry's load (Entry.Loaded)
	// flat, when set, is the candidates' bytes joined in posting order,
	// candidate j's ending at ends[j]; charged to the store's budget.
	flat []byte
	ends []uint32
}

// postMemos are a name index's posting memos, by key position and value.
type postMemos struct {
	mu      sync.Mutex // guards m and dropped
	m       map[postKey]*postMemo
	dropped bool // the index left its nameIndexes: no new memos
	store   *cache.Store
}

type postKey struct {
	key   int
	value string
}

// Bounds: a posting list of more candidates than maxPostCands gets no
// memo (its copy would be a large share of a table, made for one
// value), and an index keeps at most maxPostMemos memos, forgetting
// arbitrary ones (whose copies' budget is given back): a memo is some 64
// bytes outside the budget, so with maxNameIndexes indexes they take at
// most 64 MiB, and a year of days pruned in turn keeps its memos.
const (
	maxPostCands = 1024
	maxPostMemos = 1024
	// postLookup: one use of a posting memo in this many looks each
	// selected entry up in the store. As often as cache.Store.Again does
	// (one in 16), which served these entries before the memos: the
	// store's eviction policy (TinyLFU counts lookups) sees them used as
	// it did then, at a sixteenth of the cost of a lookup per partition.
	postLookup = 16
)

// memo returns the memo of the posting list of value v of key position
// key, making it if there is none; nil once the index was dropped.
func (x *postMemos) memo(store *cache.Store, key int, v string) *postMemo {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.dropped {
		return nil
	}
	pk := postKey{key, v}
	if m := x.m[pk]; m != nil {
		return m
	}
	if x.m == nil {
		x.m = map[postKey]*postMemo{}
		x.store = store
	}
	for k, old := range x.m {
		if len(x.m) < maxPostMemos {
			break
		}
		delete(x.m, k)
		old.dropped.Store(true)
		old.settle(nil, x.store)
	}
	m := &postMemo{}
	x.m[pk] = m
	return m
}

// drop forgets every memo and gives back their copies' budget: the
// index left its nameIndexes.
func (x *postMemos) drop() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dropped = true
	for _, m := range x.m {
		m.dropped.Store(true)
		m.settle(nil, x.store)
	}
	x.m = nil
}

// settle makes st (nil: none) the memo's state, and gives back the
// budget of a flat copy it replaces.
func (m *postMemo) settle(st *postSettled, store *cache.Store) {
	if old := m.settled.Swap(st); old != nil && old != st && old.flat != nil {
		store.Unreserve(int64(len(old.flat)))
	}
}

// appendRuns appends to pieces the bytes of the candidates at positions
// selj (ascending) as runs of st's flat copy: neighbours in one piece.
func (st *postSettled) appendRuns(pieces [][]byte, selj []int32) [][]byte {
	for a := 0; a < len(selj); {
		b := a + 1
		for b < len(selj) && selj[b] == selj[b-1]+1 {
			b++
		}
		from := uint32(0)
		if j := selj[a]; j > 0 {
			from = st.ends[j-1]
		}
		pieces = append(pieces, st.flat[from:st.ends[selj[b-1]]])
		a = b
	}
	return pieces
}

// postedParts returns the reply pieces of the selected candidates
// (selj: positions in cands, the posting list of memo pm of idx) from
// the memo, and false when it cannot answer: then the per-entry path
// does. group is the table's segment group, ex the prune's snapshot
// less the partition set (cache.Store.TableEpoch), base the entry key
// prefix of the table's partitions, now the prune's clock reading.
func (c *clientConn) postedParts(pm *postMemo, idx *nameIndex, cands, selj []int32, base, group []byte, ex *cache.Snapshot, now time.Time) ([][]byte, bool) {
	k := c.rt.cache
	store := k.Store
	const kind = hms.KindPartitions
	st := pm.settled.Load()
	if st != nil && st.flat != nil && store.Settled(&st.epoch, kind, st.oldest, now) {
		store.CountHits(kind, len(selj))
		k.postHits.Add(1)
		c.ppieces = st.appendRuns(c.ppieces[:0], selj)
		return c.ppieces, true
	}
	// Take every candidate back, after reading the epochs that are to
	// vouch for them.
	tableEp, storeEp := store.TableEpoch(group, ex), store.Epoch()
	covered, oldest := true, uint32(math.MaxUint32)
	parts := c.pparts[:0]
	defer func() { clear(parts); c.pparts = parts[:0] }()
	for _, i := range cands {
		e, ok := c.candidateEntry(idx, i, base, now)
		if !ok {
			pm.settle(nil, store)
			return nil, false
		}
		parts = append(parts, prunePart{e: e})
		oldest = min(oldest, e.Loaded())
		covered = covered && store.Covers(&tableEp, e)
	}
	nst := &postSettled{epoch: storeEp, oldest: oldest}
	if covered {
		nst.epoch = tableEp
	}
	if st != nil && len(cands) <= maxPostCands {
		// Pruned before: join the copy.
		n := 0
		for _, p := range parts {
			n += p.e.Len()
		}
		if store.Reserve(int64(n)) {
			nst.flat, nst.ends = make([]byte, 0, n), make([]uint32, len(parts))
			iov := c.ppieces[:0]
			for j, p := range parts {
				iov = p.e.AppendPieces(iov[:0])
				for _, b := range iov {
					nst.flat = append(nst.flat, b...)
				}
				nst.ends[j] = uint32(len(nst.flat))
			}
			clear(iov)
			c.ppieces = iov[:0]
		}
	}
	pm.settle(nst, store)
	if nst.flat != nil && pm.dropped.Load() {
		pm.settle(nil, store) // dropped meanwhile: nobody else gives it back
	}
	pieces := c.ppieces[:0]
	for _, j := range selj {
		pieces = parts[j].e.AppendPieces(pieces)
	}
	c.ppieces = pieces
	return pieces, true
}

// candidateEntry is the current entry of the partition at position i of
// idx, when a lookup finds it a hit not due for a refresh, taken back
// through the index's reference first.
func (c *clientConn) candidateEntry(idx *nameIndex, i int32, base []byte, now time.Time) (cache.Entry, bool) {
	k := c.rt.cache
	ref := idx.refs[i].Load()
	e, st := k.Store.Again(ref, hms.KindPartitions, now)
	if st == cache.Miss {
		key := append(c.key[:0], base...)
		key = append(key, idx.names[i]...)
		c.key = key
		if e, st = k.Store.GetAt(key, hms.KindPartitions, now); st == cache.Miss {
			return cache.Entry{}, false
		}
		if r := e.RefAgain(ref); r != ref {
			idx.refs[i].Store(r)
		}
	}
	return e, st == cache.Hit
}
