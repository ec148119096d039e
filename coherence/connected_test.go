package coherence

import (
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
)

// TestConnectedIgnoresSilentPeers: a node cut from Redis is not
// Connected; its peer, which stops serving its cache for it (Synced
// false), stays Connected (issue 15: readiness).
func TestConnectedIgnoresSilentPeers(t *testing.T) {
	r := redistest.Start(t)
	a, cut, relay := runCuttable(t, r, fast(r.Client(), "c"))
	if !a.bus.Connected() || !cut.bus.Connected() {
		t.Fatalf("Connected() = %v, %v before the cut; want true, true", a.bus.Connected(), cut.bus.Connected())
	}

	relay.Cut()
	waitFor(t, "the cut node not connected", func() bool { return !cut.bus.Connected() })
	waitFor(t, "the peer silent", func() bool { return !a.bus.Synced() })
	if !a.bus.Connected() {
		t.Fatal("a node whose peer fell silent is not Connected; want Connected, only Synced false")
	}

	relay.Restore()
	waitFor(t, "reconnected", func() bool { return cut.bus.Connected() && a.bus.Synced() })
}
