package upstream

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/auth/certs"
	"github.com/hmsproxy/hmsproxy/auth/certs/certstest"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// trackingListener keeps the connections it accepted, to close them
// under the TLS layer as a metastore restart would.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex // guards conns
	conns []net.Conn
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *trackingListener) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

type discard struct{ ok bool }

func (d *discard) Reply(m wire.Message) error { d.ok = Succeeded(m); return nil }

// TestTLSConnectionsArePooled: over TLS, a connection is verified, used
// and then reused from the pool (the liveness peek looks at the socket
// under the TLS layer); a metastore whose certificate the CA bundle does
// not vouch for is refused.
func TestTLSConnectionsArePooled(t *testing.T) {
	ca := certstest.NewAuthority(t, "hms CA")
	c, k := ca.Issue(t, certstest.ECDSA, 1, "hms", time.Now().Add(time.Hour))
	f := certstest.WriteFiles(t, t.TempDir(), c, k, ca.PEM, 0)
	srvCerts, err := certs.New(certs.Config{Name: "hms", Cert: f.Cert, Key: f.Key, Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srvCerts.Close()
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tracked := &trackingListener{Listener: plain}
	ln, _ := srvCerts.Listener(tracked)
	demo := demohms.New(demohms.Config{})
	go demo.Serve(ln)
	defer demo.Close()

	other := certstest.NewAuthority(t, "other CA")
	otherFile := t.TempDir() + "/other.pem"
	certstest.Write(t, otherFile, other.PEM, 0)
	for _, tc := range []struct {
		name  string
		ca    string
		valid bool
	}{{"trusted", f.CA, true}, {"untrusted", otherFile, false}} {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := certs.New(certs.Config{Name: "upstream", CA: tc.ca, Interval: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			g, err := New(Config{URIs: []string{"thrift://" + plain.Addr().String()}, TLS: cl.ClientConfig, HealthInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			msg := wire.AppendHeader(nil, wire.Call, []byte("get_all_databases"), 1)
			msg = append(msg, wire.TStop)
			m, err := wire.Parse(msg, wire.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				var sink discard
				err := g.Do(context.Background(), Call{Session: &Session{}, Class: Read, Msg: m}, &sink)
				if !tc.valid {
					if err == nil {
						t.Fatal("metastore with a certificate from a CA not in the bundle: got no error")
					}
					return
				}
				if err != nil || !sink.ok {
					t.Fatalf("call %d: err %v, ok %v", i, err, sink.ok)
				}
			}
			// The health checks' getStatus calls have connections of their own.
			conns := map[uint64]bool{}
			for _, c := range demo.Calls() {
				if c.Method == "get_all_databases" {
					conns[c.Conn] = true
				}
			}
			if len(conns) != 1 {
				t.Fatalf("three sequential calls went over %d TLS connections; want 1, reused from the pool", len(conns))
			}
			// The metastore drops its connections: the idle one must be
			// seen as dead, not reused for a write that would then fail.
			tracked.closeAll()
			var sink discard
			create := wire.AppendHeader(nil, wire.Call, []byte("create_database"), 2)
			create = append(create, wire.TStruct, 0, 1, wire.TString, 0, 1, 0, 0, 0, 3, 'n', 'e', 'w', wire.TStop, wire.TStop)
			cm, err := wire.Parse(create, wire.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Do(context.Background(), Call{Session: &Session{}, Class: Write, Msg: cm}, &sink); err != nil {
				t.Fatalf("write after the metastore closed the idle TLS connection: %v", err)
			}
		})
	}
}
