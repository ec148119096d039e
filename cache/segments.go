package cache

import (
	"bytes"
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// Segments: the runs of bytes that entries of one group (the partitions
// of one table) have in common, kept once. A segment is immutable and
// owned by the garbage collector: an entry, or a reply being written,
// that points at it keeps it alive, so no reader ever sees it freed. The
// count of entries using it is kept for the budget only: its bytes are
// charged once, when it is made, by lowering ristretto's MaxCost, and
// given back when the last entry using it leaves the store (OnExit, or a
// Set that ristretto dropped). A reply still being written from an entry
// that has left holds its bytes a moment longer uncounted, as it does for
// entries without segments.

// maxSegs bounds the segments of one entry: hms.SharedRuns gives at most
// two runs.
const maxSegs = 2

// minSegment is the shortest run worth a segment: shorter ones cost more
// in the segment's own record and map slot than they save.
const minSegment = 64

// segOverhead is what a segment costs beyond its bytes: its record and
// its slot in the intern map.
const segOverhead = 96

// segShards spreads the intern table's lock.
const segShards = 16

type segment struct {
	b     []byte // never written after the segment is made
	key   segKey
	users int32 // entries using it; guarded by its shard's mu
}

type segKey struct{ group, hash uint64 }

func (sg *segment) cost() int64 { return int64(len(sg.b)) + segOverhead }

type segShard struct {
	mu sync.Mutex // guards m and the users of its segments
	m  map[segKey]*segment
}

// segTable interns segments by group and content.
type segTable struct {
	seed   maphash.Seed
	shards [segShards]segShard
	// limit bounds bytes: past it, runs stay in their entries, so
	// segments never take the budget from entries altogether.
	limit int64
	bytes atomic.Int64 // cost of live segments
	count atomic.Int64 // live segments
	// charge is told the new cost of live segments after each change.
	// chargeMu orders its calls, so the last one made carries the latest
	// figure.
	charge   func(bytes int64)
	chargeMu sync.Mutex
}

func newSegTable(limit int64, charge func(int64)) *segTable {
	t := &segTable{seed: maphash.MakeSeed(), limit: limit, charge: charge}
	for i := range t.shards {
		t.shards[i].m = map[segKey]*segment{}
	}
	return t
}

// intern returns the group's segment holding b, counting one more user,
// made from a copy of b if there is none; nil when b stays in its entry
// (short, over the limit, or a hash shared with other bytes).
func (t *segTable) intern(group uint64, b []byte) *segment {
	if len(b) < minSegment {
		return nil
	}
	k := segKey{group: group, hash: maphash.Bytes(t.seed, b)}
	sh := &t.shards[k.hash%segShards]
	sh.mu.Lock()
	if sg := sh.m[k]; sg != nil {
		if !bytes.Equal(sg.b, b) {
			sh.mu.Unlock()
			return nil
		}
		sg.users++
		sh.mu.Unlock()
		return sg
	}
	sg := &segment{b: bytes.Clone(b), key: k, users: 1}
	if t.bytes.Add(sg.cost()) > t.limit {
		t.bytes.Add(-sg.cost())
		sh.mu.Unlock()
		return nil
	}
	t.count.Add(1)
	sh.m[k] = sg
	sh.mu.Unlock()
	t.recharge()
	return sg
}

// release counts one user of sg fewer; the last one gives its bytes back.
func (t *segTable) release(sg *segment) {
	sh := &t.shards[sg.key.hash%segShards]
	sh.mu.Lock()
	sg.users--
	last := sg.users == 0
	if last {
		delete(sh.m, sg.key)
		t.bytes.Add(-sg.cost())
		t.count.Add(-1)
	}
	sh.mu.Unlock()
	if last {
		t.recharge()
	}
}

func (t *segTable) recharge() {
	t.chargeMu.Lock()
	t.charge(t.bytes.Load())
	t.chargeMu.Unlock()
}
