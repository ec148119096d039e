package trace

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParseAuditLine(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       AuditLine
		ok         bool
	}{
		{"3.1 table", "2026-12-03T07:07:55,502  INFO [pool-6-thread-3] HiveMetaStore.audit: ugi=root\tip=127.0.0.1\tcmd=source:127.0.0.1 get_table : tbl=hive.bench_db0.bench_t0\t",
			AuditLine{Thread: "pool-6-thread-3", User: "root", IP: "127.0.0.1", Cmd: "get_table", Catalog: "hive", DB: "bench_db0", Table: "bench_t0"}, true},
		{"3.1 partial spec", "2026-12-03T07:07:55,557  INFO [pool-6-thread-3] HiveMetaStore.audit: ugi=alice\tip=10.1.2.3\tcmd=source:10.1.2.3 get_partitions_names_ps : tbl=hive.db.t[2024-01-01,7]\t",
			AuditLine{Thread: "pool-6-thread-3", User: "alice", IP: "10.1.2.3", Cmd: "get_partitions_names_ps", Catalog: "hive", DB: "db", Table: "t", Values: []string{"2024-01-01", "7"}}, true},
		{"3.1 statistics", "2026-12-03T07:07:55,898  INFO [pool-6-thread-3] HiveMetaStore.audit: ugi=root\tip=127.0.0.1\tcmd=source:127.0.0.1 get_table_statistics_req: table=hive.db.t\t",
			AuditLine{Thread: "pool-6-thread-3", User: "root", IP: "127.0.0.1", Cmd: "get_table_statistics_req", Catalog: "hive", DB: "db", Table: "t"}, true},
		{"2.3 table", "2019-01-01 10:00:00,001 INFO  [pool-5-thread-2]: HiveMetaStore.audit (HiveMetaStore.java:logAuditEvent(309)) - ugi=bob\tip=/10.0.0.1\tcmd=source:/10.0.0.1 get_table : db=default tbl=web_logs\t",
			AuditLine{Thread: "pool-5-thread-2", User: "bob", IP: "/10.0.0.1", Cmd: "get_table", DB: "default", Table: "web_logs"}, true},
		{"listing pattern", "2026-12-03T07:07:51,477  INFO [pool-6-thread-2] HiveMetaStore.audit: ugi=root\tip=127.0.0.1\tcmd=source:127.0.0.1 get_databases: @hive#\t",
			AuditLine{Thread: "pool-6-thread-2", User: "root", IP: "127.0.0.1", Cmd: "get_databases", Pattern: "@hive#"}, true},
		{"close", "2026-12-03T07:07:55,479  INFO [pool-6-thread-2] HiveMetaStore.audit: ugi=root\tip=127.0.0.1\tcmd=Cleaning up thread local RawStore...\t",
			AuditLine{Thread: "pool-6-thread-2", User: "root", IP: "127.0.0.1", Close: true}, true},
		{"done cleaning", "2026-12-03T07:07:55,480  INFO [pool-6-thread-2] HiveMetaStore.audit: ugi=root\tip=127.0.0.1\tcmd=Done cleaning up thread local RawStore\t", AuditLine{}, false},
		{"not audit", "2026-12-03T07:07:55,480  INFO [main] metastore.HiveMetaStore: Started the new metaserver on port", AuditLine{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseAuditLine(tc.line)
			if ok != tc.ok {
				t.Fatalf("ok %v; want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if got.Time.IsZero() {
				t.Errorf("no time read")
			}
			got.Time = tc.want.Time
			if got.Thread != tc.want.Thread || got.User != tc.want.User || got.IP != tc.want.IP || got.Cmd != tc.want.Cmd ||
				got.Catalog != tc.want.Catalog || got.DB != tc.want.DB || got.Table != tc.want.Table ||
				!slices.Equal(got.Values, tc.want.Values) || got.Pattern != tc.want.Pattern || got.Close != tc.want.Close {
				t.Fatalf("got %+v; want %+v", got, tc.want)
			}
		})
	}
}

// The lines the test bed's metastores wrote (testbed/hms.sh logs the
// audit logger at INFO into hms.log) all parse, and one call is one call
// where 4.0 logs an inner line too.
func TestParseAuditOfTheTestBed(t *testing.T) {
	for _, tc := range []struct {
		file                string
		calls               map[string]int
		values, tbl, nested int
	}{
		{"hms23-audit.log", map[string]int{"get_table": 2, "get_partitions_names_ps": 2}, 2, 0, 0},
		{"hms31-audit.log", map[string]int{"get_partitions_by_names": 6, "get_partitions_names_ps": 6}, 6, 0, 0},
		{"hms40-audit.log", map[string]int{"get_partition_names": 2, "fetch_partition_names_req": 0, "get_partitions_names_ps": 2}, 2, 0, 4},
	} {
		t.Run(tc.file, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			lines, skipped, err := ParseAudit(strings.NewReader(string(raw)))
			if err != nil {
				t.Fatal(err)
			}
			done := strings.Count(string(raw), "Done cleaning up")
			if skipped != done || len(lines)+skipped+tc.nested != strings.Count(string(raw), "\n") {
				t.Fatalf("%d lines, %d skipped; want all but the %d 'Done cleaning up' and %d nested lines", len(lines), skipped, done, tc.nested)
			}
			got, values := map[string]int{}, 0
			for _, l := range lines {
				got[l.Cmd]++
				if l.Time.IsZero() || l.Thread == "" || l.User != "root" {
					t.Errorf("line %+v: no time, thread or user", l)
				}
				if strings.HasPrefix(l.Cmd, "get_") && strings.Contains(l.Cmd, "partition") && (l.DB != "bench_db0" || !strings.HasPrefix(l.Table, "bench_t")) {
					t.Errorf("line %+v: table not read", l)
				}
				if len(l.Values) == 1 && strings.HasPrefix(l.Values[0], "2024-01-0") {
					values++
				}
			}
			for cmd, n := range tc.calls {
				if got[cmd] != n {
					t.Errorf("%d %s calls; want %d (all: %v)", got[cmd], cmd, n, got)
				}
			}
			if values != tc.values {
				t.Errorf("%d lines with partition values [2024-01-0x]; want %d", values, tc.values)
			}
		})
	}
}

func FuzzParseAuditLine(f *testing.F) {
	for _, file := range []string{"hms23-audit.log", "hms31-audit.log", "hms40-audit.log"} {
		raw, _ := os.ReadFile("testdata/" + file)
		for _, l := range strings.Split(string(raw), "\n") {
			f.Add(l)
		}
	}
	f.Fuzz(func(t *testing.T, line string) {
		l, ok := ParseAuditLine(line)
		if ok && !l.Close && l.Cmd == "" {
			t.Fatalf("a call without a method: %+v", l)
		}
	})
}
