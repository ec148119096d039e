package twin

import (
	"strings"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Class says how the twin makes a call.
type Class uint8

const (
	// Read is made through the proxy and straight to the metastore, and
	// the two replies are compared.
	Read Class = iota
	// Write is made once, through the path of its step.
	Write
	// Session changes the state of the session's connections: made on
	// both, replies compared.
	Session
)

// Op is one generated call. Its fields are plain values, so that a
// sequence prints as Go source (%#v) in the test file a failing run
// writes.
type Op interface {
	Method() string
	Class() Class
	// Args writes the call's args; false when the call cannot be made in
	// the session's state (no lock to check).
	Args(e *enc, s *state) bool
	// Touches lists what the call reads or changes: "db" (a database
	// and its listings), "db/name" (a table or function of it), "*"
	// (every database), all by base. See overlaps.
	Touches() []string
}

// state is what a session remembers of its calls: the ids the metastore
// gave it, which later calls name.
type state struct {
	locks []lockHeld
	txns  []int64
}

type lockHeld struct {
	id       int64
	acquired bool
	db, tbl  string // bases
	hold     int    // steps left before a random run unlocks it
}

// ---- session ----------------------------------------------------------

// SetUGI is set_ugi(user, groups).
type SetUGI struct {
	User   string
	Groups []string
}

func (SetUGI) Method() string { return "set_ugi" }
func (SetUGI) Class() Class   { return Session }
func (o SetUGI) Args(e *enc, _ *state) bool {
	e.str(1, o.User)
	e.strs(2, o.Groups)
	return true
}
func (SetUGI) Touches() []string { return nil }

// SetMetaConf is setMetaConf(key, value).
type SetMetaConf struct{ Key, Value string }

func (SetMetaConf) Method() string { return "setMetaConf" }
func (SetMetaConf) Class() Class   { return Session }
func (o SetMetaConf) Args(e *enc, _ *state) bool {
	e.str(1, o.Key)
	e.str(2, o.Value)
	return true
}
func (SetMetaConf) Touches() []string { return nil }

// Reconnect closes both of the session's connections and opens new ones:
// the session state starts over. It makes no call.
type Reconnect struct{}

func (Reconnect) Method() string         { return "" }
func (Reconnect) Class() Class           { return Session }
func (Reconnect) Args(*enc, *state) bool { return false }
func (Reconnect) Touches() []string      { return nil }

// ---- databases ----------------------------------------------------------

// GetDatabase is get_database(name).
type GetDatabase struct{ DB DBName }

func (GetDatabase) Method() string               { return "get_database" }
func (GetDatabase) Class() Class                 { return Read }
func (o GetDatabase) Args(e *enc, _ *state) bool { e.db(1, o.DB); return true }
func (o GetDatabase) Touches() []string          { return []string{o.DB.Base} }

// GetAllDatabases is get_all_databases().
type GetAllDatabases struct{}

func (GetAllDatabases) Method() string         { return "get_all_databases" }
func (GetAllDatabases) Class() Class           { return Read }
func (GetAllDatabases) Args(*enc, *state) bool { return true }
func (GetAllDatabases) Touches() []string      { return []string{"*"} }

// GetDatabases is get_databases(pattern); the pattern is the namespace
// followed by Suffix.
type GetDatabases struct{ Suffix string }

func (GetDatabases) Method() string { return "get_databases" }
func (GetDatabases) Class() Class   { return Read }
func (o GetDatabases) Args(e *enc, _ *state) bool {
	e.str(1, e.ns+o.Suffix)
	return true
}
func (GetDatabases) Touches() []string { return []string{"*"} }

// CreateDatabase is create_database(Database).
type CreateDatabase struct{ DB Name }

func (CreateDatabase) Method() string { return "create_database" }
func (CreateDatabase) Class() Class   { return Write }
func (o CreateDatabase) Args(e *enc, _ *state) bool {
	e.begin(1)
	e.dbName(1, o.DB)
	e.str(2, "twin")
	e.strMap(4, nil)
	e.end()
	return true
}
func (o CreateDatabase) Touches() []string { return []string{o.DB.Base, "*"} }

// DropDatabase is drop_database(name, deleteData, cascade).
type DropDatabase struct {
	DB      DBName
	Cascade bool
}

func (DropDatabase) Method() string { return "drop_database" }
func (DropDatabase) Class() Class   { return Write }
func (o DropDatabase) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.BoolField(2, true)
	e.BoolField(3, o.Cascade)
	return true
}
func (o DropDatabase) Touches() []string { return []string{o.DB.Base, "*"} }

// AlterDatabase is alter_database(name, Database) with a new description.
type AlterDatabase struct {
	DB   DBName
	Desc string
}

func (AlterDatabase) Method() string { return "alter_database" }
func (AlterDatabase) Class() Class   { return Write }
func (o AlterDatabase) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.begin(2)
	// The struct names the database as the metastore stores it: a name
	// of another form there (a trailing blank) is a rename to 4.0, whose
	// ACID listener then renames the database in the transaction tables
	// while its own alter holds their rows; on Derby that wait never
	// ends, and every lock call of the metastore hangs behind it (seen
	// in a short twin run: all lock calls timed out for minutes). The
	// name forms are the argument's to exercise.
	e.dbName(1, Name{Base: o.DB.Name.Base})
	e.str(2, o.Desc)
	e.strMap(4, nil)
	// And its catalog, as Hive's own client fills it in: 4.0 compares the
	// catalogs of the old and the new object too, and an absent one is a
	// rename (older versions skip the field).
	e.str(8, "hive")
	e.end()
	return true
}
func (o AlterDatabase) Touches() []string { return []string{o.DB.Base, "*"} }

// ---- tables -------------------------------------------------------------

// CreateTable is create_table(Table).
type CreateTable struct {
	DB    DBName
	Table Name
	Spec  TableSpec
	// Location of an external table; "" lets the metastore choose.
	Location string
}

func (CreateTable) Method() string { return "create_table" }
func (CreateTable) Class() Class   { return Write }
func (o CreateTable) Args(e *enc, _ *state) bool {
	loc := o.Location
	if loc != "" {
		loc += "/" + Canon(e.ns, o.DB.Base) + "/" + Canon(e.ns, o.Table.Base)
	}
	e.table(1, o.DB, o.Table, o.Spec, loc)
	return true
}
func (o CreateTable) Touches() []string { return []string{o.DB.Base, o.DB.Base + "/" + o.Table.Base} }

// DropTable is drop_table(db, name, deleteData).
type DropTable struct {
	DB    DBName
	Table Name
}

func (DropTable) Method() string { return "drop_table" }
func (DropTable) Class() Class   { return Write }
func (o DropTable) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Table)
	e.BoolField(3, true)
	return true
}
func (o DropTable) Touches() []string { return []string{o.DB.Base, o.DB.Base + "/" + o.Table.Base} }

// AlterTable is alter_table_with_environment_context(db, name, Table,
// env): the table as Spec with NewName, so a rename when it differs.
type AlterTable struct {
	DB       DBName
	Table    Name
	NewName  Name
	Spec     TableSpec
	Location string // as CreateTable's
}

func (AlterTable) Method() string { return "alter_table_with_environment_context" }
func (AlterTable) Class() Class   { return Write }
func (o AlterTable) Args(e *enc, _ *state) bool {
	loc := o.Location
	if loc != "" {
		loc += "/" + Canon(e.ns, o.DB.Base) + "/" + Canon(e.ns, o.Table.Base)
	}
	e.db(1, o.DB)
	e.name(2, o.Table)
	e.table(3, o.DB, o.NewName, o.Spec, loc)
	e.begin(4)
	e.strMap(1, map[string]string{"DO_NOT_UPDATE_STATS": "true"})
	e.end()
	return true
}
func (o AlterTable) Touches() []string {
	if o.NewName.Base == "" || o.NewName.Base == o.Table.Base {
		return []string{o.DB.Base + "/" + o.Table.Base}
	}
	// a rename changes the database's listings and the new name too
	return []string{o.DB.Base, o.DB.Base + "/" + o.NewName.Base}
}

// GetTable is get_table(db, name).
type GetTable struct {
	DB    DBName
	Table Name
}

func (GetTable) Method() string { return "get_table" }
func (GetTable) Class() Class   { return Read }
func (o GetTable) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Table)
	return true
}
func (o GetTable) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// GetTableReq is get_table_req(GetTableRequest); Caps, when set, are the
// client's capabilities (1 TEST, 2 INSERT_ONLY_TABLES).
type GetTableReq struct {
	DB    Name
	Table Name
	Cat   string
	Caps  []int32
}

func (GetTableReq) Method() string { return "get_table_req" }
func (GetTableReq) Class() Class   { return Read }
func (o GetTableReq) Args(e *enc, _ *state) bool {
	e.begin(1)
	e.dbName(1, o.DB)
	e.name(2, o.Table)
	if o.Caps != nil {
		e.begin(3)
		e.FieldBegin(wire.TList, 1)
		e.ListBegin(wire.TI32, len(o.Caps))
		for _, c := range o.Caps {
			e.I32(c)
		}
		e.end()
	}
	if o.Cat != "" {
		e.str(4, o.Cat)
	}
	e.end()
	return true
}
func (o GetTableReq) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// GetTableObjects is get_table_objects_by_name(db, names).
type GetTableObjects struct {
	DB     DBName
	Tables []Name
}

func (GetTableObjects) Method() string { return "get_table_objects_by_name" }
func (GetTableObjects) Class() Class   { return Read }
func (o GetTableObjects) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	names := make([]string, len(o.Tables))
	for i, t := range o.Tables {
		names[i] = t.Render(e.ns)
	}
	e.strs(2, names)
	return true
}
func (o GetTableObjects) Touches() []string {
	out := []string{}
	for _, t := range o.Tables {
		out = append(out, o.DB.Base+"/"+t.Base)
	}
	return out
}

// GetAllTables is get_all_tables(db).
type GetAllTables struct{ DB DBName }

func (GetAllTables) Method() string               { return "get_all_tables" }
func (GetAllTables) Class() Class                 { return Read }
func (o GetAllTables) Args(e *enc, _ *state) bool { e.db(1, o.DB); return true }
func (o GetAllTables) Touches() []string          { return []string{o.DB.Base} }

// GetTables is get_tables(db, pattern).
type GetTables struct {
	DB      DBName
	Pattern string
}

func (GetTables) Method() string { return "get_tables" }
func (GetTables) Class() Class   { return Read }
func (o GetTables) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.str(2, o.Pattern)
	return true
}
func (o GetTables) Touches() []string { return []string{o.DB.Base} }

// GetFields is get_fields(db, table).
type GetFields struct {
	DB    DBName
	Table Name
}

func (GetFields) Method() string { return "get_fields" }
func (GetFields) Class() Class   { return Read }
func (o GetFields) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Table)
	return true
}
func (o GetFields) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// ---- partitions ---------------------------------------------------------

// AddPartitions is add_partitions(list<Partition>) of one table.
type AddPartitions struct {
	DB     DBName
	Table  Name
	Values [][]string
	Cols   []Col
}

func (AddPartitions) Method() string { return "add_partitions" }
func (AddPartitions) Class() Class   { return Write }
func (o AddPartitions) Args(e *enc, _ *state) bool {
	e.FieldBegin(wire.TList, 1)
	e.ListBegin(wire.TStruct, len(o.Values))
	for _, v := range o.Values {
		e.partition(-1, o.DB, o.Table, v, nil, o.Cols)
	}
	return true
}
func (o AddPartitions) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// DropPartition is drop_partition(db, table, values, deleteData).
type DropPartition struct {
	DB     DBName
	Table  Name
	Values []string
}

func (DropPartition) Method() string { return "drop_partition" }
func (DropPartition) Class() Class   { return Write }
func (o DropPartition) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Table)
	e.strs(3, o.Values)
	e.BoolField(4, true)
	return true
}
func (o DropPartition) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// AlterPartition is alter_partition(db, table, Partition) setting one
// parameter.
type AlterPartition struct {
	DB         DBName
	Table      Name
	Values     []string
	Cols       []Col
	Key, Value string
}

func (AlterPartition) Method() string { return "alter_partition" }
func (AlterPartition) Class() Class   { return Write }
func (o AlterPartition) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Table)
	e.partition(3, o.DB, o.Table, o.Values, map[string]string{o.Key: o.Value}, o.Cols)
	return true
}
func (o AlterPartition) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// GetPartition is get_partition(db, table, values).
type GetPartition struct {
	DB     DBName
	Table  Name
	Values []string
}

func (GetPartition) Method() string { return "get_partition" }
func (GetPartition) Class() Class   { return Read }
func (o GetPartition) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Table)
	e.strs(3, o.Values)
	return true
}
func (o GetPartition) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// GetPartitionByName is get_partition_by_name(db, table, name).
type GetPartitionByName struct {
	DB    DBName
	Table Name
	Part  string
}

func (GetPartitionByName) Method() string { return "get_partition_by_name" }
func (GetPartitionByName) Class() Class   { return Read }
func (o GetPartitionByName) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Table)
	e.str(3, o.Part)
	return true
}
func (o GetPartitionByName) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// GetPartitions is get_partitions(db, table, max).
type GetPartitions struct {
	DB    DBName
	Table Name
	Max   int16
}

func (GetPartitions) Method() string { return "get_partitions" }
func (GetPartitions) Class() Class   { return Read }
func (o GetPartitions) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Table)
	e.i16(3, o.Max)
	return true
}
func (o GetPartitions) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// GetPartitionNames is get_partition_names(db, table, max).
type GetPartitionNames struct {
	DB    DBName
	Table Name
	Max   int16
}

func (GetPartitionNames) Method() string { return "get_partition_names" }
func (GetPartitionNames) Class() Class   { return Read }
func (o GetPartitionNames) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Table)
	e.i16(3, o.Max)
	return true
}
func (o GetPartitionNames) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// GetPartitionsPs is get_partitions_ps(db, table, partial values, max);
// Names makes it get_partition_names_ps.
type GetPartitionsPs struct {
	DB     DBName
	Table  Name
	Values []string
	Max    int16
	Names  bool
}

func (o GetPartitionsPs) Method() string {
	if o.Names {
		return "get_partition_names_ps"
	}
	return "get_partitions_ps"
}
func (GetPartitionsPs) Class() Class { return Read }
func (o GetPartitionsPs) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Table)
	e.strs(3, o.Values)
	e.i16(4, o.Max)
	return true
}
func (o GetPartitionsPs) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// GetPartitionsByNames is get_partitions_by_names(db, table, names), or
// with Req get_partitions_by_names_req (4.0).
type GetPartitionsByNames struct {
	DB    DBName
	Table Name
	Names []string
	Req   bool
}

func (o GetPartitionsByNames) Method() string {
	if o.Req {
		return "get_partitions_by_names_req"
	}
	return "get_partitions_by_names"
}
func (GetPartitionsByNames) Class() Class { return Read }
func (o GetPartitionsByNames) Args(e *enc, _ *state) bool {
	if o.Req {
		e.begin(1)
		e.db(1, o.DB)
		e.name(2, o.Table)
		e.strs(3, o.Names)
		e.end()
		return true
	}
	e.db(1, o.DB)
	e.name(2, o.Table)
	e.strs(3, o.Names)
	return true
}
func (o GetPartitionsByNames) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// GetPartitionsByFilter is get_partitions_by_filter(db, table, filter,
// max), or with Count get_num_partitions_by_filter(db, table, filter).
type GetPartitionsByFilter struct {
	DB     DBName
	Table  Name
	Filter string
	Max    int16
	Count  bool
}

func (o GetPartitionsByFilter) Method() string {
	if o.Count {
		return "get_num_partitions_by_filter"
	}
	return "get_partitions_by_filter"
}
func (GetPartitionsByFilter) Class() Class { return Read }
func (o GetPartitionsByFilter) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Table)
	e.str(3, o.Filter)
	if !o.Count {
		e.i16(4, o.Max)
	}
	return true
}
func (o GetPartitionsByFilter) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// ---- statistics ---------------------------------------------------------

// UpdateColStats is update_table_column_statistics, or with Part
// update_partition_column_statistics, of one column.
type UpdateColStats struct {
	DB    DBName
	Table Name
	Part  string
	Col   Col
	N     int64
}

func (o UpdateColStats) Method() string {
	if o.Part != "" {
		return "update_partition_column_statistics"
	}
	return "update_table_column_statistics"
}
func (UpdateColStats) Class() Class { return Write }
func (o UpdateColStats) Args(e *enc, _ *state) bool {
	e.colStats(1, o.DB, o.Table, o.Part, o.Col, o.N)
	return true
}
func (o UpdateColStats) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// DeleteTableColStats is delete_table_column_statistics(db, table, col).
type DeleteTableColStats struct {
	DB    DBName
	Table Name
	Col   string
}

func (DeleteTableColStats) Method() string { return "delete_table_column_statistics" }
func (DeleteTableColStats) Class() Class   { return Write }
func (o DeleteTableColStats) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Table)
	e.str(3, o.Col)
	return true
}
func (o DeleteTableColStats) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// GetTableColStats is get_table_statistics_req(db, table, cols).
type GetTableColStats struct {
	DB    Name
	Table Name
	Cols  []string
}

func (GetTableColStats) Method() string { return "get_table_statistics_req" }
func (GetTableColStats) Class() Class   { return Read }
func (o GetTableColStats) Args(e *enc, _ *state) bool {
	e.begin(1)
	e.dbName(1, o.DB)
	e.name(2, o.Table)
	e.strs(3, o.Cols)
	e.end()
	return true
}
func (o GetTableColStats) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// GetPartColStats is get_partitions_statistics_req(db, table, cols,
// parts), or with Aggr get_aggr_stats_for.
type GetPartColStats struct {
	DB    Name
	Table Name
	Cols  []string
	Parts []string
	Aggr  bool
}

func (o GetPartColStats) Method() string {
	if o.Aggr {
		return "get_aggr_stats_for"
	}
	return "get_partitions_statistics_req"
}
func (GetPartColStats) Class() Class { return Read }
func (o GetPartColStats) Args(e *enc, _ *state) bool {
	e.begin(1)
	e.dbName(1, o.DB)
	e.name(2, o.Table)
	e.strs(3, o.Cols)
	e.strs(4, o.Parts)
	e.end()
	return true
}
func (o GetPartColStats) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// ---- functions ----------------------------------------------------------

// CreateFunction is create_function(Function).
type CreateFunction struct {
	DB   DBName
	Fn   Name
	Impl string
}

func (CreateFunction) Method() string { return "create_function" }
func (CreateFunction) Class() Class   { return Write }
func (o CreateFunction) Args(e *enc, _ *state) bool {
	e.function(1, o.DB, o.Fn, o.Impl)
	return true
}
func (o CreateFunction) Touches() []string { return []string{o.DB.Base + "/" + o.Fn.Base} }

// AlterFunction is alter_function(db, name, Function) with a new class.
type AlterFunction struct {
	DB   DBName
	Fn   Name
	Impl string
}

func (AlterFunction) Method() string { return "alter_function" }
func (AlterFunction) Class() Class   { return Write }
func (o AlterFunction) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Fn)
	e.function(3, o.DB, o.Fn, o.Impl)
	return true
}
func (o AlterFunction) Touches() []string { return []string{o.DB.Base + "/" + o.Fn.Base} }

// DropFunction is drop_function(db, name).
type DropFunction struct {
	DB DBName
	Fn Name
}

func (DropFunction) Method() string { return "drop_function" }
func (DropFunction) Class() Class   { return Write }
func (o DropFunction) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Fn)
	return true
}
func (o DropFunction) Touches() []string { return []string{o.DB.Base + "/" + o.Fn.Base} }

// GetFunction is get_function(db, name).
type GetFunction struct {
	DB DBName
	Fn Name
}

func (GetFunction) Method() string { return "get_function" }
func (GetFunction) Class() Class   { return Read }
func (o GetFunction) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Fn)
	return true
}
func (o GetFunction) Touches() []string { return []string{o.DB.Base + "/" + o.Fn.Base} }

// GetFunctions is get_functions(db, pattern).
type GetFunctions struct {
	DB      DBName
	Pattern string
}

func (GetFunctions) Method() string { return "get_functions" }
func (GetFunctions) Class() Class   { return Read }
func (o GetFunctions) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.str(2, o.Pattern)
	return true
}
func (o GetFunctions) Touches() []string { return []string{o.DB.Base} }

// ---- configuration and unknown methods ----------------------------------

// GetConfigValue is get_config_value(name, default).
type GetConfigValue struct{ Key, Default string }

func (GetConfigValue) Method() string { return "get_config_value" }
func (GetConfigValue) Class() Class   { return Read }
func (o GetConfigValue) Args(e *enc, _ *state) bool {
	e.str(1, o.Key)
	e.str(2, o.Default)
	return true
}
func (GetConfigValue) Touches() []string { return nil }

// Unknown is a method the metastore does not have, with string args.
type Unknown struct {
	Name string
	Strs []string
}

func (o Unknown) Method() string { return o.Name }
func (Unknown) Class() Class     { return Read }
func (o Unknown) Args(e *enc, _ *state) bool {
	for i, a := range o.Strs {
		e.str(int16(i+1), a)
	}
	return true
}
func (Unknown) Touches() []string { return []string{"*"} }

// overlaps reports whether what a call touches (a) and what another
// touches (b) may meet: the same object, an object and its database, or
// anything and "*".
func overlaps(a, b string) bool {
	switch {
	case a == "*" || b == "*" || a == b:
		return true
	case !strings.Contains(a, "/"):
		return strings.HasPrefix(b, a+"/")
	case !strings.Contains(b, "/"):
		return strings.HasPrefix(a, b+"/")
	}
	return false
}

// overlapsAny reports whether any of as overlaps any of bs.
func overlapsAny(as, bs []string) bool {
	for _, a := range as {
		for _, b := range bs {
			if overlaps(a, b) {
				return true
			}
		}
	}
	return false
}

// ---- constraints, truncation, statistics in bulk ------------------------

// AddPrimaryKey is add_primary_key of one column of a table.
type AddPrimaryKey struct {
	DB    DBName
	Table Name
	Col   string
	PK    string
}

func (AddPrimaryKey) Method() string { return "add_primary_key" }
func (AddPrimaryKey) Class() Class   { return Write }
func (o AddPrimaryKey) Args(e *enc, _ *state) bool {
	e.begin(1)
	e.FieldBegin(wire.TList, 1)
	e.ListBegin(wire.TStruct, 1)
	e.db(1, o.DB)
	e.name(2, o.Table)
	e.str(3, o.Col)
	e.I32Field(4, 1)
	e.str(5, o.PK)
	e.BoolField(6, false)
	e.BoolField(7, false)
	e.BoolField(8, true)
	e.end()
	e.end()
	return true
}
func (o AddPrimaryKey) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// DropConstraint is drop_constraint of a table's constraint.
type DropConstraint struct {
	DB    Name
	Table Name
	Name  string
}

func (DropConstraint) Method() string { return "drop_constraint" }
func (DropConstraint) Class() Class   { return Write }
func (o DropConstraint) Args(e *enc, _ *state) bool {
	e.begin(1)
	e.dbName(1, o.DB)
	e.name(2, o.Table)
	e.str(3, o.Name)
	e.end()
	return true
}
func (o DropConstraint) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// GetPrimaryKeys is get_primary_keys(PrimaryKeysRequest).
type GetPrimaryKeys struct {
	DB    Name
	Table Name
}

func (GetPrimaryKeys) Method() string { return "get_primary_keys" }
func (GetPrimaryKeys) Class() Class   { return Read }
func (o GetPrimaryKeys) Args(e *enc, _ *state) bool {
	e.begin(1)
	e.dbName(1, o.DB)
	e.name(2, o.Table)
	e.end()
	return true
}
func (o GetPrimaryKeys) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// TruncateTable is truncate_table(db, table, partNames) (3.0+).
type TruncateTable struct {
	DB    DBName
	Table Name
}

func (TruncateTable) Method() string { return "truncate_table" }
func (TruncateTable) Class() Class   { return Write }
func (o TruncateTable) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Table)
	return true
}
func (o TruncateTable) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// SetAggrStats is set_aggr_stats_for(SetPartitionsStatsRequest) of one
// column of a table or one of its partitions.
type SetAggrStats struct {
	DB    DBName
	Table Name
	Part  string
	Col   Col
	N     int64
}

func (SetAggrStats) Method() string { return "set_aggr_stats_for" }
func (SetAggrStats) Class() Class   { return Write }
func (o SetAggrStats) Args(e *enc, _ *state) bool {
	e.begin(1)
	e.FieldBegin(wire.TList, 1)
	e.ListBegin(wire.TStruct, 1)
	// colStats writes a struct at a field; a list element is the same
	// struct without its field header.
	var one enc
	one.ns = e.ns
	one.colStats(1, o.DB, o.Table, o.Part, o.Col, o.N)
	e.B = append(e.B, one.B[3:]...)
	e.end()
	return true
}
func (o SetAggrStats) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// DeletePartColStats is delete_partition_column_statistics(db, table, part, col).
type DeletePartColStats struct {
	DB    DBName
	Table Name
	Part  string
	Col   string
}

func (DeletePartColStats) Method() string { return "delete_partition_column_statistics" }
func (DeletePartColStats) Class() Class   { return Write }
func (o DeletePartColStats) Args(e *enc, _ *state) bool {
	e.db(1, o.DB)
	e.name(2, o.Table)
	e.str(3, o.Part)
	e.str(4, o.Col)
	return true
}
func (o DeletePartColStats) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }

// GetPartitionsByFilterReq is get_partitions_by_filter_req (4.0).
type GetPartitionsByFilterReq struct {
	DB     Name
	Table  Name
	Filter string
	Max    int16
}

func (GetPartitionsByFilterReq) Method() string { return "get_partitions_by_filter_req" }
func (GetPartitionsByFilterReq) Class() Class   { return Read }
func (o GetPartitionsByFilterReq) Args(e *enc, _ *state) bool {
	e.begin(1)
	e.dbName(2, o.DB)
	e.name(3, o.Table)
	e.str(4, o.Filter)
	e.i16(5, o.Max)
	e.end()
	return true
}
func (o GetPartitionsByFilterReq) Touches() []string { return []string{o.DB.Base + "/" + o.Table.Base} }
