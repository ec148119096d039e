package main

import (
	"testing"
)

// TestPruneConfig: cache.prune (file) and -cache-prune (flag, winning
// over the file) turn local pruning off; it is on by default (#12).
func TestPruneConfig(t *testing.T) {
	p := writeConfig(t, "cache:\n  prune: false\n")
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
			caching := demoCaching(t, tc.args...)
			if caching.PruneOff != tc.wantOff {
				t.Errorf("got PruneOff %v; want %v", caching.PruneOff, tc.wantOff)
			}
		})
	}
}
