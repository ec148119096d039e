package twin

import (
	"strings"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

// This file alone says which differences between the proxy and the
// metastore are allowed, and why. Everything else the twin finds is a
// difference and fails the run.
//
//   - raced: a read made while another session's write was in flight
//     (Step.Racy reads only; every other read waits for the writes over
//     what it touches). Either
//     answer is one the metastore could have given. The reads after the
//     write are compared as usual, so a load that began before the write
//     and was cached after it (a stale fill) is still found.
//   - metastore-varies: the metastore itself answered the same call
//     differently twice in a row, with no write between.
//   - unlogged-direct-write: a write made straight to the metastore that
//     its notification log does not record (hms.UnloggedWrites, measured
//     on the test bed) reaches a proxy only when its entries expire:
//     cache.ttl_without_eventlog for the kinds such writes change. Reads
//     of what it touched may differ for that long, and only those whose
//     answer it can change (answerOfWrite): an alter_database the
//     database object, not the tables in it.
//
//   - write-in-doubt: a write the twin stopped waiting for after
//     writeTimeout (the metastore retries a write its database refuses
//     for 20 seconds): it may land any time until then, and the proxy
//     invalidates once it does. Reads of what it touches may differ for
//     inDoubtFor.
//
//   - leaked-override (2.3 only): HMS 2.3 keeps a connection's setMetaConf
//     overrides in its worker thread's Configuration, and closing the
//     connection does not clear it (deleteContext drops the thread's
//     RawStore, not its conf). Any later connection the thread serves,
//     straight or through the proxy, may then run without direct SQL,
//     whatever its own session set. Allowed only where both answers say
//     the same and word it differently: a database not found is "There is
//     no database named d" from JDO and "d" from direct SQL. (A 3-node
//     twin on 2.3 met it twice in 21,842 operations; 3.1 and 4.0 never
//     did.) Answers that differ in substance are never allowed by it.
//
//   - derby-cast: the test bed's metastores keep their catalog in Derby,
//     where direct SQL's filter on an integral key casts every stored
//     value of that key position to a decimal, those of other tables
//     included, whatever guard the query puts around the cast. Once any
//     table holds a value that is not a number there ("a%b"), the query
//     fails ("Invalid character string format for type DECIMAL"), the
//     metastore falls back to JDO, and JDO refuses filters on keys that
//     are not strings. The answer then depends on other tables' data and
//     Derby's plan, which a proxy cannot know; on MySQL and Postgres the
//     metastore answers as the proxy does. Allowed only where the
//     metastore answered exactly that refusal, the proxy a result, and
//     the metastore's own log shows the failed cast since the read began.
//
// Direct writes the log does record are not allowed to differ at all:
// the twin waits until every node reports that it applied the
// metastore's newest event (hmsproxy_eventlog_applied_event_id) before
// it compares the reads they touched. Reads of a table the session holds
// a granted write lock on never wait and are never allowed to differ:
// the lock is a freshness point (an Iceberg commit reads under it).

// unloggedBound is how long after an unlogged direct write its reads may
// differ: the proxy's default cache.ttl_without_eventlog (30s), plus the
// slack of a refresh in flight.
const unloggedBound = 30*time.Second + 5*time.Second

// inDoubtFor is how long a write the twin stopped waiting for may still
// land: the metastore's ten retries two seconds apart, and slack.
const inDoubtFor = 30 * time.Second

// versions maps the twin's version names to the metastore's.
var versions = map[string]hms.Version{"2.3": hms.Version2, "3.1": hms.Version3, "4.0": hms.Version4}

type allower struct {
	unlogged map[string]bool
	// leaks: the metastore's worker threads keep closed connections'
	// overrides (2.3).
	leaks bool
}

// jdoStringKeysOnly is JDO's refusal of a filter on a key that is not a
// string; derbyCastFailed what Derby says when direct SQL's cast of a
// stored value fails.
const (
	jdoStringKeysOnly = "Filtering is supported only on partition keys of type string"
	derbyCastFailed   = "Invalid character string format for type DECIMAL"
)

// jdoNoDatabase is how the JDO path words a database not found; direct
// SQL names the database alone.
const jdoNoDatabase = "There is no database named "

// newAllower allows what version's unlogged writes (hms.UnloggedWrites,
// which e2e TestEventLogCoverage measures on the real metastores) may
// leave different for a while.
func newAllower(version string) *allower {
	a := &allower{unlogged: map[string]bool{}, leaks: version == "2.3"}
	for _, m := range hms.UnloggedWrites(versions[version]) {
		a.unlogged[m] = true
	}
	return a
}

// unlogged reports whether a direct write of op leaves no event.
func (a *allower) unloggedOp(op Op) bool { return a.unlogged[op.Method()] }

// reply names the rule that allows a difference of a read, or "".
func (a *allower) reply(r *runner, st Step, rp, rd reply, begun time.Time) string {
	if a.leaks && sameNotFound(rp.String(), rd.String()) {
		return "leaked-override"
	}
	if rp.kind() == "ok" && strings.Contains(rd.String(), jdoStringKeysOnly) &&
		r.ms.logged(begun, derbyCastFailed) {
		return "derby-cast"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ans := answerOfRead(st.Op.Method())
	for k, at := range r.unlogged {
		if k.answer == ans && overlapsAny([]string{k.touch}, st.Op.Touches()) && time.Since(at) < unloggedBound {
			return "unlogged-direct-write"
		}
	}
	for t, until := range r.doubt {
		if overlapsAny([]string{t}, st.Op.Touches()) && time.Now().Before(until) {
			return "write-in-doubt"
		}
	}
	return ""
}

// unloggedKey is what an unlogged direct write may leave stale: the
// answers of one kind about one database or table.
type unloggedKey struct {
	touch  string
	answer answer
}

// answer is the kind of a read's answer, as far as the unlogged writes
// change them.
type answer uint8

const (
	answerObjects     answer = iota // tables, partitions, statistics
	answerDatabase                  // the database object
	answerFunction                  // functions
	answerConstraints               // keys and constraints
	answerNames                     // lists of names
)

// answerOfWrite is the kind of answer an unlogged write changes: a
// statistics write the statistics and the COLUMN_STATS_ACCURATE
// parameter of the table or partitions it names.
func answerOfWrite(method string) answer {
	switch {
	case method == "alter_database":
		return answerDatabase
	case strings.Contains(method, "function"):
		return answerFunction
	case strings.Contains(method, "constraint"), strings.HasSuffix(method, "_key"):
		return answerConstraints
	}
	return answerObjects
}

// answerOfRead is the kind of a read's answer.
func answerOfRead(method string) answer {
	switch {
	case strings.HasPrefix(method, "get_database"):
		return answerDatabase
	case strings.Contains(method, "function"):
		return answerFunction
	case strings.HasSuffix(method, "_keys"), strings.Contains(method, "constraints"):
		return answerConstraints
	case method == "get_all_tables", method == "get_tables", method == "get_all_databases",
		method == "get_databases", strings.HasPrefix(method, "get_partition_names"):
		return answerNames
	}
	return answerObjects
}

// sameNotFound reports whether two answers are the one NoSuchObjectException
// for a database, worded by the two paths of the metastore.
func sameNotFound(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	const pre = `{1:{1:"`
	return strings.HasPrefix(a, pre) && strings.HasPrefix(b, pre) &&
		b == pre+jdoNoDatabase+strings.TrimPrefix(a, pre)
}
