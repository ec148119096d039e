package cache

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/hmsproxy/hmsproxy/internal/testenv/clocktest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

// refOf puts body under the key of r, gets it back and returns its Ref.
func refOf(t *testing.T, s *Store, r req, body string) (load, *Ref) {
	t.Helper()
	l := startLoad(t, s, r)
	if !l.put(s, body, false) {
		t.Fatalf("Put: got false; want true")
	}
	s.Wait()
	e, st := s.Get(l.key, l.kind)
	if st == Miss {
		t.Fatal("Get after Put: Miss")
	}
	ref := e.Ref()
	if got, st := s.Again(ref, l.kind, s.Now()); st != Hit || string(got.Body()) != body {
		t.Fatalf("Again of a fresh ref: got %q, %v; want %q", got.Body(), st, body)
	}
	return l, ref
}

// leaving is one way the entry of partition db0.t1/1, loaded into a
// store, leaves it or goes stale.
type leaving struct {
	name  string
	leave func(s *Store, l *load)
}

// leavings are the ways an entry leaves or goes stale that every promise
// to give it back (Again, Settled) must follow: deletion as shadow
// validation does, replacement as a refresh does, Clear and TTL on c.
func leavings(t *testing.T, c *clocktest.Clock, kinds [NumKinds]KindConfig) []leaving {
	return []leaving{
		{"delete", func(s *Store, l *load) { s.Delete(l.key) }},
		{"replace", func(s *Store, l *load) {
			l2 := startLoad(t, s, getPartition("db0", "t1", "1"))
			l2.put(s, "newer", false)
			s.Wait()
		}},
		{"clear", func(s *Store, l *load) { s.Clear() }},
		{"ttl", func(s *Store, l *load) { c.Advance(kinds[hms.KindPartition].TTL) }},
	}
}

// TestAgainFollowsGet: a Ref gives its entry back only while a Get of
// its key would: every way an entry leaves or goes stale (delete as
// shadow validation does, replacement as a refresh does, Clear,
// invalidation of what it depends on, TTL) makes Again refuse it.
func TestAgainFollowsGet(t *testing.T) {
	c := newClock()
	kinds := DefaultKinds()
	for _, tc := range append(leavings(t, c, kinds),
		leaving{"partitions invalidated", func(s *Store, l *load) {
			s.Apply("a", []Entity{{Level: LevelPartitions, Cat: "hive", DB: "db0", Table: "t1"}})
		}},
		leaving{"table dropped", func(s *Store, l *load) {
			s.Apply("a", []Entity{{Level: LevelTable, Cat: "hive", DB: "db0", Table: "t1"}})
		}},
	) {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t, Config{Kinds: kinds, Now: c.Now})
			l, ref := refOf(t, s, getPartition("db0", "t1", "1"), "older")
			// Another table's invalidation leaves it.
			s.Apply("a", []Entity{{Level: LevelPartitions, Cat: "hive", DB: "db0", Table: "t2"}})
			if _, st := s.Again(ref, l.kind, s.Now()); st == Miss {
				t.Fatal("Again after another table's write: false; want the entry")
			}
			tc.leave(s, &l)
			if e, st := s.Again(ref, l.kind, s.Now()); st != Miss {
				t.Fatalf("Again after %s: got %q; want nothing", tc.name, e.Body())
			}
			if e, st := s.Get(l.key, l.kind); st != Miss && string(e.Body()) == "older" {
				t.Fatalf("Get after %s: still %q", tc.name, e.Body())
			}
		})
	}
}

// TestAgainAfterEviction: an entry the budget evicted is never given
// back by its Ref, whether or not the collector has taken it.
func TestAgainAfterEviction(t *testing.T) {
	const maxBytes = 1 << 20
	s := newTestStore(t, Config{MaxBytes: maxBytes})
	snap, _ := s.Gens().Take(nil)
	body := bytes.Repeat([]byte("y"), 1000)
	var refs []*Ref
	var keys [][]byte
	for i := 0; i < 5*maxBytes/len(body); i++ {
		key := []byte(fmt.Sprint("key", i))
		s.Put(key, hms.KindPartition, body, &snap, s.Now(), false)
		if i%100 == 99 {
			s.Wait()
			for j := i - 99; j <= i; j++ {
				if e, st := s.Get([]byte(fmt.Sprint("key", j)), hms.KindPartition); st != Miss {
					refs, keys = append(refs, e.Ref()), append(keys, []byte(fmt.Sprint("key", j)))
				}
			}
		}
	}
	s.Wait()
	check := func(when string) (gone int) {
		for i, ref := range refs {
			_, ast := s.Again(ref, hms.KindPartition, s.Now())
			again := ast != Miss
			_, st := s.Get(keys[i], hms.KindPartition)
			if again && st == Miss {
				t.Fatalf("%s: Again gives %q back; Get misses it", when, keys[i])
			}
			if !again {
				gone++
			}
		}
		return gone
	}
	if gone := check("before GC"); gone == 0 || s.Stats(hms.KindPartition).Evicted.Load() == 0 {
		t.Fatalf("nothing evicted (%d refs gone): the test proves nothing", gone)
	}
	runtime.GC()
	check("after GC")
}

// TestRefKeepsNothing: a Ref alone does not keep its entry's bytes
// alive: once the store let go of it, the collector takes it.
func TestRefKeepsNothing(t *testing.T) {
	s := newTestStore(t, Config{})
	l, ref := refOf(t, s, getPartition("db0", "t1", "1"), "p")
	s.Delete(l.key)
	wait.Eventually(t, 5*time.Second, func() bool { runtime.GC(); return ref.p.Value() == nil },
		"the entry outlived the store's hold on it: the Ref keeps it")
}

// TestRefKeepsNoSegments: nor does it keep the shared segments of its
// entry, which the budget stops counting once the last entry using them
// has left. Found in review of the prune speed-up: a Ref held them
// until the name index holding it was rebuilt.
func TestRefKeepsNoSegments(t *testing.T) {
	s := newTestStore(t, Config{})
	deps, _ := s.ReadDeps(nil, Scope{Upstream: "up"}, method(t, "get_partitions_by_names"), &Names{Cat: "hive", DB: "db", Tables: []string{"a"}, HasDB: true})
	snap, _ := s.Gens().Take(deps)
	key := []byte("a0")
	if !putPart(s, &snap, "a", key, partBody("a", 20, 0)) {
		t.Fatal("PutShared: got false; want true")
	}
	s.Wait()
	e, st := s.Get(key, hms.KindPartitions)
	if st == Miss || e.ss == nil {
		t.Fatalf("Get: %v, segments %v; want a hit with segments", st, e.ss)
	}
	ref := e.Ref()
	if _, st := s.Again(ref, hms.KindPartitions, s.Now()); st == Miss {
		t.Fatal("Again of a fresh ref: Miss")
	}
	seg := weak.Make(e.ss.segs[0])
	e = Entry{}
	s.Delete(key)
	s.Wait()
	if n, _ := s.Segments(); n != 0 {
		t.Fatalf("%d segments left in the store; want none", n)
	}
	wait.Eventually(t, 5*time.Second, func() bool { runtime.GC(); return seg.Value() == nil },
		"a segment outlived every entry using it: the Ref keeps it")
	if _, st := s.Again(ref, hms.KindPartitions, s.Now()); st != Miss {
		t.Fatalf("Again of a deleted entry: %v; want Miss", st)
	}
}

// TestAgainReportsRefresh: past its kind's refresh age, Again says so as
// Get does, so a caller going by Refs still refreshes ahead.
func TestAgainReportsRefresh(t *testing.T) {
	c := newClock()
	s := newTestStore(t, Config{Now: c.Now})
	l, ref := refOf(t, s, getPartition("db0", "t1", "1"), "p")
	c.Advance(DefaultKinds()[l.kind].RefreshAfter)
	_, again := s.Again(ref, l.kind, s.Now())
	_, get := s.Get(l.key, l.kind)
	if again != HitRefresh || get != HitRefresh {
		t.Fatalf("past the refresh age: Again %v, Get %v; want both HitRefresh", again, get)
	}
}

// TestAgainCountsAccesses: an entry served through its Ref (as a prune
// serves a hot table's partitions) is looked up in ristretto every
// againLookup-th time, so that ristretto's admission and eviction policy
// (TinyLFU), which counts only the Gets it sees, keeps knowing it is in
// use. Without it such entries look as cold as entries never read again
// and are evicted first under budget pressure: in review, 2 to 15 of 50
// were left against 50 of 50 read by Get. The lookups are counted here
// through a seam, not by their effect on eviction, which ristretto
// samples and whose access buffers drop under contention: a test of the
// outcome would flake. Found in review of the prune speed-up.
func TestAgainCountsAccesses(t *testing.T) {
	s := newTestStore(t, Config{})
	l, ref := refOf(t, s, getPartition("db0", "t1", "1"), "p")
	seen := 0
	s.getHook = func(key []byte) {
		if bytes.Equal(key, l.key) {
			seen++
		}
	}
	first := ref
	const serves = 10 * againLookup
	for range serves {
		// As a prune does: Again, and on a Miss a lookup of the key.
		if _, st := s.Again(ref, l.kind, s.Now()); st != Miss {
			continue
		}
		e, st := s.GetAt(l.key, l.kind, s.Now())
		if st == Miss {
			t.Fatal("the entry left the store")
		}
		ref = e.RefAgain(ref)
	}
	if want := serves / againLookup; seen < want {
		t.Errorf("ristretto saw %d lookups of an entry served %d times through its Ref; want at least %d", seen, serves, want)
	}
	if ref != first {
		t.Error("a lookup that found the Ref's own entry made a new Ref")
	}
}
