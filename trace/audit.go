package trace

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"
)

// AuditLine is one call in a metastore audit log (the HiveMetaStore.audit
// logger of Hive 2.3, 3.1 and 4.0):
//
//	2026-12-03T07:07:55,557  INFO [pool-6-thread-3] HiveMetaStore.audit: ugi=hive	ip=10.0.0.7	cmd=source:10.0.0.7 get_partitions_names_ps : tbl=hive.sales.orders[2024-01-01]
//
// The log names the method and the table, but not every argument: the
// partition names of a by-names read, the columns of a statistics read,
// a filter. Whoever replays it fills those in (and says so).
type AuditLine struct {
	// Time is the log line's time; zero when it has none that parses.
	Time time.Time
	// Thread is the metastore's handler thread: calls of one client
	// connection run on one thread, which a later connection may reuse.
	Thread string
	// User is the ugi, IP the client address.
	User, IP string
	// Cmd is the method as the audit log names it (get_table for both
	// get_table and get_table_req, get_databases for get_all_databases).
	Cmd string
	// Catalog, DB, Table: the object named, where the line names one
	// ("tbl=cat.db.t" in 3.1 and 4.0, "db=d tbl=t" in 2.3).
	Catalog, DB, Table string
	// Values are the partition values of a line that lists some
	// ("tbl=hive.db.t[2024-01-01]").
	Values []string
	// Pattern is a listing's pattern ("get_databases: @hive#", "pat=...").
	Pattern string
	// Close: the line ends the thread's connection ("Cleaning up thread
	// local RawStore"), not a call.
	Close bool
	// MaxPartitions: the line states a partition limit ("Max partitions
	// =-1", Hive 4.0), as 4.0 does on the outer line of a call that logs
	// an inner one too.
	MaxPartitions bool
}

// maxAuditLine bounds a line the parser takes: create_table lines print
// whole tables, and a log is untrusted input.
const maxAuditLine = 1 << 20

// ParseAudit reads a metastore log and returns its audit lines, in order;
// other lines are skipped. skipped counts audit lines it could not read.
func ParseAudit(r io.Reader) (lines []AuditLine, skipped int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxAuditLine)
	last := map[string]AuditLine{} // each thread's previous call line
	for sc.Scan() {
		text := sc.Text()
		if !strings.Contains(text, "HiveMetaStore.audit") && !strings.Contains(text, "ugi=") {
			continue
		}
		l, ok := ParseAuditLine(text)
		if !ok {
			skipped++
			continue
		}
		if prev, ok := last[l.Thread]; ok && nested(&prev, &l) {
			delete(last, l.Thread)
			continue
		}
		lines = append(lines, l)
		last[l.Thread] = l
		if l.Close {
			delete(last, l.Thread)
		}
	}
	if err := sc.Err(); err != nil {
		return lines, skipped, fmt.Errorf("trace: read audit log: %w", err)
	}
	return lines, skipped, nil
}

// nested reports whether l is the inner line of the call prev logged:
// Hive 4.0 logs get_partition_names as itself with its limit, then as
// fetch_partition_names_req, and get_partition_names_ps twice, the
// second time without the limit. One client call, one call.
func nested(prev, l *AuditLine) bool {
	if !prev.MaxPartitions || l.MaxPartitions || prev.DB != l.DB || prev.Table != l.Table {
		return false
	}
	return l.Cmd == prev.Cmd || prev.Cmd == "get_partition_names" && l.Cmd == "fetch_partition_names_req"
}

// ParseAuditLine reads one audit line; false when it is none.
func ParseAuditLine(text string) (AuditLine, bool) {
	var l AuditLine
	head, rest, ok := strings.Cut(text, "ugi=")
	if !ok {
		return l, false
	}
	l.Time = auditTime(head)
	if i := strings.IndexByte(head, '['); i >= 0 {
		if j := strings.IndexByte(head[i:], ']'); j > 0 {
			l.Thread = head[i+1 : i+j]
		}
	}
	// ugi=..<TAB>ip=..<TAB>cmd=..<TAB>
	fields := strings.Split(rest, "\t")
	l.User = strings.TrimSpace(fields[0])
	cmd := ""
	for _, f := range fields[1:] {
		switch {
		case strings.HasPrefix(f, "ip="):
			l.IP = strings.TrimPrefix(f, "ip=")
		case strings.HasPrefix(f, "cmd="):
			cmd = strings.TrimPrefix(f, "cmd=")
		}
	}
	if cmd == "" {
		return l, false
	}
	if strings.HasPrefix(cmd, "Cleaning up thread local RawStore") {
		l.Close = true
		return l, true
	}
	if strings.HasPrefix(cmd, "source:") {
		if _, after, ok := strings.Cut(cmd, " "); ok {
			cmd = after
		}
	}
	name, args, _ := strings.Cut(cmd, ":")
	l.Cmd = strings.TrimSpace(name)
	if l.Cmd == "" || strings.ContainsAny(l.Cmd, " ()=") {
		return l, false // "Done cleaning up ...", and lines of other shapes
	}
	l.auditArgs(strings.TrimSpace(args))
	return l, true
}

// auditArgs reads "tbl=cat.db.t[v1,v2]", "db=d tbl=t", "db=d pat=p",
// "table=cat.db.t" or a bare pattern, and 4.0's further ": "-separated
// parts ("Max partitions =-1", "Partitions = [v1, v2]").
func (l *AuditLine) auditArgs(args string) {
	if !strings.Contains(args, "=") {
		l.Pattern = args
		return
	}
	parts := strings.Split(args, ": ")
	for _, p := range parts[1:] {
		switch {
		case strings.HasPrefix(p, "Max partitions"):
			l.MaxPartitions = true
		case strings.HasPrefix(p, "Partitions = [") && strings.HasSuffix(p, "]"):
			l.Values = splitValues(p[len("Partitions = [") : len(p)-1])
		}
	}
	for _, kv := range strings.Fields(parts[0]) {
		k, v, ok := strings.Cut(strings.TrimSuffix(kv, ":"), "=")
		if !ok {
			continue
		}
		switch k {
		case "db":
			l.DB = v
		case "pat":
			l.Pattern = v
		case "tbl", "table":
			l.tableArg(v)
		}
	}
}

// tableArg reads "cat.db.t", "db.t" or "t", each with partition values
// in brackets or not.
func (l *AuditLine) tableArg(v string) {
	if i := strings.IndexByte(v, '['); i >= 0 && strings.HasSuffix(v, "]") {
		l.Values = splitValues(v[i+1 : len(v)-1])
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	switch {
	case len(parts) >= 3 && l.DB == "":
		l.Catalog, l.DB, l.Table = parts[0], parts[1], strings.Join(parts[2:], ".")
	case len(parts) == 2 && l.DB == "":
		l.DB, l.Table = parts[0], parts[1]
	default:
		l.Table = v
	}
}

func splitValues(s string) []string {
	if s == "" {
		return nil
	}
	vals := strings.Split(s, ",")
	for i := range vals {
		vals[i] = strings.TrimSpace(vals[i])
	}
	return vals
}

// auditTime reads the ISO 8601 time log4j writes at the start of a line
// ("2026-12-03T07:07:55,557" or with a space for the T).
func auditTime(head string) time.Time {
	f := strings.Fields(head)
	if len(f) == 0 {
		return time.Time{}
	}
	s := f[0]
	if len(f) > 1 && len(s) == len("2006-01-02") {
		s += "T" + f[1]
	}
	s = strings.Replace(s, ",", ".", 1)
	for _, layout := range []string{"2006-01-02T15:04:05.000", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t
		}
	}
	return time.Time{}
}
