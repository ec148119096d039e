package e2e

import (
	"fmt"
	"testing"

	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
)

// TestUnknownMethodReal (issue 10): a method neither the proxy nor the
// metastore knows gets the metastore's own UNKNOWN_METHOD answer through
// the proxy, and flushes what the proxy cached for that metastore: the
// next read is loaded again.
func TestUnknownMethodReal(t *testing.T) {
	eachVersion(t, func(t *testing.T, v string) {
		ms := start(t, v)
		n := startProxy(t, ms, nodeOpts{})
		direct, c := dial(t, ms.addr), dial(t, n.addr)
		read := hmsreq.Args(hmsreq.Str(1, "default"))
		misses := func() uint64 {
			counted(t, c)
			return n.srv.Stats().Method("get_database", proxy.OutcomeMiss)
		}
		call(t, c, "get_database", read)
		n.store.Wait()
		m0 := misses()
		call(t, c, "get_database", read)
		if m := misses(); m != m0 {
			t.Fatalf("second get_database: %d misses; want a hit", m-m0)
		}
		const made = "get_made_up_thing_e2e"
		got, want := call(t, c, made, read), call(t, direct, made, read)
		if !sameButSeqID(got, want) || outcome(t, got) != "app1" {
			t.Fatalf("%s through the proxy answered %s %x; the metastore %s %x; want its UNKNOWN_METHOD",
				made, outcome(t, got), got, outcome(t, want), want)
		}
		m1 := misses()
		if r := call(t, c, "get_database", read); !sameButSeqID(r, call(t, direct, "get_database", read)) {
			t.Errorf("get_database after %s differs from the metastore's", made)
		}
		if m := misses(); m != m1+1 {
			t.Errorf("get_database after %s: %d misses; want 1 (the cache flushed)", made, m-m1)
		}
		flushes := map[string]uint64{}
		n.srv.EachUnknownFlush(func(m string, k uint64) { flushes[m] = k })
		if flushes[made] != 1 {
			t.Errorf("flush counts %v; want %s: 1", flushes, made)
		}
		if !t.Failed() {
			fmt.Printf("e2e: unknown method HMS %s: UNKNOWN_METHOD passed through, cache flushed\n", v)
		}
	})
}
