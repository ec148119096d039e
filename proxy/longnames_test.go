package proxy

import (
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestLongNamesUncached (issue 22, item 8): a read naming a database,
// table or partition longer than the metastore's column for it can only
// be answered "not found"; it is forwarded and never cached, so a 30 MiB
// name cannot buy a 30 MiB not-found entry that evicts other clients'
// entries. Names at the column widths are cached as before.
func TestLongNamesUncached(t *testing.T) {
	name := func(n int) string { return strings.Repeat("n", n) }
	for _, tc := range []struct {
		name   string
		method string
		kind   hms.Kind
		args   []byte
		cached bool
	}{
		{"database at the width", "get_database", hms.KindDatabase,
			hmsreq.Args(hmsreq.Str(1, name(hms.MaxDatabaseName))), true},
		{"database past the width", "get_database", hms.KindDatabase,
			hmsreq.Args(hmsreq.Str(1, name(hms.MaxDatabaseName+1))), false},
		{"table at the width", "get_table", hms.KindTable,
			hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, name(hms.MaxTableName))), true},
		{"table past the width", "get_table", hms.KindTable,
			hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, name(hms.MaxTableName+1))), false},
		{"30 MiB table", "get_table", hms.KindTable,
			hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, name(30<<20))), false},
		{"database of a table past the width", "get_table", hms.KindTable,
			hmsreq.Args(hmsreq.Str(1, name(hms.MaxDatabaseName+1)), hmsreq.Str(2, "t0")), false},
		{"catalog-qualified database at the width", "get_database", hms.KindDatabase,
			hmsreq.Args(hmsreq.Str(1, "@hive#"+name(hms.MaxDatabaseName))), true},
		{"database pattern past the width", "get_databases", hms.KindDatabaseNames,
			hmsreq.Args(hmsreq.Str(1, "demo*|"+name(hms.MaxDatabaseName))), true},
		{"partition name past the width", "get_partitions_by_names", hms.KindPartitions,
			hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"),
				hmsreq.Strings(3, "ds=2024-01-01/hr=1", "ds="+name(hms.MaxPartitionName))), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			demo, addr := startDemo(t, wire.Buffered)
			caching := newCaching(t, nil)
			srv, paddr := startProxy(t, proxyOpts{cache: caching}, addr)
			c := dial(t, paddr, wire.Buffered)
			first := call(t, c, tc.method, tc.args)
			caching.Store.Wait()
			before := demo.CallCount(tc.method)
			second := call(t, c, tc.method, tc.args)
			refreshesSettled(t, srv)
			if !sameButSeqID(first, second) {
				t.Fatal("the two answers differ")
			}
			loads := demo.CallCount(tc.method) - before
			admitted := caching.Store.Stats(tc.kind).Admitted.Load()
			if tc.cached && (loads != 0 || admitted == 0) {
				t.Fatalf("second call reached the metastore %d times, %d entries admitted; want a hit", loads, admitted)
			}
			if !tc.cached && (loads != 1 || admitted != 0) {
				t.Fatalf("second call reached the metastore %d times, %d entries admitted; want 1 and none", loads, admitted)
			}
		})
	}
}
