// Package module finds, for a test, the root of the module it runs in.
package module

import (
	"os"
	"path/filepath"
	"testing"
)

// Root is the nearest directory at or above the test's working directory
// that holds go.mod; it fails the test where there is none.
func Root(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatalf("module: no go.mod above %s", wd)
		}
	}
}
