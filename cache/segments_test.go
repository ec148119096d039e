package cache

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// partBody encodes a Partition struct (through its STOP) of table tbl
// with ncols columns, as a metastore sends it in a by-names reply.
// Tables of as many columns have the same storage descriptor but for
// its location.
func partBody(tbl string, ncols, i int) []byte {
	cols := make([]hmsreq.Column, ncols)
	for c := range cols {
		cols[c] = hmsreq.Column{Name: "col_" + strconv.Itoa(c), Type: "string"}
	}
	p := hmsreq.Partition{DB: "db", Table: tbl, Values: []string{strconv.Itoa(i)}, CreateTime: 1700000000,
		SD:     hmsreq.ORCSD("hdfs://nn/wh/db.db/"+tbl+"/p="+strconv.Itoa(i), cols...),
		Params: map[string]string{"numRows": strconv.Itoa(i)}}
	var e wire.Encoder
	p.Append(&e, 1)
	return e.B[3:] // less the field header
}

// ristrettoItem is what ristretto adds to the cost of each item: the
// size of its storeItem record (key, conflict, value, expiration).
const ristrettoItem = 56

// putPart puts body under key as the proxy does: its runs shared within
// the table's group.
func putPart(s *Store, snap *Snapshot, tbl string, key, body []byte) bool {
	return s.PutShared(key, hms.KindPartitions, TableGroup(nil, "up", "hive", "db", tbl), body,
		hms.SharedRuns(nil, body), snap, s.Now())
}

func joined(e Entry) []byte {
	var out []byte
	for _, p := range e.AppendPieces(nil) {
		out = append(out, p...)
	}
	return out
}

// checkSegments proves the store's segment accounting from what it
// holds: every live segment is used by exactly as many stored entries as
// it counts, none is missing from the intern table, their cost is what
// the table says, and ristretto's MaxCost is the budget less that cost.
func checkSegments(t *testing.T, s *Store, keys [][]byte) {
	t.Helper()
	s.Wait()
	used := map[*segment]int32{}
	for _, k := range keys {
		r, ok := s.rc.Get(k)
		if !ok {
			continue
		}
		if r.ss == nil {
			continue
		}
		for _, sg := range r.ss.segs {
			if sg != nil {
				used[sg]++
			}
		}
	}
	var cost, n int64
	for i := range s.segs.shards {
		sh := &s.segs.shards[i]
		sh.mu.Lock()
		for _, sg := range sh.m {
			n++
			cost += sg.cost()
			if used[sg] != sg.users {
				t.Errorf("segment of %d bytes counts %d users; %d stored entries use it", len(sg.b), sg.users, used[sg])
			}
			delete(used, sg)
		}
		sh.mu.Unlock()
	}
	for sg, u := range used {
		t.Errorf("a segment of %d bytes used by %d entries is not in the intern table", len(sg.b), u)
	}
	if gotN, gotB := s.Segments(); gotN != n || gotB != cost {
		t.Errorf("Segments() = %d, %d; the table holds %d of cost %d", gotN, gotB, n, cost)
	}
	if got, want := s.rc.MaxCost(), s.max-cost; got != want {
		t.Errorf("ristretto MaxCost %d; want the budget less the segments, %d", got, want)
	}
}

// TestSegmentsSharedOnce: the partitions of one table keep their storage
// descriptors once, charged once; another table's are its own.
func TestSegmentsSharedOnce(t *testing.T) {
	s := newTestStore(t, Config{})
	snap, _ := s.Gens().Take(nil)
	var keys [][]byte
	var whole int64
	for _, tbl := range []string{"a", "b"} {
		for i := 0; i < 1000; i++ {
			k := []byte(fmt.Sprint(tbl, i))
			body := partBody(tbl, 20, i)
			whole += int64(len(body))
			if !putPart(s, &snap, tbl, k, body) {
				t.Fatalf("PutShared %s: refused", k)
			}
			keys = append(keys, k)
		}
	}
	checkSegments(t, s, keys)
	// The two tables' descriptors are the same bytes, but segments are
	// interned per table.
	if n, _ := s.Segments(); n != 4 {
		t.Errorf("got %d segments; want 4 (two runs of each of two tables)", n)
	}
	for _, k := range keys {
		e, st := s.Get(k, hms.KindPartitions)
		if st != Hit {
			t.Fatalf("Get %s: %v; want a hit", k, st)
		}
		if e.ss == nil || e.ss.segs[0] == nil || e.ss.segs[1] == nil {
			t.Fatalf("entry %s keeps no segments", k)
		}
	}
	// The budget counts each entry's own bytes and each segment once;
	// ristretto adds a record of its own per entry.
	var own int64
	for _, k := range keys {
		e, _ := s.Get(k, hms.KindPartitions)
		own += int64(len(e.b)) + entryOverhead
	}
	_, segCost := s.Segments()
	if cost, want := s.Cost(), own+segCost+int64(len(keys))*ristrettoItem; cost != want {
		t.Errorf("budget used %d; want %d (entries %d, segments %d, ristretto's records)", cost, want, own, segCost)
	}
	if cost := s.Cost(); cost > whole/2 {
		t.Errorf("budget used %d for %d bytes of partitions; want at most half", cost, whole)
	}
	t.Logf("%d partitions of %d bytes: budget used %d (segments %d)", len(keys), whole, s.Cost(), segCost)
}

// TestSegmentsReleased: every way an entry leaves the store gives back
// its hold on its segments, and the last one their bytes.
func TestSegmentsReleased(t *testing.T) {
	ways := []struct {
		name string
		out  func(s *Store, keys [][]byte)
	}{
		{"delete", func(s *Store, keys [][]byte) {
			for _, k := range keys {
				s.Delete(k)
			}
		}},
		{"stale get", func(s *Store, keys [][]byte) {
			s.Apply("up", []Entity{{Level: LevelAll}})
			for _, k := range keys {
				if _, st := s.Get(k, hms.KindPartitions); st != Miss {
					t.Fatalf("Get after invalidation: %v; want Miss", st)
				}
			}
		}},
		{"replaced", func(s *Store, keys [][]byte) {
			snap, _ := s.Gens().Take(nil)
			for i, k := range keys {
				s.Put(k, hms.KindPartitions, partBody("a", 20, i), &snap, s.Now(), false) // whole, no segments
			}
		}},
		{"clear", func(s *Store, _ [][]byte) { s.Clear() }},
	}
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			s := newTestStore(t, Config{})
			deps, _ := s.ReadDeps(nil, Scope{Upstream: "up"}, method(t, "get_partitions_by_names"), &Names{Cat: "hive", DB: "db", Tables: []string{"a"}, HasDB: true})
			snap, _ := s.Gens().Take(deps)
			var keys [][]byte
			for i := 0; i < 100; i++ {
				k := []byte(fmt.Sprint("a", i))
				putPart(s, &snap, "a", k, partBody("a", 20, i))
				keys = append(keys, k)
			}
			checkSegments(t, s, keys)
			if n, _ := s.Segments(); n != 2 {
				t.Fatalf("got %d segments before; want 2", n)
			}
			w.out(s, keys[:50])
			checkSegments(t, s, keys)
			if w.name != "clear" && w.name != "stale get" {
				if n, _ := s.Segments(); n != 2 {
					t.Fatalf("half the entries out: %d segments; want still 2", n)
				}
			}
			w.out(s, keys)
			checkSegments(t, s, keys)
			if n, b := s.Segments(); n != 0 || b != 0 {
				t.Errorf("every entry out: %d segments of cost %d; want none", n, b)
			}
			if got := s.rc.MaxCost(); got != s.max {
				t.Errorf("MaxCost %d; want the whole budget %d back", got, s.max)
			}
		})
	}
}

// TestSegmentsDroppedSet: a Set ristretto drops under contention never
// reaches OnExit, so the Put gives its segments back itself.
func TestSegmentsDroppedSet(t *testing.T) {
	s := newTestStore(t, Config{})
	snap, _ := s.Gens().Take(nil)
	keys := [][]byte{[]byte("a0"), []byte("a1")}
	putPart(s, &snap, "a", keys[0], partBody("a", 20, 0))
	dropped := 0
	s.setHook = func([]byte, record, int64) bool { dropped++; return false }
	if putPart(s, &snap, "a", keys[1], partBody("a", 20, 1)) {
		t.Fatal("PutShared reported a dropped Set as stored")
	}
	if putPart(s, &snap, "b", []byte("b0"), partBody("b", 20, 0)) {
		t.Fatal("PutShared reported a dropped Set as stored")
	}
	if dropped != 2 {
		t.Fatalf("the hook saw %d Sets; want 2", dropped)
	}
	checkSegments(t, s, keys)
	if n, _ := s.Segments(); n != 2 {
		t.Errorf("%d segments; want 2, those of the one stored entry", n)
	}
}

// TestSegmentsBudget: filling a small store ten times over with the
// partitions of many tables evicts and rejects entries; their segments
// go with the last entry using them, the accounting stays exact, and the
// budget (entries plus segments, each once) is kept.
func TestSegmentsBudget(t *testing.T) {
	const maxBytes = 1 << 20
	s := newTestStore(t, Config{MaxBytes: maxBytes})
	snap, _ := s.Gens().Take(nil)
	var keys [][]byte
	tables := 0
	for put := 0; put < 10*maxBytes; tables++ {
		tbl := "t" + strconv.Itoa(tables)
		for i := 0; i < 2; i++ { // few per table: evictions take whole tables' entries
			k := []byte(fmt.Sprint(tbl, "/", i))
			body := partBody(tbl, 10+tables%20, i)
			putPart(s, &snap, tbl, k, body)
			keys = append(keys, k)
			put += len(body)
		}
		if tables%100 == 0 {
			s.Wait()
		}
	}
	checkSegments(t, s, keys)
	st := s.Stats(hms.KindPartitions)
	if st.Evicted.Load()+st.Rejected.Load() == 0 {
		t.Fatal("nothing evicted or rejected: the budget was never reached")
	}
	n, b := s.Segments()
	t.Logf("%d tables, %d segments live of cost %d, evicted %d, rejected %d", tables, n, b, st.Evicted.Load(), st.Rejected.Load())
	if n == 0 || n >= int64(2*tables) {
		t.Errorf("%d segments live of %d tables' %d; want some, and fewer than all", n, tables, 2*tables)
	}
	if b > maxBytes/2 {
		t.Errorf("segments cost %d; want at most half the budget, %d", b, maxBytes/2)
	}
	// ristretto evicts on admission: one more entry brings it within.
	putPart(s, &snap, "last", []byte("last"), partBody("last", 1, 0))
	s.Wait()
	if c := s.Cost(); c > maxBytes {
		t.Errorf("budget used %d; want at most %d", c, maxBytes)
	}
}

// FuzzSharedRoundTrip: whatever a Partition's bytes, cutting out the runs
// SharedRuns finds (or any runs at all) and keeping them as segments
// gives back the exact bytes: Body, AppendPieces and Len agree with what
// was put, for an entry that made its segments and for one that reuses
// them (the transparency promise). The seeds hold the shapes of Hive 2.3,
// 3.1 and 4.0, fields in other orders, no sd or no location, and fields
// of a later version.
func FuzzSharedRoundTrip(f *testing.F) {
	for i, tbl := range []string{"a", "b", "wide"} {
		f.Add(partBody(tbl, 1+19*i/2, i), uint16(0), uint16(0), uint16(0), uint16(0))
	}
	for _, sh := range []hmsreq.PartitionShape{{Hive: "2.3"}, {Hive: "3.1"}, {Hive: "4.0"}, {Hive: "3.1", SDFirst: true},
		{Hive: "3.1", LocFirst: true}, {Hive: "3.1", NoLoc: true}, {Hive: "3.1", NoSD: true}, {Hive: "4.0", Unknown: true}} {
		f.Add(hmsreq.ShapedPartition(sh, "2024-01-01"), uint16(0), uint16(0), uint16(0), uint16(0))
	}
	f.Add(partBody("a", 20, 1)[:200], uint16(10), uint16(100), uint16(100), uint16(180))
	var noSD wire.Encoder
	noSD.StringListField(1, []string{"x"})
	noSD.Stop()
	f.Add(noSD.B, uint16(0), uint16(1), uint16(1), uint16(2))
	f.Add(bytes.Repeat([]byte{wire.TStruct, 0, 6}, 40), uint16(3), uint16(90), uint16(90), uint16(120))
	// Three runs long enough for segments; runs reversed; runs that overlap.
	f.Add(bytes.Repeat([]byte("abc"), 100), uint16(0), uint16(70), uint16(140), uint16(210))
	f.Add(bytes.Repeat([]byte("abc"), 100), uint16(150), uint16(80), uint16(200), uint16(290))
	f.Add(bytes.Repeat([]byte("abc"), 100), uint16(0), uint16(100), uint16(30), uint16(200))
	s := newTestStore(f, Config{})
	snap, _ := s.Gens().Take(nil)
	n := 0
	f.Fuzz(func(t *testing.T, body []byte, a, b, c, d uint16) {
		if len(body) == 0 {
			return // the store keeps no empty bodies of partitions
		}
		runsOf := [][]hms.Run{hms.SharedRuns(nil, body), {{Start: int(a), End: int(b)}, {Start: int(c), End: int(d)}}, {{Start: int(a), End: int(d)}},
			{{Start: int(a), End: int(b)}, {Start: int(b), End: int(c)}, {Start: int(c), End: int(d)}}}
		for ri, runs := range runsOf {
			for copy := 0; copy < 2; copy++ { // the second reuses the first's segments
				n++
				key := []byte("k" + strconv.Itoa(n))
				group := TableGroup(nil, "up", "hive", "db", strconv.Itoa(ri))
				if !s.PutShared(key, hms.KindPartitions, group, body, runs, &snap, s.Now()) {
					continue // dropped under contention: nothing to read back
				}
				s.Wait()
				e, st := s.Get(key, hms.KindPartitions)
				if st == Miss {
					continue // rejected by the admission policy
				}
				if got := e.Body(); !bytes.Equal(got, body) {
					t.Fatalf("runs %v: Body\n% x\nwant\n% x", runs, got, body)
				}
				if got := joined(e); !bytes.Equal(got, body) {
					t.Fatalf("runs %v: AppendPieces\n% x\nwant\n% x", runs, got, body)
				}
				if e.Len() != len(body) {
					t.Fatalf("runs %v: Len %d; want %d", runs, e.Len(), len(body))
				}
				s.Delete(key)
			}
		}
	})
}

// TestSegmentsConcurrent: puts, hits, replacements, deletes and stale
// lookups of the partitions of a few tables from several goroutines at
// once leave the accounting exact, and every hit reads its own bytes.
func TestSegmentsConcurrent(t *testing.T) {
	s := newTestStore(t, Config{MaxBytes: 4 << 20})
	deps, _ := s.ReadDeps(nil, Scope{Upstream: "up"}, method(t, "get_partitions_by_names"), &Names{Cat: "hive", DB: "db", Tables: []string{"t0"}, HasDB: true})
	const workers, rounds, perTable = 4, 300, 50
	bodies := map[string][]byte{}
	var keys [][]byte
	for tb := 0; tb < 3; tb++ {
		for i := 0; i < perTable; i++ {
			k := fmt.Sprint("t", tb, "/", i)
			bodies[k] = partBody("t"+strconv.Itoa(tb), 20, i)
			keys = append(keys, []byte(k))
		}
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				k := keys[(w*7919+r*31)%len(keys)]
				tbl := string(k[:2])
				switch r % 5 {
				case 0, 1:
					snap, _ := s.Gens().Take(deps)
					putPart(s, &snap, tbl, k, bodies[string(k)])
				case 2, 3:
					if e, st := s.Get(k, hms.KindPartitions); st != Miss && !bytes.Equal(joined(e), bodies[string(k)]) {
						t.Errorf("hit on %s: bytes differ from those put", k)
					}
				case 4:
					if w == 0 && r%25 == 4 {
						s.Apply("up", []Entity{{Level: LevelTable, Cat: "hive", DB: "db", Table: "t0"}})
					} else {
						s.Delete(k)
					}
				}
			}
		}(w)
	}
	wg.Wait()
	checkSegments(t, s, keys)
	for _, k := range keys {
		s.Delete(k)
	}
	checkSegments(t, s, keys)
	if n, b := s.Segments(); n != 0 || b != 0 {
		t.Errorf("every entry deleted: %d segments of cost %d; want none", n, b)
	}
}
