package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/proxy"
)

// TestCacheScopeConfig: cache.scope defaults to auto, the deprecated
// per_user maps to user, and an unknown scope is refused.
func TestCacheScopeConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		yaml    string
		args    []string
		want    proxy.ScopeMode
		wantErr error
	}{
		{"default", "", nil, proxy.ScopeAuto, nil},
		{"file", "cache:\n  scope: shared\n", nil, proxy.ScopeShared, nil},
		{"flag", "", []string{"-cache-scope", "user"}, proxy.ScopeUser, nil},
		{"per_user alias", "cache:\n  scope: shared\n  per_user: true\n", nil, proxy.ScopeUser, nil},
		{"per-user flag", "", []string{"-cache-per-user"}, proxy.ScopeUser, nil},
		{"unknown", "", []string{"-cache-scope", "everyone"}, 0, proxy.ErrScopeMode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HMSPROXY_CONFIG", "")
			args := append([]string{"-demo"}, tc.args...)
			if tc.yaml != "" {
				p := filepath.Join(dir, tc.name+".yaml")
				if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "-config", p)
			}
			c, err := load(args)
			if err != nil {
				t.Fatal(err)
			}
			caching, err := settings.NewCaching(c)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("got error %v; want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			defer caching.Store.Close()
			got := caching.Scope
			if caching.PerUser {
				got = proxy.ScopeUser
			}
			if got != tc.want {
				t.Fatalf("got scope %v; want %v", got, tc.want)
			}
			if c.Cache.ScopeInterval <= 0 {
				t.Fatalf("scope interval %v; want the 10m default", c.Cache.ScopeInterval)
			}
		})
	}
}
