package proxy

import (
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/hmsclient"
	"github.com/hmsproxy/hmsproxy/internal/hmsreq"
	"github.com/hmsproxy/hmsproxy/internal/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/ratelimit"
	"github.com/hmsproxy/hmsproxy/internal/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// TestRateLimitedUser (issue 14): a user over the rate limit gets a
// MetaException that says so, cache hits included; the connection stays
// open, and other users and other classes are not affected.
func TestRateLimitedUser(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	var lims ratelimit.Limits
	lims[ratelimit.ClassRead] = ratelimit.Limit{Rate: 0.001, Burst: 2}
	lim, err := ratelimit.New(ratelimit.Config{Default: lims})
	if err != nil {
		t.Fatal(err)
	}
	_, paddr := serve(t, Config{Cache: newCaching(t, nil), Limiter: lim}, proxytest.Group(t, upstream.Config{}, addr))

	bob, alice := userConn(t, paddr, "bob"), userConn(t, paddr, "alice")
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	for i := 0; i < 2; i++ {
		if f := resultField(t, call(t, bob, "get_table", get)); f != 0 {
			t.Fatalf("bob's read %d answered field %d; want success (within the burst)", i+1, f)
		}
	}
	over := call(t, bob, "get_table", get) // would be a cache hit
	if f := resultField(t, over); f != 1 {
		t.Fatalf("bob's third read answered field %d; want 1 (MetaException)", f)
	}
	if !strings.Contains(string(over), `rate limit exceeded for user "bob"`) {
		t.Fatalf("refusal %q does not say why", over)
	}
	// get_table_objects_by_name declares no MetaException in 2.3.
	objs := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Strings(2, "t0"))
	if m, err := wire.Parse(call(t, bob, "get_table_objects_by_name", objs), wire.Limits{}); err != nil || m.Type != wire.Exception {
		t.Fatalf("refused get_table_objects_by_name: type %d, %v; want a TApplicationException", m.Type, err)
	}
	// Same connection, another class: answered.
	if m, err := wire.Parse(call(t, bob, "getStatus", hmsreq.Args()), wire.Limits{}); err != nil || m.Type != wire.Reply {
		t.Fatalf("bob's getStatus after the refusals: %v; want a reply on the same connection", err)
	}
	if f := resultField(t, call(t, alice, "get_table", get)); f != 0 {
		t.Fatalf("alice's read answered field %d; bob's limit spilled over", f)
	}
	if n := lim.Stats().Limited[ratelimit.ClassRead].Load(); n != 2 {
		t.Fatalf("limited reads counted %d; want 2", n)
	}
}

// TestBackgroundNotRateLimited guards issue 12: the warm-up's in-process
// connections load as a user whose per-user limit does not apply to
// them (they are bounded by their concurrency); the same user on a
// client connection is limited.
func TestBackgroundNotRateLimited(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	var lims ratelimit.Limits
	lims[ratelimit.ClassRead] = ratelimit.Limit{Rate: 0.001, Burst: 2}
	lim, err := ratelimit.New(ratelimit.Config{Default: lims})
	if err != nil {
		t.Fatal(err)
	}
	srv, paddr := serve(t, Config{Cache: newCaching(t, nil), Limiter: lim}, proxytest.Group(t, upstream.Config{}, addr))
	nc, err := srv.DialBackground()
	if err != nil {
		t.Fatal(err)
	}
	bg := hmsclient.New(nc, wire.Buffered)
	t.Cleanup(func() { bg.Close() })
	call(t, bg, "set_ugi", ugiArgs("hive"))
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	for i := 0; i < 5; i++ {
		if f := resultField(t, call(t, bg, "get_table", get)); f != 0 {
			t.Fatalf("background read %d answered field %d; want success (not limited)", i+1, f)
		}
	}
	client := userConn(t, paddr, "hive")
	for i := 0; i < 2; i++ {
		call(t, client, "get_table", get)
	}
	if f := resultField(t, call(t, client, "get_table", get)); f != 1 {
		t.Fatalf("the same user's third client read answered field %d; want 1 (limited)", f)
	}
}
