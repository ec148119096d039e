// Package kdctest runs a real MIT Kerberos KDC on loopback for tests, through
// the test bed's testbed/kdc.sh.
package kdctest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
)

// Realm is the test bed's realm.
const Realm = "HMSPROXY.TEST"

// Foreign is a second realm that Realm trusts: its users get tickets for
// Realm's services through a cross-realm ticket-granting ticket.
const Foreign = "FOREIGN.TEST"

// The test bed's principals (testbed/kdc.sh).
const (
	Metastore = "hive/localhost@" + Realm     // hive.keytab
	Proxy     = "hmsproxy/localhost@" + Realm // hmsproxy.keytab
	Alice     = "alice@" + Realm              // alice.keytab
	Bob       = "bob@" + Realm                // bob.keytab
	Short     = "short@" + Realm              // short.keytab: tickets live 2 seconds

	ForeignAlice = "alice@" + Foreign // foreign-alice.keytab: not Alice, though her short name is the same
)

// KDC is a krb5kdc process owned by a test.
type KDC struct {
	Dir  string // holds krb5.conf and the keytabs
	Port int
}

// Script is the path of testbed/kdc.sh.
func Script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testbed", "kdc.sh")
}

// Start creates the realm in a temporary directory and runs the KDC on a
// free loopback port until the test ends. Without the MIT KDC binaries the
// test is skipped with a message naming the script that installs them.
func Start(t testing.TB) *KDC {
	t.Helper()
	for _, b := range []string{"krb5kdc", "kdb5_util", "kadmin.local"} {
		if _, err := exec.LookPath(b); err != nil {
			if _, err := os.Stat("/usr/sbin/" + b); err != nil {
				t.Skipf("kdctest: %s not installed (run scripts/deps.sh): the Kerberos tests need a real MIT KDC", b)
			}
		}
	}
	k, err := start(t.TempDir())
	if err != nil {
		t.Skipf("kdctest: %v", err)
	}
	t.Cleanup(k.Stop)
	return k
}

func start(dir string) (*KDC, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	k := &KDC{Dir: dir, Port: port}
	out, err := exec.Command("bash", Script(), "start", k.Dir, strconv.Itoa(port)).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("the KDC did not start (%v): %s", err, out)
	}
	return k, nil
}

// Stop ends the KDC.
func (k *KDC) Stop() { _ = exec.Command("bash", Script(), "stop", k.Dir).Run() }

// shared is one KDC for a whole test binary (see Main); nil when it
// could not start, with sharedErr saying why.
var (
	shared    *KDC
	sharedErr error
)

// Main runs a package's tests with one KDC that Shared hands out, so that
// each test does not pay for creating a realm; use it from TestMain.
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kdctest")
	if err != nil {
		sharedErr = err
		return m.Run()
	}
	defer os.RemoveAll(dir)
	shared, sharedErr = start(dir)
	if shared != nil {
		defer shared.Stop()
	}
	return m.Run()
}

// Shared returns the KDC started by Main, skipping the test when none runs.
func Shared(t testing.TB) *KDC {
	t.Helper()
	if shared == nil {
		if sharedErr == nil {
			sharedErr = errors.New("kdctest.Main is not this package's TestMain")
		}
		t.Skipf("kdctest: %v", sharedErr)
	}
	return shared
}

// Krb5ConfPath is the realm's krb5.conf.
func (k *KDC) Krb5ConfPath() string { return filepath.Join(k.Dir, "krb5.conf") }

// KeytabPath is the keytab of a test-bed principal by its first component
// ("hive", "hmsproxy", "alice", "bob", "short"; "foreign-alice" for
// ForeignAlice).
func (k *KDC) KeytabPath(name string) string { return filepath.Join(k.Dir, name+".keytab") }

// Config parses krb5.conf.
func (k *KDC) Config(t testing.TB) *config.Config {
	t.Helper()
	c, err := config.Load(k.Krb5ConfPath())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Keytab loads a test-bed principal's keytab.
func (k *KDC) Keytab(t testing.TB, name string) *keytab.Keytab {
	t.Helper()
	kt, err := keytab.Load(k.KeytabPath(name))
	if err != nil {
		t.Fatal(err)
	}
	return kt
}
