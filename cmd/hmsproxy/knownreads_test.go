package main

import (
	"slices"
	"testing"

	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/proxy"
)

// loadDemo loads the demo proxy's settings from args alone
// (HMSPROXY_CONFIG unset).
func loadDemo(t *testing.T, args ...string) settings.File {
	t.Helper()
	t.Setenv("HMSPROXY_CONFIG", "")
	c, err := load(append([]string{"-demo"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// demoCaching builds the caching config of the demo proxy's settings
// from args (loadDemo), whose store closes when the test ends.
func demoCaching(t *testing.T, args ...string) *proxy.Caching {
	t.Helper()
	caching, err := settings.NewCaching(loadDemo(t, args...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(caching.Store.Close)
	return caching
}

// TestKnownReadsConfig: cache.known_reads (file) and -cache-known-reads
// (flag, winning over the file) reach the proxy's caching config.
func TestKnownReadsConfig(t *testing.T) {
	p := writeConfig(t, "cache:\n  known_reads: [get_a, get_b]\n")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"default", nil, nil},
		{"file", []string{"-config", p}, []string{"get_a", "get_b"}},
		{"flag", []string{"-cache-known-reads", "get_c, get_d"}, []string{"get_c", "get_d"}},
		{"flag wins", []string{"-config", p, "-cache-known-reads", "get_c"}, []string{"get_c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caching := demoCaching(t, tc.args...)
			if !slices.Equal(caching.KnownReads, tc.want) {
				t.Errorf("got known reads %q; want %q", caching.KnownReads, tc.want)
			}
		})
	}
}
