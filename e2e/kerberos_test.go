package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"

	"github.com/hmsproxy/hmsproxy/auth/impersonate"
	"github.com/hmsproxy/hmsproxy/auth/sasl"
	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proctest"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// The Kerberized metastore's and the KDC's ports, apart from the others.
const (
	krbBasePort = 29683
	kdcBasePort = 29688
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

var (
	krbMu    sync.Mutex // guards the two below
	krbStore *krbMetastore
	kdcErr   error
)

// startKerberos starts (once) a KDC and an HMS 3.1 with
// hive.metastore.sasl.enabled (testbed/kdc.sh, hms.sh HMS_KERBEROS).
func startKerberos(t *testing.T) *krbMetastore {
	t.Helper()
	krbMu.Lock()
	defer krbMu.Unlock()
	if krbStore == nil && kdcErr == nil {
		krbStore, kdcErr = startKDC()
	}
	if kdcErr != nil {
		t.Fatalf("start KDC: %v", kdcErr)
	}
	// with the test bed's filter hook, so that impersonation shows: only
	// admin may read secret_* tables
	krbStore.metastore = startShared(t, "3.1", "3.1-kerberos", krbBasePort-basePort["3.1"], "HMS_KERBEROS="+krbStore.kdc, "HMS_FILTER_HOOK=1")
	return krbStore
}

// startKDC starts the test bed's KDC in a work directory of its own,
// which stopAll stops and deletes.
func startKDC() (*krbMetastore, error) {
	work, err := os.MkdirTemp("", "hmsproxy-e2e-kdc-")
	if err != nil {
		return nil, err
	}
	ms := &krbMetastore{kdc: filepath.Join(work, "kdc")}
	if out, err := exec.Command("bash", filepath.Join(repoRoot(), "testbed", "kdc.sh"), "start", ms.kdc,
		fmt.Sprint(proctest.PortOffset(kdcBasePort))).CombinedOutput(); err != nil {
		os.RemoveAll(work)
		return nil, fmt.Errorf("%v\n%s", err, out)
	}
	msMu.Lock()
	defer msMu.Unlock()
	atExit = append(atExit, func() {
		exec.Command("bash", filepath.Join(repoRoot(), "testbed", "kdc.sh"), "stop", ms.kdc).Run()
		os.RemoveAll(work)
	})
	return ms, nil
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
// as cmd/hmsproxy does with the kerberos: keys: impersonating each client
// with a delegation token, or (asProxy) as the proxy for everyone.
func krbProxy(t testing.TB, ms *krbMetastore, asProxy bool) *node {
	t.Helper()
	cl, err := sasl.NewClient(sasl.ClientConfig{Principal: pxPrincipal, Keytab: ms.keytab(t, "hmsproxy"), Krb5Conf: ms.krb5(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	im, err := impersonate.New(impersonate.Config{Client: cl, Service: hmsPrincipal, Renewer: pxPrincipal})
	if err != nil {
		t.Fatal(err)
	}
	hook := im.Handshake
	if asProxy {
		hook = func(ctx context.Context, c net.Conn, _ string) (net.Conn, error) {
			return c, cl.Handshake(ctx, c, hmsPrincipal, "")
		}
	}
	g, err := upstream.New(upstream.Config{URIs: []string{"thrift://" + ms.addr}, Transport: wire.Framed, HealthInterval: time.Hour,
		Handshake: hook})
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
// (keytab name; a name starting with "cache:" is a ticket cache file
// instead) with SASL on, expecting the server principal service.
func javaKerberos(t *testing.T, ms *krbMetastore, uri, name, principal, service string) ([]byte, error, time.Duration) {
	t.Helper()
	login, env := "-Dhmstb.keytab="+filepath.Join(ms.kdc, name+".keytab"), []string(nil)
	if cc, ok := strings.CutPrefix(name, "cache:"); ok {
		login, env = "", []string{"KRB5CCNAME=FILE:" + cc}
	}
	opts := strings.Join([]string{
		"-Djava.security.krb5.conf=" + filepath.Join(ms.kdc, "krb5.conf"),
		"--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
		"-Dhmstb.principal=" + principal,
		login,
		"-Dmetastore.sasl.enabled=true",
		"-Dmetastore.kerberos.principal=" + service,
	}, " ")
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "testbed/clients/java_client.sh"), "3.1", uri, t.TempDir())
	return runTimed(cmd, append([]string{"JAVA_CLIENT_OPTS=" + opts}, env...)...)
}

// TestKerberosClients (issue 14): the Java HiveMetaStoreClient 3.1.3 with
// a keytab, and Spark SQL with a ticket cache, work against a Kerberized HMS 3.1 directly and through a proxy
// that is Kerberized on both sides, and the proxy serves some reads from
// its cache.
func TestKerberosClients(t *testing.T) {
	if !slices.Contains(versions(t), "3.1") {
		t.Skip("the Kerberized metastore is an HMS 3.1; HMSPROXY_E2E lacks 3.1")
	}
	ms := startKerberos(t)
	for _, cl := range []struct {
		name string
		// run runs the client against uri, asking a ticket for service.
		run        func(t *testing.T, uri, service string) ([]byte, error, time.Duration)
		needsKinit bool
	}{
		{"java-3.1", func(t *testing.T, uri, service string) ([]byte, error, time.Duration) {
			return javaKerberos(t, ms, uri, "alice", "alice@"+realm, service)
		}, false},
		{"spark-sql", func(t *testing.T, uri, service string) ([]byte, error, time.Duration) {
			return sparkKerberos(t, ms, uri, service)
		}, true},
	} {
		if _, err := exec.LookPath("kinit"); cl.needsKinit && err != nil {
			t.Logf("kinit not installed (scripts/deps.sh installs krb5-user): no %s cells", cl.name)
			continue
		}
		t.Run(cl.name+" direct", func(t *testing.T) {
			out, err, took := cl.run(t, "thrift://"+ms.addr, hmsPrincipal)
			if err != nil {
				t.Fatalf("directly: %v\n%s", err, tail(out, 30))
			}
			fmt.Printf("e2e: Kerberos client %s HMS 3.1 direct: PASS in %v; %s\n", cl.name, took, lastLine(out))
		})
		t.Run(cl.name+" proxy", func(t *testing.T) {
			n := krbProxy(t, ms, false)
			out, err, took := cl.run(t, "thrift://"+n.addr, pxPrincipal)
			if err != nil {
				t.Fatalf("through the proxy: %v\n%s", err, tail(out, 30))
			}
			hits, calls := proxyCounts(n.srv.Stats())
			fmt.Printf("e2e: Kerberos client %s HMS 3.1 proxy:  PASS in %v, %d calls, %d cache hits; %s\n", cl.name, took, calls, hits, lastLine(out))
			if hits == 0 {
				t.Fatalf("%s made %d calls through the Kerberos proxy and none was a cache hit", cl.name, calls)
			}
		})
	}
}

// sparkKerberos runs Spark SQL (its built-in Hive 2.3 client) as alice from
// a kinit ticket cache with SASL on, expecting the server principal
// service. Hadoop's login reads hadoop.security.authentication from a
// core-site.xml on the classpath (HADOOP_CONF_DIR), before Spark's own
// spark.hadoop.* settings apply.
func sparkKerberos(t *testing.T, ms *krbMetastore, uri, service string) ([]byte, error, time.Duration) {
	t.Helper()
	cc := kinit(t, ms, "alice", "alice@"+realm)
	hconf := t.TempDir()
	if err := os.WriteFile(filepath.Join(hconf, "core-site.xml"), []byte(`<?xml version="1.0"?>
<configuration><property><name>hadoop.security.authentication</name><value>kerberos</value></property></configuration>
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(cacheDir(), "venv", "bin", "python"), filepath.Join(repoRoot(), "testbed/clients/spark_client.py"),
		uri, t.TempDir(), "--conf", "spark.hadoop.hive.metastore.sasl.enabled=true",
		"--conf", "spark.hadoop.hive.metastore.kerberos.principal="+service)
	return runTimed(cmd, "HADOOP_CONF_DIR="+hconf, "KRB5CCNAME=FILE:"+cc,
		"JAVA_TOOL_OPTIONS=-Djava.security.krb5.conf="+filepath.Join(ms.kdc, "krb5.conf")+
			" --add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED")
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
	n := krbProxy(t, ms, false)
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

// TestKerberosImpersonation (issue 14): through the proxy each Kerberos
// user acts as themself at the metastore (a delegation token fetched by
// the proxy as a Hadoop proxy user): the metastore's audit log names the
// user, and behind the test bed's filter hook admin reads the secret
// table while bob is refused, exactly as directly, with no entry leaking
// between them through the cache. The same run as the proxy's own
// principal shows what impersonation prevents.
func TestKerberosImpersonation(t *testing.T) {
	if !slices.Contains(versions(t), "3.1") {
		t.Skip("the Kerberized metastore is an HMS 3.1; HMSPROXY_E2E lacks 3.1")
	}
	ms := startKerberos(t)
	const db = "krb_e2e"
	dbLoc := "file:" + ms.work + "/krb-wh/" + db + ".db"
	adminD, err := krbDial(t, ms, "admin", "admin@"+realm, ms.addr, hmsPrincipal)
	if err != nil {
		t.Fatal(err)
	}
	bobD, err := krbDial(t, ms, "bob", "bob@"+realm, ms.addr, hmsPrincipal)
	if err != nil {
		t.Fatal(err)
	}
	drop := hmsreq.Args(hmsreq.Str(1, db), hmsreq.Bool(2, true), hmsreq.Bool(3, true))
	call(t, adminD, "drop_database", drop)
	clMustOK(t, "create_database", call(t, adminD, "create_database", hmsreq.Args(hmsreq.Database{Name: db, Location: dbLoc}.Field(1))))
	t.Cleanup(func() { call(t, adminD, "drop_database", drop) })
	for _, tbl := range []string{"secret_pay", "open_t"} {
		clMustOK(t, "create_table "+tbl, call(t, adminD, "create_table", hmsreq.Args(corpusTable(db, tbl, dbLoc+"/"+tbl, false).Field(1))))
	}
	reads := secretReads(db)
	if o := outcome(t, call(t, bobD, "get_table", reads[0].args)); !strings.HasPrefix(o, "ex") {
		t.Fatalf("bob's direct get_table of a secret table answered %s; want an exception: the filter hook is not active", o)
	}

	t.Run("token", func(t *testing.T) {
		n := krbProxy(t, ms, false)
		adminP, err := krbDial(t, ms, "admin", "admin@"+realm, n.addr, pxPrincipal)
		if err != nil {
			t.Fatal(err)
		}
		bobP, err := krbDial(t, ms, "bob", "bob@"+realm, n.addr, pxPrincipal)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reads {
			for _, u := range []struct {
				name      string
				direct, p *hmsclient.Client
			}{{"admin", adminD, adminP}, {"bob", bobD, bobP}} {
				want := call(t, u.direct, r.method, r.args)
				for i := 0; i < 2; i++ { // the second from the cache
					if got := call(t, u.p, r.method, r.args); !sameButSeqID(got, want) {
						t.Errorf("%s: %s through the proxy got %s; directly %s", r.name, u.name, outcome(t, got), outcome(t, want))
					}
				}
				n.store.Wait()
			}
		}
		hits, calls := proxyCounts(n.srv.Stats())
		if hits == 0 {
			t.Errorf("%d calls and no cache hit", calls)
		}
		// the audit log names the user for a call only the proxy made
		marker := fmt.Sprintf("krb_marker_%d", time.Now().UnixNano())
		call(t, bobP, "get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, marker)))
		if log, err := os.ReadFile(filepath.Join(ms.work, "hms.log")); err != nil || !auditedAs(log, marker, "bob") {
			t.Errorf("the metastore's audit log does not show ugi=bob for %s (err %v)", marker, err)
		}
		fmt.Printf("e2e: Kerberos impersonation HMS 3.1 (filter hook): admin and bob get through the proxy what they get directly; %d calls, %d hits; audit ugi=bob\n", calls, hits)
	})
	t.Run("as the proxy (what impersonation prevents)", func(t *testing.T) {
		n := krbProxy(t, ms, true)
		adminP, err := krbDial(t, ms, "admin", "admin@"+realm, n.addr, pxPrincipal)
		if err != nil {
			t.Fatal(err)
		}
		if o := outcome(t, call(t, adminP, "get_table", reads[0].args)); o == "ok" {
			t.Fatal("admin read the secret table as the proxy's principal: the filter hook does not tell users apart")
		}
	})
}

// auditedAs reports whether the HMS audit log has a line for marker with
// ugi=user.
func auditedAs(log []byte, marker, user string) bool {
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "HiveMetaStore.audit") && strings.Contains(line, marker) {
			return strings.Contains(line, "ugi="+user+"\t") || strings.Contains(line, "ugi="+user+" ")
		}
	}
	return false
}

// kinit fills a ticket cache for principal from its keytab with the MIT
// kinit, as a user would.
func kinit(t *testing.T, ms *krbMetastore, name, principal string) string {
	t.Helper()
	cc := filepath.Join(t.TempDir(), "cc-"+name)
	cmd := exec.Command("kinit", "-kt", filepath.Join(ms.kdc, name+".keytab"), "-c", "FILE:"+cc, principal)
	cmd.Env = append(os.Environ(), "KRB5_CONFIG="+filepath.Join(ms.kdc, "krb5.conf"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kinit %s: %v\n%s", principal, err, out)
	}
	return cc
}

// TestKerberosExpiredTicket (issue 14): a Java client whose ticket cache
// is past its end fails the same way directly and through the proxy
// (before anything reaches either server), while the same client with a
// live ticket cache works through the proxy. The proxy's own refusal of
// an expired service ticket is auth/sasl's TestExpiredTicket.
func TestKerberosExpiredTicket(t *testing.T) {
	if !slices.Contains(versions(t), "3.1") {
		t.Skip("the Kerberized metastore is an HMS 3.1; HMSPROXY_E2E lacks 3.1")
	}
	if _, err := exec.LookPath("kinit"); err != nil {
		t.Skip("kinit not installed (scripts/deps.sh installs krb5-user)")
	}
	ms := startKerberos(t)
	n := krbProxy(t, ms, false)
	live := kinit(t, ms, "alice", "alice@"+realm)
	if out, err, _ := javaKerberos(t, ms, "thrift://"+n.addr, "cache:"+live, "alice@"+realm, pxPrincipal); err != nil {
		t.Fatalf("a live ticket cache through the proxy: %v\n%s", err, tail(out, 20))
	}
	// short@ tickets live 2 seconds (testbed/kdc.sh); the KDC and the Java
	// client read the wall clock, so the way to an expired ticket is a
	// sleep.
	stale := kinit(t, ms, "short", "short@"+realm)
	time.Sleep(2500 * time.Millisecond)
	outD, errD, tookD := javaKerberos(t, ms, "thrift://"+ms.addr, "cache:"+stale, "short@"+realm, hmsPrincipal)
	outP, errP, tookP := javaKerberos(t, ms, "thrift://"+n.addr, "cache:"+stale, "short@"+realm, pxPrincipal)
	if errD == nil || errP == nil {
		t.Fatalf("an expired ticket cache was accepted: directly err=%v, through the proxy err=%v", errD, errP)
	}
	const want = "GSS initiate failed"
	for way, out := range map[string][]byte{"directly": outD, "through the proxy": outP} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%s: output lacks %q:\n%s", way, want, tail(out, 20))
		}
	}
	fmt.Printf("e2e: Kerberos java-3.1 expired ticket cache: XFAIL directly (%v) and through the proxy (%v), both %q\n", tookD, tookP, want)
}
