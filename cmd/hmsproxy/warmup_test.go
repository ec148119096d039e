package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
)

// TestWarmUpConcurrency guards issue 12: the warm-up never takes more
// than half the connections that reads do not reserve.
func TestWarmUpConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		conf, maxConns, reserved int
		want                     int
	}{
		{"defaults", 0, 0, 0, 4},              // 64 conns, 16 reserved: 24 allowed
		{"configured", 16, 64, 0, 16},         // within 24
		{"lowered", 40, 64, 0, 24},            // (64-16)/2
		{"small pool", 4, 4, 0, 1},            // 4 conns, 1 reserved: 3/2
		{"no reservation", 8, 8, -1, 4},       // 8/2
		{"reservation capped", 4, 4, 10, 1},   // reserved at most 3: 1/2, at least 1
		{"explicit reservation", 8, 20, 4, 8}, // (20-4)/2 = 8
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := warmUpConcurrency(tc.conf, tc.maxConns, tc.reserved); got != tc.want {
				t.Fatalf("warmUpConcurrency(%d, %d, %d) = %d; want %d", tc.conf, tc.maxConns, tc.reserved, got, tc.want)
			}
		})
	}
}

// TestWarmUpWiring runs the binary's wiring with the demo metastore and
// housekeeping.warm_up set: the warm-up runs at start, and POST
// /cache/warm starts another; both show on the status page.
func TestWarmUpWiring(t *testing.T) {
	cfg := demoConfig(t)
	cfg.Housekeeping.WarmUp = []string{"demo_db0"}
	cfg.Housekeeping.WarmUpConcurrency = 2
	runInProcess(t, cfg)

	var st struct {
		WarmUp *struct {
			Targets         []string
			Running         bool
			Runs            uint64
			TablesDone      int64 `json:"tables_done"`
			Partitions      int64
			PartitionsFound int64 `json:"partitions_found"`
			Errors          int64
		} `json:"warm_up"`
	}
	waitRuns := func(runs uint64) {
		t.Helper()
		proxytest.Eventually(t, fmt.Sprintf("warm-up run %d on the status page", runs), func() bool {
			resp, err := http.Get("http://" + cfg.Admin.Listen + "/status.json")
			if err != nil {
				return false // the admin listener is bound after the proxy's
			}
			defer resp.Body.Close()
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
				t.Fatal(err)
			}
			return st.WarmUp != nil && st.WarmUp.Runs == runs && !st.WarmUp.Running
		})
		if w := st.WarmUp; w.Errors != 0 || w.TablesDone == 0 || w.Partitions == 0 || w.Partitions != w.PartitionsFound {
			t.Fatalf("warm-up run %d: %+v; want tables and all their partitions loaded", runs, *w)
		}
	}
	waitRuns(1)
	if got := st.WarmUp.Targets; len(got) != 1 || got[0] != "demo_db0" {
		t.Fatalf("boot warm-up targets: %v; want [demo_db0]", got)
	}
	resp, err := http.Post("http://"+cfg.Admin.Listen+"/cache/warm", "application/json", strings.NewReader(`{"targets":["demo_db1.t*"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /cache/warm: got %d; want 202", resp.StatusCode)
	}
	waitRuns(2)
	if got := st.WarmUp.Targets; len(got) != 1 || got[0] != "demo_db1.t*" {
		t.Fatalf("on-demand warm-up targets: %v; want [demo_db1.t*]", got)
	}
}
