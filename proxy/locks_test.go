package proxy

import (
	"bytes"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Lock types and levels for the tests' lock requests.
const (
	tSharedRead = 1
	tExclusive  = 3
	tLevelTable = 2
)

func lockArgs(typ int32, db, table string) []byte {
	return hmsreq.Args(hmsreq.Struct(1,
		hmsreq.StructList(1, []hmsreq.Field{hmsreq.I32(1, typ), hmsreq.I32(2, tLevelTable), hmsreq.Str(3, db), hmsreq.Str(4, table), hmsreq.I32(6, 5)}),
		hmsreq.Str(3, "tester"), hmsreq.Str(4, "localhost")))
}

func lockIDArgs(id int64) []byte { return hmsreq.Args(hmsreq.Struct(1, hmsreq.I64(1, id))) }

// lockReply reads the lock id and state of a LockResponse reply.
func lockReply(t *testing.T, reply []byte) (int64, int32) {
	t.Helper()
	m, err := wire.Parse(reply, wire.Limits{MaxMessage: len(reply)})
	if err != nil {
		t.Fatal(err)
	}
	id, state, ok := lockResponse(m)
	if !ok {
		t.Fatalf("%s: not a LockResponse: %x", m.Name(), m.Body())
	}
	return id, state
}

// commitDirect alters table t straight to the metastore under an
// exclusive lock, as a writer that bypasses the proxy does: the proxy
// hears nothing of it (no notification log here).
func commitDirect(t *testing.T, direct *hmsclient.Client, db, table, location string) {
	t.Helper()
	id, state := lockReply(t, call(t, direct, "lock", lockArgs(tExclusive, db, table)))
	if state != lockAcquired {
		t.Fatalf("direct lock: state %d; want acquired", state)
	}
	alterDirect(t, direct, db, table, location)
	call(t, direct, "unlock", lockIDArgs(id))
}

func alterDirect(t *testing.T, direct *hmsclient.Client, db, table, location string) {
	t.Helper()
	r := call(t, direct, "alter_table", alterTableArgs(db, table, testTable(db, table, map[string]string{"metadata_location": location})))
	if m, err := wire.Parse(r, wire.Limits{MaxMessage: len(r)}); err != nil || !bytes.Equal(m.Body(), []byte{wire.TStop}) {
		t.Fatalf("alter_table %s.%s: %q; want success", db, table, r)
	}
}

// TestGrantedLockIsFreshnessPoint (issue 20): a commit under a lock
// reads the table under the lock; a commit made straight to the
// metastore before the grant must show, or the commit through the
// proxy overwrites it (a lost Iceberg commit).
func TestGrantedLockIsFreshnessPoint(t *testing.T) {
	demo, addr, caching, paddr := startCachingProxy(t)
	p := dial(t, paddr, wire.Buffered)
	other := dial(t, paddr, wire.Buffered) // another client of the proxy, with no lock
	direct := dial(t, addr, wire.Buffered)
	call(t, direct, "create_table", tableArgs("demo_db0", "lk"))
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "lk"))
	fresh := func(c *hmsclient.Client, want string) {
		t.Helper()
		if got := call(t, c, "get_table", get); !bytes.Contains(got, []byte(want)) {
			t.Fatalf("get_table does not hold %s: a value cached before the lock was served: %q", want, got)
		}
	}

	call(t, p, "get_table", get) // cached
	caching.Store.Wait()
	commitDirect(t, direct, "demo_db0", "lk", "loc-1")
	if got := call(t, p, "get_table", get); bytes.Contains(got, []byte("loc-1")) {
		t.Fatal("the direct commit showed without a lock: this test's cache is not in play")
	}

	// Granted at once: what it covers was invalidated before the reply.
	id, state := lockReply(t, call(t, p, "lock", lockArgs(tExclusive, "demo_db0", "lk")))
	if state != lockAcquired {
		t.Fatalf("lock: state %d; want acquired", state)
	}
	fresh(p, "loc-1")
	fresh(other, "loc-1")
	// Reads of the locked table by the holder go to the metastore.
	before := demo.CallCount("get_table")
	fresh(p, "loc-1")
	if n := demo.CallCount("get_table"); n != before+1 {
		t.Errorf("a read under the holder's lock made %d metastore calls; want 1", n-before)
	}
	call(t, p, "unlock", lockIDArgs(id))
	caching.Store.Wait()
	before = demo.CallCount("get_table")
	call(t, p, "get_table", get)
	call(t, p, "get_table", get)
	if n := demo.CallCount("get_table"); n > before+1 {
		t.Errorf("after unlock the table was read from the metastore %d times; want the cache again", n-before)
	}

	// Waiting, then granted by check_lock after a direct commit.
	held, _ := lockReply(t, call(t, direct, "lock", lockArgs(tExclusive, "demo_db0", "lk")))
	id, state = lockReply(t, call(t, p, "lock", lockArgs(tExclusive, "demo_db0", "lk")))
	if state != lockWaiting {
		t.Fatalf("lock behind another: state %d; want waiting", state)
	}
	alterDirect(t, direct, "demo_db0", "lk", "loc-2")
	call(t, direct, "unlock", lockIDArgs(held))
	if _, state = lockReply(t, call(t, p, "check_lock", lockIDArgs(id))); state != lockAcquired {
		t.Fatalf("check_lock: state %d; want acquired", state)
	}
	fresh(p, "loc-2")
	call(t, p, "unlock", lockIDArgs(id))

	// A lock taken on another connection, granted through this one.
	commitDirect(t, direct, "demo_db0", "lk", "loc-3")
	id, _ = lockReply(t, call(t, direct, "lock", lockArgs(tExclusive, "demo_db0", "lk")))
	if _, state = lockReply(t, call(t, other, "check_lock", lockIDArgs(id))); state != lockAcquired {
		t.Fatalf("check_lock of another connection's lock: state %d", state)
	}
	fresh(other, "loc-3")
	call(t, direct, "unlock", lockIDArgs(id))
}

// TestSharedReadLockInvalidatesNothing: a read lock announces no write,
// so it costs the cache nothing.
func TestSharedReadLockInvalidatesNothing(t *testing.T) {
	demo, _, caching, paddr := startCachingProxy(t)
	p := dial(t, paddr, wire.Buffered)
	get := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	call(t, p, "get_table", get)
	caching.Store.Wait()
	id, state := lockReply(t, call(t, p, "lock", lockArgs(tSharedRead, "demo_db0", "t0")))
	if state != lockAcquired {
		t.Fatalf("lock: state %d; want acquired", state)
	}
	call(t, p, "get_table", get)
	if n := demo.CallCount("get_table"); n != 1 {
		t.Errorf("the metastore saw %d get_table calls; want 1 (a shared read lock is no freshness point)", n)
	}
	call(t, p, "unlock", lockIDArgs(id))
}
