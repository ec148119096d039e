package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestEventLogCoverage measures, on each real metastore, which writes
// made straight to it (not through a proxy) leave an event in its
// notification log, and checks hms.UnloggedWrites against that
// measurement. A proxy learns of a bypassing write only from the log; for
// the writes the log misses it bounds staleness by expiry instead
// (cache.ttl_without_eventlog), and it can do that only for the writes
// hms.UnloggedWrites names. A write missing from that list is served
// stale until its entries' full TTL; a write listed needlessly costs
// cache hits. So both directions are failures.
//
// Each write runs once, must succeed (a refused write changes nothing and
// so proves nothing about the log), and is judged by whether the current
// notification event id moved within evcovWait. Where a write could
// answer success and change nothing, a read afterwards shows its effect.
// Writes a version does not have (UNKNOWN_METHOD), and writes that were
// refused or showed no effect, are reported and left out of the
// comparison.
func TestEventLogCoverage(t *testing.T) {
	vs := versions(t)
	begin := time.Now()
	results := map[string][]evcovResult{}
	var mu sync.Mutex // guards results
	// The versions run side by side: each has a metastore and an event
	// log of its own, and most of a run is waiting for a write's events
	// to settle (evcovSettle per write).
	t.Run("versions", func(t *testing.T) {
		eachVersionAtOnce(t, func(t *testing.T, v string) {
			r := runEventLogCoverage(t, v)
			mu.Lock()
			defer mu.Unlock()
			results[v] = r
		})
	})
	evcovPrintTable(t, vs, results)
	fmt.Printf("e2e: eventlog coverage: %d versions measured in %v\n", len(vs), time.Since(begin).Round(100*time.Millisecond))
}

// evcovWait is how long a write may take to show up in the log. The test
// bed's listeners write in the write's own transaction, so the id has
// moved by the time the reply arrives; the wait covers a listener that
// writes after the change commits (hive.metastore.event.listeners).
const evcovWait = 2 * time.Second

// evcovSettle is how long the id must stay put after it moved before the
// write's events are read: a write may log several (one ALTER_PARTITION
// per partition), and a late one must not be counted for the next write.
const evcovSettle = 300 * time.Millisecond

// evcovVersion maps a test-bed version to the product's hms.Version.
var evcovVersion = map[string]hms.Version{"2.3": hms.Version2, "3.1": hms.Version3, "4.0": hms.Version4}

// evcovWrite is one write to measure.
type evcovWrite struct {
	method string
	args   []byte
	// reportOnly: measured and reported, but not compared with
	// hms.UnloggedWrites. Privilege writes are bounded by a per-user TTL,
	// not by the event log.
	reportOnly bool
	// prepare, when set, runs before the write (a data file for truncate
	// to delete).
	prepare func() error
	// effect, when set, shows that the write changed the metastore. A
	// write that answers success and changes nothing (truncate_table with
	// an empty partition list) would pass for "unlogged" vacuously; a
	// logged write proves itself by its event, an unlogged one only by
	// its effect.
	effect evcovEffect
}

// evcovEffect reads the metastore after a write and says what is missing
// from its effect, or "" when the effect is there.
type evcovEffect func(t *testing.T, c *hmsclient.Client) string

// evcovShows is an effect: a read whose success reply contains want.
func evcovShows(method string, args []byte, want string) evcovEffect {
	return func(t *testing.T, c *hmsclient.Client) string {
		reply := call(t, c, method, args)
		if reason, ok := evcovReplyError(reply); !ok {
			return fmt.Sprintf("%s after the write: %s", method, reason)
		}
		if !strings.Contains(string(reply), want) {
			return fmt.Sprintf("%s after the write lacks %q", method, want)
		}
		return ""
	}
}

// evcovLacks is an effect: a read whose reply does not contain want: a
// success, or the declared exception in result field 1 (NoSuchObject-
// Exception where the statistics are gone). Any other answer is a read
// that failed, which shows nothing.
func evcovLacks(method string, args []byte, want string) evcovEffect {
	return func(t *testing.T, c *hmsclient.Client) string {
		reply := call(t, c, method, args)
		if o := outcome(t, reply); o != "ok" && o != "ex1" {
			r, _ := evcovReplyError(reply)
			return fmt.Sprintf("%s after the write: %s", method, r)
		}
		if strings.Contains(string(reply), want) {
			return fmt.Sprintf("%s after the write still has %q", method, want)
		}
		return ""
	}
}

// evcovI64 is the encoding of i64 field id with value v, to look for in
// a reply (a statistic's highValue).
func evcovI64(id int16, v int64) string {
	var e wire.Encoder
	e.I64Field(id, v)
	return string(e.B)
}

// evcovStatus is what became of one write.
type evcovStatus int

const (
	evcovLogged  evcovStatus = iota // succeeded, the event id moved
	evcovNone                       // succeeded, no event within evcovWait
	evcovUnknown                    // the version has no such method
	evcovFailed                     // refused, or no effect to be seen
)

// evcovResult is the measurement of one write on one version.
type evcovResult struct {
	evcovWrite
	status evcovStatus
	events []evcovEvent // evcovLogged: the events that appeared
	reason string       // evcovUnknown, evcovFailed: why, in words
}

// cell is r as one cell of the printed table.
func (r evcovResult) cell() string {
	switch r.status {
	case evcovLogged:
		return evcovTypes(r.events)
	case evcovNone:
		return "none"
	case evcovUnknown:
		return "n/a (unknown method)"
	}
	return "FAILED (see log)"
}

// evcovEvent is the part of a NotificationEvent the test reads.
type evcovEvent struct {
	id      int64
	typ, db string
}

// evcovTypes lists the event types of evs in order, runs of one type
// counted: "ALTER_PARTITION x2".
func evcovTypes(evs []evcovEvent) string {
	var out []string
	for i := 0; i < len(evs); {
		j := i
		for j < len(evs) && evs[j].typ == evs[i].typ {
			j++
		}
		if j-i > 1 {
			out = append(out, fmt.Sprintf("%s x%d", evs[i].typ, j-i))
		} else {
			out = append(out, evs[i].typ)
		}
		i = j
	}
	return strings.Join(out, ",")
}

// evcovSetup builds, straight on the metastore, what the measured writes
// work on: database db with a partitioned table "events" (string key ds,
// partitions ds=2024-01-01..03), an unpartitioned table "plain", a
// function "upper1", and column statistics on both tables. It is not
// measured: its events only move the id before the first write.
func evcovSetup(db, dbLoc string) []evcovWrite {
	evLoc, plainLoc := dbLoc+"/events", dbLoc+"/plain"
	part := func(ds string) hmsreq.Partition { return corpusPartition(db, "events", evLoc, ds) }
	return []evcovWrite{
		{method: "create_database", args: hmsreq.Args(hmsreq.Database{Name: db, Description: "eventlog coverage", Location: dbLoc, Owner: "e2e"}.Field(1))},
		{method: "create_table", args: hmsreq.Args(corpusTable(db, "events", evLoc, true).Field(1))},
		{method: "create_table", args: hmsreq.Args(corpusTable(db, "plain", plainLoc, false).Field(1))},
		{method: "add_partitions", args: hmsreq.Args(hmsreq.Partitions(1, part("2024-01-01"), part("2024-01-02"), part("2024-01-03")))},
		{method: "create_function", args: hmsreq.Args(hmsreq.Struct(1, functionFields(db, "upper1")...))},
		{method: "update_table_column_statistics", args: hmsreq.Args(hmsreq.Struct(1, longStats(db, "plain", "", 1, 10)...))},
		{method: "update_partition_column_statistics", args: hmsreq.Args(hmsreq.Struct(1, longStats(db, "events", "ds=2024-01-01", 1, 10)...))},
	}
}

// evcovWrites are the measured writes, in an order in which each finds
// what it needs: what setup built, or what an earlier write made (the
// primary key before the foreign key that references it, the statistics
// before their deletes). db2 is a database of their own for the database
// writes; "scratch" a table of their own for the table writes. dbDir is
// db's directory (its location without "file:"). Methods a version lacks
// are sent all the same: the metastore's UNKNOWN_METHOD answer is what
// says the version lacks them.
func evcovWrites(v, db, dbDir, db2 string) []evcovWrite {
	dbLoc := "file:" + dbDir
	evLoc := dbLoc + "/events"
	scratchDir := dbDir + "/scratch"
	v3 := v != "2.3"                       // catalogs (catName fields) and the 3.0 constraint kinds
	v4 := v == "4.0"                       // the engine argument of the statistics deletes
	cat := func(id int16) []hmsreq.Field { // catName, where the version has it
		if v3 {
			return []hmsreq.Field{hmsreq.Str(id, "hive")}
		}
		return nil
	}
	part := func(ds string, params ...string) hmsreq.Partition {
		return corpusPartition(db, "events", evLoc, ds, params...)
	}
	withEngine := func(fs ...hmsreq.Field) []byte {
		if v4 {
			fs = append(fs, hmsreq.Str(int16(len(fs)+1), "hive"))
		}
		return hmsreq.Args(fs...)
	}
	scratch := func(params ...string) hmsreq.Table {
		return corpusTable(db, "scratch", "file:"+scratchDir, false, params...)
	}
	function := func(class string) []hmsreq.Field {
		return []hmsreq.Field{hmsreq.Str(1, "upper1"), hmsreq.Str(2, db), hmsreq.Str(3, class), hmsreq.Str(4, "e2e"),
			hmsreq.I32(5, 1), hmsreq.I32(6, fixedTime), hmsreq.I32(7, 1), hmsreq.StructList(8)}
	}

	// Statistics: each write's highValue (LongColumnStatsData field 2)
	// differs from every other's, so a read shows which write it saw.
	tableStats := hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "plain"), hmsreq.Str(3, "id"))
	partStats := func(name string) []byte {
		return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Str(3, name), hmsreq.Str(4, "id"))
	}

	// Constraints are off, unvalidated and not relied on: the metastore
	// stores them as given; the flags matter to Hive's planner only.
	flags := func(first int16) []hmsreq.Field {
		return []hmsreq.Field{hmsreq.Bool(first, false), hmsreq.Bool(first+1, false), hmsreq.Bool(first+2, false)}
	}
	// constraint is an Add*ConstraintRequest of one constraint of a 3.0
	// kind on events (catName 1, table_db 2, table_name 3, column_name 4,
	// the kind's own fields, the three flags).
	constraint := func(col string, own ...hmsreq.Field) []byte {
		fs := append([]hmsreq.Field{hmsreq.Str(1, "hive"), hmsreq.Str(2, db), hmsreq.Str(3, "events"), hmsreq.Str(4, col)}, own...)
		fs = append(fs, flags(int16(5+len(own)))...)
		return hmsreq.Req(hmsreq.StructList(1, fs))
	}
	// constraints reads the constraints of events, of any 3.0 kind:
	// their requests all have catName 1, db 2, table 3.
	constraints := hmsreq.Req(hmsreq.Str(1, "hive"), hmsreq.Str(2, db), hmsreq.Str(3, "events"))
	pk := append([]hmsreq.Field{hmsreq.Str(1, db), hmsreq.Str(2, "plain"), hmsreq.Str(3, "id"), hmsreq.I32(4, 1), hmsreq.Str(5, "evcov_pk")}, flags(6)...)
	fk := append([]hmsreq.Field{hmsreq.Str(1, db), hmsreq.Str(2, "plain"), hmsreq.Str(3, "id"), hmsreq.Str(4, db), hmsreq.Str(5, "events"), hmsreq.Str(6, "id"),
		hmsreq.I32(7, 1), hmsreq.I32(8, 0), hmsreq.I32(9, 0), hmsreq.Str(10, "evcov_fk"), hmsreq.Str(11, "evcov_pk")}, flags(12)...)
	primaryKeys := hmsreq.Req(append([]hmsreq.Field{hmsreq.Str(1, db), hmsreq.Str(2, "plain")}, cat(3)...)...)
	foreignKeys := hmsreq.Req(append([]hmsreq.Field{hmsreq.Str(1, db), hmsreq.Str(2, "plain"), hmsreq.Str(3, db), hmsreq.Str(4, "events")}, cat(5)...)...)

	// Privileges: SELECT on table plain for the user evcov_user.
	object := append([]hmsreq.Field{hmsreq.I32(1, 3 /* TABLE */), hmsreq.Str(2, db), hmsreq.Str(3, "plain")}, cat(6)...)
	privilege := []hmsreq.Field{hmsreq.Struct(1, object...), hmsreq.Str(2, "evcov_user"), hmsreq.I32(3, 1 /* USER */),
		hmsreq.Struct(4, hmsreq.Str(1, "SELECT"), hmsreq.I32(2, fixedTime), hmsreq.Str(3, "e2e"), hmsreq.I32(4, 1), hmsreq.Bool(5, false))}
	if v3 {
		privilege = append(privilege, hmsreq.Str(5, "hive")) // authorizer, 3.1+
	}
	privileges := hmsreq.Args(hmsreq.Struct(1, hmsreq.StructList(1, privilege)))
	listPrivileges := hmsreq.Args(hmsreq.Str(1, "evcov_user"), hmsreq.I32(2, 1), hmsreq.Struct(3, object...))

	w := func(m string, a []byte, effect evcovEffect) evcovWrite {
		return evcovWrite{method: m, args: a, effect: effect}
	}
	truncate := w("truncate_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "scratch")), // no partNames: the whole table
		func(*testing.T, *hmsclient.Client) string {
			if _, err := os.Stat(scratchDir + "/data.txt"); !os.IsNotExist(err) {
				return fmt.Sprintf("the table's data file is still there (stat: %v)", err)
			}
			return ""
		})
	truncate.prepare = func() error { return os.WriteFile(scratchDir+"/data.txt", []byte("1\tone\n"), 0o644) }
	grant := w("grant_privileges", privileges, evcovShows("list_privileges", listPrivileges, "SELECT"))
	revoke := w("revoke_privileges", privileges, evcovLacks("list_privileges", listPrivileges, "SELECT"))
	grant.reportOnly, revoke.reportOnly = true, true

	return []evcovWrite{
		// Databases.
		w("create_database", hmsreq.Args(hmsreq.Database{Name: db2, Description: "scratch", Location: dbLoc + "/" + db2 + ".db", Owner: "e2e"}.Field(1)), nil),
		// A new parameter: 2.3's ObjectStore.alterDatabase changes the
		// parameters and the owner only, so a new description would not
		// show the alter there.
		w("alter_database", hmsreq.Args(hmsreq.Str(1, db2), hmsreq.Database{Name: db2, Description: "scratch", Location: dbLoc + "/" + db2 + ".db",
			Params: kv("evcov_state", "altered"), Owner: "e2e"}.Field(2)),
			evcovShows("get_database", hmsreq.Args(hmsreq.Str(1, db2)), "evcov_state")),
		w("drop_database", hmsreq.Args(hmsreq.Str(1, db2), hmsreq.Bool(2, true), hmsreq.Bool(3, false)), nil),

		// Tables.
		w("create_table", hmsreq.Args(scratch().Field(1)), nil),
		w("alter_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "scratch"), scratch("comment", "altered").Field(3)), nil),
		w("alter_table_with_environment_context", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "scratch"), scratch("comment", "altered again").Field(3),
			hmsreq.Struct(4, hmsreq.Map(1, kv("CASCADE", "false")))), nil),
		truncate,
		w("drop_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "scratch"), hmsreq.Bool(3, true)), nil),

		// Partitions of events (setup made ds=2024-01-01..03).
		w("add_partition", hmsreq.Args(part("2024-01-04").Field(1)), nil),
		w("add_partitions", hmsreq.Args(hmsreq.Partitions(1, part("2024-01-05"), part("2024-01-06"))), nil),
		w("alter_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), part("2024-01-01", "owner", "team-a").Field(3)), nil),
		w("alter_partitions", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Partitions(3, part("2024-01-02", "owner", "team-b"), part("2024-01-03", "owner", "team-b"))), nil),
		w("rename_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, "2024-01-04"), part("2024-01-07").Field(4)), nil),
		w("drop_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, "2024-01-07"), hmsreq.Bool(4, true)), nil),
		w("append_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, "2024-01-08")), nil),

		// Functions (setup made upper1).
		w("create_function", hmsreq.Args(hmsreq.Struct(1, functionFields(db, "upper2")...)), nil),
		w("alter_function", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "upper1"), hmsreq.Struct(3, function("org.example.Lower")...)),
			evcovShows("get_function", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "upper1")), "org.example.Lower")),
		w("drop_function", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "upper2")), nil),

		// Column statistics (setup made those of plain and of ds=2024-01-01, highValue 10).
		// The 4.0 request forms of the two updates (2.3 and 3.1 lack them),
		// which hms.UnloggedWrites lists too; first, so that the plain
		// updates after them overwrite what they wrote and the delete
		// below is checked against the last value written.
		w("update_table_column_statistics_req", hmsreq.Req(hmsreq.StructList(1, longStats(db, "plain", "", 1, 200)), hmsreq.Bool(2, false)),
			evcovShows("get_table_column_statistics", tableStats, evcovI64(2, 200))),
		w("update_partition_column_statistics_req", hmsreq.Req(hmsreq.StructList(1, longStats(db, "events", "ds=2024-01-03", 8, 80)), hmsreq.Bool(2, false)),
			evcovShows("get_partition_column_statistics", partStats("ds=2024-01-03"), evcovI64(2, 80))),
		w("update_table_column_statistics", hmsreq.Args(hmsreq.Struct(1, longStats(db, "plain", "", 1, 100)...)),
			evcovShows("get_table_column_statistics", tableStats, evcovI64(2, 100))),
		w("update_partition_column_statistics", hmsreq.Args(hmsreq.Struct(1, longStats(db, "events", "ds=2024-01-01", 5, 50)...)),
			evcovShows("get_partition_column_statistics", partStats("ds=2024-01-01"), evcovI64(2, 50))),
		w("set_aggr_stats_for", hmsreq.Req(hmsreq.StructList(1, longStats(db, "events", "ds=2024-01-02", 7, 70)), hmsreq.Bool(2, false)),
			evcovShows("get_partition_column_statistics", partStats("ds=2024-01-02"), evcovI64(2, 70))),
		w("delete_partition_column_statistics", withEngine(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Str(3, "ds=2024-01-01"), hmsreq.Str(4, "id")),
			evcovLacks("get_partition_column_statistics", partStats("ds=2024-01-01"), evcovI64(2, 50))),
		w("delete_table_column_statistics", withEngine(hmsreq.Str(1, db), hmsreq.Str(2, "plain"), hmsreq.Str(3, "id")),
			evcovLacks("get_table_column_statistics", tableStats, evcovI64(2, 100))),

		// Constraints: plain.id is the primary key events.id refers to.
		w("add_primary_key", hmsreq.Req(hmsreq.StructList(1, append(pk, cat(9)...))),
			evcovShows("get_primary_keys", primaryKeys, "evcov_pk")),
		w("add_foreign_key", hmsreq.Req(hmsreq.StructList(1, append(fk, cat(15)...))),
			evcovShows("get_foreign_keys", foreignKeys, "evcov_fk")),
		w("add_unique_constraint", constraint("name", hmsreq.I32(5, 1), hmsreq.Str(6, "evcov_uk")),
			evcovShows("get_unique_constraints", constraints, "evcov_uk")),
		w("add_not_null_constraint", constraint("name", hmsreq.Str(5, "evcov_nn")),
			evcovShows("get_not_null_constraints", constraints, "evcov_nn")),
		w("add_default_constraint", constraint("name", hmsreq.Str(5, "'none'"), hmsreq.Str(6, "evcov_dc")),
			evcovShows("get_default_constraints", constraints, "evcov_dc")),
		w("add_check_constraint", constraint("id", hmsreq.Str(5, "id > 0"), hmsreq.Str(6, "evcov_cc")),
			evcovShows("get_check_constraints", constraints, "evcov_cc")),
		w("drop_constraint", hmsreq.Req(append([]hmsreq.Field{hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Str(3, "evcov_fk")}, cat(4)...)...),
			evcovLacks("get_foreign_keys", foreignKeys, "evcov_fk")),

		// Privileges: reported only.
		grant,
		revoke,
	}
}

func runEventLogCoverage(t *testing.T, v string) []evcovResult {
	hv, ok := evcovVersion[v]
	if !ok {
		t.Fatalf("no hms.Version for test-bed version %q", v)
	}
	ms := start(t, v)
	begin := time.Now()
	tag := strings.ReplaceAll(v, ".", "")
	db, db2 := "evcov_"+tag, "evcov_"+tag+"_db"
	dbDir := ms.work + "/evcov-wh/" + db + ".db"
	dbLoc := "file:" + dbDir
	c := dial(t, ms.addr)
	drop := func() {
		for _, d := range []string{db, db2} {
			dropDatabase(t, c, d)
		}
	}
	drop() // left over from an earlier run against the same metastore
	t.Cleanup(drop)

	for _, s := range evcovSetup(db, dbLoc) {
		if reason, ok := evcovReplyError(call(t, c, s.method, s.args)); !ok {
			t.Fatalf("HMS %s setup: %s: %s", v, s.method, reason)
		}
	}
	// Without a log nothing below means anything: setup's creates must
	// have moved the id.
	if id := evcovCurrentID(t, c); id == 0 {
		t.Fatalf("HMS %s: notification event id is 0 after setup's creates: the notification log is off", v)
	}

	var results []evcovResult
	for _, w := range evcovWrites(v, db, dbDir, db2) {
		results = append(results, evcovMeasure(t, c, v, w, db, db2))
	}
	for _, r := range results {
		switch r.status {
		case evcovUnknown:
			t.Logf("HMS %s: %s: skipped, the version has no such method (%s)", v, r.method, r.reason)
		case evcovFailed:
			t.Logf("HMS %s: %s: COULD NOT RUN, left out of the comparison: %s", v, r.method, r.reason)
		}
	}
	evcovCompare(t, v, hv, results)
	fmt.Printf("e2e: eventlog coverage HMS %s: %d writes, %v\n", v, len(results), time.Since(begin).Round(100*time.Millisecond))
	return results
}

// evcovMeasure makes write w and says whether the log recorded it.
func evcovMeasure(t *testing.T, c *hmsclient.Client, v string, w evcovWrite, db, db2 string) evcovResult {
	t.Helper()
	r := evcovResult{evcovWrite: w}
	if w.prepare != nil {
		if err := w.prepare(); err != nil {
			r.status, r.reason = evcovFailed, fmt.Sprintf("preparing: %v", err)
			return r
		}
	}
	before := evcovCurrentID(t, c)
	reply := call(t, c, w.method, w.args)
	if outcome(t, reply) == "app1" { // TApplicationException UNKNOWN_METHOD
		r.status = evcovUnknown
		r.reason, _ = evcovReplyError(reply)
		return r
	}
	if reason, ok := evcovReplyError(reply); !ok {
		r.status, r.reason = evcovFailed, reason
		return r
	}
	after := evcovAwaitID(t, c, before)
	if w.effect != nil {
		// Read after the wait: the reads log nothing, and the id the
		// verdict rests on is already taken.
		if missing := w.effect(t, c); missing != "" {
			r.status, r.reason = evcovFailed, "answered success but changed nothing: "+missing
			return r
		}
	}
	if after == before {
		r.status = evcovNone
		return r
	}
	r.status = evcovLogged
	for _, ev := range evcovEventsAfter(t, c, before) {
		// Only events of this test's databases are the write's: anything
		// else would be a background writer on the metastore, and would
		// make the verdict unreliable.
		if !strings.EqualFold(ev.db, db) && !strings.EqualFold(ev.db, db2) {
			t.Errorf("HMS %s: %s: event %d %s names database %q, not this test's: the verdict may be wrong", v, w.method, ev.id, ev.typ, ev.db)
			continue
		}
		r.events = append(r.events, ev)
	}
	return r
}

// evcovAwaitID polls the current event id until it moves past before and
// then stays put for evcovSettle, or evcovWait passes without a move. An
// id that never settles means something else writes to the metastore,
// and no verdict can be had.
func evcovAwaitID(t *testing.T, c *hmsclient.Client, before int64) int64 {
	t.Helper()
	var id int64
	wait.Poll(evcovWait, 50*time.Millisecond, func() bool { id = evcovCurrentID(t, c); return id != before })
	if id == before {
		return id
	}
	for settleBy := time.Now().Add(30 * time.Second); time.Now().Before(settleBy); {
		time.Sleep(evcovSettle) // the id must stay put this long: a measured pause
		again := evcovCurrentID(t, c)
		if again == id {
			return id
		}
		id = again
	}
	t.Fatalf("the notification event id keeps moving (%d, then %d 30s on): another writer on the metastore", before, id)
	return id
}

// evcovCompare checks hms.UnloggedWrites(hv) against the measurement:
// every compared write that left no event must be listed, and every
// listed write that was measured must have left none.
func evcovCompare(t *testing.T, v string, hv hms.Version, results []evcovResult) {
	t.Helper()
	listed := hms.UnloggedWrites(hv)
	measured := map[string]bool{}
	var mismatches []string
	for _, r := range results {
		if r.reportOnly || (r.status != evcovLogged && r.status != evcovNone) {
			continue
		}
		measured[r.method] = true
		isListed := slices.Contains(listed, r.method)
		switch {
		case r.status == evcovNone && !isListed:
			mismatches = append(mismatches, fmt.Sprintf("%s left no event, but hms.UnloggedWrites does not list it (a proxy would serve it stale for the full TTL)", r.method))
		case r.status == evcovLogged && isListed:
			mismatches = append(mismatches, fmt.Sprintf("%s left %s, but hms.UnloggedWrites lists it as unlogged", r.method, evcovTypes(r.events)))
		}
	}
	var unmeasured []string
	for _, m := range listed {
		if !measured[m] {
			unmeasured = append(unmeasured, m)
		}
	}
	if len(unmeasured) > 0 {
		t.Logf("HMS %s: listed in hms.UnloggedWrites(%v) but not measured here: %s", v, hv, strings.Join(unmeasured, " "))
	}
	if len(mismatches) > 0 {
		t.Errorf("HMS %s: hms.UnloggedWrites(%v) disagrees with the notification log measured on the metastore (thrift/hms/version.go, unloggedWrites):\n\t%s",
			v, hv, strings.Join(mismatches, "\n\t"))
	}
}

// evcovPrintTable prints method × version: the event types each write
// left, "none", or why it was not measured.
func evcovPrintTable(t *testing.T, vs []string, results map[string][]evcovResult) {
	t.Helper()
	var methods []string
	cells := map[string]map[string]string{} // method → version → cell
	for _, v := range vs {
		for _, r := range results[v] {
			if cells[r.method] == nil {
				methods = append(methods, r.method)
				cells[r.method] = map[string]string{}
			}
			cell := r.cell()
			if r.reportOnly {
				cell += " (report only)"
			}
			cells[r.method][v] = cell
		}
	}
	const prefix = "e2e: eventlog coverage"
	line := func(s string) { t.Log(prefix + " " + s); fmt.Println(prefix + " " + s) }
	header := fmt.Sprintf("%-38s", "method")
	for _, v := range vs {
		header += fmt.Sprintf(" | %-28s", "HMS "+v)
	}
	line(header)
	for _, m := range methods {
		row := fmt.Sprintf("%-38s", m)
		for _, v := range vs {
			cell := cells[m][v]
			if cell == "" {
				cell = "not run"
			}
			row += fmt.Sprintf(" | %-28s", cell)
		}
		line(row)
	}
}

// evcovCurrentID is get_current_notificationEventId's eventId.
func evcovCurrentID(t *testing.T, c *hmsclient.Client) int64 {
	t.Helper()
	reply := call(t, c, "get_current_notificationEventId", hmsreq.Args())
	id, err := eventlog.ReadCurrentID(evcovSuccess(t, "get_current_notificationEventId", reply))
	if err != nil {
		t.Fatalf("get_current_notificationEventId: %v", err)
	}
	return id
}

// evcovEventsAfter reads the events after id after (at most 1000: one
// write makes a handful).
func evcovEventsAfter(t *testing.T, c *hmsclient.Client, after int64) []evcovEvent {
	t.Helper()
	reply := call(t, c, "get_next_notification", hmsreq.Req(hmsreq.I64(1, after), hmsreq.I32(2, 1000)))
	read, err := eventlog.ReadEvents(evcovSuccess(t, "get_next_notification", reply))
	if err != nil {
		t.Fatalf("get_next_notification: %v", err)
	}
	evs := make([]evcovEvent, 0, len(read))
	for _, ev := range read {
		evs = append(evs, evcovEvent{id: ev.ID, typ: ev.Type, db: ev.DB})
	}
	return evs
}

// evcovSuccess positions a decoder on the struct a successful reply
// returns in field 0, or fails the test with the metastore's answer.
func evcovSuccess(t *testing.T, method string, reply []byte) *wire.Decoder {
	t.Helper()
	if reason, ok := evcovReplyError(reply); !ok {
		t.Fatalf("%s: %s", method, reason)
	}
	m, _ := wire.Parse(reply, wire.Limits{MaxMessage: 1 << 30})
	d := wire.NewDecoder(m.Body())
	if typ, id := d.FieldBegin(); id != 0 || typ != wire.TStruct {
		t.Fatalf("%s: success reply without a struct in field 0: %x", method, reply)
	}
	return d
}

// evcovReplyError says whether a reply is a success and, if not, why, in
// words: the TApplicationException's or the declared exception's message.
func evcovReplyError(reply []byte) (string, bool) {
	m, err := wire.Parse(reply, wire.Limits{MaxMessage: 1 << 30})
	if err != nil {
		return fmt.Sprintf("unparsable reply: %v", err), false
	}
	if m.Type == wire.Exception {
		ex, err := wire.DecodeApplicationException(m.Body())
		if err != nil {
			return fmt.Sprintf("unparsable application exception: %v", err), false
		}
		return fmt.Sprintf("application exception %d: %s", ex.Code, ex.Message), false
	}
	f, err := wire.ResultField(m.Body())
	if err != nil {
		return fmt.Sprintf("unparsable result: %v", err), false
	}
	if f <= 0 {
		return "", true
	}
	// Every declared metastore exception carries its message in field 1.
	msg := "(no message)"
	hms.Walk(m.Body(), hms.Path{f, 1}, func(typ byte, val []byte) bool {
		if typ == wire.TString {
			msg = string(val)
		}
		return false
	})
	return fmt.Sprintf("declared exception (result field %d): %s", f, msg), false
}
