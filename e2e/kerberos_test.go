package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/hmsclient"
	"github.com/hmsproxy/hmsproxy/internal/hmsreq"
	"github.com/hmsproxy/hmsproxy/internal/sasl"
	"github.com/hmsproxy/hmsproxy/internal/wire"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// The Kerberized metastore's and the KDC's ports, apart from the others.
const (
	krbBasePort = 39683
	kdcBasePort = 39688
)

// The test bed's realm (testbed/kdc.sh).
const (
	realm        = "HMSPROXY.TEST"
	hmsPrincipal = "hive/localhost@" + realm
	pxPrincipal  = "hmsproxy/localhost@" + realm
)

// krbMetastore is an HMS 3.1 with SASL/GSSAPI and the KDC it trusts.
type krbMetastore struct {
	*metastore
	kdc string // testbed/kdc.sh work directory: krb5.conf, keytabs
}

var krbStore *krbMetastore

// startKerberos starts (once) a KDC and an HMS 3.1 with
// hive.metastore.sasl.enabled (testbed/kdc.sh, hms.sh HMS_KERBEROS).
func startKerberos(t *testing.T) *krbMetastore {
	t.Helper()
	msMu.Lock()
	defer msMu.Unlock()
	if krbStore != nil {
		if krbStore.err != nil {
			t.Fatalf("Kerberized HMS 3.1 did not start earlier: %v", krbStore.err)
		}
		return krbStore
	}
	off, _ := strconv.Atoi(os.Getenv("HMSPROXY_E2E_PORT_OFFSET"))
	work, _ := os.MkdirTemp("", "hmsproxy-e2e-3.1-krb-")
	ms := &krbMetastore{metastore: &metastore{version: "3.1", addr: fmt.Sprintf("127.0.0.1:%d", krbBasePort+off), work: work},
		kdc: filepath.Join(work, "kdc")}
	krbStore = ms
	stores["3.1-kerberos"] = ms.metastore
	begin := time.Now()
	if out, err := exec.Command("bash", filepath.Join(repoRoot(), "testbed", "kdc.sh"), "start", ms.kdc,
		fmt.Sprint(kdcBasePort+off)).CombinedOutput(); err != nil {
		ms.err = fmt.Errorf("KDC: %v\n%s", err, out)
		t.Fatalf("start KDC: %v", ms.err)
	}
	atExit = append(atExit, func() {
		exec.Command("bash", filepath.Join(repoRoot(), "testbed", "kdc.sh"), "stop", ms.kdc).Run()
	})
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "testbed", "hms.sh"), "start", "3.1", fmt.Sprint(krbBasePort+off), work)
	cmd.Env = append(os.Environ(), "HMS_KERBEROS="+ms.kdc)
	if out, err := cmd.CombinedOutput(); err != nil {
		ms.err = fmt.Errorf("%v\n%s", err, out)
		t.Fatalf("start Kerberized HMS 3.1: %v", ms.err)
	}
	fmt.Printf("e2e: Kerberized HMS 3.1 started on %s in %v\n", ms.addr, time.Since(begin).Round(100*time.Millisecond))
	return ms
}

func (ms *krbMetastore) keytab(t testing.TB, name string) *keytab.Keytab {
	t.Helper()
	kt, err := keytab.Load(filepath.Join(ms.kdc, name+".keytab"))
	if err != nil {
		t.Fatal(err)
	}
	return kt
}

func (ms *krbMetastore) krb5(t testing.TB) *config.Config {
	t.Helper()
	c, err := config.Load(filepath.Join(ms.kdc, "krb5.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// krbProxy is an in-process hmsproxy accepting Kerberos clients as
// hmsproxy/localhost and authenticating to the metastore with that keytab,
// as cmd/hmsproxy does with the kerberos: keys.
func krbProxy(t testing.TB, ms *krbMetastore) *node {
	t.Helper()
	cl, err := sasl.NewClient(sasl.ClientConfig{Principal: pxPrincipal, Keytab: ms.keytab(t, "hmsproxy"), Krb5Conf: ms.krb5(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	g, err := upstream.New(upstream.Config{URIs: []string{"thrift://" + ms.addr}, Transport: wire.Framed, HealthInterval: time.Hour,
		Handshake: func(ctx context.Context, c net.Conn, _ string) (net.Conn, error) {
			return c, cl.Handshake(ctx, c, hmsPrincipal, "")
		}})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{}
	n.store, err = cache.New(cache.Config{MaxBytes: 64 << 20, Kinds: cache.DefaultKinds()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.store.Close)
	n.srv, err = proxy.New(proxy.Config{Transport: wire.Framed, Cache: &proxy.Caching{Store: n.store, Upstream: ms.addr}}, g)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sasl.NewServer(sasl.ServerConfig{Principal: pxPrincipal, Keytab: ms.keytab(t, "hmsproxy")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.addr = ln.Addr().String()
	go n.srv.Serve(sasl.Listen(ln, srv, sasl.ListenerConfig{}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.srv.Shutdown(ctx)
		g.Close()
	})
	return n
}

// krbDial opens a framed Thrift connection authenticated as name's
// keytab principal to service at addr.
func krbDial(t testing.TB, ms *krbMetastore, name, principal, addr, service string) (*hmsclient.Client, error) {
	t.Helper()
	cl, err := sasl.NewClient(sasl.ClientConfig{Principal: principal, Keytab: ms.keytab(t, name), Krb5Conf: ms.krb5(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Handshake(context.Background(), nc, service, ""); err != nil {
		nc.Close()
		return nil, err
	}
	c := hmsclient.New(nc, wire.Framed)
	t.Cleanup(func() { c.Close() })
	return c, nil
}

// javaKerberos runs the Java HiveMetaStoreClient 3.1.3 as principal
// (keytab name) with SASL on, expecting the server principal service.
func javaKerberos(t *testing.T, ms *krbMetastore, uri, name, principal, service string) ([]byte, error, time.Duration) {
	t.Helper()
	opts := strings.Join([]string{
		"-Djava.security.krb5.conf=" + filepath.Join(ms.kdc, "krb5.conf"),
		"--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
		"-Dhmstb.principal=" + principal,
		"-Dhmstb.keytab=" + filepath.Join(ms.kdc, name+".keytab"),
		"-Dmetastore.sasl.enabled=true",
		"-Dmetastore.kerberos.principal=" + service,
	}, " ")
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "testbed/clients/java_client.sh"), "3.1", uri, t.TempDir())
	cmd.Env = append(os.Environ(), "HMSPROXY_CACHE="+cacheDir(), "JAVA_CLIENT_OPTS="+opts)
	begin := time.Now()
	out, err := cmd.CombinedOutput()
	return out, err, time.Since(begin).Round(100 * time.Millisecond)
}

// TestKerberosClients (issue 14): the Java HiveMetaStoreClient 3.1.3 with
// a keytab works against a Kerberized HMS 3.1 directly and through a proxy
// that is Kerberized on both sides, and the proxy serves some reads from
// its cache.
func TestKerberosClients(t *testing.T) {
	if !slices.Contains(versions(t), "3.1") {
		t.Skip("the Kerberized metastore is an HMS 3.1; HMSPROXY_E2E lacks 3.1")
	}
	ms := startKerberos(t)
	t.Run("java-3.1 direct", func(t *testing.T) {
		out, err, took := javaKerberos(t, ms, "thrift://"+ms.addr, "alice", "alice@"+realm, hmsPrincipal)
		if err != nil {
			t.Fatalf("directly: %v\n%s", err, tail(out, 30))
		}
		fmt.Printf("e2e: Kerberos client java-3.1 HMS 3.1 direct: PASS in %v; %s\n", took, lastLine(out))
	})
	t.Run("java-3.1 proxy", func(t *testing.T) {
		n := krbProxy(t, ms)
		out, err, took := javaKerberos(t, ms, "thrift://"+n.addr, "alice", "alice@"+realm, pxPrincipal)
		if err != nil {
			t.Fatalf("through the proxy: %v\n%s", err, tail(out, 30))
		}
		hits, calls := proxyCounts(n.srv.Stats())
		fmt.Printf("e2e: Kerberos client java-3.1 HMS 3.1 proxy:  PASS in %v, %d calls, %d cache hits; %s\n", took, calls, hits, lastLine(out))
		if hits == 0 {
			t.Fatalf("the Java client made %d calls through the Kerberos proxy and none was a cache hit", calls)
		}
	})
}

// TestKerberosWrongServicePrincipal (issue 14): a client that asks a
// ticket for another service than the one it reaches fails with the same
// Thrift-SASL error directly and through the proxy, and a client on the
// proxy at the same time is unaffected.
func TestKerberosWrongServicePrincipal(t *testing.T) {
	if !slices.Contains(versions(t), "3.1") {
		t.Skip("the Kerberized metastore is an HMS 3.1; HMSPROXY_E2E lacks 3.1")
	}
	ms := startKerberos(t)
	n := krbProxy(t, ms)
	bystander, err := krbDial(t, ms, "bob", "bob@"+realm, n.addr, pxPrincipal)
	if err != nil {
		t.Fatal(err)
	}
	get := hmsreq.Args(hmsreq.Str(1, "default"))
	call(t, bystander, "get_database", get)

	// each side is asked with the other's principal
	outD, errD, tookD := javaKerberos(t, ms, "thrift://"+ms.addr, "alice", "alice@"+realm, pxPrincipal)
	outP, errP, tookP := javaKerberos(t, ms, "thrift://"+n.addr, "alice", "alice@"+realm, hmsPrincipal)
	if errD == nil || errP == nil {
		t.Fatalf("a ticket for the wrong service was accepted: directly err=%v, through the proxy err=%v", errD, errP)
	}
	const want = "Peer indicated failure"
	for way, out := range map[string][]byte{"directly": outD, "through the proxy": outP} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%s: output lacks %q:\n%s", way, want, tail(out, 20))
		}
	}
	if !strings.Contains(string(outP), "not for this service") {
		t.Errorf("through the proxy the reason is not given:\n%s", tail(outP, 20))
	}
	call(t, bystander, "get_database", get) // unaffected
	fmt.Printf("e2e: Kerberos java-3.1 wrong service principal: XFAIL directly (%v) and through the proxy (%v): %s / %s\n",
		tookD, tookP, lastLine(outD), lastLine(outP))
}
