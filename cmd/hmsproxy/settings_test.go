package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hmsproxy/hmsproxy/proxy"
)

// writeConfig writes body as a config file and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDeclaration (issue 23): every setting says what it is, its
// defaults parse, and they agree with the defaults of the libraries.
func TestDeclaration(t *testing.T) {
	for _, s := range settings() {
		if s.doc == "" {
			t.Errorf("%s: no doc tag", s.key)
		}
		if s.def != "" && s.defDoc != "" {
			t.Errorf("%s: both default and defdoc", s.key)
		}
		if s.zeroOff && s.offDoc == "" {
			t.Errorf("%s: zerooff without off", s.key)
		}
	}
	c := defaults() // panics on a default that does not parse
	for _, tc := range []struct {
		key       string
		got, want any
	}{
		{"limits.client_read_timeout", c.Limits.ClientReadTimeout, proxy.DefaultReadTimeout},
		{"limits.client_idle_timeout", c.Limits.ClientIdleTimeout, proxy.DefaultIdleTimeout},
		{"limits.client_write_timeout", c.Limits.ClientWriteTimeout, proxy.DefaultWriteTimeout},
		{"limits.max_session_bytes", c.Limits.MaxSessionBytes, int64(proxy.DefaultMaxSessionBytes)},
		{"upstream.write_timeout", c.Upstream.WriteTimeout, time.Duration(-1)},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got default %v; want %v", tc.key, tc.got, tc.want)
		}
	}
}

// TestPrintDefaultsRoundTrip (issue 23): --print-defaults is a config
// file that reads back as the defaults, without a warning.
func TestPrintDefaultsRoundTrip(t *testing.T) {
	t.Setenv("HMSPROXY_CONFIG", "")
	def := defaults()
	b, err := configYAML(&def)
	if err != nil {
		t.Fatal(err)
	}
	want, err := load([]string{"--demo"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := load([]string{"--demo", "--config", writeConfig(t, string(b))})
	if err != nil {
		t.Fatalf("the printed defaults do not load: %v\n%s", err, b)
	}
	if got.warnings != nil {
		t.Errorf("got warnings %q; want none", got.warnings)
	}
	// Compared as printed: a file's [] is an empty list where the
	// defaults have nil, which means the same.
	gotYAML, err := configYAML(&got)
	if err != nil {
		t.Fatal(err)
	}
	wantYAML, err := configYAML(&want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotYAML, wantYAML) {
		t.Errorf("got config\n%s\nwant\n%s", gotYAML, wantYAML)
	}
	for _, s := range settings() {
		if s.index != nil && !bytes.Contains(b, []byte(s.key[strings.LastIndex(s.key, ".")+1:]+":")) {
			t.Errorf("%s is missing from the printed defaults", s.key)
		}
	}
}

// TestZeroRule (issue 23): left out, 0 or "" is the default; off is off;
// where 0 or "" meant off before the rule it still does, with a warning;
// old flag names and keys still work, with a warning.
func TestZeroRule(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		args     []string
		check    func(c fileConfig) bool
		warnings int
	}{
		{"0 is the default", "upstream:\n  max_conns: 0\nredis:\n  heartbeat: 0s\n", nil,
			func(c fileConfig) bool { return c.Upstream.MaxConns == 64 && c.Redis.Heartbeat == time.Second }, 0},
		{"empty is the default", "log:\n  level: \"\"\n", []string{"--cache.scope", ""},
			func(c fileConfig) bool { return c.Log.Level == "info" && c.Cache.Scope == "auto" }, 0},
		{"off in the file", "eventlog:\n  interval: off\nadmin:\n  listen: off\nlimits:\n  inflight_bytes: off\n", nil,
			func(c fileConfig) bool {
				return c.EventLog.Interval < 0 && c.Admin.Listen == "" && c.Limits.InflightBytes < 0
			}, 0},
		{"off as a flag", "", []string{"--shutdown.drain_delay", "off", "--cache.shadow.rate", "off"},
			func(c fileConfig) bool { return c.drainDelay() == 0 && c.Cache.Shadow.Rate < 0 }, 0},
		{"off in a kind", "cache:\n  kinds:\n    table:\n      ttl: off\n", nil,
			func(c fileConfig) bool { return *c.Cache.Kinds["table"].TTL < 0 }, 0},
		{"old 0 for off", "eventlog:\n  interval: 0\nshutdown:\n  drain_delay: 0s\ncache:\n  kinds:\n    table:\n      ttl: 0s\n", nil,
			func(c fileConfig) bool {
				return c.EventLog.Interval < 0 && c.drainDelay() == 0 && *c.Cache.Kinds["table"].TTL < 0
			}, 3},
		{"old flag", "", []string{"--upstream-max-conns", "8", "--ratelimit-read", "5"},
			func(c fileConfig) bool { return c.Upstream.MaxConns == 8 && c.RateLimit.Read.Rate == 5 }, 2},
		{"old shutdown_timeout", "shutdown_timeout: 7s\n", nil,
			func(c fileConfig) bool { return c.Shutdown.Timeout == 7*time.Second && c.ShutdownTimeout == nil }, 1},
		{"old shutdown_timeout, new flag wins", "shutdown_timeout: 7s\n", []string{"--shutdown.timeout", "9s"},
			func(c fileConfig) bool { return c.Shutdown.Timeout == 9*time.Second }, 1},
		{"off where off is not", "", []string{"--upstream.max_conns", "off"}, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HMSPROXY_CONFIG", "")
			args := append([]string{"--demo"}, tc.args...)
			if tc.yaml != "" {
				args = append(args, "--config", writeConfig(t, tc.yaml))
			}
			c, err := load(args)
			if tc.check == nil {
				if err == nil {
					t.Fatal("got no error; want one")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("got %+v", c)
			}
			if len(c.warnings) != tc.warnings {
				t.Errorf("got warnings %q; want %d", c.warnings, tc.warnings)
			}
		})
	}
}

// TestOldFlagNames (issue 23): every flag name before flags followed the
// keys still sets its key.
func TestOldFlagNames(t *testing.T) {
	want := strings.Fields(`upstream upstream-name upstream-transport upstream-max-conns dial-timeout read-timeout
		write-timeout upstream-idle-timeout health-interval acquire-timeout upstream-hold-max-bytes stream-write-timeout
		upstream-reserved-read-conns max-message-bytes max-depth max-clients max-clients-per-address client-read-timeout
		client-idle-timeout client-write-timeout inflight-bytes max-session-bytes flush-burst flush-rate flush-interval
		shutdown-timeout drain-delay log-level log-format cache cache-maximum-bytes cache-ttl cache-refresh-interval
		cache-missing cache-scope cache-scope-interval cache-per-user warm-up-user default-catalog cache-allow cache-deny
		cache-refresh-workers cache-prune cache-known-reads cache-shadow-rate eventlog-interval eventlog-batch
		eventlog-health-interval cache-ttl-without-eventlog cache-unlogged-writes cache-user-scope-ttl open-txns-interval
		compactions-interval txn-reaper txn-reaper-abort txn-timeout warm-up warm-up-batch warm-up-concurrency
		ratelimit-read ratelimit-write ratelimit-other ratelimit-redis redis redis-sentinel-master redis-sentinel
		redis-cluster node-id redis-heartbeat redis-heartbeat-timeout redis-peer-gone admin`)
	old := map[string]bool{}
	for _, s := range settings() {
		for _, o := range s.old {
			old[o] = true
		}
	}
	for _, name := range want {
		if !old[name] {
			t.Errorf("--%s is no longer a flag", name)
		}
	}
	if len(old) != len(want) {
		t.Errorf("got %d old names; want %d", len(old), len(want))
	}
}

// TestConfigurationDoc (issue 23): docs/configuration.md is generated
// from the declaration; regenerate it with go generate ./cmd/hmsproxy.
func TestConfigurationDoc(t *testing.T) {
	var b bytes.Buffer
	if err := writeConfigDoc(&b); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Fatal("docs/configuration.md is out of date: run go generate ./cmd/hmsproxy")
	}
	for _, s := range settings() {
		if !bytes.Contains(got, []byte("`"+s.key+"`")) {
			t.Errorf("%s is not in docs/configuration.md", s.key)
		}
	}
}

// TestConfigurationDocExample: the example in docs/configuration.md
// loads, without a warning.
func TestConfigurationDocExample(t *testing.T) {
	t.Setenv("HMSPROXY_CONFIG", "")
	c, err := load([]string{"--config", writeConfig(t, configDocExample)})
	if err != nil {
		t.Fatalf("the example does not load: %v", err)
	}
	if c.warnings != nil {
		t.Errorf("got warnings %q; want none", c.warnings)
	}
	if len(c.Upstream.URIs) != 2 || c.Cache.MaximumBytes != 1<<30 {
		t.Errorf("got uris %v, cache.maximum_bytes %d; want the example's", c.Upstream.URIs, c.Cache.MaximumBytes)
	}
}

// TestBuildInfoMetric (issue 23): hmsproxy_build_info says which build
// runs.
func TestBuildInfoMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := registerBuildInfo(reg, buildInfo{version: "v9", goVersion: "go1.x", revision: "abc"}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got = append(got, fmt.Sprintf("%s %v %g", mf.GetName(), labels, m.GetGauge().GetValue()))
		}
	}
	want := "hmsproxy_build_info map[goversion:go1.x revision:abc version:v9] 1"
	if len(got) != 1 || got[0] != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

// TestVersionFlag (issue 23): --version prints the version set at build
// time, and --print-defaults a file the binary starts from.
func TestVersionFlag(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "hmsproxy")
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v1.2.3-test -X main.revision=abc123", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "hmsproxy v1.2.3-test (revision abc123, ") {
		t.Errorf("got %q, %v; want hmsproxy v1.2.3-test (revision abc123, ...)", out, err)
	}
	def, err := exec.Command(bin, "--print-defaults").Output()
	if err != nil {
		t.Fatal(err)
	}
	// The defaults name no upstream: the binary must say so, and nothing else.
	out, err = exec.Command(bin, "--config", writeConfig(t, string(def))).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no upstream") {
		t.Errorf("got %q, %v; want the no-upstream error alone", out, err)
	}
}
