package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestKnownReadsConfig: cache.known_reads (file) and -cache-known-reads
// (flag, winning over the file) reach the proxy's caching config.
func TestKnownReadsConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte("cache:\n  known_reads: [get_a, get_b]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
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
			t.Setenv("HMSPROXY_CONFIG", "")
			c, err := load(append([]string{"-demo"}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			caching, err := newCaching(c)
			if err != nil {
				t.Fatal(err)
			}
			defer caching.Store.Close()
			if !slices.Equal(caching.KnownReads, tc.want) {
				t.Errorf("got known reads %q; want %q", caching.KnownReads, tc.want)
			}
		})
	}
}
