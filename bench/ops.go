package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// step is one call of an operation.
type step struct {
	label  string // row of its own in the report ("" for single-call ops and helpers)
	method string
	args   []byte
	timed  bool  // counts toward the operation's latency (false: a helper call)
	exists int16 // result field of AlreadyExistsException, 0: none
	onOK   func()
}

// scratch is a write operation's table, one per worker and target.
type scratch struct {
	db, table, alt string // alt: the rename target
	renamed        bool
	next           int // counter for new partition values
}

func (s *scratch) current() string {
	if s.renamed {
		return s.alt
	}
	return s.table
}

// opEnv is what an operation's steps depend on.
type opEnv struct {
	spec       Spec
	namesBatch int
	writeBatch int
}

// op is one named operation: a single call (hmsbench) or a mix of calls.
type op struct {
	name  string
	write bool
	mix   bool
	// keys is the size of the key set.
	keys  func(e opEnv) int
	steps func(e opEnv, k int, ws *scratch) []step
}

const scratchDB = "bench_scratch"

// ScratchDB is the database write operations create their tables in.
func ScratchDB() string { return scratchDB }

// OpNames lists every operation and mix, in report order.
func OpNames() []string {
	names := make([]string, len(ops))
	for i, o := range ops {
		names[i] = o.name
	}
	return names
}

// DefaultOps are the operations run when none are named: the reads and
// the three mixes.
var DefaultOps = []string{"getTable", "listTables", "getPartitionNames", "getPartitionsByNames",
	"getPartitionsByFilter", "trino-planning", "spark-scan", "listing"}

func lookupOp(name string) *op {
	for i := range ops {
		if strings.EqualFold(ops[i].name, name) {
			return &ops[i]
		}
	}
	return nil
}

func tablesKeys(e opEnv) int { return e.spec.Databases * e.spec.Tables }
func dayKeys(e opEnv) int    { return e.spec.Databases * e.spec.Tables * e.spec.days() }

// dayKey splits a key of dayKeys into (db, table, day).
func dayKey(e opEnv, k int) (string, string, int) {
	db, tbl := e.spec.tableKey(k / e.spec.days())
	return db, tbl, k % e.spec.days()
}

// partNames lists n existing partition names starting at partition from,
// wrapping around.
func partNamesFrom(e opEnv, from, n int) []string {
	n = min(n, e.spec.Partitions)
	out := make([]string, n)
	for i := range out {
		out[i] = PartName((from + i) % e.spec.Partitions)
	}
	return out
}

func read(method string, args []byte) step { return step{method: method, args: args, timed: true} }

func labelled(label string, s step) step { s.label = label; return s }

var ops = []op{
	{name: "getTable", keys: tablesKeys, steps: func(e opEnv, k int, _ *scratch) []step {
		db, tbl := e.spec.tableKey(k)
		return []step{read("get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl)))}
	}},
	{name: "listDatabases", keys: func(opEnv) int { return 1 }, steps: func(opEnv, int, *scratch) []step {
		return []step{read("get_all_databases", []byte{wire.TStop})}
	}},
	{name: "listTables", keys: func(e opEnv) int { return e.spec.Databases }, steps: func(e opEnv, k int, _ *scratch) []step {
		return []step{read("get_all_tables", hmsreq.Args(hmsreq.Str(1, DBName(k))))}
	}},
	{name: "getPartitions", keys: tablesKeys, steps: func(e opEnv, k int, _ *scratch) []step {
		db, tbl := e.spec.tableKey(k)
		return []step{read("get_partitions", partNamesArgs(db, tbl, -1))}
	}},
	{name: "getPartitionNames", keys: tablesKeys, steps: func(e opEnv, k int, _ *scratch) []step {
		db, tbl := e.spec.tableKey(k)
		return []step{read("get_partition_names", partNamesArgs(db, tbl, -1))}
	}},
	{name: "getPartitionsByNames", keys: func(e opEnv) int {
		return tablesKeys(e) * ((e.spec.Partitions + e.namesBatch - 1) / e.namesBatch)
	}, steps: func(e opEnv, k int, _ *scratch) []step {
		variants := (e.spec.Partitions + e.namesBatch - 1) / e.namesBatch
		db, tbl := e.spec.tableKey(k / variants)
		return []step{read("get_partitions_by_names", byNamesArgs(db, tbl, partNamesFrom(e, (k%variants)*e.namesBatch, e.namesBatch)))}
	}},
	{name: "getPartitionsByFilter", keys: dayKeys, steps: func(e opEnv, k int, _ *scratch) []step {
		db, tbl, day := dayKey(e, k)
		return []step{read("get_partitions_by_filter", filterArgs(db, tbl, `ds = "`+partDay(day)+`"`))}
	}},
	{name: "addPartitions", write: true, keys: func(opEnv) int { return 1 }, steps: func(e opEnv, _ int, ws *scratch) []step {
		vals := ws.newValues(e.writeBatch)
		s := []step{{method: "add_partitions", args: e.spec.addPartitionsArgs(ws.db, ws.current(), vals), timed: true}}
		for _, v := range vals {
			s = append(s, step{method: "drop_partition", args: dropPartitionArgs(ws.db, ws.current(), v)})
		}
		return s
	}},
	{name: "dropPartitions", write: true, keys: func(opEnv) int { return 1 }, steps: func(e opEnv, _ int, ws *scratch) []step {
		vals := ws.newValues(e.writeBatch)
		s := []step{{method: "add_partitions", args: e.spec.addPartitionsArgs(ws.db, ws.current(), vals)}}
		for _, v := range vals {
			s = append(s, step{method: "drop_partition", args: dropPartitionArgs(ws.db, ws.current(), v), timed: true})
		}
		return s
	}},
	{name: "renameTable", write: true, keys: func(opEnv) int { return 1 }, steps: func(e opEnv, _ int, ws *scratch) []step {
		from, to := ws.table, ws.alt
		if ws.renamed {
			from, to = to, from
		}
		return []step{{method: "alter_table", args: alterTableArgs(e.spec, ws.db, from, to), timed: true,
			onOK: func() { ws.renamed = !ws.renamed }}}
	}},
	{name: "trino-planning", mix: true, keys: dayKeys, steps: func(e opEnv, k int, _ *scratch) []step {
		db, tbl, day := dayKey(e, k)
		s := []step{
			labelled("get_table_req", read("get_table_req", getTableReqArgs(db, tbl))),
			labelled("get_partition_names_ps", read("get_partition_names_ps", partNamesPsArgs(db, tbl, []string{partDay(day)}))),
		}
		names := partNamesFrom(e, day*24, 3*24)
		for c := range slices.Chunk(names, 50) {
			s = append(s, labelled("get_partitions_by_names", read("get_partitions_by_names", byNamesArgs(db, tbl, c))))
		}
		cols := e.spec.columns()[:min(3, e.spec.Columns)]
		colNames := make([]string, len(cols))
		for i, c := range cols {
			colNames[i] = c.Name
		}
		return append(s, labelled("get_table_statistics_req", read("get_table_statistics_req", tableStatsReqArgs(db, tbl, colNames))))
	}},
	{name: "spark-scan", mix: true, keys: dayKeys, steps: func(e opEnv, k int, _ *scratch) []step {
		db, tbl, day := dayKey(e, k)
		return []step{
			labelled("get_table", read("get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl)))),
			labelled("get_partitions_by_filter", read("get_partitions_by_filter", filterArgs(db, tbl, `ds = "`+partDay(day)+`"`))),
		}
	}},
	{name: "listing", mix: true, keys: tablesKeys, steps: func(e opEnv, k int, _ *scratch) []step {
		db, tbl := e.spec.tableKey(k)
		return []step{
			labelled("get_all_databases", read("get_all_databases", []byte{wire.TStop})),
			labelled("get_all_tables", read("get_all_tables", hmsreq.Args(hmsreq.Str(1, db)))),
			labelled("get_partition_names", read("get_partition_names", partNamesArgs(db, tbl, -1))),
		}
	}},
}

func (s *scratch) newValues(n int) [][]string {
	out := make([][]string, n)
	for i := range out {
		out[i] = []string{fmt.Sprintf("w%09d", s.next), "0"}
		s.next++
	}
	return out
}

// prepareScratch creates the scratch database and a fresh scratch table
// through c (the target under test), dropping leftovers of earlier runs.
func prepareScratch(ctx context.Context, c *conn, spec Spec, ws *scratch) error {
	if o, _, err := c.call(ctx, "create_database", spec.createDatabaseArgs(ws.db), existsCreateDB); o != outOK && o != outExists {
		return err
	}
	for _, t := range []string{ws.table, ws.alt} {
		if o, _, err := c.call(ctx, "drop_table", dropTableArgs(ws.db, t), 0); o != outOK && o != outException {
			return err
		}
	}
	ws.renamed = false
	if o, _, err := c.call(ctx, "create_table", spec.createTableArgs(ws.db, ws.table), existsCreateTable); o != outOK {
		return fmt.Errorf("bench: create scratch table %s.%s: %w", ws.db, ws.table, err)
	}
	return nil
}

// scratchName is a table name for worker w and target name t.
func scratchName(t string, w int) string {
	var b strings.Builder
	b.WriteString("w" + strconv.Itoa(w) + "_")
	for _, r := range strings.ToLower(t) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func byNamesArgs(db, tbl string, names []string) []byte {
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, names...))
}

func filterArgs(db, tbl, filter string) []byte {
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Str(3, filter), hmsreq.I16(4, -1))
}

func partNamesPsArgs(db, tbl string, vals []string) []byte {
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, vals...), hmsreq.I16(4, -1))
}

// getTableReqArgs: get_table_req(1: GetTableRequest{1 dbName, 2 tblName, 4 catName}).
func getTableReqArgs(db, tbl string) []byte {
	return hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Str(4, "hive"))
}

// tableStatsReqArgs: get_table_statistics_req(1: TableStatsRequest{1 dbName, 2 tblName, 3 colNames}).
func tableStatsReqArgs(db, tbl string, cols []string) []byte {
	return hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, cols...))
}

// dropPartitionArgs: drop_partition(1 db, 2 tbl, 3 part_vals, 4 deleteData).
func dropPartitionArgs(db, tbl string, vals []string) []byte {
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, vals...), hmsreq.Bool(4, false))
}

func dropTableArgs(db, tbl string) []byte {
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Bool(3, true))
}

// alterTableArgs renames db.from to db.to: alter_table(1 db, 2 from, 3 Table).
func alterTableArgs(spec Spec, db, from, to string) []byte {
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, from), spec.table(db, to).Field(3))
}
