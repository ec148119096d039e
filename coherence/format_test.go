package coherence

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/redistest"
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

// TestMixedFormats (issue 15, acceptance): a node writing the previous
// release's format and one writing the current share a bus: each applies
// the other's invalidations before the writer's Publish returns.
func TestMixedFormats(t *testing.T) {
	r := redistest.Start(t)
	oldCfg := fast(r.Client(), "mixed")
	oldCfg.Format = FormatVersion - 1
	old := run(t, oldCfg, nil)
	cur := run(t, fast(r.Client(), "mixed"), nil)
	waitFor(t, "peers known", func() bool { return len(old.bus.Peers()) == 1 && len(cur.bus.Peers()) == 1 })
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
