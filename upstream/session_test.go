package upstream

import (
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestSessionKeySmall (issue 22, item 6): a session's key, which names
// its idle metastore connections in the pool for minutes after its client
// has gone, is a digest: it does not keep the session's names alive.
// Sessions with different state still get different keys.
func TestSessionKeySmall(t *testing.T) {
	ugi := func(user string, groups ...string) []byte {
		e := wire.Encoder{}
		e.StringField(1, user)
		e.FieldBegin(wire.TList, 2)
		e.ListBegin(wire.TString, len(groups))
		for _, g := range groups {
			e.String(g)
		}
		e.Stop()
		return e.B
	}
	big := NoSession.WithUGI(ugi(strings.Repeat("u", 700), strings.Repeat("g", 60<<10)))
	conf := big.WithConf("hive.metastore.try.direct.sql", strings.Repeat("v", 60<<10))
	keys := map[string]string{}
	for name, s := range map[string]*Session{
		"ugi": big, "ugi+conf": conf, "alice": NoSession.WithUGI(ugi("alice")),
		"bob": NoSession.WithUGI(ugi("bob")), "authenticated alice": AuthenticatedSession("alice"),
	} {
		if len(s.Key()) > 64 {
			t.Errorf("%s: key of %d bytes; want a digest of at most 64", name, len(s.Key()))
		}
		if other, dup := keys[s.Key()]; dup {
			t.Errorf("%s and %s share a key", name, other)
		}
		keys[s.Key()] = name
	}
	if NoSession.WithUGI(ugi("alice")).Key() != NoSession.WithUGI(ugi("alice")).Key() {
		t.Error("equal sessions got different keys")
	}
}
