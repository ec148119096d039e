package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPruneConfig: cache.prune (file) and -cache-prune (flag, winning
// over the file) turn local pruning off; it is on by default (#12).
func TestPruneConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte("cache:\n  prune: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		wantOff bool
	}{
		{"default", nil, false},
		{"file", []string{"-config", p}, true},
		{"flag", []string{"-cache-prune=false"}, true},
		{"flag wins", []string{"-config", p, "-cache-prune=true"}, false},
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
			if caching.PruneOff != tc.wantOff {
				t.Errorf("got PruneOff %v; want %v", caching.PruneOff, tc.wantOff)
			}
		})
	}
}
