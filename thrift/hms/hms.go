// Package hms is the table of every Hive Metastore Thrift method and what the proxy does with it.
//
// Every method of ThriftHiveMetastore in Hive 2.3, 3.0/3.1, 4.0 and 4.1-dev, and
// every fb303 FacebookService method HMS exposes, appears exactly once (see
// table.go). Unknown names get nil from Lookup: the proxy forwards them untouched
// and treats them as writes for timeouts and retries.
//
// The table is static Go data; nothing is read from IDL or docs at run time.
//
// The table also knows the Thrift shapes of the calls it names, so that no
// other package has to: Method.Resolve walks a read's args once and
// returns its names as sent, the rest of its cache key and, for a batch
// read, its list of names (resolve.go); Method.Batch cuts a batch's list
// out of its args, rebuilds them for fewer names, splits the reply into
// one object per name and lays a reply out over cached objects
// (batch.go); Walk reads the names of a write's Effects.
package hms

import (
	"sort"
	"strconv"
)

// Class says what the proxy does with a method.
type Class uint8

const (
	// Passthrough is forwarded untouched and never cached: transactions,
	// locks, compaction, notifications, tokens, and reads/writes of state no
	// cached read depends on (workload management, schema registry, ...).
	Passthrough Class = iota
	// Read is a read whose reply a cache may keep; Kind says which cache.
	Read
	// Write changes metastore state; Effects say what to invalidate.
	Write
	// Session changes per-connection server state: set_ugi, setMetaConf.
	Session
)

var classNames = [...]string{"passthrough", "read", "write", "session"}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Kind is the cache kind of a Read method; KindNone for every other class.
type Kind uint8

const (
	KindNone            Kind = iota
	KindDatabase             // one database object
	KindDatabaseNames        // database name lists
	KindTable                // table objects and what is derived from one table (fields, schema)
	KindTableNames           // name / meta lists over the tables of a database
	KindPartition            // one partition object
	KindPartitions           // partition object lists and batches of one table
	KindPartitionNames       // partition name / value lists of one table
	KindPartitionFilter      // partitions (or a count) selected by a filter or an expression
	KindStatistics           // column statistics, table or partition level, aggregates
	KindFunction             // functions and function lists
	KindConfig               // server configuration and constants
	KindConstraints          // primary/foreign/unique/not-null/default/check constraints
	KindOther                // anything else (catalogs, connectors, roles, pure helpers)
)

var kindNames = [...]string{
	KindNone:            "none",
	KindDatabase:        "database",
	KindDatabaseNames:   "database_names",
	KindTable:           "table",
	KindTableNames:      "table_names",
	KindPartition:       "partition",
	KindPartitions:      "partitions",
	KindPartitionNames:  "partition_names",
	KindPartitionFilter: "partition_filter",
	KindStatistics:      "statistics",
	KindFunction:        "function",
	KindConfig:          "config",
	KindConstraints:     "constraints",
	KindOther:           "other",
}

// String returns a stable lower-case name, used as a metric label.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// ParseKind is the kind a setting names by its String; KindNone, which
// no setting can name, and false for any other name.
func ParseKind(name string) (Kind, bool) {
	for k := KindNone + 1; int(k) < len(kindNames); k++ {
		if kindNames[k] == name {
			return k, true
		}
	}
	return KindNone, false
}

// Scope is what a write changes, or (Method.Target) what a read's reply
// depends on.
//
//   - ScopeCatalog: the catalog and everything in it.
//   - ScopeDatabase: the database object, the database-name lists, and
//     everything in the database.
//   - ScopeTable: the table object and everything keyed under it (fields,
//     schema, constraints, statistics, all its partitions and partition lists),
//     plus the table-name / table-meta lists of its database.
//   - ScopePartition: the named partitions and their statistics, plus every
//     partition list, name list, filter result and aggregate statistic of the
//     table; not the table object. An effect marked Adds changes only the
//     table's partition set: not the partitions that exist.
//   - ScopeFunction: the function (its name is located by Effect.Table) and the
//     function lists.
//   - ScopeTxn: the tables the proxy learnt for the transaction(s) named in the
//     request (from lock, allocate_table_write_ids, add_dynamic_partitions).
//   - ScopeAll: the proxy cannot tell: flush everything of that upstream.
type Scope uint8

const (
	ScopeNone Scope = iota
	ScopeCatalog
	ScopeDatabase
	ScopeTable
	ScopePartition
	ScopeFunction
	ScopeTxn // tables learnt from the txn
	ScopeAll // cannot tell: flush upstream
)

var scopeNames = [...]string{"none", "catalog", "database", "table", "partition", "function", "txn", "all"}

func (s Scope) String() string {
	if int(s) < len(scopeNames) {
		return scopeNames[s]
	}
	return "scope(" + strconv.Itoa(int(s)) + ")"
}

// Path locates a value inside an args struct: the arg's field id, then field
// ids inside nested structs. A list step is written Each (-1): every element
// of the list at that point. Paths in the table are shared: treat them as
// read-only.
type Path []int16

// Each in a Path stands for every element of the list at that point.
const Each int16 = -1

// Effect is one thing a write changes, and where its names are in the args.
//
// How a consumer resolves an Effect against a request:
//
//   - Paths of one Effect that run through the same list (same prefix up to an
//     Each) are resolved element by element together: add_partitions names
//     (db, table, values) per listed Partition. An absent or empty list yields
//     no element, so nothing is named through it.
//   - Cat nil or absent: the catalog comes from DB when DBInName and the value
//     is "@cat#db", else the upstream's default catalog.
//   - A DB or Table path given but absent in the request (an optional field not
//     set, e.g. HiveObjectRef.objectName for a DATABASE object) widens the
//     effect: no table → the whole database; no database → ScopeAll.
//   - Part names partitions: a list<string> at the end of the path is one
//     partition's values, a string is one partition name ("k=v/k2=v2"). A Part
//     that is nil here, or resolves to nothing in the request (an unset union
//     arm, e.g. drop_partitions_req by expressions), means every partition of
//     the table.
//   - NewDB/NewTable (alter_table family) locate the new names inside the new
//     Table object; when they differ from DB/Table the write is a rename and
//     both names are changed.
type Effect struct {
	Scope                Scope
	Cat, DB, Table, Part Path // where the names live (Part: partition values list or partition name); nil = absent
	NewDB, NewTable      Path // for renames (alter_table*): the new names inside the new Table struct
	// DBInName: the db string may carry "@cat#db". 3.0+ servers split it
	// in every legacy method's plain db_name arg and in the request
	// structs that have no catalog field (TruncateTableRequest,
	// GetPartitionsByNamesRequest); 2.3 takes it as a literal name.
	// testdata/catalog_prefixed.txt lists every entry that has it.
	DBInName bool
	// Adds (ScopePartition) marks a write that only creates partitions
	// and never changes one that exists: add_partition*, add_partitions*
	// and append_partition* fail with AlreadyExistsException (or, with
	// ifNotExists, skip the partition) when one is there, and leave the
	// table object alone. Such a write changes the table's partition
	// set (lists, names, filters, counts, aggregates, not-found answers)
	// but no existing partition's own entries.
	Adds bool
	// Optional marks an effect whose names sit in a list the request may
	// leave out or empty (the constraint lists of a table creation):
	// naming nothing there changes nothing, where a name missing
	// elsewhere widens the effect to its database or to everything.
	Optional bool
}

// Method is one Thrift method name and what the proxy does with it.
type Method struct {
	Name      string
	Class     Class
	Kind      Kind     // for Read
	Effects   []Effect // for Write
	Oneway    bool     // fb303 shutdown, reinitialize: no reply ever
	Since     string   // "2.3" "2.3.6" "3.0" "3.1" "4.0" "4.1"
	Gone      string   // version it was removed in, "" if present everywhere since
	Cacheable bool     // Read methods a cache may serve by default (false for caller- or connection-specific answers)

	// Target locates the names a Read's reply depends on, with the same
	// Path conventions as Effects: Cat, DB, Table (for a list of tables,
	// e.g. get_table_objects_by_name, Table points at the list with Each),
	// Part (partition values list or name(s)). DBInName as for writes.
	// Scope says the level: ScopeDatabase for database objects and
	// table-name lists of a database, ScopeTable for table
	// objects/constraints/table stats, ScopePartition for partition
	// objects, names, filters and partition stats, ScopeCatalog for
	// database-name lists and catalog-wide lists, ScopeFunction for
	// functions (Table path = function name when there is one), ScopeAll
	// when the reply depends on everything (e.g. get_all_functions,
	// get_config_value, getVersion).
	//
	// Resolving a Target against a request:
	//
	//   - Part is set only when the reply is about exactly the named
	//     partitions (point reads, batches by name, partition statistics);
	//     nil means the reply depends on the table's whole partition set
	//     (lists, partial specs, filters, expressions). Part ending in a
	//     list<string> is one partition's values; Part ending in Each over a
	//     list<string> is one partition name per element.
	//   - A DB, Table or Part path given but unset in the request widens the
	//     dependency as for Effects: no partitions → the whole table, no
	//     table → the whole database, no database → ScopeAll. (For example
	//     get_table_objects_by_name_req with tablesPattern and no tblNames.)
	//   - ScopeCatalog with a DB path (get_databases, get_table_meta): the
	//     string there is a database *pattern*, "@cat#pattern" from 3.x/4.0
	//     clients; it is read only for the catalog, never as a database name.
	//     ScopeCatalog with neither Cat nor DB: the default catalog.
	//   - get_partitions_by_names_req has no catalog field, so 3.x/4.0
	//     clients fold it into db_name: its Target has DBInName on a nested
	//     DB path.
	//   - get_foreign_keys and get_all_table_constraints also depend on the
	//     parent tables of the foreign keys, which one Target cannot name:
	//     Target names the child (foreign) table.
	Target Effect

	// Batch is set for reads that name a list of objects a cache may
	// keep one entry each for (get_partitions_by_names[_req],
	// get_table_objects_by_name[_req]).
	Batch *Batch
	// PartStats is set for the statistics reads whose replies depend on
	// their column names only as a set (stats.go): where that list is,
	// and for get_partitions_statistics_req where its partitions are, so
	// that a cache may keep one entry per partition and set of columns.
	PartStats *StatsShape

	idem bool
	plan []target // Resolve's paths, for Read methods // the call changes no metastore state: safe to retry, read timeouts apply
}

// Idempotent reports whether the call changes no server state, so it may be
// retried and given read timeouts: every Read, and the Passthrough methods that
// only look (show_locks, get_next_notification, fb303 getters, ...). Writes,
// sessions, oneway calls and state-changing passthroughs (open_txns, lock,
// heartbeat, token calls, ...) are not.
func (m *Method) Idempotent() bool { return m != nil && m.idem }

var (
	byName map[string]*Method
	sorted []*Method
)

// unproven are reads a cache could serve but that no test has yet shown
// byte-equal through the proxy against a real metastore. They pass
// through until one does: a cached reply must be the metastore's own.
// e2e TestCorpus and TestProven prove the others. Of these, the 4.1-dev
// methods (fetch_partition_names_req, get_functions_req) are on no test
// bed; get_partitions_by_expr and get_partitions_spec_by_expr need a
// Kryo-serialised Hive expression the test bed cannot evaluate;
// get_tables_ext lists tables in an order that varies from call to call
// (4.0); data connectors and materialized views are not exercised yet.
var unproven = []string{
	"fetch_partition_names_req", "get_dataconnector_req", "get_dataconnectors", "get_functions_req",
	"get_materialized_views_for_rewriting", "get_partitions_by_expr", "get_partitions_spec_by_expr", "get_tables_ext",
}

func init() {
	byName = make(map[string]*Method, len(table))
	sorted = make([]*Method, 0, len(table))
	for i := range table {
		m := &table[i]
		if _, dup := byName[m.Name]; dup {
			panic("hms: method listed twice: " + m.Name)
		}
		byName[m.Name] = m
		sorted = append(sorted, m)
		if m.Class == Read {
			m.plan = resolvePlan(m)
		}
	}
	for _, name := range unproven {
		m := byName[name]
		if m == nil || m.Class != Read {
			panic("hms: unproven is not a read: " + name)
		}
		m.Cacheable = false
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
}

// Lookup returns the method called name, or nil when it is unknown. It does
// not allocate. The result is shared: do not modify it.
func Lookup(name []byte) *Method {
	return byName[string(name)]
}

// All returns every known method, sorted by name. The slice is the caller's;
// the Methods are shared.
func All() []*Method {
	out := make([]*Method, len(sorted))
	copy(out, sorted)
	return out
}
