package proxy

import (
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/limits/inflight"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// metaExceptionReply reports whether reply (a whole message) is a REPLY
// whose result is the MetaException field (o1) of a session call.
func metaExceptionReply(t testing.TB, reply []byte) bool {
	t.Helper()
	m, err := wire.Parse(reply, wire.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := wire.ResultField(m.Body())
	return err == nil && m.Type == wire.Reply && f == 1
}

// TestSessionNamesBounded (issue 22, item 6): set_ugi names longer than
// any column the metastore keeps a user or group in (767 characters),
// and session state past limits.max_session_bytes, are refused with a
// MetaException before the metastore sees them; the connection stays
// open, without an identity, as after any refused set_ugi. Six
// connections with 40 MiB user names once took RSS to 900 MiB.
func TestSessionNamesBounded(t *testing.T) {
	long := strings.Repeat("u", hms.MaxPrincipalName+1)
	many := make([]string, 200)
	for i := range many {
		many[i] = strings.Repeat("g", 700)
	}
	for _, tc := range []struct {
		name    string
		method  string
		args    []byte
		refused bool
	}{
		{"user at the column width", "set_ugi", ugiArgs(strings.Repeat("u", hms.MaxPrincipalName), "g"), false},
		{"multi-byte user at the width", "set_ugi", ugiArgs(strings.Repeat("é", hms.MaxPrincipalName)), false},
		{"user past the width", "set_ugi", ugiArgs(long), true},
		{"40 MiB user", "set_ugi", ugiArgs(strings.Repeat("u", 40<<20)), true},
		{"group past the width", "set_ugi", ugiArgs("alice", "analysts", long), true},
		{"groups past the session bound", "set_ugi", ugiArgs("alice", many...), true},
		{"conf value past the session bound", "setMetaConf",
			hmsclient.Args("hive.metastore.partition.name.whitelist.pattern", strings.Repeat("x", 100<<10)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			demo, addr := startDemo(t, wire.Buffered)
			_, paddr := serve(t, Config{Limits: wire.Limits{MaxMessage: 64 << 20}}, proxytest.Group(t, upstream.Config{}, addr))
			c := dial(t, paddr, wire.Buffered)
			reply := call(t, c, tc.method, tc.args)
			if got := metaExceptionReply(t, reply); got != tc.refused {
				t.Fatalf("%s answered with a MetaException: %v; want %v", tc.method, got, tc.refused)
			}
			if n := demo.CallCount(tc.method); tc.refused && n != 0 || !tc.refused && n != 1 {
				t.Fatalf("%s reached the metastore %d times; refused %v", tc.method, n, tc.refused)
			}
			if tc.refused && tc.method == "set_ugi" {
				// No identity was set: a set_ugi within the bounds is
				// taken, where a second one would close the connection.
				if metaExceptionReply(t, call(t, c, "set_ugi", ugiArgs("alice"))) {
					t.Fatal("set_ugi(alice) after a refused one was refused")
				}
			}
			call(t, c, "get_all_databases", hmsreq.Args())
		})
	}
}

// TestSessionStateBudgeted (issue 22, item 6): the session state a
// connection keeps (set_ugi args, setMetaConf overrides) is claimed from
// the in-flight budget while the connection lives, and returned when it
// closes.
func TestSessionStateBudgeted(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	b := inflight.New(64 << 20)
	s, paddr := serve(t, Config{Budget: b}, proxytest.Group(t, upstream.Config{Budget: b}, addr))
	c := dial(t, paddr, wire.Buffered)
	groups := make([]string, 40)
	for i := range groups {
		groups[i] = strings.Repeat("g", 200)
	}
	ugi := ugiArgs(strings.Repeat("u", 700), groups...)
	call(t, c, "set_ugi", ugi)
	value := strings.Repeat("v", 20<<10)
	call(t, c, "setMetaConf", hmsclient.Args("hive.metastore.partition.name.whitelist.pattern", value))
	call(t, c, "get_all_databases", hmsreq.Args())
	if held, least := b.InUse(), int64(len(ugi)+len(value)); held < least {
		t.Fatalf("budget in use %d with %d bytes of session state kept; want at least that", held, least)
	}
	c.Close()
	eventually(t, "connection gone", func() bool { return s.Clients() == 0 })
	eventually(t, "session state returned to the budget", func() bool { return b.InUse() == 0 })
}

// FuzzUGIRefusal: the set_ugi check walks args a client wrote; whatever
// they are, it returns, and refuses no args within the bounds.
func FuzzUGIRefusal(f *testing.F) {
	f.Add(ugiArgs("alice", "analysts"))
	f.Add(ugiArgs(strings.Repeat("u", hms.MaxPrincipalName+1)))
	f.Add(ugiArgs("alice", strings.Repeat("é", hms.MaxPrincipalName)))
	f.Add([]byte{wire.TList, 0, 2, wire.TI32, 0x7f, 0xff, 0xff, 0xff})
	f.Add([]byte{wire.TString, 0, 1, 0xff, 0xff, 0xff, 0xff})
	c := &clientConn{s: &Server{cfg: Config{MaxSessionBytes: DefaultMaxSessionBytes}}}
	f.Fuzz(func(t *testing.T, args []byte) {
		if msg := c.ugiRefusal(args); msg != "" && len(args) <= hms.MaxPrincipalName {
			t.Fatalf("refused %d bytes of args, too short to hold a name past the bound: %s", len(args), msg)
		}
	})
}
