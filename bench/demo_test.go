package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestDemoComparison runs a short demo comparison end to end: setup on the
// metastore, cold and warm phases against it and the proxy, metrics.
func TestDemoComparison(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run; skipped with -short")
	}
	d, err := StartDemo(DemoConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec := Spec{Databases: 1, Tables: 4, Partitions: 48, Columns: 5, Params: 2}
	st, err := Setup(ctx, d.Direct, wire.Buffered, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Databases != 1 || st.Tables != 4 || st.Partitions != 4*48 {
		t.Fatalf("setup created %+v; want 1 db, 4 tables, 192 partitions", st)
	}
	if st, err = Setup(ctx, d.Direct, wire.Buffered, spec, nil); err != nil || st.Tables+st.Partitions+st.Databases != 0 {
		t.Fatalf("second setup: %+v, %v; want everything skipped", st, err)
	}
	rep, err := Run(ctx, Config{
		Targets: []Target{d.Direct, d.Proxy}, Baseline: "direct",
		Ops:         []string{"getTable", "trino-planning", "addPartitions", "renameTable"},
		Concurrency: []int{2}, Duration: 400 * time.Millisecond, Warmup: 100 * time.Millisecond,
		Phases: []string{"cold", "warm"}, Spec: spec, FlushURL: d.FlushURL, KeyDist: "zipf",
	})
	if err != nil {
		t.Fatal(err)
	}
	find := func(op, phase, target string) Row {
		t.Helper()
		for _, r := range rep.Rows {
			if r.Op == op && r.Phase == phase && r.Target == target {
				return r
			}
		}
		t.Fatalf("no row %s %s %s", op, phase, target)
		return Row{}
	}
	for _, target := range []string{"direct", "proxy"} {
		cold := find("getTable", "cold", target)
		if cold.Count != 4 || cold.Errors != 0 {
			t.Errorf("getTable cold on %s: %d calls, %d errors; want one per table (4), none failed", target, cold.Count, cold.Errors)
		}
		warm := find("getTable", "warm", target)
		if warm.Count == 0 || warm.Errors != 0 || warm.P50 <= 0 || warm.P99 < warm.P50 {
			t.Errorf("getTable warm on %s: %+v", target, warm)
		}
		if stats := find("trino-planning/get_table_statistics_req", "warm", target); stats.Unsupported == 0 {
			t.Errorf("get_table_statistics_req on %s: not counted as unsupported: %+v", target, stats)
		}
		for _, w := range []string{"addPartitions", "renameTable"} {
			if r := find(w, "warm", target); r.Count == 0 || r.Errors != 0 {
				t.Errorf("%s on %s: %d calls, %d errors", w, target, r.Count, r.Errors)
			}
		}
	}
	if r := find("getTable", "cold", "proxy"); r.Saved == nil || *r.Saved != 0 {
		t.Errorf("cold getTable through the proxy: saved %v; want 0 (every key missed)", r.Saved)
	}
	if r := find("getTable", "warm", "proxy"); r.Saved == nil || *r.Saved < 0.9 {
		t.Errorf("warm getTable through the proxy: saved %v; want nearly all", r.Saved)
	}
	if r := find("getTable", "warm", "direct"); r.RatioP50 != 1 || r.Saved != nil {
		t.Errorf("baseline row: ratio %v saved %v; want 1 and none", r.RatioP50, r.Saved)
	}
	var sb strings.Builder
	rep.WriteTable(&sb)
	t.Log("\n" + sb.String())
}
