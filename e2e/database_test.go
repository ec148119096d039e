package e2e

import (
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
)

// eachVersion runs run as a subtest, named for the version, on every
// metastore version the run asks for.
func eachVersion(t *testing.T, run func(t *testing.T, v string)) {
	for _, v := range versions(t) {
		t.Run(v, func(t *testing.T) { run(t, v) })
	}
}

// eachVersionAtOnce is eachVersion with the versions run side by side: a
// metastore serves one connection's calls one at a time on one core, so
// a long differential test that waits on it leaves the other core idle.
// Only for tests that judge answers, never time: their versions share
// the machine. scripts/e2e.sh runs go test with -parallel 3, one per
// version, above the default of one per core.
func eachVersionAtOnce(t *testing.T, run func(t *testing.T, v string)) {
	eachVersion(t, func(t *testing.T, v string) {
		t.Parallel()
		run(t, v)
	})
}

// scratchNames names a test's database after prefix and the metastore
// version v, and places it under prefix-wh in the metastore's work
// folder.
func scratchNames(ms *metastore, v, prefix string) (db, loc string) {
	db = prefix + "_" + strings.ReplaceAll(v, ".", "")
	return db, "file:" + ms.work + "/" + prefix + "-wh/" + db + ".db"
}

// scratchDB makes a fresh database of the test's own on ms (named by
// scratchNames, described by desc) and returns it, its location, a
// connection straight to the metastore and a call on it that must
// answer ok.
func scratchDB(t *testing.T, ms *metastore, v, prefix, desc string) (db, loc string, direct *hmsclient.Client, mustOK func(method string, args []byte)) {
	t.Helper()
	db, loc = scratchNames(ms, v, prefix)
	direct = dial(t, ms.addr)
	mustOK = okCaller(t, direct)
	freshDatabase(t, direct, mustOK, db, desc, loc)
	return db, loc, direct, mustOK
}

// okCaller returns a call on c that fails the test unless the metastore
// answers ok.
func okCaller(t *testing.T, c *hmsclient.Client) func(method string, args []byte) {
	return func(method string, args []byte) {
		t.Helper()
		if o := outcome(t, call(t, c, method, args)); o != "ok" {
			t.Fatalf("%s: %s", method, o)
		}
	}
}

// dropDatabase drops db on c's metastore with its tables and data,
// whatever the answer (it may not exist).
func dropDatabase(t *testing.T, c *hmsclient.Client, db string) {
	call(t, c, "drop_database", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Bool(2, true), hmsreq.Bool(3, true)))
}

// freshDatabase drops what a run before left of db on c's metastore,
// creates it at loc through mustOK, and drops it when the test ends.
func freshDatabase(t *testing.T, c *hmsclient.Client, mustOK func(method string, args []byte), db, desc, loc string) {
	t.Helper()
	dropDatabase(t, c, db)
	mustOK("create_database", hmsreq.Args(hmsreq.Database{Name: db, Description: desc, Location: loc}.Field(1)))
	t.Cleanup(func() { dropDatabase(t, c, db) })
}
