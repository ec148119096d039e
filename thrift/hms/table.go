package hms

// The method table. Field ids follow shared/hms-protocol.md §3, §4, §4.11/4.12,
// §6, §7 and §9. Struct field ids used in paths below:
//
//	Database:  1 name, 8 catalogName
//	Table:     1 tableName, 2 dbName, 17 catName
//	Partition: 1 values, 2 dbName, 3 tableName, 9 catName
//	PartitionSpec: 1 dbName, 2 tableName, 6 catName
//	Function:  1 functionName, 2 dbName, 9 catName
//	ColumnStatistics: 1 statsDesc → ColumnStatisticsDesc: 2 dbName, 3 tableName, 4 partName, 6 catName
//	SetPartitionsStatsRequest: 1 colStats (list<ColumnStatistics>)
//	HiveObjectRef: 2 dbName, 3 objectName, 6 catName; PrivilegeBag: 1 privileges → HiveObjectPrivilege: 1 hiveObject
//	SQLPrimaryKey: 1 table_db, 2 table_name, 9 catName
//	SQLForeignKey: 1 pktable_db, 2 pktable_name, 4 fktable_db, 5 fktable_name, 15 catName
//	SQLUnique/NotNull/Default/CheckConstraint: 1 catName, 2 table_db, 3 table_name
//	Add*ConstraintRequest / AddPrimaryKeyRequest / AddForeignKeyRequest: 1 the constraint list

// constraintLists are the tables named by the constraint lists of a table
// creation, found at in (the args, or a request struct in them) from field
// first on: primary keys, foreign keys (their child tables; the parents
// are an effect of their own), unique, not-null, default and check
// constraints.
func constraintLists(in Path, first int16) []Effect {
	at := func(id int16, rest ...int16) Path {
		p := append(append(Path{}, in...), id, Each)
		return append(p, rest...)
	}
	out := []Effect{
		{Scope: ScopeTable, Cat: at(first, 9), DB: at(first, 1), Table: at(first, 2), Optional: true},        // SQLPrimaryKey
		{Scope: ScopeTable, Cat: at(first+1, 15), DB: at(first+1, 4), Table: at(first+1, 5), Optional: true}, // SQLForeignKey child
	}
	for id := first + 2; id <= first+5; id++ { // SQLUnique/NotNull/Default/CheckConstraint
		out = append(out, Effect{Scope: ScopeTable, Cat: at(id, 1), DB: at(id, 2), Table: at(id, 3), Optional: true})
	}
	return out
}

// rd is a read a cache may serve by default.
func rd(name, since string, k Kind) Method {
	return Method{Name: name, Class: Read, Kind: k, Since: since, Cacheable: true, idem: true}
}

// rdOwn is a read whose answer depends on the caller (privileges, user and
// group arguments) or on per-connection state: cached only if the operator
// says so, keyed on the identity.
func rdOwn(name, since string, k Kind) Method {
	return Method{Name: name, Class: Read, Kind: k, Since: since, idem: true}
}

// look is a passthrough that changes nothing (safe to retry).
func look(name, since string) Method {
	return Method{Name: name, Class: Passthrough, Since: since, idem: true}
}

// pass is a passthrough that changes server state, or whose state no cached
// read depends on.
func pass(name, since string) Method {
	return Method{Name: name, Class: Passthrough, Since: since}
}

// wr is a write and what it changes.
func wr(name, since string, e ...Effect) Method {
	return Method{Name: name, Class: Write, Since: since, Effects: e}
}

// adds marks a partition effect as only creating partitions (Effect.Adds).
func adds(e Effect) Effect { e.Adds = true; return e }

// batch marks a read that names a list of objects.
func (m Method) batch(of BatchOf, names Path, inStruct bool) Method {
	m.Batch = &Batch{Of: of, Names: names, InStruct: inStruct}
	return m
}

// partStats marks a partition statistics read: its partition names at
// parts, its column names at cols.
func (m Method) partStats(parts, cols Path) Method {
	m.PartStats = &StatsShape{Parts: parts, Cols: cols}
	return m
}

// gone marks the version a method was removed in.
func (m Method) gone(v string) Method { m.Gone = v; return m }

// at sets the Target of a read: where the names its reply depends on live.
func (m Method) at(t Effect) Method { m.Target = t; return m }

// Effects shared by many legacy methods: positional (db_name, tbl_name, ...)
// string args, the db possibly "@cat#db".
var (
	argTable = Effect{Scope: ScopeTable, DB: Path{1}, Table: Path{2}, DBInName: true}
	// alter_table, alter_table_with_environment_context, alter_table_with_cascade:
	// old name in args 1/2, new name in new_tbl (arg 3) Table.dbName 2 / tableName 1.
	argAlterTable = Effect{Scope: ScopeTable, DB: Path{1}, Table: Path{2}, NewDB: Path{3, 2}, NewTable: Path{3, 1}, DBInName: true}
	argPartVals   = Effect{Scope: ScopePartition, DB: Path{1}, Table: Path{2}, Part: Path{3}, DBInName: true} // arg 3: part_vals list or part_name string
	argPartObj    = Effect{Scope: ScopePartition, DB: Path{1}, Table: Path{2}, Part: Path{3, 1}, DBInName: true}
	argPartList   = Effect{Scope: ScopePartition, DB: Path{1}, Table: Path{2}, Part: Path{3, Each, 1}, DBInName: true}
	argFunction   = Effect{Scope: ScopeFunction, DB: Path{1}, Table: Path{2}, DBInName: true} // dbName 1, funcName 2

	// A Table object in arg 1.
	tableArg1 = Effect{Scope: ScopeTable, Cat: Path{1, 17}, DB: Path{1, 2}, Table: Path{1, 1}}
	// The parent tables named by a list<SQLForeignKey> in arg 3 (create_table_with_constraints).
	fkParentsArg3 = Effect{Scope: ScopeTable, Cat: Path{3, Each, 15}, DB: Path{3, Each, 1}, Table: Path{3, Each, 2}, Optional: true}
	// A Partition object in arg 1.
	partArg1 = Effect{Scope: ScopePartition, Cat: Path{1, 9}, DB: Path{1, 2}, Table: Path{1, 3}, Part: Path{1, 1}}

	// ColumnStatistics in arg 1 (statsDesc 1).
	statsTable = Effect{Scope: ScopeTable, Cat: Path{1, 1, 6}, DB: Path{1, 1, 2}, Table: Path{1, 1, 3}}
	statsPart  = Effect{Scope: ScopePartition, Cat: Path{1, 1, 6}, DB: Path{1, 1, 2}, Table: Path{1, 1, 3}, Part: Path{1, 1, 4}}
	// SetPartitionsStatsRequest in arg 1: colStats 1 → each ColumnStatistics → statsDesc 1.
	setStatsTable = Effect{Scope: ScopeTable, Cat: Path{1, 1, Each, 1, 6}, DB: Path{1, 1, Each, 1, 2}, Table: Path{1, 1, Each, 1, 3}}
	setStatsPart  = Effect{Scope: ScopePartition, Cat: Path{1, 1, Each, 1, 6}, DB: Path{1, 1, Each, 1, 2}, Table: Path{1, 1, Each, 1, 3}, Part: Path{1, 1, Each, 1, 4}}

	// Add{Unique,NotNull,Default,Check}ConstraintRequest in arg 1: list 1 → catName 1, table_db 2, table_name 3.
	constraintList = Effect{Scope: ScopeTable, Cat: Path{1, 1, Each, 1}, DB: Path{1, 1, Each, 2}, Table: Path{1, 1, Each, 3}, Optional: true}

	// Privilege writes name HiveObjectRefs. Only caller-specific reads
	// (rdOwn) return privileges; a GLOBAL or DATABASE object has no table
	// name and widens the effect (see Effect).
	privBagArg1 = Effect{Scope: ScopeTable, Cat: Path{1, 1, Each, 1, 6}, DB: Path{1, 1, Each, 1, 2}, Table: Path{1, 1, Each, 1, 3}}

	// The txn ids are in the request: CommitTxnRequest / AbortTxnRequest 1
	// txnid, AbortTxnsRequest 1 txn_ids.
	txn = Effect{Scope: ScopeTxn}

	// all is for writes whose entities cannot be located; each use says why.
	all = Effect{Scope: ScopeAll}
)

// Targets shared by many legacy reads: positional (db_name, tbl_name, ...)
// string args, the db possibly "@cat#db". argTable and argPartVals above
// serve reads too (get_table, get_partition, ...).
var (
	// Database-name lists and catalog-wide lists whose arg 1 is a database
	// pattern carrying the catalog ("@cat#pattern"): get_databases,
	// get_table_meta.
	argCatPattern = Effect{Scope: ScopeCatalog, DB: Path{1}, DBInName: true}
	// The default catalog (get_all_databases: no args).
	defaultCatalog = Effect{Scope: ScopeCatalog}
	// A database object, or a name list over the tables of a database.
	argDB = Effect{Scope: ScopeDatabase, DB: Path{1}, DBInName: true}
	// Lists, partial specs and filters over the partitions of a table
	// (db 1, table 2): every partition of the table.
	argParts = Effect{Scope: ScopePartition, DB: Path{1}, Table: Path{2}, DBInName: true}
	// Partitions named in a list<string> arg 3 (get_partitions_by_names).
	argPartNames = Effect{Scope: ScopePartition, DB: Path{1}, Table: Path{2}, Part: Path{3, Each}, DBInName: true}

	// Request structs with catName 1, dbName 2, tblName 3 (GetFieldsRequest,
	// GetSchemaRequest, PartitionsRequest, GetPartitionsByFilterRequest,
	// GetPartitionNamesPsRequest, GetPartitionsPsWithAuthRequest,
	// GetPartitionsRequest, and the Unique/NotNull/Default/Check
	// constraint requests).
	reqTable123 = Effect{Scope: ScopeTable, Cat: Path{1, 1}, DB: Path{1, 2}, Table: Path{1, 3}}
	reqParts123 = Effect{Scope: ScopePartition, Cat: Path{1, 1}, DB: Path{1, 2}, Table: Path{1, 3}}
	// PartitionsByExprRequest: dbName 1, tblName 2, catName 6.
	reqPartsByExpr = Effect{Scope: ScopePartition, Cat: Path{1, 6}, DB: Path{1, 1}, Table: Path{1, 2}}
	// PartitionsStatsRequest: dbName 1, tblName 2, partNames 4, catName 5.
	reqPartStats = Effect{Scope: ScopePartition, Cat: Path{1, 5}, DB: Path{1, 1}, Table: Path{1, 2}, Part: Path{1, 4, Each}}
)

var table = []Method{
	// ---- §3.1 databases and catalogs -----------------------------------
	rd("get_database", "2.3", KindDatabase).at(argDB),
	rd("get_database_req", "4.0", KindDatabase).at(Effect{Scope: ScopeDatabase, Cat: Path{1, 2}, DB: Path{1, 1}}),
	rd("get_databases", "2.3", KindDatabaseNames).at(argCatPattern),
	rd("get_all_databases", "2.3", KindDatabaseNames).at(defaultCatalog),
	rd("get_catalog", "3.0", KindOther).at(Effect{Scope: ScopeCatalog, Cat: Path{1, 1}}),
	rd("get_catalogs", "3.0", KindOther).at(all),       // catalog writes name one catalog; the list spans all
	rd("get_dataconnectors", "4.0", KindOther).at(all), // connector writes flush everything (see §4.1 below)
	rd("get_dataconnector_req", "4.0", KindOther).at(all),

	// ---- §3.2 tables, schemas, constraints ------------------------------
	rd("get_table", "2.3", KindTable).at(argTable).gone("4.1"),
	rd("get_table_req", "2.3", KindTable).at(Effect{Scope: ScopeTable, Cat: Path{1, 4}, DB: Path{1, 1}, Table: Path{1, 2}}),
	rd("get_table_objects_by_name", "2.3", KindTable).at(Effect{Scope: ScopeTable, DB: Path{1}, Table: Path{2, Each}, DBInName: true}).
		batch(BatchTables, Path{2}, false).gone("4.1"),
	rd("get_table_objects_by_name_req", "2.3", KindTable).at(Effect{Scope: ScopeTable, Cat: Path{1, 4}, DB: Path{1, 1}, Table: Path{1, 2, Each}}).
		batch(BatchTables, Path{1, 2}, true),
	rd("get_tables", "2.3", KindTableNames).at(argDB),
	rd("get_tables_by_type", "2.3", KindTableNames).at(argDB),
	rd("get_all_tables", "2.3", KindTableNames).at(argDB),
	rd("get_table_meta", "2.3", KindTableNames).at(argCatPattern), // db *patterns*: spans databases
	rd("get_tables_ext", "4.0", KindTableNames).at(Effect{Scope: ScopeDatabase, Cat: Path{1, 1}, DB: Path{1, 2}}),
	rd("get_table_names_by_filter", "2.3", KindTableNames).at(argDB), // filter over owner/params: any table write in the db changes it
	rd("get_fields", "2.3", KindTable).at(argTable),
	rd("get_fields_with_environment_context", "2.3", KindTable).at(argTable),
	rd("get_fields_req", "4.0", KindTable).at(reqTable123),
	rd("get_schema", "2.3", KindTable).at(argTable),
	rd("get_schema_with_environment_context", "2.3", KindTable).at(argTable),
	rd("get_schema_req", "4.0", KindTable).at(reqTable123),
	rd("get_materialized_views_for_rewriting", "3.0", KindTableNames).at(argDB),
	rdOwn("get_all_materialized_view_objects_for_rewriting", "4.0", KindOther).at(all), // every MV of every database
	rd("get_primary_keys", "2.3", KindConstraints).at(Effect{Scope: ScopeTable, Cat: Path{1, 3}, DB: Path{1, 1}, Table: Path{1, 2}}),
	// Foreign keys also depend on parent tables the request does not name
	// (dropping a parent deletes them), so they are never cached.
	rdOwn("get_foreign_keys", "2.3", KindConstraints).at(Effect{Scope: ScopeTable, Cat: Path{1, 5}, DB: Path{1, 3}, Table: Path{1, 4}}), // child table 3/4; parent 1/2 not named (see Method.Target)
	rd("get_unique_constraints", "3.0", KindConstraints).at(reqTable123),
	rd("get_not_null_constraints", "3.0", KindConstraints).at(reqTable123),
	rd("get_default_constraints", "3.0", KindConstraints).at(reqTable123),
	rd("get_check_constraints", "3.0", KindConstraints).at(reqTable123),
	rdOwn("get_all_table_constraints", "4.0", KindConstraints).at(Effect{Scope: ScopeTable, Cat: Path{1, 3}, DB: Path{1, 1}, Table: Path{1, 2}}),

	// ---- §3.3 partition objects -----------------------------------------
	rd("get_partition", "2.3", KindPartition).at(argPartVals),
	rd("get_partition_req", "4.0", KindPartition).at(Effect{Scope: ScopePartition, Cat: Path{1, 1}, DB: Path{1, 2}, Table: Path{1, 3}, Part: Path{1, 4}}),
	rd("get_partition_by_name", "2.3", KindPartition).at(argPartVals),
	rdOwn("get_partition_with_auth", "2.3", KindPartition).at(argPartVals),
	rd("get_partitions", "2.3", KindPartitions).at(argParts),
	rd("get_partitions_req", "4.0", KindPartitions).at(reqParts123),
	rdOwn("get_partitions_with_auth", "2.3", KindPartitions).at(argParts),
	rd("get_partitions_pspec", "2.3", KindPartitions).at(argParts),
	rd("get_partitions_by_names", "2.3", KindPartitions).at(argPartNames).batch(BatchPartitions, Path{3}, false),
	rd("get_partitions_by_names_req", "4.0", KindPartitions).at(Effect{Scope: ScopePartition, DB: Path{1, 1}, Table: Path{1, 2}, Part: Path{1, 3, Each}, DBInName: true}).
		batch(BatchPartitions, Path{1, 3}, true),
	rd("get_partitions_ps", "2.3", KindPartitions).at(argParts),
	rdOwn("get_partitions_ps_with_auth", "2.3", KindPartitions).at(argParts),
	rdOwn("get_partitions_ps_with_auth_req", "4.0", KindPartitions).at(reqParts123), // userName 6, groupNames 7
	rdOwn("get_partitions_with_specs", "4.0", KindPartitions).at(reqParts123),       // withAuth 4, user 5, groupNames 6

	// ---- §3.4 partition names and values --------------------------------
	rd("get_partition_names", "2.3", KindPartitionNames).at(argParts),
	rd("get_partition_names_ps", "2.3", KindPartitionNames).at(argParts),
	rd("get_partition_names_ps_req", "4.0", KindPartitionNames).at(reqParts123),
	rd("get_partition_names_req", "4.0", KindPartitionNames).at(reqPartsByExpr), // PartitionsByExprRequest: optional expr/order
	rd("fetch_partition_names_req", "4.1", KindPartitionNames).at(reqParts123),
	rd("get_partition_values", "2.3.6", KindPartitionNames).at(Effect{Scope: ScopePartition, Cat: Path{1, 9}, DB: Path{1, 1}, Table: Path{1, 2}}),
	rd("partition_name_to_vals", "2.3", KindOther).at(all),                 // pure function of its arg (no narrower Scope exists)
	rd("partition_name_to_spec", "2.3", KindOther).at(all),                 // pure function of its arg
	rdOwn("partition_name_has_valid_characters", "2.3", KindOther).at(all), // whitelist pattern is a setMetaConf key

	// ---- §3.5 partition filters and expressions -------------------------
	rd("get_partitions_by_filter", "2.3", KindPartitionFilter).at(argParts),
	rd("get_partitions_by_filter_req", "4.0", KindPartitionFilter).at(reqParts123),
	rd("get_part_specs_by_filter", "2.3", KindPartitionFilter).at(argParts),
	rd("get_partitions_by_expr", "2.3", KindPartitionFilter).at(reqPartsByExpr),
	rd("get_partitions_spec_by_expr", "4.0", KindPartitionFilter).at(reqPartsByExpr),
	rd("get_num_partitions_by_filter", "2.3", KindPartitionFilter).at(argParts),

	// ---- §3.6 column statistics -----------------------------------------
	rd("get_table_column_statistics", "2.3", KindStatistics).at(argTable),
	rd("get_partition_column_statistics", "2.3", KindStatistics).at(argPartVals),
	rd("get_table_statistics_req", "2.3", KindStatistics).at(Effect{Scope: ScopeTable, Cat: Path{1, 4}, DB: Path{1, 1}, Table: Path{1, 2}}).
		partStats(nil, Path{1, 3}),
	rd("get_partitions_statistics_req", "2.3", KindStatistics).at(reqPartStats).partStats(Path{1, 4}, Path{1, 3}),
	rd("get_aggr_stats_for", "2.3", KindStatistics).at(reqPartStats),

	// ---- §3.7 functions -------------------------------------------------
	rd("get_function", "2.3", KindFunction).at(argFunction),
	rd("get_functions", "2.3", KindFunction).at(Effect{Scope: ScopeFunction, DB: Path{1}, DBInName: true}),
	rd("get_all_functions", "2.3", KindFunction).at(all),
	rd("get_functions_req", "4.1", KindFunction).at(Effect{Scope: ScopeFunction, Cat: Path{1, 2}, DB: Path{1, 1}}),

	// ---- §3.8 configuration ---------------------------------------------
	rd("get_config_value", "2.3", KindConfig).at(all),
	look("getMetaConf", "2.3"), // answers with this connection's setMetaConf overrides
	rd("get_metastore_db_uuid", "3.0", KindConfig).at(all),

	// ---- §3.9 privileges and roles: caller-specific ---------------------
	rdOwn("get_role_names", "2.3", KindOther).at(all),
	rdOwn("list_roles", "2.3", KindOther).at(all),
	rdOwn("get_principals_in_role", "2.3", KindOther).at(all),
	rdOwn("get_role_grants_for_principal", "2.3", KindOther).at(all),
	rdOwn("get_privilege_set", "2.3", KindOther).at(Effect{Scope: ScopeTable, Cat: Path{1, 6}, DB: Path{1, 2}, Table: Path{1, 3}}),
	rdOwn("list_privileges", "2.3", KindOther).at(Effect{Scope: ScopeTable, Cat: Path{3, 6}, DB: Path{3, 2}, Table: Path{3, 3}}),

	// ---- §3.10 / §5 notifications: never cached -------------------------
	look("get_current_notificationEventId", "2.3"),
	look("get_next_notification", "2.3"),
	look("get_notification_events_count", "3.0"),
	pass("fire_listener_event", "2.3"),                 // records an event; changes no metadata object
	pass("add_write_notification_log", "4.0"),          // ACID write event record
	pass("add_write_notification_log_in_batch", "4.0"), // ACID write event records

	// ---- §2 identity, tokens, session -----------------------------------
	{Name: "set_ugi", Class: Session, Since: "2.3"},
	{Name: "setMetaConf", Class: Session, Since: "2.3"},
	pass("get_delegation_token", "2.3"),
	pass("renew_delegation_token", "2.3"),
	pass("cancel_delegation_token", "2.3"),
	pass("add_token", "2.3"),
	look("get_token", "2.3"),
	pass("remove_token", "2.3"),
	look("get_all_token_identifiers", "2.3"),
	pass("add_master_key", "2.3"),
	pass("update_master_key", "2.3"),
	pass("remove_master_key", "2.3"),
	look("get_master_keys", "2.3"),

	// ---- §4.1 database and catalog writes -------------------------------
	wr("create_database", "2.3", Effect{Scope: ScopeDatabase, Cat: Path{1, 8}, DB: Path{1, 1}}),
	wr("create_database_req", "4.1", Effect{Scope: ScopeDatabase, Cat: Path{1, 8}, DB: Path{1, 1}}), // CreateDatabaseRequest: catalogName 8, databaseName 1
	wr("drop_database", "2.3", Effect{Scope: ScopeDatabase, DB: Path{1}, DBInName: true}),
	wr("drop_database_req", "4.0", Effect{Scope: ScopeDatabase, Cat: Path{1, 2}, DB: Path{1, 1}}),
	wr("alter_database", "2.3", Effect{Scope: ScopeDatabase, DB: Path{1}, DBInName: true}),
	wr("alter_database_req", "4.1", Effect{Scope: ScopeDatabase, Cat: Path{1, 2, 8}, DB: Path{1, 1}}), // oldDbName 1; catalog of newDb 2
	wr("create_catalog", "3.0", Effect{Scope: ScopeCatalog, Cat: Path{1, 1, 1}}),                      // CreateCatalogRequest 1 catalog → Catalog.name 1
	wr("alter_catalog", "3.1", Effect{Scope: ScopeCatalog, Cat: Path{1, 1}}),
	wr("drop_catalog", "3.0", Effect{Scope: ScopeCatalog, Cat: Path{1, 1}}),
	// A data connector backs REMOTE databases whose names no connector call
	// carries: flush.
	wr("create_dataconnector", "4.0", all).gone("4.1"),
	wr("alter_dataconnector", "4.0", all).gone("4.1"),
	wr("drop_dataconnector", "4.0", all).gone("4.1"),
	wr("create_dataconnector_req", "4.1", all),
	wr("alter_dataconnector_req", "4.1", all),
	wr("drop_dataconnector_req", "4.1", all),

	// ---- §4.2/4.3 table writes ------------------------------------------
	wr("create_table", "2.3", tableArg1),
	wr("create_table_with_environment_context", "2.3", tableArg1),
	// The metastore adds each constraint to the table its own table_db and
	// table_name name (issue 22), which a client may set to another table
	// than the one created: each list is an effect of its own.
	wr("create_table_with_constraints", "2.3", append([]Effect{tableArg1, fkParentsArg3}, constraintLists(nil, 2)...)...),
	wr("create_table_req", "4.0", append([]Effect{ // CreateTableRequest: 1 table, 3..8 constraint lists
		{Scope: ScopeTable, Cat: Path{1, 1, 17}, DB: Path{1, 1, 2}, Table: Path{1, 1, 1}},
		{Scope: ScopeTable, Cat: Path{1, 4, Each, 15}, DB: Path{1, 4, Each, 1}, Table: Path{1, 4, Each, 2}, Optional: true}},
		constraintLists(Path{1}, 3)...)...),
	wr("drop_table", "2.3", argTable),
	wr("drop_table_with_environment_context", "2.3", argTable),
	wr("drop_table_req", "4.1", Effect{Scope: ScopeTable, Cat: Path{1, 1}, DB: Path{1, 2}, Table: Path{1, 3}}),
	wr("alter_table", "2.3", argAlterTable),
	wr("alter_table_with_environment_context", "2.3", argAlterTable),
	wr("alter_table_with_cascade", "2.3", argAlterTable),
	wr("alter_table_req", "4.0", // AlterTableRequest: cat 1, db 2, table 3 (old), new Table 4
		Effect{Scope: ScopeTable, Cat: Path{1, 1}, DB: Path{1, 2}, Table: Path{1, 3}, NewDB: Path{1, 4, 2}, NewTable: Path{1, 4, 1}}),
	// Truncation rewrites basic-stats params of the table or of the listed
	// partitions (partNames 3, optional): table scope covers both.
	wr("truncate_table", "3.0", argTable),
	// TruncateTableRequest has no catalog field: Hive 4 clients fold it
	// into dbName ("@hive#db"), which the server splits (issue 10).
	wr("truncate_table_req", "4.0", Effect{Scope: ScopeTable, DB: Path{1, 1}, Table: Path{1, 2}, DBInName: true}),
	wr("update_creation_metadata", "3.0", Effect{Scope: ScopeTable, Cat: Path{1}, DB: Path{2}, Table: Path{3}}),
	look("translate_table_dryrun", "4.0"), // dry run: returns the Table the server would create

	// ---- §4.4 partition writes ------------------------------------------
	// Adds and appends only create partitions (Effect.Adds).
	wr("add_partition", "2.3", adds(partArg1)),
	wr("add_partition_with_environment_context", "2.3", adds(partArg1)),
	wr("add_partitions", "2.3", adds(Effect{Scope: ScopePartition, Cat: Path{1, Each, 9}, DB: Path{1, Each, 2}, Table: Path{1, Each, 3}, Part: Path{1, Each, 1}})),
	// PartitionSpec values sit in one of two arms (4 sharedSDPartitionSpec,
	// 5 partitionList): Part nil = every partition of the table.
	wr("add_partitions_pspec", "2.3", adds(Effect{Scope: ScopePartition, Cat: Path{1, Each, 6}, DB: Path{1, Each, 1}, Table: Path{1, Each, 2}})),
	wr("add_partitions_req", "2.3", adds(Effect{Scope: ScopePartition, Cat: Path{1, 6}, DB: Path{1, 1}, Table: Path{1, 2}, Part: Path{1, 3, Each, 1}})),
	wr("append_partition", "2.3", adds(argPartVals)),
	wr("append_partition_with_environment_context", "2.3", adds(argPartVals)),
	wr("append_partition_by_name", "2.3", adds(argPartVals)),
	wr("append_partition_by_name_with_environment_context", "2.3", adds(argPartVals)),
	// AppendPartitionsRequest: name 4 or partVals 5, either may be set: Part nil.
	wr("append_partition_req", "4.1", adds(Effect{Scope: ScopePartition, Cat: Path{1, 1}, DB: Path{1, 2}, Table: Path{1, 3}})),
	wr("drop_partition", "2.3", argPartVals),
	wr("drop_partition_with_environment_context", "2.3", argPartVals),
	wr("drop_partition_by_name", "2.3", argPartVals),
	wr("drop_partition_by_name_with_environment_context", "2.3", argPartVals),
	// DropPartitionsRequest parts 3 is a union: names 1 or exprs 2; with
	// exprs Part resolves to nothing = every partition of the table.
	wr("drop_partitions_req", "2.3", Effect{Scope: ScopePartition, Cat: Path{1, 9}, DB: Path{1, 1}, Table: Path{1, 2}, Part: Path{1, 3, 1, Each}}),
	// DropPartitionRequest: partName 4 or partVals 5: Part nil.
	wr("drop_partition_req", "4.1", Effect{Scope: ScopePartition, Cat: Path{1, 1}, DB: Path{1, 2}, Table: Path{1, 3}}),
	wr("alter_partition", "2.3", argPartObj),
	wr("alter_partition_with_environment_context", "2.3", argPartObj),
	wr("alter_partitions", "2.3", argPartList),
	wr("alter_partitions_with_environment_context", "2.3", argPartList),
	wr("alter_partitions_req", "4.0", Effect{Scope: ScopePartition, Cat: Path{1, 1}, DB: Path{1, 2}, Table: Path{1, 3}, Part: Path{1, 4, Each, 1}}),
	wr("rename_partition", "2.3", // old values 3, new Partition 4
		argPartVals,
		Effect{Scope: ScopePartition, DB: Path{1}, Table: Path{2}, Part: Path{4, 1}, DBInName: true}),
	wr("rename_partition_req", "4.0", // RenamePartitionRequest: cat 1, db 2, table 3, old partVals 4, newPart 5
		Effect{Scope: ScopePartition, Cat: Path{1, 1}, DB: Path{1, 2}, Table: Path{1, 3}, Part: Path{1, 4}},
		Effect{Scope: ScopePartition, Cat: Path{1, 1}, DB: Path{1, 2}, Table: Path{1, 3}, Part: Path{1, 5, 1}}),
	// exchange_partition(s): the spec map 1 may be partial: every partition
	// of source (db 2, table 3) and destination (db 4, table 5).
	wr("exchange_partition", "2.3",
		Effect{Scope: ScopePartition, DB: Path{2}, Table: Path{3}, DBInName: true},
		Effect{Scope: ScopePartition, DB: Path{4}, Table: Path{5}, DBInName: true}),
	wr("exchange_partitions", "2.3",
		Effect{Scope: ScopePartition, DB: Path{2}, Table: Path{3}, DBInName: true},
		Effect{Scope: ScopePartition, DB: Path{4}, Table: Path{5}, DBInName: true}),
	pass("markPartitionForEvent", "2.3"), // only isPartitionMarkedForEvent (passthrough) reads it
	look("isPartitionMarkedForEvent", "2.3"),

	// ---- §4.5 column statistics writes ----------------------------------
	// Updating table stats also rewrites Table.parameters
	// (COLUMN_STATS_ACCURATE): table scope.
	wr("update_table_column_statistics", "2.3", statsTable),
	wr("update_partition_column_statistics", "2.3", statsPart),
	wr("update_table_column_statistics_req", "4.0", setStatsTable),
	wr("update_partition_column_statistics_req", "4.0", setStatsPart),
	// set_aggr_stats_for mixes table-level (no partName) and partition-level
	// entries; table scope covers both.
	wr("set_aggr_stats_for", "2.3", setStatsTable),
	wr("delete_table_column_statistics", "2.3", argTable),
	wr("delete_partition_column_statistics", "2.3", argPartVals), // part_name 3
	// UpdateTransactionalStatsRequest names the table only by numeric id
	// (field 1 tableId): no names to invalidate by.
	wr("update_transaction_statistics", "4.0", all),

	// ---- §4.6 functions -------------------------------------------------
	wr("create_function", "2.3", Effect{Scope: ScopeFunction, Cat: Path{1, 9}, DB: Path{1, 2}, Table: Path{1, 1}}),
	wr("drop_function", "2.3", argFunction),
	wr("alter_function", "2.3", argFunction, // the new Function 3 may carry a new name
		Effect{Scope: ScopeFunction, Cat: Path{3, 9}, DB: Path{3, 2}, Table: Path{3, 1}}),

	// ---- §4.7 roles and privileges --------------------------------------
	// Role membership changes what every privilege-bearing answer holds for
	// every member, on every object; no object is named: flush.
	wr("create_role", "2.3", all),
	wr("drop_role", "2.3", all),
	wr("grant_role", "2.3", all),
	wr("revoke_role", "2.3", all),
	wr("grant_revoke_role", "2.3", all),
	wr("grant_privileges", "2.3", privBagArg1),
	wr("revoke_privileges", "2.3", privBagArg1),
	wr("grant_revoke_privileges", "2.3", // GrantRevokePrivilegeRequest: privileges 2 (PrivilegeBag)
		Effect{Scope: ScopeTable, Cat: Path{1, 2, 1, Each, 1, 6}, DB: Path{1, 2, 1, Each, 1, 2}, Table: Path{1, 2, 1, Each, 1, 3}}),
	wr("refresh_privileges", "3.0", Effect{Scope: ScopeTable, Cat: Path{1, 6}, DB: Path{1, 2}, Table: Path{1, 3}}), // objToRefresh 1

	// ---- §4.8 constraints -----------------------------------------------
	wr("add_primary_key", "2.3", Effect{Scope: ScopeTable, Cat: Path{1, 1, Each, 9}, DB: Path{1, 1, Each, 1}, Table: Path{1, 1, Each, 2}, Optional: true}),
	wr("add_foreign_key", "2.3", // child and parent tables
		Effect{Scope: ScopeTable, Cat: Path{1, 1, Each, 15}, DB: Path{1, 1, Each, 4}, Table: Path{1, 1, Each, 5}, Optional: true},
		Effect{Scope: ScopeTable, Cat: Path{1, 1, Each, 15}, DB: Path{1, 1, Each, 1}, Table: Path{1, 1, Each, 2}, Optional: true}),
	wr("add_unique_constraint", "3.0", constraintList),
	wr("add_not_null_constraint", "3.0", constraintList),
	wr("add_default_constraint", "3.0", constraintList),
	wr("add_check_constraint", "3.0", constraintList),
	wr("drop_constraint", "2.3", Effect{Scope: ScopeTable, Cat: Path{1, 4}, DB: Path{1, 1}, Table: Path{1, 2}}),

	// ---- §4.10 / §6 transactions, locks, compaction ---------------------
	// Commit and abort change what ACID readers see for the tables the txn
	// wrote; the request names only txn ids.
	wr("commit_txn", "2.3", txn),
	wr("abort_txn", "2.3", txn),
	wr("abort_txns", "2.3", txn),
	pass("open_txns", "2.3"),
	look("get_open_txns", "2.3"),
	look("get_open_txns_req", "4.0"),
	look("get_open_txns_info", "2.3"),
	pass("heartbeat", "2.3"),
	pass("heartbeat_txn_range", "2.3"),
	pass("lock", "2.3"),
	pass("check_lock", "2.3"), // may acquire a waiting lock
	pass("unlock", "2.3"),
	look("show_locks", "2.3"),
	pass("compact", "2.3"),
	pass("compact2", "2.3"),
	look("show_compact", "2.3"),
	pass("abort_Compactions", "4.0"),
	pass("allocate_table_write_ids", "3.0"),
	look("get_valid_write_ids", "3.0"),
	pass("add_dynamic_partitions", "2.3"),
	look("get_latest_txnid_in_conflict", "4.0"),
	look("get_max_allocated_table_write_id", "4.0"),
	pass("seed_write_id", "4.0"),
	pass("seed_txn_id", "4.0"),
	pass("repl_tbl_writeid_state", "3.0"),
	pass("add_write_ids_to_min_history", "4.0"),
	look("get_all_write_event_info", "4.0"),
	pass("find_next_compact", "4.0"),  // claims a compaction
	pass("find_next_compact2", "4.0"), // claims a compaction
	pass("update_compactor_state", "4.0"),
	look("find_columns_with_stats", "4.0"),
	pass("mark_cleaned", "4.0"),
	pass("mark_compacted", "4.0"),
	pass("mark_failed", "4.0"),
	pass("mark_refused", "4.0"),
	pass("set_hadoop_jobid", "4.0"),
	look("get_latest_committed_compaction_info", "4.0"),
	pass("submit_for_cleanup", "4.0"),
	pass("update_compaction_metrics_data", "4.0"),
	pass("remove_compaction_metrics_data", "4.0"),
	pass("get_lock_materialization_rebuild", "3.0"), // takes a lock
	pass("heartbeat_lock_materialization_rebuild", "3.0"),
	look("get_materialization_invalidation_info", "3.0"), // answer depends on the txn snapshot passed

	// ---- state outside the metadata caches ------------------------------
	// The server drops its own caches: drop ours too.
	wr("flushCache", "2.3", all),
	pass("cm_recycle", "3.0"), // change-management: moves files, no metadata
	pass("create_type", "2.3"),
	pass("drop_type", "2.3"),
	look("get_type", "2.3"),
	look("get_type_all", "2.3"),
	pass("put_file_metadata", "2.3"),
	pass("clear_file_metadata", "2.3"),
	pass("cache_file_metadata", "2.3"),
	look("get_file_metadata", "2.3"),
	look("get_file_metadata_by_expr", "2.3"),

	// Index API (2.3 only). add_index creates the index table (arg 2 Table).
	wr("add_index", "2.3", Effect{Scope: ScopeTable, DB: Path{2, 2}, Table: Path{2, 1}}).gone("3.0"),
	wr("alter_index", "2.3", Effect{Scope: ScopeTable, DB: Path{1}, Table: Path{2}}).gone("3.0"), // base table db 1, table 2
	// drop_index_by_name drops the index table too, whose name is not in
	// the args (db 1, base table 2, index 3): the whole database.
	wr("drop_index_by_name", "2.3", Effect{Scope: ScopeDatabase, DB: Path{1}}).gone("3.0"),
	look("get_index_by_name", "2.3").gone("3.0"),
	look("get_index_names", "2.3").gone("3.0"),
	look("get_indexes", "2.3").gone("3.0"),

	// Workload management (3.0+).
	pass("create_resource_plan", "3.0"),
	look("get_resource_plan", "3.0"),
	look("get_active_resource_plan", "3.0"),
	look("get_all_resource_plans", "3.0"),
	pass("alter_resource_plan", "3.0"),
	look("validate_resource_plan", "3.0"),
	pass("drop_resource_plan", "3.0"),
	pass("create_wm_trigger", "3.0"),
	pass("alter_wm_trigger", "3.0"),
	pass("drop_wm_trigger", "3.0"),
	look("get_triggers_for_resourceplan", "3.0"),
	pass("create_wm_pool", "3.0"),
	pass("alter_wm_pool", "3.0"),
	pass("drop_wm_pool", "3.0"),
	pass("create_or_update_wm_mapping", "3.0"),
	pass("drop_wm_mapping", "3.0"),
	pass("create_or_drop_wm_trigger_to_pool_mapping", "3.0"),

	// Schema registry (3.0+).
	pass("create_ischema", "3.0"),
	pass("alter_ischema", "3.0"),
	look("get_ischema", "3.0"),
	pass("drop_ischema", "3.0"),
	pass("add_schema_version", "3.0"),
	look("get_schema_version", "3.0"),
	look("get_schema_latest_version", "3.0"),
	look("get_schema_all_versions", "3.0"),
	pass("drop_schema_version", "3.0"),
	look("get_schemas_by_cols", "3.0"),
	pass("map_schema_version_to_serde", "3.0"),
	pass("set_schema_version_state", "3.0"),
	pass("add_serde", "3.0"),
	look("get_serde", "3.0"),

	// Runtime stats, replication metrics, scheduled queries, stored
	// procedures, packages, properties.
	pass("add_runtime_stats", "3.0"),
	look("get_runtime_stats", "3.0"),
	pass("add_replication_metrics", "4.0"),
	look("get_replication_metrics", "4.0"),
	pass("scheduled_query_poll", "4.0"), // claims a scheduled execution
	pass("scheduled_query_maintenance", "4.0"),
	pass("scheduled_query_progress", "4.0"),
	look("get_scheduled_query", "4.0"),
	pass("create_stored_procedure", "4.0"),
	look("get_stored_procedure", "4.0"),
	pass("drop_stored_procedure", "4.0"),
	look("get_all_stored_procedures", "4.0"),
	look("find_package", "4.0"),
	pass("add_package", "4.0"),
	look("get_all_packages", "4.0"),
	pass("drop_package", "4.0"),
	pass("set_properties", "4.0"),
	look("get_properties", "4.0"),

	// ---- §7 fb303 FacebookService ---------------------------------------
	rd("getName", "2.3", KindConfig).at(all),
	rd("getVersion", "2.3", KindConfig).at(all),
	look("getStatus", "2.3"),
	look("getStatusDetails", "2.3"),
	look("getCounters", "2.3"),
	look("getCounter", "2.3"),
	pass("setOption", "2.3"),
	look("getOption", "2.3"),
	look("getOptions", "2.3"),
	look("getCpuProfile", "2.3"),
	look("aliveSince", "2.3"),
	{Name: "reinitialize", Class: Passthrough, Oneway: true, Since: "2.3"},
	{Name: "shutdown", Class: Passthrough, Oneway: true, Since: "2.3"},
}
