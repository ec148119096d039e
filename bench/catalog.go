package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Spec is the shape of the synthetic catalog. The zero value of each field
// selects the default in its comment.
type Spec struct {
	// Databases bench_db0.. Default 2.
	Databases int
	// Tables per database, bench_t0.. Default 20.
	Tables int
	// Partitions per table, keys (ds string, hr int): hour k%24 of day
	// 2024-01-01 + k/24. Default 240 (ten days).
	Partitions int
	// Columns per table (and partition storage descriptor). Default 20.
	Columns int
	// Params is the number of parameters on every database, table and
	// partition. Default 5.
	Params int
}

// orDefault sets a count left at 0 (or negative) to its default d: the
// rule of this package's specs and configs.
func orDefault(v *int, d int) {
	if *v <= 0 {
		*v = d
	}
}

func (s Spec) withDefaults() Spec {
	orDefault(&s.Databases, 2)
	orDefault(&s.Tables, 20)
	orDefault(&s.Partitions, 240)
	orDefault(&s.Columns, 20)
	if s.Params < 0 {
		s.Params = 0
	} else if s.Params == 0 {
		s.Params = 5
	}
	return s
}

// DBName is the name of database i.
func DBName(i int) string { return "bench_db" + strconv.Itoa(i) }

// TableName is the name of table j (in every database).
func TableName(j int) string { return "bench_t" + strconv.Itoa(j) }

// PartValues are the values (ds, hr) of partition k.
func PartValues(k int) []string {
	return []string{partDay(k / 24), strconv.Itoa(k % 24)}
}

// PartName is the name of partition k, "ds=2024-01-01/hr=5".
func PartName(k int) string {
	v := PartValues(k)
	return "ds=" + v[0] + "/hr=" + v[1]
}

func partDay(day int) string {
	return time.Date(2024, 1, 1+day, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
}

// tableKey splits a table key into (database, table) indexes.
func (s Spec) tableKey(k int) (string, string) {
	return DBName(k / s.Tables), TableName(k % s.Tables)
}

// days is the number of distinct ds values.
func (s Spec) days() int { return (s.Partitions + 23) / 24 }

var colTypes = []string{"bigint", "string", "double", "int", "decimal(10,2)", "timestamp", "boolean", "array<string>"}

func (s Spec) columns() []hmsreq.Column {
	cols := make([]hmsreq.Column, s.Columns)
	for i := range cols {
		cols[i] = hmsreq.Column{Name: "c" + strconv.Itoa(i), Type: colTypes[i%len(colTypes)]}
	}
	return cols
}

func (s Spec) params(prefix string) map[string]string {
	m := make(map[string]string, s.Params)
	for i := 0; i < s.Params; i++ {
		m["bench.param"+strconv.Itoa(i)] = prefix + "-value-" + strconv.Itoa(i)
	}
	return m
}

const warehouse = "file:/tmp/hmsbench/warehouse"

// createDatabaseArgs: create_database(1: Database).
func (s Spec) createDatabaseArgs(db string) []byte {
	return hmsreq.Args(hmsreq.Database{
		Name:        db,
		Description: "hmsbench database",
		Location:    warehouse + "/" + db + ".db",
		Params:      s.params(db),
		Owner:       "hmsbench",
	}.Field(1))
}

// table is table db.tbl of the catalog.
func (s Spec) table(db, tbl string) hmsreq.Table {
	return hmsreq.Table{
		DB:         db,
		Name:       tbl,
		Owner:      "hmsbench",
		CreateTime: 1700000000,
		SD:         hmsreq.ORCSD(warehouse+"/"+db+".db/"+tbl, s.columns()...),
		PartKeys:   []hmsreq.Column{{Name: "ds", Type: "string"}, {Name: "hr", Type: "int"}},
		Params:     s.params(tbl),
	}
}

// createTableArgs: create_table(1: Table).
func (s Spec) createTableArgs(db, tbl string) []byte {
	return hmsreq.Args(s.table(db, tbl).Field(1))
}

// addPartitionsArgs: add_partitions(1: list<Partition>) for the given
// partition values.
func (s Spec) addPartitionsArgs(db, tbl string, vals [][]string) []byte {
	ps := make([]hmsreq.Partition, len(vals))
	for i, v := range vals {
		name := "ds=" + v[0] + "/hr=" + v[1]
		ps[i] = hmsreq.Partition{
			DB:         db,
			Table:      tbl,
			Values:     v,
			CreateTime: 1700000000,
			SD:         hmsreq.ORCSD(warehouse+"/"+db+".db/"+tbl+"/"+name, s.columns()...),
			Params:     s.params(name),
		}
	}
	return hmsreq.Args(hmsreq.Partitions(1, ps...))
}

// Result field ids of AlreadyExistsException.
const (
	existsCreateDB    = 1
	existsCreateTable = 1
	existsAddParts    = 2
)

// SetupStats counts what Setup created and skipped.
type SetupStats struct {
	Databases, Tables, Partitions                      int
	SkippedDatabases, SkippedTables, SkippedPartitions int
}

// Setup creates the catalog of spec on the metastore at addr, skipping
// what exists, with partitions added in batches of 100. It writes
// progress lines to progress (nil: none).
func Setup(ctx context.Context, t Target, tr wire.Transport, spec Spec, progress io.Writer) (SetupStats, error) {
	spec = spec.withDefaults()
	if progress == nil {
		progress = io.Discard
	}
	c := &conn{addr: t.Addr, tr: tr, timeout: 10 * time.Minute}
	defer c.close()
	var st SetupStats
	do := func(method string, args []byte, exists int16) (outcome, []byte, error) {
		o, body, err := c.call(ctx, method, args, exists)
		if o == outOK || o == outExists {
			return o, body, nil
		}
		return o, body, fmt.Errorf("bench: setup on %s: %w", t.Name, err)
	}
	// create makes name with method and args unless have lists it or the
	// metastore answers that it exists (another writer raced), and counts
	// which.
	create := func(have []string, name, method string, args []byte, exists int16, created, skipped *int) error {
		if slices.Contains(have, name) {
			*skipped++
			return nil
		}
		o, _, err := do(method, args, exists)
		if err != nil {
			return err
		}
		if o == outExists {
			*skipped++
		} else {
			*created++
		}
		return nil
	}
	_, body, err := do("get_all_databases", []byte{wire.TStop}, 0)
	if err != nil {
		return st, err
	}
	haveDB := stringList(body)
	total := spec.Databases * spec.Tables
	done := 0
	start := time.Now()
	for i := 0; i < spec.Databases; i++ {
		db := DBName(i)
		if err := create(haveDB, db, "create_database", spec.createDatabaseArgs(db), existsCreateDB, &st.Databases, &st.SkippedDatabases); err != nil {
			return st, err
		}
		_, body, err := do("get_all_tables", hmsreq.Args(hmsreq.Str(1, db)), 0)
		if err != nil {
			return st, err
		}
		haveTbl := stringList(body)
		for j := 0; j < spec.Tables; j++ {
			tbl := TableName(j)
			if err := create(haveTbl, tbl, "create_table", spec.createTableArgs(db, tbl), existsCreateTable, &st.Tables, &st.SkippedTables); err != nil {
				return st, err
			}
			if err := spec.setupPartitions(do, db, tbl, &st); err != nil {
				return st, err
			}
			done++
			if done%10 == 0 || done == total {
				fmt.Fprintf(progress, "setup: %d/%d tables (%d partitions added, %d existed) %s\n",
					done, total, st.Partitions, st.SkippedPartitions, time.Since(start).Round(time.Millisecond))
			}
		}
	}
	return st, nil
}

func (s Spec) setupPartitions(do func(string, []byte, int16) (outcome, []byte, error), db, tbl string, st *SetupStats) error {
	_, body, err := do("get_partition_names", partNamesArgs(db, tbl, -1), 0)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, n := range stringList(body) {
		have[n] = true
	}
	var batch [][]string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		o, _, err := do("add_partitions", s.addPartitionsArgs(db, tbl, batch), existsAddParts)
		if err != nil {
			return err
		}
		if o == outExists { // raced with another writer: count as existing
			st.SkippedPartitions += len(batch)
		} else {
			st.Partitions += len(batch)
		}
		batch = batch[:0]
		return nil
	}
	for k := 0; k < s.Partitions; k++ {
		if have[PartName(k)] {
			st.SkippedPartitions++
			continue
		}
		batch = append(batch, PartValues(k))
		if len(batch) == 100 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

func partNamesArgs(db, tbl string, max int16) []byte {
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.I16(3, max))
}
