package federation

import (
	"bytes"
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestPruneKeepsGroupsApart: one connection prunes the primary's
// demo_db0.t0, then the member's lake_demo_db0.t0, which the member
// knows as demo_db0.t0: the made-up reads of both prunes have the same
// args. The connection's memo of them (pruneSynthOf) must tell the
// groups apart, or the member's prune is answered with the primary's
// partitions (promise 6). Found in review of the prune speed-up.
func TestPruneKeepsGroupsApart(t *testing.T) {
	b := newRenamedBed(t, nil)
	c := proxytest.Dial(t, b.addr, wire.Buffered)
	filt := "hr = 3 or hr = 7"
	args := func(db string) []byte {
		return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "t0"), hmsreq.Str(3, filt), hmsreq.I16(4, -1))
	}
	for range 2 { // load, then prune locally
		body(t, proxytest.Call(t, c, "get_partitions_by_filter", args("demo_db0")))
		b.store.Wait()
	}
	want := b.member(t, "get_partitions_by_filter", args("demo_db0"))
	for i := range 2 { // the member's load, then its local prune
		got := body(t, proxytest.Call(t, c, "get_partitions_by_filter", args("lake_demo_db0")))
		if !bytes.Equal(got, want) {
			t.Fatalf("member prune %d on a connection that pruned the primary's same-named table:\n got %q\nwant %q", i, got, want)
		}
		b.store.Wait()
	}
	if n := b.srv.PruneStats().Local.Load(); n == 0 {
		t.Fatal("no prune was answered locally: the test proves nothing")
	}
}
