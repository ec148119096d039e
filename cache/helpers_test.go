package cache

import (
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

func method(t testing.TB, name string) *hms.Method {
	t.Helper()
	m := hms.Lookup([]byte(name))
	if m == nil {
		t.Fatalf("hms.Lookup(%q) = nil", name)
	}
	return m
}

// readNames extracts a read's names as the proxy does.
func readNames(t testing.TB, m *hms.Method, a []byte) Names {
	t.Helper()
	n, err := ExtractNames(&m.Target, a, "hive")
	if err != nil {
		t.Fatalf("ExtractNames(%s): %v", m.Name, err)
	}
	return n
}
