package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/internal/testenv/module"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/trace"
)

// TestReplayConfigIsHmsproxys: replay reads --config through hmsproxy's
// loader and builds its cache with hmsproxy's code, so an empty file
// gives it hmsproxy's defaults and a file's cache settings reach it;
// the two caches differ only where replayUndoes says, and every key it
// names is one of hmsproxy's.
func TestReplayConfigIsHmsproxys(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(module.Root(t), "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range replayUndoes {
		if !bytes.Contains(doc, []byte("| `"+u.key+"` |")) {
			t.Errorf("replayUndoes names %s, which is not a setting of hmsproxy", u.key)
		}
	}
	dir := t.TempDir()
	for _, tc := range []struct{ name, file string }{
		{"empty", ""},
		{"set", "upstream:\n  uris: [thrift://hms:9083]\nlimits:\n  flush_burst: 3\neventlog:\n  interval: 2s\n" +
			"cache:\n  maximum_bytes: 8388608\n  ttl: 1m\n  cache_missing: false\n  scope: shared\n  default_catalog: spark\n" +
			"  allow: [sales]\n  prune: false\n  user_scope_ttl: 5s\n  ttl_without_eventlog: 1m\n  unlogged_writes: [alter_table]\n" +
			"  shadow:\n    rate: 0.5\n    max_per_second: 7\n  kinds:\n    table:\n      ttl: off\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".yaml")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			// hmsproxy's caching, from its command line
			cl, err := settings.ParseArgs([]string{"--config", path, "--demo"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			pcfg, err := cl.Config()
			if err != nil {
				t.Fatal(err)
			}
			want, err := settings.NewCaching(pcfg)
			if err != nil {
				t.Fatal(err)
			}
			defer want.Store.Close()
			newCaching, err := readReplayConfig(path, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			got, err := newCaching()
			if err != nil {
				t.Fatal(err)
			}
			defer got.Store.Close()
			for k := range cache.NumKinds {
				if g, w := got.Store.Policy(hms.Kind(k)), want.Store.Policy(hms.Kind(k)); g != w {
					t.Errorf("kind %s: replay's policy %+v; hmsproxy's %+v", hms.Kind(k), g, w)
				}
			}
			if tc.file != "" && (got.UserScopeTTL != 5*time.Second || got.Shadow.MaxPerSecond != 7 || got.Flushes.Burst != 3) {
				t.Errorf("the file's cache settings did not reach the replay: %+v", got)
			}
			if got.Upstream != "replay" || got.TTLUnlogged != 0 || got.UnloggedWrites != nil || got.Shadow.Grace != -1 {
				t.Errorf("replay kept what it undoes: %+v", got)
			}
			for _, u := range replayUndoes {
				u.undo(want)
			}
			want.Upstream = "replay"
			if fmt.Sprint(got.Policy) != fmt.Sprint(want.Policy) {
				t.Errorf("replay's allow/deny %v; hmsproxy's %v", got.Policy, want.Policy)
			}
			want.Store, got.Store = nil, nil
			want.Policy, got.Policy = nil, nil // compiled patterns hold funcs
			if !reflect.DeepEqual(got, want) {
				t.Errorf("replay's cache differs from hmsproxy's beyond replayUndoes:\n got %+v\nwant %+v", got, want)
			}
		})
	}
	for _, bad := range []string{"cache:\n  ttl: 1m\n  no_such_key: 1\n", "cache:\n  shadow:\n    rate: 2\n"} {
		path := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := readReplayConfig(path, io.Discard); err == nil {
			t.Errorf("%q: replay took a config hmsproxy refuses", bad)
		}
	}
}

// hmsbench replay --demo replays a trace recorded against hmsproxy
// --demo, and its last line is the replay line.
func TestReplayCommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "calls.trace")
	rec, err := trace.New(trace.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	rec.Start(0)
	base := time.Now()
	for i := range 200 {
		c := trace.Call{Time: base.Add(time.Duration(i) * time.Millisecond), Conn: 1, Method: "get_table",
			Args: hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t1"))}
		rec.Record(&c)
	}
	rec.Close()
	cfg := filepath.Join(dir, "proxy.yaml")
	os.WriteFile(cfg, []byte("cache:\n  ttl: 1m\n  shadow:\n    rate: off\n  kinds:\n    partitions:\n      ttl: off\n"), 0o600)
	var out, errOut bytes.Buffer
	svg := filepath.Join(dir, "replay.svg")
	if err := run([]string{"replay", "--trace", path, "--demo", "--config", cfg, "--speed", "10", "--svg", svg}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// 199 hits; the proxy's own checks of the metastore's settings
	// (about a dozen calls at start) count against the total.
	m := regexp.MustCompile(`^replay: 200 calls, (9\d\.\d)% metastore calls saved, p50 direct \S+ proxy \S+$`).FindStringSubmatch(lines[len(lines)-1])
	if m == nil || !strings.Contains(out.String(), "get_table  200    199") {
		t.Fatalf("want 200 calls, 199 of them hits, over 90%% saved:\n%s", out.String())
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Fatalf("no chart written: %v", err)
	}
	for _, bad := range [][]string{
		{"replay", "--demo"},
		{"replay", "--trace", path},
		{"replay", "--trace", path, "--demo", "--upstream", "thrift://h:1"},
	} {
		if err := run(bad, &out, &errOut); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
