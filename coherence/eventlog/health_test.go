package eventlog

import (
	"context"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/internal/testenv/clocktest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// TestHealthDemo (issue 10, item 9): with the demo metastore with and
// without its notification log, writes through a caching proxy decide
// the verdict; without a log every TTL is cut to the configured bound, so
// a write made directly on the metastore shows through the proxy after
// 30s instead of the kind's 5m.
func TestHealthDemo(t *testing.T) {
	const capTTL = 30 * time.Second
	for _, tc := range []struct {
		name      string
		noLog     bool
		want      HealthState
		wantFresh bool // the bypassing write shows after capTTL
	}{
		{"with a notification log", false, HealthOK, false},
		{"without a notification log", true, HealthMissing, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := proxytest.Demo(t, proxytest.DemoOptions{Config: demohms.Config{NoEventLog: tc.noLog}, Seed: [3]int{1, 1, 3}})
			direct := &hmsclient.Redialer{Addr: addr}
			defer direct.Close()

			clk := clocktest.At(time.Now())
			st := proxytest.Store(t, cache.Config{MaxBytes: 16 << 20, Now: clk.Now})
			stats := &Stats{}
			h, err := NewHealth(HealthConfig{Caller: direct, Stats: stats, OnChange: CapWhileMissing(st, capTTL)})
			if err != nil {
				t.Fatal(err)
			}
			srv, err := proxy.New(proxy.Config{Cache: &proxy.Caching{Store: st, Writes: h}}, proxytest.Group(t, upstream.Config{}, addr))
			if err != nil {
				t.Fatal(err)
			}
			c := &hmsclient.Redialer{Addr: proxytest.Serve(t, srv)}
			defer c.Close()
			ctx := context.Background()

			// At start: the seeded demo has logged nothing yet either way.
			if err := h.Check(ctx); err != nil {
				t.Fatal(err)
			}
			if got := h.State(); got != HealthMissing {
				t.Fatalf("empty log at start: got %v; want missing", got)
			}
			// Writes through the proxy, a check after each.
			for _, db := range []string{"h_a", "h_b", "h_c"} {
				if m, err := c.Call(ctx, "create_database", createDBArgs(db)); err != nil || m.Type != wire.Reply {
					t.Fatalf("create_database through the proxy: %v", err)
				}
				if err := h.Check(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got := h.State(); got != tc.want {
				t.Fatalf("after writes through the proxy: got %v; want %v", got, tc.want)
			}
			if got := HealthState(stats.Health.Load()); got != tc.want {
				t.Fatalf("Stats.Health: got %v; want %v", got, tc.want)
			}

			// A cached list, then a write behind the proxy's back.
			count := partitionCounter(t, ctx, c)
			before := count()
			st.Wait()
			// The store counts the hit before the reply is sent (the
			// proxy's own stats count after).
			if count() != before || st.Stats(hms.KindPartitionNames).Hits.Load() != 1 {
				t.Fatal("second read was not a hit: the test would prove nothing")
			}
			dropBehind(t, ctx, direct)
			clk.Advance(capTTL + time.Second)
			fresh := count() == before-1
			if fresh != tc.wantFresh {
				t.Fatalf("%v after a write on the metastore: fresh %v; want %v (TTL cap %v)", capTTL+time.Second, fresh, tc.wantFresh, st.TTLCap())
			}
		})
	}
}

// TestHealthStrikes: the verdict over a scripted log. One check that saw
// writes and no new event is not enough (a write's reply may have been in
// flight while the previous check read the id); two are. Checks without
// writes are no evidence either way.
func TestHealthStrikes(t *testing.T) {
	log := &fakeLog{latest: 7}
	var changes []HealthState
	h, err := NewHealth(HealthConfig{Caller: log, OnChange: func(st HealthState, _ string) { changes = append(changes, st) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	write := func() { h.Wrote("alter_table", nil, true) }
	steps := []struct {
		name    string
		writes  int
		advance int64
		want    HealthState
	}{
		{"first check, log has events", 0, 0, HealthUnknown},
		{"idle", 0, 0, HealthUnknown},
		{"writes logged", 2, 2, HealthOK},
		{"writes not logged, once", 1, 0, HealthOK},
		{"idle again", 0, 0, HealthOK},
		{"writes not logged, twice", 1, 0, HealthMissing},
		{"failed and unlogged writes are no evidence", 0, 0, HealthMissing},
		{"log moves again", 1, 1, HealthOK},
	}
	for _, s := range steps {
		for range s.writes {
			write()
		}
		if s.name == "failed and unlogged writes are no evidence" {
			h.Wrote("alter_table", nil, false)
			h.Wrote("heartbeat", nil, true)
			h.Wrote("add_partitions_req", nil, true)
		}
		log.latest += s.advance
		if err := h.Check(ctx); err != nil {
			t.Fatal(err)
		}
		if got := h.State(); got != s.want {
			t.Fatalf("%s: got %v; want %v", s.name, got, s.want)
		}
	}
	if want := []HealthState{HealthOK, HealthMissing, HealthOK}; len(changes) != len(want) || changes[0] != want[0] || changes[1] != want[1] || changes[2] != want[2] {
		t.Fatalf("changes told: got %v; want %v", changes, want)
	}
}

// TestLoggedLeavesOutUnloggedWrites: a write some version's log does not
// record must not count as evidence that the log is missing, or a
// workload of such writes through the proxy (alter_database on 2.3)
// would cut every TTL on a healthy metastore.
func TestLoggedLeavesOutUnloggedWrites(t *testing.T) {
	for _, m := range hms.UnloggedWrites(hms.VersionUnknown) {
		if Logged(m) {
			t.Errorf("Logged(%q) = true, but some metastore version records no event for it", m)
		}
	}
	for _, m := range []string{"create_table", "drop_table", "alter_table_with_environment_context", "add_partition", "create_function"} {
		if !Logged(m) {
			t.Errorf("Logged(%q) = false, want true", m)
		}
	}
}
