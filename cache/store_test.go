package cache

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/clocktest"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
)

// newClock is a settable fake time, at a fixed start.
func newClock() *clocktest.Clock { return clocktest.At(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)) }

// load is what a proxy miss does before the upstream call: key, deps,
// snapshot and start time.
type load struct {
	key     []byte
	kind    hms.Kind
	snap    Snapshot
	started time.Time
}

func startLoad(t *testing.T, s *Store, r req) load {
	t.Helper()
	k, ok := r.key(t)
	if !ok {
		t.Fatalf("AppendKey(%s): not ok", r.meth)
	}
	return load{key: k, kind: method(t, r.meth).Kind, snap: snapOf(t, s, r), started: s.Now()}
}

func (l *load) put(s *Store, body string, negative bool) bool {
	return s.Put(l.key, l.kind, []byte(body), &l.snap, l.started, negative)
}

func TestNewConfig(t *testing.T) {
	if _, err := New(Config{MaxBytes: 1000}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("New(MaxBytes 1000): got %v; want ErrBadConfig", err)
	}
	s, err := New(Config{})
	if err != nil {
		t.Fatalf("New(zero Config): %v", err)
	}
	s.Close()
	s.Close() // twice is fine
}

func TestPutGet(t *testing.T) {
	s := newTestStore(t, Config{})
	l := startLoad(t, s, getTable("db0", "t1"))
	if !l.put(s, "reply", false) {
		t.Fatalf("Put: got false; want true")
	}
	s.Wait()
	e, st := s.Get(l.key, hms.KindTable)
	if st != Hit || string(e.Body()) != "reply" {
		t.Fatalf("Get: got %v %q; want Hit \"reply\"", st, e.Body())
	}
	if _, st := s.Get(l.key, hms.KindPartition); st != Miss {
		t.Errorf("Get with another kind: got %v; want Miss", st)
	}
	other, _ := getTable("db0", "t2").key(t)
	if _, st := s.Get(other, hms.KindTable); st != Miss {
		t.Errorf("Get(other key): got %v; want Miss", st)
	}
}

// TestPutRefusesStale guards promise 3: a load that began before an
// invalidation never lands in the cache after it.
func TestPutRefusesStale(t *testing.T) {
	tests := []struct {
		name  string
		write Entity
		admit bool
	}{
		{"same table", Entity{Level: LevelTable, Cat: "hive", DB: "db0", Table: "t1"}, false},
		{"database", Entity{Level: LevelDatabase, Cat: "hive", DB: "db0", Table: ""}, false},
		{"all", Entity{Level: LevelAll}, false},
		{"other table", Entity{Level: LevelTable, Cat: "hive", DB: "db0", Table: "t2"}, true},
		{"partitions only", Entity{Level: LevelPartitions, Cat: "hive", DB: "db0", Table: "t1"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t, Config{})
			l := startLoad(t, s, getTable("db0", "t1"))
			s.Apply("a", []Entity{tc.write}) // lands while the load is upstream
			if got := l.put(s, "old", false); got != tc.admit {
				t.Fatalf("Put after %s write: got %v; want %v", tc.name, got, tc.admit)
			}
			s.Wait()
			_, st := s.Get(l.key, hms.KindTable)
			if (st != Miss) != tc.admit {
				t.Errorf("Get: got %v; want hit %v", st, tc.admit)
			}
			if got, want := s.Stats(hms.KindTable).Invalidated.Load(), map[bool]uint64{true: 0, false: 1}[tc.admit]; got != want {
				t.Errorf("Invalidated: got %d; want %d", got, want)
			}
		})
	}
}

func TestGetMissesAfterBump(t *testing.T) {
	s := newTestStore(t, Config{})
	l := startLoad(t, s, getPartition("db0", "t1", "1"))
	if !l.put(s, "p", false) {
		t.Fatalf("Put: got false; want true")
	}
	s.Wait()
	if _, st := s.Get(l.key, hms.KindPartition); st != Hit {
		t.Fatalf("Get before write: got %v; want Hit", st)
	}
	s.Apply("a", []Entity{{Level: LevelPartitions, Cat: "hive", DB: "db0", Table: "t1"}})
	if _, st := s.Get(l.key, hms.KindPartition); st != Miss {
		t.Fatalf("Get after write: got %v; want Miss", st)
	}
	if got := s.Stats(hms.KindPartition).Stale.Load(); got != 1 {
		t.Errorf("Stale: got %d; want 1", got)
	}
	// A new load after the write is admitted again.
	l2 := startLoad(t, s, getPartition("db0", "t1", "1"))
	if !l2.put(s, "p2", false) {
		t.Fatalf("Put of a fresh load: got false; want true")
	}
	s.Wait()
	if e, st := s.Get(l.key, hms.KindPartition); st != Hit || string(e.Body()) != "p2" {
		t.Errorf("Get: got %v %q; want Hit \"p2\"", st, e.Body())
	}
}

func TestTTLAndRefresh(t *testing.T) {
	c := newClock()
	var kinds [NumKinds]KindConfig
	kinds[hms.KindTable] = KindConfig{TTL: 10 * time.Minute, RefreshAfter: 5 * time.Minute}
	kinds[hms.KindDatabase] = KindConfig{TTL: time.Minute}
	s := newTestStore(t, Config{Kinds: kinds, Now: c.Now})
	l := startLoad(t, s, getTable("db0", "t1"))
	c.Advance(time.Second) // the upstream call took a second
	if !l.put(s, "t", false) {
		t.Fatalf("Put: got false; want true")
	}
	s.Wait()
	steps := []struct {
		after time.Duration // since the load began
		want  Status
	}{
		{time.Minute, Hit},
		{5*time.Minute - time.Nanosecond, Hit},
		{5 * time.Minute, HitRefresh},
		{10*time.Minute - time.Nanosecond, HitRefresh},
		{10 * time.Minute, Miss},
	}
	for _, st := range steps {
		c.Advance(l.started.Add(st.after).Sub(c.Now()))
		if _, got := s.Get(l.key, hms.KindTable); got != st.want {
			t.Errorf("Get %v after load start: got %v; want %v", st.after, got, st.want)
		}
	}

	// A load older than its TTL is not admitted; a kind without TTL never is.
	old := startLoad(t, s, getTable("db0", "t2"))
	c.Advance(10 * time.Minute)
	if old.put(s, "t2", false) {
		t.Errorf("Put of a load older than TTL: got true; want false")
	}
	d := startLoad(t, s, req{"get_database", hmsreq.Args(hmsreq.Str(1, "db0")), scA})
	if !d.put(s, "db", false) {
		t.Errorf("Put(KindDatabase): got false; want true")
	}
	s.Wait()
	if _, st := s.Get(d.key, hms.KindDatabase); st != Hit {
		t.Errorf("Get(KindDatabase): got %v; want Hit (no RefreshAfter)", st)
	}
	c.Advance(time.Minute)
	if _, st := s.Get(d.key, hms.KindDatabase); st != Miss {
		t.Errorf("Get(KindDatabase) after TTL: got %v; want Miss", st)
	}
	fn := startLoad(t, s, req{"get_all_functions", hmsreq.Args(), scA})
	if fn.put(s, "f", false) {
		t.Errorf("Put(KindFunction) with zero policy: got true; want false")
	}
}

func TestNegative(t *testing.T) {
	s := newTestStore(t, Config{}) // DefaultKinds: tables negative, partitions not
	tests := []struct {
		name string
		r    req
		want bool
	}{
		{"table allows", getTable("db0", "missing"), true},
		{"database allows", req{"get_database", hmsreq.Args(hmsreq.Str(1, "missing")), scA}, true},
		{"partition refuses", getPartition("db0", "t1", "missing"), false},
		{"table names refuse", req{"get_all_tables", hmsreq.Args(hmsreq.Str(1, "db0")), scA}, false},
	}
	for _, tc := range tests {
		l := startLoad(t, s, tc.r)
		if got := l.put(s, "NoSuchObjectException", true); got != tc.want {
			t.Errorf("%s: Put(negative): got %v; want %v", tc.name, got, tc.want)
		}
		if !l.put(s, "found", false) {
			t.Errorf("%s: Put(positive): got false; want true", tc.name)
		}
	}
}

func TestStartRefreshExclusive(t *testing.T) {
	s := newTestStore(t, Config{})
	a, b := []byte("key-a"), []byte("key-b")
	steps := []struct {
		name string
		do   func() bool
		want bool
	}{
		{"start a", func() bool { return s.StartRefresh(a) }, true},
		{"start a again", func() bool { return s.StartRefresh(a) }, false},
		{"start b", func() bool { return s.StartRefresh(b) }, true},
		{"end a, start a", func() bool { s.EndRefresh(a); return s.StartRefresh(a) }, true},
		{"start b again", func() bool { return s.StartRefresh(b) }, false},
	}
	for _, st := range steps {
		if got := st.do(); got != st.want {
			t.Errorf("%s: got %v; want %v", st.name, got, st.want)
		}
	}

	key := []byte("contended")
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.StartRefresh(key) {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := wins.Load(); got != 1 {
		t.Errorf("concurrent StartRefresh winners: got %d; want 1", got)
	}
}

func gauges(s *Store) (bytes, entries int64) {
	for k := range NumKinds {
		bytes += s.Stats(hms.Kind(k)).Bytes.Load()
		entries += s.Stats(hms.Kind(k)).Entries.Load()
	}
	return bytes, entries
}

func TestGaugesFollowStore(t *testing.T) {
	s := newTestStore(t, Config{})
	body := bytes.Repeat([]byte("x"), 100)
	snap, _ := s.Gens().Take(nil)
	kinds := []hms.Kind{hms.KindTable, hms.KindPartition, hms.KindDatabase}
	for i := 0; i < 300; i++ {
		s.Put([]byte(fmt.Sprint("k", i)), kinds[i%3], body, &snap, s.Now(), false)
	}
	// Replacing a key keeps one entry.
	s.Wait()
	s.Put([]byte("k0"), hms.KindTable, body[:10], &snap, s.Now(), false)
	s.Wait()
	b, n := gauges(s)
	if n <= 0 || n > 300 || b < n*int64(len(body)-90) {
		t.Errorf("after Put: got %d bytes in %d entries; want 1..300 entries", b, n)
	}
	for i := 0; i < 300; i += 2 { // delete some through stale Gets
		s.Get([]byte(fmt.Sprint("k", i)), kinds[i%3])
	}
	s.Clear()
	s.Wait()
	if b, n := gauges(s); b != 0 || n != 0 {
		t.Errorf("after Clear: got %d bytes, %d entries; want 0, 0", b, n)
	}
}

func TestBudget(t *testing.T) {
	const maxBytes = 1 << 20
	s := newTestStore(t, Config{MaxBytes: maxBytes})
	snap, _ := s.Gens().Take(nil)
	body := bytes.Repeat([]byte("y"), 1000)
	for i := 0; i < 10*maxBytes/len(body); i++ {
		s.Put([]byte(fmt.Sprint("key", i)), hms.KindPartition, body, &snap, s.Now(), false)
		if i%1000 == 0 {
			s.Wait()
		}
	}
	s.Wait()
	b, n := gauges(s)
	if b > maxBytes || b <= 0 {
		t.Errorf("after 10x the budget: got %d bytes in %d entries; want 1..%d", b, n, maxBytes)
	}
	st := s.Stats(hms.KindPartition)
	if st.Evicted.Load()+st.Rejected.Load() == 0 {
		t.Errorf("Evicted+Rejected: got 0; want > 0")
	}
}

func TestPutStoresSnapshot(t *testing.T) {
	// Entries with different dep counts decode their own header size.
	s := newTestStore(t, Config{})
	for n := 0; n <= maxDeps; n++ {
		deps := make([]Dep, n)
		for i := range deps {
			deps[i] = s.Gens().Of([]byte{byte(i), byte(n)})
		}
		snap, ok := s.Gens().Take(deps)
		if !ok {
			t.Fatalf("Take(%d deps): false", n)
		}
		key := []byte{byte(n)}
		body := fmt.Sprintf("body%d", n)
		s.Put(key, hms.KindTable, []byte(body), &snap, s.Now(), false)
		s.Wait()
		if e, st := s.Get(key, hms.KindTable); st != Hit || string(e.Body()) != body {
			t.Errorf("%d deps: got %v %q; want Hit %q", n, st, e.Body(), body)
		}
	}
	if _, ok := s.Gens().Take(make([]Dep, maxDeps+1)); ok {
		t.Errorf("Take(%d deps): got true; want false", maxDeps+1)
	}
}

// TestTTLCap (issue 10, item 9): a cap bounds every kind's TTL, for
// entries cached before it was set too, and its refresh age; lifting it
// restores the kind's own TTL.
func TestTTLCap(t *testing.T) {
	c := newClock()
	s := newTestStore(t, Config{Kinds: DefaultKinds(), Now: c.Now})
	old := startLoad(t, s, getTable("db0", "t1"))
	old.put(s, "old", false)
	s.Wait()
	c.Advance(20 * time.Second)
	s.SetTTLCap(30 * time.Second)
	if got := s.TTLCap(); got != 30*time.Second {
		t.Fatalf("TTLCap: got %v; want 30s", got)
	}
	if _, st := s.Get(old.key, hms.KindTable); st != HitRefresh {
		t.Fatalf("20s-old entry under a 30s cap: got %v; want HitRefresh (past half the cap)", st)
	}
	c.Advance(15 * time.Second)
	if _, st := s.Get(old.key, hms.KindTable); st != Miss {
		t.Fatalf("35s-old entry under a 30s cap: got %v; want Miss", st)
	}
	if s.Put(old.key, old.kind, []byte("late"), &old.snap, old.started, false) {
		t.Fatal("Put of a load begun 35s ago under a 30s cap: admitted")
	}

	s.SetTTLCap(0)
	l := startLoad(t, s, getTable("db0", "t2"))
	l.put(s, "new", false)
	s.Wait()
	c.Advance(35 * time.Second)
	if _, st := s.Get(l.key, hms.KindTable); st != Hit {
		t.Fatalf("35s-old entry with the cap lifted: got %v; want Hit (TTL 10m)", st)
	}
}

// TestKindAndScopeCaps (issue 20): a kind's cap bounds that kind only,
// comes down but never up, and the scope cap bounds every kind until it
// is lifted.
func TestKindAndScopeCaps(t *testing.T) {
	c := newClock()
	s := newTestStore(t, Config{Kinds: DefaultKinds(), Now: c.Now})
	tbl := startLoad(t, s, getTable("db0", "t1"))
	tbl.put(s, "t", false)
	parts := startLoad(t, s, getPartition("db0", "t1", "1"))
	parts.put(s, "p", false)
	s.Wait()
	s.CapKindTTL(hms.KindTable, 30*time.Second)
	s.CapKindTTL(hms.KindTable, time.Hour) // a longer cap does not lift it
	if got := s.KindTTLCap(hms.KindTable); got != 30*time.Second {
		t.Fatalf("KindTTLCap(table) = %v; want 30s", got)
	}
	c.Advance(40 * time.Second)
	if _, st := s.Get(tbl.key, hms.KindTable); st != Miss {
		t.Errorf("40s-old table under a 30s table cap: %v; want Miss", st)
	}
	if _, st := s.Get(parts.key, hms.KindPartition); st == Miss {
		t.Errorf("40s-old partition under a table cap only: Miss; want a hit")
	}
	s.SetScopeTTLCap(20 * time.Second)
	if _, st := s.Get(parts.key, hms.KindPartition); st != Miss {
		t.Errorf("40s-old partition under a 20s scope cap: %v; want Miss", st)
	}
	s.SetScopeTTLCap(0)
	l := startLoad(t, s, getPartition("db0", "t1", "2"))
	l.put(s, "p2", false)
	s.Wait()
	c.Advance(time.Minute)
	if _, st := s.Get(l.key, hms.KindPartition); st == Miss {
		t.Errorf("1m-old partition with the scope cap lifted: Miss; want a hit")
	}
}

// TestAddedKeepsExisting (#12): stored entries follow the narrowed
// invalidation of an add. The entry of an existing partition (admitted
// under Snapshot.Existing) survives it, a not-found answer and a name
// list do not, and a plain partitions write drops all three. A load
// that raced the add is admitted only as an existing partition.
func TestAddedKeepsExisting(t *testing.T) {
	s := newTestStore(t, Config{Kinds: func() [NumKinds]KindConfig {
		k := DefaultKinds()
		k[hms.KindPartition].Negative = true
		return k
	}()})
	names := req{"get_partition_names", hmsreq.Args(hmsreq.Str(1, "db0"), hmsreq.Str(2, "t1")), scA}
	existing, absent, list := startLoad(t, s, getPartition("db0", "t1", "1")), startLoad(t, s, getPartition("db0", "t1", "2")), startLoad(t, s, names)
	existing.snap = existing.snap.Existing()
	for _, l := range []*load{&existing, &absent, &list} {
		if !l.put(s, "x", l == &absent) {
			t.Fatal("Put: refused")
		}
	}
	s.Wait()
	added := Entity{Level: LevelPartitions, Cat: "hive", DB: "db0", Table: "t1", Added: true}
	racing, racingAbsent := startLoad(t, s, getPartition("db0", "t1", "3")), startLoad(t, s, getPartition("db0", "t1", "4"))
	s.Apply("a", []Entity{added})
	hit := func(l load) bool { _, st := s.Get(l.key, l.kind); return st != Miss }
	if !hit(existing) || hit(absent) || hit(list) {
		t.Fatalf("after an add: existing %v, not found %v, list %v; want true, false, false", hit(existing), hit(absent), hit(list))
	}
	racing.snap = racing.snap.Existing()
	if !racing.put(s, "p3", false) || racingAbsent.put(s, "none", true) {
		t.Fatal("a load that raced an add: want an existing partition admitted and a not-found answer refused")
	}
	s.Apply("a", []Entity{{Level: LevelPartitions, Cat: "hive", DB: "db0", Table: "t1"}})
	if hit(existing) {
		t.Fatal("an existing partition's entry survived a partitions write")
	}
}
