package cache

import (
	"strconv"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

// TestSettledFollowsGet (#24): Settled vouches for entries found current
// after an epoch only while a Get of each would still find it current:
// every way an entry leaves or goes stale or due (delete, replacement,
// Clear, an invalidation, even of something else, refresh age, TTL)
// ends it, and Held gives the entry back while it does.
func TestSettledFollowsGet(t *testing.T) {
	c := newClock()
	kinds := DefaultKinds()
	pol := kinds[hms.KindPartition]
	for _, tc := range append(leavings(t, c, kinds),
		leaving{"another table invalidated", func(s *Store, l *load) {
			s.Apply("a", []Entity{{Level: LevelPartitions, Cat: "hive", DB: "db0", Table: "t2"}})
		}},
		leaving{"refresh age", func(s *Store, l *load) { c.Advance(pol.RefreshAfter) }},
	) {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t, Config{Kinds: kinds, Now: c.Now})
			epoch := s.Epoch()
			l, ref := refOf(t, s, getPartition("db0", "t1", "1"), "older")
			e, _ := s.Get(l.key, l.kind)
			if !s.Settled(&epoch, l.kind, e.Loaded(), s.Now()) {
				t.Fatal("Settled right after the lookup: false; want true")
			}
			if got, ok := s.Held(ref); !ok || string(got.Body()) != "older" {
				t.Fatalf("Held: got %q, %v; want the entry", got.Body(), ok)
			}
			tc.leave(s, &l)
			if s.Settled(&epoch, l.kind, e.Loaded(), s.Now()) {
				t.Fatalf("Settled after %s: true; want false", tc.name)
			}
		})
	}
}

// TestReserve (#24): reservations count in the budget's cost, stop at an
// eighth of the budget, and go back whole.
func TestReserve(t *testing.T) {
	const maxBytes = 8 << 20
	s := newTestStore(t, Config{MaxBytes: maxBytes})
	cost := s.Cost()
	if !s.Reserve(maxBytes / 16) {
		t.Fatal("Reserve of a sixteenth of the budget refused")
	}
	if got := s.Cost() - cost; got != maxBytes/16 {
		t.Fatalf("cost grew by %d; want %d", got, maxBytes/16)
	}
	if s.Reserve(maxBytes/16 + 1) {
		t.Fatal("Reserve past an eighth of the budget granted")
	}
	if s.Reserved() != maxBytes/16 {
		t.Fatalf("reserved %d after a refusal; want %d", s.Reserved(), maxBytes/16)
	}
	s.Unreserve(maxBytes / 16)
	if s.Reserved() != 0 || s.Cost() != cost {
		t.Fatalf("after Unreserve: reserved %d, cost %d; want 0, %d", s.Reserved(), s.Cost(), cost)
	}
}

// TestTableEpoch (#24): a table's epoch covers the entries sharing its
// segments and vouches for them while none of them leaves and none of
// the table's dependencies is bumped; another table's entries leaving
// and another table's invalidation leave it.
func TestTableEpoch(t *testing.T) {
	s := newTestStore(t, Config{Kinds: DefaultKinds()})
	names := func(tbl string) Names { return Names{Cat: "hive", DB: "db", HasDB: true, Tables: []string{tbl}} }
	snapOfTable := func(tbl string) Snapshot {
		n := names(tbl)
		deps, ok := s.ReadDeps(nil, Scope{Upstream: "up"}, method(t, "get_partitions_by_names"), &n)
		if !ok {
			t.Fatal("ReadDeps: not ok")
		}
		snap, _ := s.Gens().Take(deps)
		return snap
	}
	put := func(tbl string, i int) []byte {
		snap := snapOfTable(tbl)
		ex := snap.Existing()
		key := []byte(tbl + "/" + strconv.Itoa(i))
		if !putPart(s, &ex, tbl, key, partBody(tbl, 20, i)) {
			t.Fatalf("put %s: refused", key)
		}
		return key
	}
	mine := [][]byte{put("t1", 1), put("t1", 2)}
	theirs := put("t2", 1)
	s.Wait()
	snap := snapOfTable("t1")
	ex := snap.Existing()
	ep := s.TableEpoch(TableGroup(nil, "up", "hive", "db", "t1"), &ex)
	oldest := uint32(1 << 31)
	for _, k := range mine {
		e, st := s.Get(k, hms.KindPartitions)
		if st != Hit || !s.Covers(&ep, e) {
			t.Fatalf("%s: status %v, covered %v; want a covered hit", k, st, s.Covers(&ep, e))
		}
		oldest = min(oldest, e.Loaded())
	}
	if e, _ := s.Get(theirs, hms.KindPartitions); s.Covers(&ep, e) {
		t.Fatal("t1's epoch covers an entry of t2")
	}
	settled := func() bool { return s.Settled(&ep, hms.KindPartitions, oldest, s.Now()) }
	if !settled() {
		t.Fatal("not settled right after the lookups")
	}
	s.Delete(theirs)
	s.Apply("up", []Entity{{Level: LevelPartitions, Cat: "hive", DB: "db", Table: "t2"}})
	if !settled() {
		t.Fatal("t2's entry leaving and its invalidation ended t1's epoch")
	}
	s.Delete(mine[1])
	if settled() {
		t.Fatal("settled after one of t1's entries left")
	}
}
