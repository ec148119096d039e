package proxy

import (
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestGroupCallsSingleGroup: without a router the one group's call
// counts (status page, hmsproxy_group_requests_total) are the call
// stats, which the connection loop keeps anyway.
func TestGroupCallsSingleGroup(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	caching := newCaching(t, nil)
	var srv *Server
	paddr := startProxyOver(t, caching, addr, func(up Forwarder) Forwarder { return up }, func(s *Server) { srv = s })
	c := dial(t, paddr, wire.Buffered)
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	call(t, c, "get_table", get)
	caching.Store.Wait()
	call(t, c, "get_table", get)
	call(t, c, "get_table", get)
	// A call is counted after its reply is written: the client may read
	// the reply first.
	eventually(t, "three calls counted", func() bool {
		return srv.GroupCalls(0, OutcomeMiss)+srv.GroupCalls(0, OutcomeHit) == 3
	})
	if got := srv.GroupCalls(0, OutcomeMiss); got != 1 {
		t.Errorf("primary misses = %d, want 1", got)
	}
	if got := srv.GroupCalls(0, OutcomeHit); got != 2 {
		t.Errorf("primary hits = %d, want 2", got)
	}
	if got := srv.GroupCalls(1, OutcomeHit); got != 0 {
		t.Errorf("group 1 of a single-group proxy = %d, want 0", got)
	}
}
