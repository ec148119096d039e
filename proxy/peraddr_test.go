package proxy

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// TestPerAddressCap guards issue 22: one source address holds at most
// MaxClientsPerAddress connections. Its newcomer replaces its own
// longest-idle connection, or is refused when all of them are in a
// call; other addresses are not affected.
func TestPerAddressCap(t *testing.T) {
	up, arrived, release := holdingFake(t)
	s, addr := serve(t, Config{MaxClients: 100, MaxClientsPerAddress: 3}, proxytest.Group(t, upstream.Config{}, up))
	idle := silent(t, s, "127.0.0.1", addr, 3)
	more := proxytest.DialFrom(t, "127.0.0.1", addr)
	if !wait.Closed(idle[0], 5*time.Second) {
		t.Fatal("at the per-address cap, the address's longest-idle connection is still open")
	}
	if wait.Closed(more, 10*time.Millisecond) {
		t.Fatal("the address's newcomer was refused though it had an idle connection to give up")
	}
	eventually(t, "three clients", func() bool { return s.Clients() == 3 })

	// Every connection of 127.0.0.3 in a call: its next one is refused.
	for range 3 {
		c := hmsclient.New(proxytest.DialFrom(t, "127.0.0.3", addr), wire.Buffered)
		go c.Call(ctxT(t), "get_all_databases", hmsclient.Args())
	}
	inFlight(t, arrived, 3)
	if !wait.Closed(proxytest.DialFrom(t, "127.0.0.3", addr), 5*time.Second) {
		t.Error("a fourth connection of an address whose three are in calls was admitted")
	}
	// Another address is served all along.
	honest := hmsclient.New(proxytest.DialFrom(t, "127.0.0.2", addr), wire.Buffered)
	close(release)
	if _, err := honest.Call(ctxT(t), "get_all_databases", hmsclient.Args()); err != nil {
		t.Fatalf("a client of another address: %v; want served", err)
	}
	var b [1]byte
	more.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := more.Read(b[:]); errors.Is(err, io.EOF) {
		t.Error("the newcomer that replaced an idle connection was closed")
	}
}
