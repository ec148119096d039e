package cache

import (
	"encoding/binary"
	"hash/maphash"
	"sync/atomic"
)

// Generations are invalidation counters. Every cached entry records, when
// its load starts, the counters of the entities its reply depends on; an
// invalidation bumps the counters of the entities a write changed. An entry
// is served only while all its recorded counters are current, so a load
// that raced an invalidation can never be served after it (promise 3), and
// invalidating is O(1) however many entries depend on the entity.
//
// Entities hash into a fixed array of counters. Two entities sharing a
// counter only cause extra misses, never a stale hit, so the array needs no
// locks, no deletion and no growth.
type Generations struct {
	seed  maphash.Seed
	slots []atomic.Uint32
	mask  uint64
	// bumps counts every Bump: unchanged, no entry's counters moved
	// (Store.Settled).
	bumps atomic.Uint64
}

// Dep is one entity an entry depends on: the counter's index, and in
// the top bit (depPartSet) whether it is a table's partition set, the
// one dependency an entry of an existing partition may shed
// (Snapshot.Existing).
type Dep uint32

const (
	depPartSet Dep = 1 << 31
	depIndex       = depPartSet - 1
)

// NewGenerations makes 2^bits counters (4 bytes each), bits at most 30.
// A counter would have to be bumped 2^32 times while one entry lives to
// be mistaken.
func NewGenerations(bits uint) *Generations {
	bits = min(bits, maxGenerationBits)
	n := 1 << bits
	return &Generations{seed: maphash.MakeSeed(), slots: make([]atomic.Uint32, n), mask: uint64(n - 1)}
}

// Of returns the counter of an entity named by key.
func (g *Generations) Of(key []byte) Dep {
	return Dep(maphash.Bytes(g.seed, key) & g.mask)
}

// maxGenerationBits keeps counter indexes clear of depPartSet.
const maxGenerationBits = 30

// Load reads a counter.
func (g *Generations) Load(d Dep) uint32 { return g.slots[d&depIndex].Load() }

// Bump invalidates everything that depends on d.
func (g *Generations) Bump(d Dep) {
	g.slots[d&depIndex].Add(1)
	g.bumps.Add(1)
}

// Snapshot records deps' counters.
type Snapshot struct {
	deps [maxDeps]Dep
	gens [maxDeps]uint32
	n    uint8
}

// maxDeps bounds the entities one entry depends on: global, database,
// lists, tables (a table-objects batch names several), partitions. Only
// the deps an entry has are stored with it; requests needing more are
// not cached.
const maxDeps = 16

// Take records the current counters of deps.
func (g *Generations) Take(deps []Dep) (Snapshot, bool) {
	var s Snapshot
	if len(deps) > maxDeps {
		return s, false
	}
	for i, d := range deps {
		s.deps[i] = d
		s.gens[i] = g.slots[d&depIndex].Load()
	}
	s.n = uint8(len(deps))
	return s, true
}

// Current reports whether no dependency was bumped since the snapshot.
func (g *Generations) Current(s *Snapshot) bool {
	for i := uint8(0); i < s.n; i++ {
		if g.slots[s.deps[i]&depIndex].Load() != s.gens[i] {
			return false
		}
	}
	return true
}

// Existing is s without its dependency on a table's partition set, for
// the entry of one partition the metastore returned: adding partitions
// never changes a partition that exists (an add of it fails or skips
// it), so only writes that invalidate the table's partitions as a
// whole, or more, may drop the entry. A not-found answer, a list or
// anything assembled over several names must keep the full snapshot.
func (s Snapshot) Existing() Snapshot {
	var out Snapshot
	for i := uint8(0); i < s.n; i++ {
		if s.deps[i]&depPartSet != 0 {
			continue
		}
		out.deps[out.n], out.gens[out.n] = s.deps[i], s.gens[i]
		out.n++
	}
	return out
}

// AppendKey appends the snapshot as bytes, to tell apart loads started
// under different generations.
func (s *Snapshot) AppendKey(dst []byte) []byte {
	for i := uint8(0); i < s.n; i++ {
		dst = binary.LittleEndian.AppendUint32(dst, s.gens[i])
	}
	return dst
}

// snapshotSize is the encoded size of a snapshot of n deps.
func snapshotSize(n int) int { return 1 + 8*n }

// appendSnapshot encodes s compactly, for storage in an entry.
func appendSnapshot(dst []byte, s *Snapshot) []byte {
	dst = append(dst, s.n)
	for i := uint8(0); i < s.n; i++ {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(s.deps[i]))
		dst = binary.LittleEndian.AppendUint32(dst, s.gens[i])
	}
	return dst
}

// currentEncoded is Current for a snapshot stored by appendSnapshot; it
// returns the snapshot's size too.
func (g *Generations) currentEncoded(b []byte) (ok bool, size int) {
	n := int(b[0])
	for i := 0; i < n; i++ {
		off := 1 + 8*i
		d := Dep(binary.LittleEndian.Uint32(b[off:])) & depIndex
		if g.slots[d].Load() != binary.LittleEndian.Uint32(b[off+4:]) {
			return false, snapshotSize(n)
		}
	}
	return true, snapshotSize(n)
}
