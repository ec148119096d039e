package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/trace"
)

// TestRecordWiring: record PATH with the cache off records the calls of
// the binary's wiring, and DELETE /record on the admin port ends the
// recording with a complete file; recording.at_start false waits for
// POST /record.
func TestRecordWiring(t *testing.T) {
	for _, atStart := range []bool{true, false} {
		cfg := demoConfig(t)
		cfg.Record = filepath.Join(t.TempDir(), "calls.trace")
		cfg.Cache.Enabled = false
		cfg.Recording.AtStart = atStart
		c := runInProcess(t, cfg)
		base := "http://" + cfg.Admin.Listen
		if !atStart {
			c.Call(t.Context(), "get_all_databases", []byte{0}) // not recorded
			if code, body := adminDo(t, "POST", base+"/record"); code != http.StatusOK {
				t.Fatalf("POST /record: %d %s", code, body)
			}
		}
		for range 3 {
			if _, err := c.Call(t.Context(), "get_table", hmsclient.Args("demo_db0", "t0")); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Call(t.Context(), "get_all_databases", []byte{0}); err != nil { // the one before is counted
			t.Fatal(err)
		}
		if code, body := adminDo(t, "DELETE", base+"/record"); code != http.StatusOK {
			t.Fatalf("DELETE /record: %d %s", code, body)
		}
		l, err := trace.Load(cfg.Record, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Calls) < 3 || l.Calls[0].Method != "get_table" || l.Calls[0].Served != "passthrough" {
			t.Fatalf("at_start %v: recorded %d calls, first %+v; want the 3 get_table calls first, passed through", atStart, len(l.Calls), l.Calls[0])
		}
	}
}

func TestRecordNeedsItsDirectory(t *testing.T) {
	cfg := demoConfig(t)
	cfg.Record = filepath.Join(t.TempDir(), "no-such-dir", "calls.trace")
	if err := run(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "no-such-dir") {
		t.Fatalf("run: %v; want an error naming the missing directory", err)
	}
}
