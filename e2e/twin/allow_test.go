package twin

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSameNotFound(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{`{1:{1:"There is no database named d2"}}`, `{1:{1:"d2"}}`, true},
		{`{1:{1:"d2"}}`, `{1:{1:"There is no database named d2"}}`, true},
		{`{1:{1:"There is no database named d2"}}`, `{1:{1:"d3"}}`, false},
		{`{1:{1:"There is no database named d2"}}`, `{0:{1:"d2"}}`, false},
		{`{0:[]}`, `{1:{1:"Filtering is supported only on partition keys of type string"}}`, false},
	} {
		if got := sameNotFound(tc.a, tc.b); got != tc.want {
			t.Errorf("sameNotFound(%s, %s) = %v; want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestLogged(t *testing.T) {
	dir := t.TempDir()
	log := "2026-12-02T18:41:57,069  WARN [pool-6-thread-6] metastore.ObjectStore: Falling back to ORM path\n" +
		" Caused by: " + derbyCastFailed + ". at org.apache.derby.impl.jdbc.SQLExceptionFactory\n" +
		"2026-12-02T18:41:58,000  INFO [pool-6-thread-3] metastore.HiveMetaStore: get_table\n"
	if err := os.WriteFile(filepath.Join(dir, "hms.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	ms := &Metastore{work: dir}
	at := func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02T15:04:05.000", s, time.Local)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		since string
		want  bool
	}{
		{"2026-12-02T18:41:57.500", true}, // within the log's second of slack
		{"2026-12-02T18:41:50.000", true},
		{"2026-12-02T18:41:59.000", false}, // the failure came before the read
	} {
		if got := ms.logged(at(tc.since), derbyCastFailed); got != tc.want {
			t.Errorf("logged since %s = %v; want %v", tc.since, got, tc.want)
		}
	}
}
