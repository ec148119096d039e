package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/module"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/trace"
)

// TestReplayConfigKeys keeps replay's reading of --config in step with
// hmsproxy's settings: every key of the cache section (as
// docs/configuration.md, generated from the settings, lists them) is
// either read by replay or named as ignored, with the reason.
func TestReplayConfigKeys(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(module.Root(t), "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, prefix string) {
		for i := range ty.NumField() {
			f := ty.Field(i)
			key := prefix + strings.Split(f.Tag.Get("yaml"), ",")[0]
			ft := f.Type
			switch {
			case ft.Kind() == reflect.Struct:
				walk(ft, key+".")
			case ft.Kind() == reflect.Map:
				walk(ft.Elem(), key+".<kind>.")
			default:
				read[key] = true
			}
		}
	}
	walk(reflect.TypeFor[replayFile](), "")
	rows := regexp.MustCompile("(?m)^\\| `(cache\\.[^`]+)` \\| (\\S+)")
	for _, m := range rows.FindAllStringSubmatch(string(doc), -1) {
		key, flag := m[1], m[2]
		section := flag == "—" && !strings.Contains(key, "<")
		if section || read[key] || ignoredCacheKeys[key] != "" {
			continue
		}
		t.Errorf("hmsproxy's %s is neither read by hmsbench replay --config nor in ignoredCacheKeys", key)
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
