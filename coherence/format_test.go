package coherence

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

// goldenV1 is what the release before versioned messages wrote for
// goldenMsg, taken from that release's encoder.
const goldenV1 = `{"n":"node-a","s":7,"t":1764561600000000000,"l":"0123abcd","h":"n0nce","e":[["table","hive","db","t"],["all","","",""]]}`

var goldenMsg = message{Node: "node-a", Seq: 7, Time: 1764561600000000000, Layout: "0123abcd", Hello: "n0nce",
	Ents: []cache.Entity{tbl, {Level: cache.LevelAll}}}

// TestFormatGolden: a node set to the previous format writes exactly what
// the previous release wrote, the current format adds only "v", and both
// read back as written.
func TestFormatGolden(t *testing.T) {
	m := goldenMsg
	m.Version = wireV1
	v1, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	if v1 != goldenV1 {
		t.Fatalf("format 1 encodes as\n%s\nwant the previous release's\n%s", v1, goldenV1)
	}
	m.Version = 0
	v2, _ := m.encode()
	if want := strings.TrimSuffix(goldenV1, "}") + `,"v":2}`; v2 != want {
		t.Fatalf("format 2 encodes as\n%s\nwant\n%s", v2, want)
	}
	for _, raw := range []string{v1, v2} {
		got, err := decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got.Node != m.Node || got.Seq != m.Seq || got.Hello != m.Hello || !slices.Equal(got.Ents, m.Ents) {
			t.Fatalf("decoded %+v from %s", got, raw)
		}
	}
	if !strings.HasPrefix(v1, ownPrefix("node-a")) || !strings.HasPrefix(v2, ownPrefix("node-a")) {
		t.Fatalf("own prefix %q does not begin both formats", ownPrefix("node-a"))
	}
}

// TestFormatVersions (issue 15, item 2): a node applies entries of the
// previous format and of the next (which may add fields), and refuses
// one of a version further on: it flushes, counts it, and does not serve
// its cache until such entries stop for the heartbeat timeout.
func TestFormatVersions(t *testing.T) {
	r := redistest.Start(t)
	cfg := fast(r.Client(), "fmt")
	cfg.HeartbeatTimeout = time.Second
	n := run(t, cfg, nil)
	c := r.Client()
	add := func(raw string) {
		t.Helper()
		if err := c.XAdd(context.Background(), &redis.XAddArgs{Stream: "hmsproxy:inval:fmt", Values: []any{"m", raw}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	now := func() string { return strconv.FormatInt(time.Now().UnixNano(), 10) }
	// The previous format and the next one, which adds a field to the
	// entry and to an entity; each sender then leaves, so that it does
	// not fall silent.
	add(`{"n":"old","s":1,"t":` + now() + `,"e":[["table","hive","db","t"]]}`)
	add(`{"n":"old","s":2,"t":` + now() + `,"b":true}`)
	add(`{"n":"next","s":1,"t":` + now() + `,"e":[["table","hive","db","t","extra"]],"x":{"new":1},"v":3}`)
	add(`{"n":"next","s":2,"t":` + now() + `,"b":true,"v":3}`)
	waitFor(t, "both applied", func() bool { got, _ := n.snapshot(); return len(got) == 2 })
	if got, losses := n.snapshot(); !slices.Equal(got, []cache.Entity{tbl, tbl}) || len(losses) != 0 {
		t.Fatalf("applied %v, flushed for %v; want two tables and no flush", got, losses)
	}
	if !n.bus.Synced() {
		t.Fatal("not in sync after readable entries")
	}

	add(`{"n":"far","s":1,"t":` + now() + `,"e":[["table","hive","db","t"]],"v":4}`)
	waitFor(t, "the refusal", func() bool { return n.bus.Stats().Loss("unreadable") == 1 })
	refused := time.Now()
	if n.bus.Synced() {
		t.Fatal("in sync right after an entry in an unreadable format")
	}
	if _, losses := n.snapshot(); !slices.Equal(losses, []string{"unreadable"}) {
		t.Fatalf("flushed for %v; want unreadable", losses)
	}
	if got, _ := n.snapshot(); len(got) != 2 {
		t.Fatalf("applied an unreadable entry: %v", got)
	}
	waitFor(t, "in sync again", n.bus.Synced)
	if d := time.Since(refused); d < 900*time.Millisecond {
		t.Fatalf("in sync again %v after the refusal; want the heartbeat timeout (1s)", d)
	}
}

// mixedPair runs, on r, a node of group writing the
// previous release's format and one writing the current, and waits
// until they know each other.
func mixedPair(t *testing.T, r *redistest.Server, group string) (old, cur *node) {
	t.Helper()
	oldCfg := fast(r.Client(), group)
	oldCfg.Format = FormatVersion - 1
	old = run(t, oldCfg, nil)
	cur = run(t, fast(r.Client(), group), nil)
	peersKnown(t, old, cur)
	return old, cur
}

// TestMixedFormats (issue 15, acceptance): a node writing the previous
// release's format and one writing the current share a bus: each applies
// the other's invalidations before the writer's Publish returns.
func TestMixedFormats(t *testing.T) {
	r := redistest.Start(t)
	old, cur := mixedPair(t, r, "mixed")
	for i := range 5 {
		if err := old.bus.Publish(context.Background(), []cache.Entity{tbl}); err != nil {
			t.Fatal(err)
		}
		if got, _ := cur.snapshot(); len(got) != i+1 {
			t.Fatalf("the current node had applied %d of the old node's invalidations when its publish %d returned", len(got), i+1)
		}
		if err := cur.bus.Publish(context.Background(), []cache.Entity{{Level: cache.LevelAll}}); err != nil {
			t.Fatal(err)
		}
		if got, _ := old.snapshot(); len(got) != i+1 {
			t.Fatalf("the old node had applied %d of the current node's invalidations when its publish %d returned", len(got), i+1)
		}
	}
	for _, n := range []*node{old, cur} {
		if _, losses := n.snapshot(); len(losses) != 0 {
			t.Fatalf("a node flushed for %v", losses)
		}
		if n.bus.Stats().AckTimeouts.Load() != 0 {
			t.Fatal("a publish timed out waiting for the other node")
		}
	}
}

// prevRelease decodes an entry as the releases before narrowed adds did
// (versions 1 and 2 read entities alike): their wire struct, which has
// no "a", and their entity loop, taken from that release's decoder.
func prevRelease(t *testing.T, raw string) []cache.Entity {
	t.Helper()
	var w struct {
		Node string     `json:"n"`
		Ents [][]string `json:"e,omitempty"`
	}
	if err := json.Unmarshal([]byte(raw), &w); err != nil {
		t.Fatalf("the previous release cannot decode %s: %v", raw, err)
	}
	var ents []cache.Entity
	for _, f := range w.Ents {
		if len(f) != 4 {
			t.Fatalf("the previous release refuses an entity of %d fields in %s", len(f), raw)
		}
		ents = append(ents, cache.Entity{Level: parseLevel(f[0]), Cat: f[1], DB: f[2], Table: f[3]})
	}
	return ents
}

// partitionsKept applies ents to a fresh store and reports whether a
// name list of db.t and the entry of one of its existing partitions
// (by names) are still current.
func partitionsKept(t *testing.T, ents []cache.Entity) (list, existing bool) {
	t.Helper()
	s, err := cache.New(cache.Config{Kinds: cache.DefaultKinds()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := cache.Names{Cat: "hive", DB: "db", Tables: []string{"t"}, HasDB: true}
	sc := cache.Scope{Upstream: "u"}
	take := func(method string) cache.Snapshot {
		deps, ok := s.ReadDeps(nil, sc, hms.Lookup([]byte(method)), &n)
		snap, took := s.Gens().Take(deps)
		if !ok || !took {
			t.Fatalf("%s: not cacheable", method)
		}
		return snap
	}
	names, part := take("get_partition_names"), take("get_partitions_by_names").Existing()
	s.Apply("u", ents)
	return s.Gens().Current(&names), s.Gens().Current(&part)
}

// TestAddedPartitionsMixedFormats (#12): an add of partitions crosses a
// bus of old and new nodes. The previous release reads a new node's add
// as the table's whole partitions, so it still drops the lists and the
// partitions it has; a new node reads it narrowed and keeps the existing
// partitions; a node writing the previous format sends what that
// release sent (no "a"), which a new node applies whole.
func TestAddedPartitionsMixedFormats(t *testing.T) {
	r := redistest.Start(t)
	old, cur := mixedPair(t, r, "adds")
	add := cache.Entity{Level: cache.LevelPartitions, Cat: "hive", DB: "db", Table: "t", Added: true}
	whole := add
	whole.Added = false
	last := func() string {
		t.Helper()
		xs, err := r.Client().XRevRangeN(context.Background(), "hmsproxy:inval:adds", "+", "-", 1).Result()
		if err != nil || len(xs) != 1 {
			t.Fatalf("read the stream: %v", err)
		}
		return xs[0].Values["m"].(string)
	}

	if err := cur.bus.Publish(context.Background(), []cache.Entity{tbl, add}); err != nil {
		t.Fatal(err)
	}
	raw := last()
	if got := prevRelease(t, raw); !slices.Equal(got, []cache.Entity{tbl, whole}) {
		t.Fatalf("the previous release reads %s as %v; want the table and its whole partitions", raw, got)
	}
	if list, existing := partitionsKept(t, prevRelease(t, raw)); list || existing {
		t.Fatalf("the previous release keeps the name list (%v) or an existing partition (%v) after an add; want both dropped", list, existing)
	}
	if got, _ := old.snapshot(); !slices.Equal(got, []cache.Entity{tbl, add}) {
		t.Fatalf("a new node applied %v; want the add narrowed", got)
	}
	if list, existing := partitionsKept(t, []cache.Entity{add}); list || !existing {
		t.Fatalf("narrowed add: name list kept %v, existing partition kept %v; want false, true", list, existing)
	}

	if err := old.bus.Publish(context.Background(), []cache.Entity{add}); err != nil {
		t.Fatal(err)
	}
	if raw := last(); strings.Contains(raw, `"a":`) {
		t.Fatalf("the previous format carries the add marker: %s", raw)
	}
	if got, _ := cur.snapshot(); !slices.Equal(got, []cache.Entity{whole}) {
		t.Fatalf("from a previous-format node, a new node applied %v; want the whole partitions", got)
	}
}

// TestAddedIndexes: "a" narrows only "partitions" entities it names;
// anything else in it is ignored, never widened into an error.
func TestAddedIndexes(t *testing.T) {
	m, err := decode(`{"n":"x","s":1,"t":1,"e":[["table","hive","db","t"],["partitions","hive","db","t"],["partitions","hive","db","u"]],"a":[0,1,7,-1],"v":2}`)
	if err != nil {
		t.Fatal(err)
	}
	want := []cache.Entity{tbl, {Level: cache.LevelPartitions, Cat: "hive", DB: "db", Table: "t", Added: true},
		{Level: cache.LevelPartitions, Cat: "hive", DB: "db", Table: "u"}}
	if !slices.Equal(m.Ents, want) {
		t.Fatalf("decoded %v; want %v", m.Ents, want)
	}
}
