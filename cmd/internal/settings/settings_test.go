package settings

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/proxy"
)

// load reads the config of a command line as hmsproxy does, with body
// as its config file unless it is empty.
func load(t *testing.T, body string, args ...string) (File, error) {
	t.Helper()
	if body != "" {
		p := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", p)
	}
	cl, err := ParseArgs(args, os.Stderr)
	if err != nil {
		return File{}, err
	}
	return cl.Config()
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
	want, err := load(t, "", "--demo")
	if err != nil {
		t.Fatal(err)
	}
	got, err := load(t, string(b), "--demo")
	if err != nil {
		t.Fatalf("the printed defaults do not load: %v\n%s", err, b)
	}
	if got.Warnings != nil {
		t.Errorf("got warnings %q; want none", got.Warnings)
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
		check    func(c File) bool
		warnings int
	}{
		{"0 is the default", "upstream:\n  max_conns: 0\nredis:\n  heartbeat: 0s\n", nil,
			func(c File) bool { return c.Upstream.MaxConns == 64 && c.Redis.Heartbeat == time.Second }, 0},
		{"empty is the default", "log:\n  level: \"\"\n", []string{"--cache.scope", ""},
			func(c File) bool { return c.Log.Level == "info" && c.Cache.Scope == "auto" }, 0},
		{"off in the file", "eventlog:\n  interval: off\nadmin:\n  listen: off\nlimits:\n  inflight_bytes: off\n", nil,
			func(c File) bool {
				return c.EventLog.Interval < 0 && c.Admin.Listen == "" && c.Limits.InflightBytes < 0
			}, 0},
		{"off as a flag", "", []string{"--shutdown.drain_delay", "off", "--cache.shadow.rate", "off"},
			func(c File) bool { return c.DrainWait() == 0 && c.Cache.Shadow.Rate < 0 }, 0},
		{"off in a kind", "cache:\n  kinds:\n    table:\n      ttl: off\n", nil,
			func(c File) bool { return *c.Cache.Kinds["table"].TTL < 0 }, 0},
		{"old 0 for off", "eventlog:\n  interval: 0\nshutdown:\n  drain_delay: 0s\ncache:\n  kinds:\n    table:\n      ttl: 0s\n", nil,
			func(c File) bool {
				return c.EventLog.Interval < 0 && c.DrainWait() == 0 && *c.Cache.Kinds["table"].TTL < 0
			}, 3},
		{"old flag", "", []string{"--upstream-max-conns", "8", "--ratelimit-read", "5"},
			func(c File) bool { return c.Upstream.MaxConns == 8 && c.RateLimit.Read.Rate == 5 }, 2},
		{"old shutdown_timeout", "shutdown_timeout: 7s\n", nil,
			func(c File) bool { return c.Shutdown.Timeout == 7*time.Second && c.ShutdownTimeout == nil }, 1},
		{"old shutdown_timeout, new flag wins", "shutdown_timeout: 7s\n", []string{"--shutdown.timeout", "9s"},
			func(c File) bool { return c.Shutdown.Timeout == 9*time.Second }, 1},
		{"off where off is not", "", []string{"--upstream.max_conns", "off"}, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HMSPROXY_CONFIG", "")
			c, err := load(t, tc.yaml, append([]string{"--demo"}, tc.args...)...)
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
			if len(c.Warnings) != tc.warnings {
				t.Errorf("got warnings %q; want %d", c.Warnings, tc.warnings)
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
	if err := WriteConfigDoc(&b); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../../docs/configuration.md")
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
	c, err := load(t, configDocExample)
	if err != nil {
		t.Fatalf("the example does not load: %v", err)
	}
	if c.Warnings != nil {
		t.Errorf("got warnings %q; want none", c.Warnings)
	}
	if len(c.Upstream.URIs) != 2 || c.Cache.MaximumBytes != 1<<30 {
		t.Errorf("got uris %v, cache.maximum_bytes %d; want the example's", c.Upstream.URIs, c.Cache.MaximumBytes)
	}
}
