package demohms

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/syncbuf"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

type rtCase struct {
	method  string
	args    func(e *wire.Encoder)
	exField int16                       // > 0: a declared exception at this result field
	appEx   int32                       // > 0: a TApplicationException of this type
	check   func(t *testing.T, v *tval) // the success value (nil for void)
}

func wantStrs(want ...string) func(t *testing.T, v *tval) {
	return func(t *testing.T, v *tval) {
		t.Helper()
		if got := strs(v); !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func wantLen(n int) func(t *testing.T, v *tval) {
	return func(t *testing.T, v *tval) {
		t.Helper()
		if len(v.elems) != n {
			t.Errorf("got %d elements, want %d", len(v.elems), n)
		}
	}
}

func wantI(n int64) func(t *testing.T, v *tval) {
	return func(t *testing.T, v *tval) {
		t.Helper()
		if v.i != n {
			t.Errorf("got %d, want %d", v.i, n)
		}
	}
}

// wantPartVals checks a list<Partition> by the values of each partition.
func wantPartVals(want ...string) func(t *testing.T, v *tval) {
	return func(t *testing.T, v *tval) {
		t.Helper()
		var got []string
		for _, p := range v.elems {
			got = append(got, strings.Join(p.strList(1), ","))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("partitions %q, want %q", got, want)
		}
	}
}

func newTable(db, name string) *table {
	t := seedTable(&database{Name: db, LocationURI: warehouse + "/" + db + ".db"}, name, 0)
	t.SD.Location = ""
	t.CreateTime = 0
	return t
}

func newPart(db, tbl string, vals ...string) *partition {
	return &partition{Values: vals, DBName: db, TableName: tbl, Parameters: map[string]string{"k": "v"}}
}

func roundTripCases() []rtCase {
	partKey := func(vals ...string) func(*wire.Encoder) {
		return args(strArg(1, "demo_db0"), strArg(2, "t0"), listArg(3, vals...))
	}
	renamed := newTable("demo_db1", "nt2")
	renamed.SD.Location = warehouse + "/new_db.db/nt" // clients send the old location back
	return []rtCase{
		// databases
		{method: "get_all_databases", check: wantStrs("default", "demo_db0", "demo_db1")},
		{method: "get_databases", args: strArg(1, "@hive#"), check: wantStrs("default", "demo_db0", "demo_db1")},
		{method: "get_databases", args: strArg(1, "@hive#DEMO*"), check: wantStrs("demo_db0", "demo_db1")},
		{method: "get_databases", args: strArg(1, "default|demo_db1"), check: wantStrs("default", "demo_db1")},
		{method: "get_databases", args: strArg(1, "@other#"), check: wantStrs()},
		{method: "get_database", args: strArg(1, "@hive#Demo_DB0"), check: func(t *testing.T, v *tval) {
			if v.str(1) != "demo_db0" || v.str(8) != "hive" || v.strMap(4)["seed_index"] != "0" {
				t.Errorf("database %q cat %q params %v", v.str(1), v.str(8), v.strMap(4))
			}
		}},
		{method: "get_database", args: strArg(1, "nope"), exField: 1},
		{method: "get_database_req", args: structArg(1, strArg(1, "demo_db1"), strArg(2, "hive")), check: func(t *testing.T, v *tval) {
			if v.str(1) != "demo_db1" {
				t.Errorf("name %q", v.str(1))
			}
		}},
		{method: "create_database", args: structArg(1, strArg(1, "New_DB"), strArg(2, "made in test")),
			check: func(t *testing.T, v *tval) {
				if v != nil {
					t.Errorf("void call returned a value")
				}
			}},
		{method: "create_database", args: structArg(1, strArg(1, "new_db")), exField: 1},
		{method: "create_database", args: structArg(1, strArg(1, "bad name!")), exField: 2},
		{method: "alter_database", args: args(strArg(1, "new_db"), structArg(2, strArg(1, "new_db"),
			func(e *wire.Encoder) { e.StringMapField(4, []string{"a"}, map[string]string{"a": "b"}) }))},
		{method: "get_database", args: strArg(1, "new_db"), check: func(t *testing.T, v *tval) {
			if v.strMap(4)["a"] != "b" || v.str(2) != "made in test" || v.str(3) != warehouse+"/new_db.db" {
				t.Errorf("altered db: %v %q %q", v.strMap(4), v.str(2), v.str(3))
			}
		}},
		{method: "alter_database", args: args(strArg(1, "nope"), structArg(2, strArg(1, "nope"))), exField: 2},

		// table reads
		{method: "get_all_tables", args: strArg(1, "demo_db0"), check: wantStrs("t0", "t1", "t2")},
		{method: "get_all_tables", args: strArg(1, "nope"), check: wantStrs()},
		{method: "get_tables", args: args(strArg(1, "@hive#demo_db0"), strArg(2, "t1|T2")), check: wantStrs("t1", "t2")},
		{method: "get_tables_by_type", args: args(strArg(1, "demo_db0"), strArg(2, "*"), strArg(3, "EXTERNAL_TABLE")), check: wantStrs("t2")},
		{method: "get_table_meta", args: args(strArg(1, "demo*"), strArg(2, "t0"), listArg(3)), check: func(t *testing.T, v *tval) {
			if len(v.elems) != 2 || v.elems[1].str(1) != "demo_db1" || v.elems[1].str(3) != "MANAGED_TABLE" || v.elems[1].str(4) != "demo table t0" {
				t.Errorf("table meta %d", len(v.elems))
			}
		}},
		{method: "get_table", args: args(strArg(1, "@hive#DEMO_DB0"), strArg(2, "T0")), check: func(t *testing.T, v *tval) {
			sd := v.sub(7)
			if v.str(1) != "t0" || v.str(2) != "demo_db0" || v.str(12) != "MANAGED_TABLE" || v.str(17) != "hive" ||
				len(v.list(8)) != 2 || v.list(8)[1].str(2) != "int" || len(sd.list(1)) != 4 ||
				sd.sub(7).str(2) != "org.apache.hadoop.hive.ql.io.orc.OrcSerde" || v.strMap(9)["comment"] != "demo table t0" {
				t.Errorf("table fields wrong: %+v", v.fields)
			}
		}},
		{method: "get_table", args: args(strArg(1, "demo_db0"), strArg(2, "nope")), exField: 2},
		{method: "get_table_req", args: structArg(1, strArg(1, "demo_db0"), strArg(2, "t1"), strArg(4, "hive")), check: func(t *testing.T, v *tval) {
			if v.sub(1).str(1) != "t1" {
				t.Errorf("GetTableResult.table = %q", v.sub(1).str(1))
			}
		}},
		{method: "get_table_req", args: structArg(1, strArg(1, "demo_db0"), strArg(2, "t1"), strArg(4, "other")), exField: 2},
		{method: "get_table_objects_by_name", args: args(strArg(1, "demo_db0"), listArg(2, "t1", "nope", "T0", "t1")), check: func(t *testing.T, v *tval) {
			if len(v.elems) != 2 || v.elems[0].str(1) != "t1" || v.elems[1].str(1) != "t0" {
				t.Errorf("got %d tables", len(v.elems))
			}
		}},
		{method: "get_table_objects_by_name", args: args(strArg(1, "nope"), listArg(2, "t1")), appEx: wire.ExInternalError},
		{method: "get_table_objects_by_name_req", args: structArg(1, strArg(1, "demo_db1"), listArg(2, "t2")), check: func(t *testing.T, v *tval) {
			if l := v.list(1); len(l) != 1 || l[0].str(12) != "EXTERNAL_TABLE" {
				t.Errorf("got %d tables", len(l))
			}
		}},
		{method: "get_table_objects_by_name_req", args: structArg(1, strArg(1, "nope")), exField: 3},
		{method: "get_fields", args: args(strArg(1, "demo_db0"), strArg(2, "t0")), check: wantLen(4)},
		{method: "get_schema", args: args(strArg(1, "demo_db0"), strArg(2, "t0")), check: wantLen(6)},
		{method: "get_fields", args: args(strArg(1, "demo_db0"), strArg(2, "nope")), exField: 2},

		// partition reads
		{method: "get_partition", args: partKey("2024-01-01", "1"), check: func(t *testing.T, v *tval) {
			if v.str(2) != "demo_db0" || v.str(3) != "t0" || v.str(9) != "hive" ||
				v.sub(6).str(2) != warehouse+"/demo_db0.db/t0/ds=2024-01-01/hr=1" || v.strMap(7)["numRows"] != "101" {
				t.Errorf("partition fields: %q %q loc %q", v.str(2), v.str(3), v.sub(6).str(2))
			}
		}},
		{method: "get_partition", args: partKey("2024-01-01", "99"), exField: 2},
		{method: "get_partition_req", args: structArg(1, strArg(2, "demo_db0"), strArg(3, "t0"), listArg(4, "2024-01-02", "0")),
			check: func(t *testing.T, v *tval) { wantStrs("2024-01-02", "0")(t, v.sub(1).fields[1]) }},
		{method: "get_partition_by_name", args: args(strArg(1, "demo_db0"), strArg(2, "t0"), strArg(3, "ds=2024-01-01/hr=5")),
			check: func(t *testing.T, v *tval) { wantStrs("2024-01-01", "5")(t, v.fields[1]) }},
		{method: "get_partition_by_name", args: args(strArg(1, "demo_db0"), strArg(2, "t0"), strArg(3, "ds=2024-01-01")), exField: 1},
		{method: "get_partitions", args: args(strArg(1, "demo_db0"), strArg(2, "t0"), i16Arg(3, 3)),
			check: wantPartVals("2024-01-01,0", "2024-01-01,1", "2024-01-01,10")},
		{method: "get_partitions", args: args(strArg(1, "demo_db0"), strArg(2, "t0"), i16Arg(3, -1)), check: wantLen(30)},
		{method: "get_partitions", args: args(strArg(1, "demo_db0"), strArg(2, "nope"), i16Arg(3, -1)), check: wantLen(0)},
		{method: "get_partitions_req", args: structArg(1, strArg(2, "demo_db0"), strArg(3, "t0"), i16Arg(4, 2)),
			check: func(t *testing.T, v *tval) { wantLen(2)(t, v.fields[1]) }},
		{method: "get_partitions_ps", args: args(partKey("2024-01-02"), i16Arg(4, -1)),
			check: wantPartVals("2024-01-02,0", "2024-01-02,1", "2024-01-02,2", "2024-01-02,3", "2024-01-02,4", "2024-01-02,5")},
		{method: "get_partitions_ps", args: args(partKey("", "23"), i16Arg(4, -1)), check: wantPartVals("2024-01-01,23")},
		{method: "get_partitions_ps", args: args(partKey("a", "b", "c"), i16Arg(4, -1)), exField: 1},
		{method: "get_partition_names", args: args(strArg(1, "demo_db0"), strArg(2, "t0"), i16Arg(3, 2)),
			check: wantStrs("ds=2024-01-01/hr=0", "ds=2024-01-01/hr=1")},
		{method: "get_partition_names_ps", args: args(partKey("2024-01-02", "3"), i16Arg(4, -1)), check: wantStrs("ds=2024-01-02/hr=3")},
		{method: "get_partitions_by_names", args: args(strArg(1, "demo_db0"), strArg(2, "t0"),
			listArg(3, "ds=2024-01-02/hr=1", "ds=2024-01-01/hr=2", "ds=1999-01-01/hr=1", "garbage")),
			check: wantPartVals("2024-01-01,2", "2024-01-02,1")},
		{method: "get_partitions_by_names_req", args: structArg(1, strArg(1, "@hive#demo_db0"), strArg(2, "t0"), listArg(3, "ds=2024-01-01/hr=3")),
			check: func(t *testing.T, v *tval) { wantPartVals("2024-01-01,3")(t, v.fields[1]) }},
		{method: "get_partitions_by_filter", args: args(strArg(1, "demo_db0"), strArg(2, "t0"), strArg(3, "ds = '2024-01-02' and hr >= 4"), i16Arg(4, -1)),
			check: wantPartVals("2024-01-02,4", "2024-01-02,5")},
		{method: "get_partitions_by_filter", args: args(strArg(1, "demo_db0"), strArg(2, "t0"), strArg(3, "(hr < 2 or hr > 22) and ds <> '2024-01-02'"), i16Arg(4, -1)),
			check: wantPartVals("2024-01-01,0", "2024-01-01,1", "2024-01-01,23")},
		{method: "get_partitions_by_filter", args: args(strArg(1, "demo_db0"), strArg(2, "t0"), strArg(3, "hr = "), i16Arg(4, -1)), exField: 1},
		{method: "get_partitions_by_filter", args: args(strArg(1, "demo_db0"), strArg(2, "nope"), strArg(3, "hr = 1"), i16Arg(4, -1)), exField: 2},
		{method: "get_partitions_by_filter_req", args: structArg(1, strArg(2, "demo_db0"), strArg(3, "t0"), strArg(4, "hr = 7")), check: wantPartVals("2024-01-01,7")},
		{method: "get_num_partitions_by_filter", args: args(strArg(1, "demo_db0"), strArg(2, "t0"), strArg(3, "hr < 10")), check: wantI(16)},

		// table and partition writes
		{method: "create_table", args: tableArg(1, newTable("new_db", "NT"))},
		{method: "create_table", args: tableArg(1, newTable("new_db", "nt")), exField: 1},
		{method: "create_table_with_environment_context", args: tableArg(1, newTable("nope", "nt")), exField: 4},
		{method: "get_table", args: args(strArg(1, "new_db"), strArg(2, "nt")), check: func(t *testing.T, v *tval) {
			if v.sub(7).str(2) != warehouse+"/new_db.db/nt" || v.integer(4, 0) == 0 || v.strMap(9)[ddlTime] == "" {
				t.Errorf("created table: loc %q createTime %d", v.sub(7).str(2), v.integer(4, 0))
			}
		}},
		{method: "add_partition", args: partArg(1, newPart("new_db", "nt", "2024-05-01", "1")), check: func(t *testing.T, v *tval) {
			if v.sub(6).str(2) != warehouse+"/new_db.db/nt/ds=2024-05-01/hr=1" || v.strMap(7)["k"] != "v" {
				t.Errorf("added partition loc %q", v.sub(6).str(2))
			}
		}},
		{method: "add_partition", args: partArg(1, newPart("new_db", "nt", "2024-05-01", "1")), exField: 2},
		{method: "add_partition", args: partArg(1, newPart("new_db", "nt", "2024-05-01")), exField: 3},
		{method: "add_partition", args: partArg(1, newPart("new_db", "nope", "x", "1")), exField: 1},
		{method: "add_partitions", args: partListArg(1, newPart("new_db", "nt", "2024-05-02", "1"), newPart("new_db", "nt", "2024-05-02", "2")), check: wantI(2)},
		{method: "add_partitions_req", args: structArg(1, strArg(1, "new_db"), strArg(2, "nt"),
			partListArg(3, newPart("new_db", "nt", "2024-05-02", "2"), newPart("new_db", "nt", "2024-05-03", "0")), boolArg(4, true)),
			check: func(t *testing.T, v *tval) { wantPartVals("2024-05-03,0")(t, v.fields[1]) }},
		{method: "append_partition", args: args(strArg(1, "new_db"), strArg(2, "nt"), listArg(3, "2024-05-04", "0")),
			check: func(t *testing.T, v *tval) { wantStrs("2024-05-04", "0")(t, v.fields[1]) }},
		{method: "append_partition_by_name", args: args(strArg(1, "new_db"), strArg(2, "nt"), strArg(3, "ds=2024-05-04/hr=1")),
			check: func(t *testing.T, v *tval) { wantStrs("2024-05-04", "1")(t, v.fields[1]) }},
		{method: "alter_partition", args: args(strArg(1, "new_db"), strArg(2, "nt"), partArg(3, &partition{
			Values: []string{"2024-05-01", "1"}, Parameters: map[string]string{"altered": "yes"}}))},
		{method: "get_partition_by_name", args: args(strArg(1, "new_db"), strArg(2, "nt"), strArg(3, "ds=2024-05-01/hr=1")),
			check: func(t *testing.T, v *tval) {
				if v.strMap(7)["altered"] != "yes" || v.sub(6).str(2) == "" {
					t.Errorf("altered partition params %v", v.strMap(7))
				}
			}},
		{method: "alter_partition", args: args(strArg(1, "new_db"), strArg(2, "nt"), partArg(3, newPart("", "", "1999-01-01", "1"))), exField: 1},
		{method: "alter_partitions", args: args(strArg(1, "new_db"), strArg(2, "nt"), partListArg(3,
			newPart("", "", "2024-05-02", "1"), newPart("", "", "2024-05-02", "2")))},
		{method: "drop_partition", args: args(strArg(1, "new_db"), strArg(2, "nt"), listArg(3, "2024-05-04", "0"), boolArg(4, true)), check: wantI(1)},
		{method: "drop_partition", args: args(strArg(1, "new_db"), strArg(2, "nt"), listArg(3, "2024-05-04", "0"), boolArg(4, true)), exField: 1},
		{method: "drop_partition_by_name", args: args(strArg(1, "new_db"), strArg(2, "nt"), strArg(3, "ds=2024-05-04/hr=1"), boolArg(4, true)), check: wantI(1)},
		{method: "get_partition_names", args: args(strArg(1, "new_db"), strArg(2, "nt"), i16Arg(3, -1)),
			check: wantStrs("ds=2024-05-01/hr=1", "ds=2024-05-02/hr=1", "ds=2024-05-02/hr=2", "ds=2024-05-03/hr=0")},
		{method: "alter_table", args: args(strArg(1, "new_db"), strArg(2, "nt"), tableArg(3, renamed)), check: nil},
		{method: "get_table", args: args(strArg(1, "new_db"), strArg(2, "nt")), exField: 2},
		{method: "get_partition_names", args: args(strArg(1, "demo_db1"), strArg(2, "nt2"), i16Arg(3, -1)),
			check: wantStrs("ds=2024-05-01/hr=1", "ds=2024-05-02/hr=1", "ds=2024-05-02/hr=2", "ds=2024-05-03/hr=0")},
		{method: "get_partition", args: args(strArg(1, "demo_db1"), strArg(2, "nt2"), listArg(3, "2024-05-03", "0")), check: func(t *testing.T, v *tval) {
			if v.str(2) != "demo_db1" || v.str(3) != "nt2" || v.sub(6).str(2) != warehouse+"/demo_db1.db/nt2/ds=2024-05-03/hr=0" {
				t.Errorf("moved partition: %q.%q at %q", v.str(2), v.str(3), v.sub(6).str(2))
			}
		}},
		{method: "alter_table", args: args(strArg(1, "new_db"), strArg(2, "nope"), tableArg(3, renamed)), exField: 1},
		{method: "alter_table_with_environment_context", args: args(strArg(1, "demo_db1"), strArg(2, "nt2"), tableArg(3, newTable("demo_db1", "t0"))), exField: 1},
		{method: "drop_table", args: args(strArg(1, "demo_db1"), strArg(2, "NT2"), boolArg(3, true))},
		{method: "drop_table_with_environment_context", args: args(strArg(1, "demo_db1"), strArg(2, "nt2"), boolArg(3, true)), exField: 1},
		{method: "drop_database", args: args(strArg(1, "demo_db1"), boolArg(2, true), boolArg(3, false)), exField: 2},
		{method: "drop_database", args: args(strArg(1, "@hive#demo_db1"), boolArg(2, true), boolArg(3, true))},
		{method: "drop_database", args: args(strArg(1, "demo_db1"), boolArg(2, true), boolArg(3, true)), exField: 1},
		{method: "drop_database", args: args(strArg(1, "default"), boolArg(2, true), boolArg(3, true)), exField: 3},

		// session, fb303, notifications
		{method: "getMetaConf", args: strArg(1, "hive.metastore.try.direct.sql"), check: func(t *testing.T, v *tval) {
			if v.s != "true" {
				t.Errorf("got %q", v.s)
			}
		}},
		{method: "setMetaConf", args: args(strArg(1, "hive.metastore.try.direct.sql"), strArg(2, "false"))},
		{method: "getMetaConf", args: strArg(1, "hive.metastore.try.direct.sql"), check: func(t *testing.T, v *tval) {
			if v.s != "false" {
				t.Errorf("got %q", v.s)
			}
		}},
		{method: "setMetaConf", args: args(strArg(1, "hive.exec.whatever"), strArg(2, "x")), exField: 1},
		{method: "getName", check: func(t *testing.T, v *tval) {
			if v.s == "" {
				t.Error("empty name")
			}
		}},
		{method: "getVersion", check: func(t *testing.T, v *tval) {
			if v.s != "3.0" {
				t.Errorf("version %q", v.s)
			}
		}},
		{method: "getStatus", check: wantI(2)},
		{method: "aliveSince", check: func(t *testing.T, v *tval) {
			if v.t != wire.TI64 || v.i < time.Now().Unix()-60 {
				t.Errorf("aliveSince %d", v.i)
			}
		}},
		{method: "get_catalogs", check: func(t *testing.T, v *tval) { wantStrs("hive")(t, v.fields[1]) }},
		{method: "get_current_notificationEventId", check: func(t *testing.T, v *tval) { wantI(19)(t, v.fields[1]) }},
		{method: "get_next_notification", args: structArg(1, i64Arg(1, 0), i32Arg(2, 100)), check: checkEvents},
		{method: "get_next_notification", args: structArg(1, i64Arg(1, 13), i32Arg(2, 1)), check: func(t *testing.T, v *tval) {
			if l := v.list(1); len(l) != 1 || l[0].integer(1, 0) != 14 || l[0].str(3) != "ALTER_TABLE" {
				t.Errorf("got %d events", len(l))
			}
		}},
		{method: "get_next_notification", args: structArg(1, i64Arg(1, 0), listArg(3, "ADD_PARTITION", "ALTER_PARTITION", "DROP_PARTITION"), strArg(5, "demo_db1")),
			check: func(t *testing.T, v *tval) {
				var types []string
				for _, ev := range v.list(1) {
					types = append(types, ev.str(3))
				}
				if want := []string{"ALTER_TABLE", "DROP_TABLE", "DROP_TABLE", "DROP_TABLE", "DROP_TABLE", "DROP_DATABASE"}; !reflect.DeepEqual(types, want) {
					t.Errorf("filtered events %q, want %q", types, want)
				}
			}},
		{method: "get_notification_events_count", args: structArg(1, i64Arg(1, 0), strArg(2, "new_db")), check: func(t *testing.T, v *tval) { wantI(13)(t, v.fields[1]) }},
		{method: "no_such_method", args: strArg(1, "x"), appEx: wire.ExUnknownMethod},
	}
}

// checkEvents checks the log written by the write cases above.
func checkEvents(t *testing.T, v *tval) {
	var got []string
	for i, ev := range v.list(1) {
		if ev.integer(1, 0) != int64(i+1) || ev.str(7) != messageFormat || ev.str(8) != "hive" || ev.integer(2, 0) == 0 {
			t.Errorf("event %d: id %d format %q cat %q", i, ev.integer(1, 0), ev.str(7), ev.str(8))
		}
		got = append(got, ev.str(3)+" "+ev.str(4)+" "+ev.str(5))
		if ev.str(3) == "ALTER_TABLE" {
			var m map[string]any
			if err := json.Unmarshal([]byte(ev.str(6)), &m); err != nil || m["oldDb"] != "new_db" || m["oldTable"] != "nt" || m["table"] != "nt2" {
				t.Errorf("rename message %s (%v)", ev.str(6), err)
			}
		}
	}
	// drop_table of nt2 happened before the cascade drop of demo_db1.
	want := []string{
		"CREATE_DATABASE new_db ", "ALTER_DATABASE new_db ", "CREATE_TABLE new_db nt",
		"ADD_PARTITION new_db nt", "ADD_PARTITION new_db nt", "ADD_PARTITION new_db nt",
		"ADD_PARTITION new_db nt", "ADD_PARTITION new_db nt", "ALTER_PARTITION new_db nt",
		"ALTER_PARTITION new_db nt", "ALTER_PARTITION new_db nt", "DROP_PARTITION new_db nt",
		"DROP_PARTITION new_db nt", "ALTER_TABLE demo_db1 nt2", "DROP_TABLE demo_db1 nt2",
		"DROP_TABLE demo_db1 t0", "DROP_TABLE demo_db1 t1", "DROP_TABLE demo_db1 t2", "DROP_DATABASE demo_db1 ",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n got %q\nwant %q", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tr := range []wire.Transport{wire.Buffered, wire.Framed} {
		t.Run(tr.String(), func(t *testing.T) {
			_, addr := startServer(t, tr)
			c := dial(t, addr, tr)
			for i, tc := range roundTripCases() {
				t.Run(fmt.Sprintf("%02d_%s", i, tc.method), func(t *testing.T) {
					rp := c.call(tc.method, tc.args)
					switch {
					case tc.appEx > 0:
						ex, err := wire.DecodeApplicationException(rp.body)
						if rp.typ != wire.Exception || err != nil || ex.Code != tc.appEx {
							t.Errorf("type %d %v, want application exception %d", rp.typ, ex, tc.appEx)
						}
					case tc.exField > 0:
						f := rp.res.sub(tc.exField)
						if rp.typ != wire.Reply || f == nil || f.str(1) == "" || len(rp.res.fields) != 1 {
							t.Errorf("want exception at field %d, got %+v", tc.exField, rp.res.fields)
						}
					default:
						v := rp.ok(t)
						if tc.check != nil {
							tc.check(t, v)
						} else if v != nil {
							t.Errorf("void method returned a value")
						}
					}
				})
			}
		})
	}
}

func TestUnknownMethodKeepsConnection(t *testing.T) {
	_, addr := startServer(t, wire.Buffered)
	c := dial(t, addr, wire.Buffered)
	rp := c.call("get_everything", args(strArg(1, "x"), listArg(2, "a", "b")))
	ex, err := wire.DecodeApplicationException(rp.body)
	if rp.typ != wire.Exception || err != nil || ex.Code != wire.ExUnknownMethod || ex.Message != "Invalid method name: 'get_everything'" {
		t.Fatalf("got type %d %+v", rp.typ, ex)
	}
	c.call("getName", nil).ok(t)
}

func TestSetUGIPerConnection(t *testing.T) {
	s, addr := startServer(t, wire.Buffered)
	a, b, anon := dial(t, addr, wire.Buffered), dial(t, addr, wire.Buffered), dial(t, addr, wire.Buffered)
	got := a.call("set_ugi", args(strArg(1, "alice"), listArg(2, "g1", "g2"))).ok(t)
	if !reflect.DeepEqual(strs(got), []string{"g1", "g2"}) {
		t.Errorf("set_ugi reply %q", strs(got))
	}
	b.call("set_ugi", args(strArg(1, "bob"), listArg(2))).ok(t)
	a.call("get_all_databases", nil).ok(t)
	b.call("get_all_databases", nil).ok(t)
	anon.call("get_all_databases", nil).ok(t)
	calls := s.Calls()
	type cu struct{ m, u string }
	var seen []cu
	conns := map[string]uint64{}
	for _, c := range calls {
		seen = append(seen, cu{c.Method, c.User})
		if prev, ok := conns[c.User]; ok && prev != c.Conn {
			t.Errorf("user %q on two conns", c.User)
		}
		conns[c.User] = c.Conn
	}
	want := []cu{{"set_ugi", "alice"}, {"set_ugi", "bob"}, {"get_all_databases", "alice"}, {"get_all_databases", "bob"}, {"get_all_databases", ""}}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("calls %v, want %v", seen, want)
	}
	if len(conns) != 3 {
		t.Errorf("conn ids %v", conns)
	}
	if n := s.CallCount("get_all_databases"); n != 3 {
		t.Errorf("CallCount = %d", n)
	}
	// A second set_ugi closes the connection without a reply.
	a.send(wire.Call, "set_ugi", args(strArg(1, "mallory"), listArg(2)))
	if _, err := a.recv(); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("after second set_ugi: %v, want EOF", err)
	}
	s.ResetCalls()
	if len(s.Calls()) != 0 {
		t.Error("ResetCalls did not reset")
	}
}

func TestOnewayGetsNoReply(t *testing.T) {
	_, addr := startServer(t, wire.Framed)
	c := dial(t, addr, wire.Framed)
	c.call("setMetaConf", args(strArg(1, "hive.metastore.try.direct.sql"), strArg(2, "false"))).ok(t)
	c.send(wire.Oneway, "reinitialize", nil)
	c.send(wire.Call, "shutdown", nil) // old clients send CALL; still no reply
	rp := c.call("getMetaConf", strArg(1, "hive.metastore.try.direct.sql"))
	if v := rp.ok(t); v.s != "true" { // shutdown dropped the override
		t.Errorf("after shutdown getMetaConf = %q", v.s)
	}
}

func TestDeterministicReplies(t *testing.T) {
	requests := []struct {
		name string
		args func(*wire.Encoder)
	}{
		{"get_table", args(strArg(1, "demo_db0"), strArg(2, "t1"))},
		{"get_partitions", args(strArg(1, "demo_db1"), strArg(2, "t2"), i16Arg(3, -1))},
		{"get_database", strArg(1, "demo_db0")},
		{"get_table_objects_by_name_req", structArg(1, strArg(1, "demo_db0"))},
	}
	var first [][]byte
	for round := 0; round < 2; round++ {
		_, addr := startServer(t, wire.Buffered)
		for _, rq := range requests {
			c := dial(t, addr, wire.Buffered)
			r1 := c.call(rq.name, rq.args)
			r2 := c.call(rq.name, rq.args)
			// same request on the same connection: bytes equal but the seqid
			if !bytes.Equal(r1.body, r2.body) {
				t.Errorf("%s: two replies differ", rq.name)
			}
			if round == 0 {
				first = append(first, r1.raw)
			} else if !bytes.Equal(first[0], r1.raw) {
				t.Errorf("%s: reply differs between two identical servers", rq.name)
			} else {
				first = first[1:]
			}
		}
	}
}

func TestSetDelay(t *testing.T) {
	s, addr := startServer(t, wire.Buffered)
	s.SetDelay("create_database", 300*time.Millisecond)
	delaying := make(chan string, 2)
	s.callMu.Lock()
	s.delaying = func(m string) { delaying <- m }
	s.callMu.Unlock()
	slow, fast := dial(t, addr, wire.Buffered), dial(t, addr, wire.Buffered)
	start := time.Now()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		seq := slow.send(wire.Call, "create_database", structArg(1, strArg(1, "slow_db")))
		rp, err := slow.recv()
		if err != nil || rp.seq != seq || rp.typ != wire.Reply {
			t.Errorf("delayed reply: %v", err)
		}
	}()
	// The server holds the write: it could have applied it by now, and
	// must not have.
	wait.Recv(t, delaying, 5*time.Second, "create_database starts its delay")
	// Others are served meanwhile, and the write is not visible yet.
	if dbs := strs(fast.call("get_all_databases", nil).ok(t)); len(dbs) != 3 {
		t.Errorf("during delayed write: %q", dbs)
	}
	if time.Since(start) > 250*time.Millisecond {
		t.Error("fast call was held up by the delayed one")
	}
	wg.Wait()
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("delayed call took %v", d)
	}
	if dbs := strs(fast.call("get_all_databases", nil).ok(t)); len(dbs) != 4 {
		t.Errorf("after delayed write: %q", dbs)
	}
	s.SetDelay("create_database", 0)
	start = time.Now()
	slow.call("create_database", structArg(1, strArg(1, "quick_db"))).ok(t)
	if time.Since(start) > 200*time.Millisecond {
		t.Error("delay not removed")
	}
}

func TestCloseWithOpenConnections(t *testing.T) {
	s := New(Config{})
	ln, err := newLocalListener()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	delaying := make(chan string, 1)
	s.delaying = func(m string) { delaying <- m } // before Serve: no lock needed
	go func() { served <- s.Serve(ln) }()
	s.SetDelay("drop_database", time.Hour)
	idle := dial(t, ln.Addr().String(), wire.Buffered)
	idle.call("getName", nil).ok(t)
	busy := dial(t, ln.Addr().String(), wire.Buffered)
	busy.send(wire.Call, "drop_database", args(strArg(1, "default")))
	half := dial(t, ln.Addr().String(), wire.Buffered)
	half.nc.Write([]byte{0x80, 0x01, 0x00, 0x01, 0, 0}) // half a header
	// Close finds all three: served, one in its delay, one mid-read.
	wait.Recv(t, delaying, 5*time.Second, "drop_database starts its delay")
	wait.Eventually(t, 5*time.Second, func() bool {
		s.connMu.Lock()
		defer s.connMu.Unlock()
		return len(s.conns) == 3
	}, "three connections accepted")

	closed := make(chan struct{})
	go func() { s.Close(); s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung")
	}
	if err := <-served; err != nil {
		t.Errorf("Serve returned %v", err)
	}
	if _, err := idle.recv(); err == nil {
		t.Error("idle connection still open")
	}
	if err := s.Serve(ln); err == nil {
		t.Error("Serve after Close succeeded")
	}
}

func TestRejectsNonStrictHeader(t *testing.T) {
	_, addr := startServer(t, wire.Buffered)
	c := dial(t, addr, wire.Buffered)
	// old-style header: name length, name, type, seqid
	c.nc.Write([]byte{0, 0, 0, 7, 'g', 'e', 't', 'N', 'a', 'm', 'e', 1, 0, 0, 0, 1, 0})
	if _, err := c.recv(); err == nil {
		t.Error("non-strict message was answered")
	}
}

func newLocalListener() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// TestEveryMethodAnswersOddArgs sends every known method empty args and
// wrongly typed args: each gets a reply (never a crash or a closed conn).
func TestEveryMethodAnswersOddArgs(t *testing.T) {
	var logs syncbuf.Buffer
	s := New(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	s.Seed(1, 1, 1)
	ln, err := newLocalListener()
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	defer s.Close()
	c := dial(t, ln.Addr().String(), wire.Buffered)
	odd := func(e *wire.Encoder) {
		for id := int16(1); id <= 6; id++ {
			e.I32Field(id, 1)
		}
	}
	for _, name := range MethodNames() {
		if m := methods[name]; m.oneway || name == "set_ugi" {
			continue
		}
		for _, a := range []func(*wire.Encoder){nil, odd} {
			if rp := c.call(name, a); rp.typ != wire.Reply && rp.typ != wire.Exception {
				t.Errorf("%s: message type %d", name, rp.typ)
			}
		}
	}
	if strings.Contains(logs.String(), "panic") {
		t.Errorf("handlers panicked:\n%s", logs.String())
	}
}
