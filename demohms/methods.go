package demohms

import (
	"maps"
	"slices"
)

// methods is the processor map: every method the demo metastore knows.
// Anything else is answered with UNKNOWN_METHOD. Exception lists follow the
// Hive 3.1 IDL (§9 of the protocol notes).
var methods map[string]method

func init() {
	methods = map[string]method{
		// session and connection state (§2, §1.12)
		"set_ugi":     {h: hSetUGI, throws: thMeta},
		"setMetaConf": {h: hSetMetaConf, throws: thMeta},
		"getMetaConf": {h: hGetMetaConf, throws: thMeta},

		// configuration
		"get_config_value": {h: hGetConfigValue, throws: []exKind{exConfigValSecurity}},

		// fb303 (§7); none declares an exception
		"getName":          {h: hConstString("new db based metaserver")},
		"getVersion":       {h: hConstString("3.0")},
		"getStatus":        {h: hGetStatus},
		"getStatusDetails": {h: hConstString("")},
		"aliveSince":       {h: hAliveSince},
		"getCounters":      {h: hEmptyMap(true)},
		"getCounter":       {h: hGetCounter},
		"getOption":        {h: hConstString("")},
		"getOptions":       {h: hEmptyMap(false)},
		"setOption":        {h: hVoid},
		"getCpuProfile":    {h: hConstString("")},
		"shutdown":         {h: hShutdown, oneway: true},
		"reinitialize":     {h: hVoid, oneway: true},

		// catalogs
		"get_catalogs": {h: hGetCatalogs, throws: thMeta},
		"get_catalog":  {h: hGetCatalog, throws: thNoSuchMeta},

		// databases
		"get_all_databases": {h: hGetAllDatabases, throws: thMeta},
		"get_databases":     {h: hGetDatabases, throws: thMeta},
		"get_database":      {h: hGetDatabase, throws: thNoSuchMeta},
		"get_database_req":  {h: hGetDatabaseReq, throws: thNoSuchMeta},
		"create_database":   {h: hCreateDatabase, throws: thCreate},
		"drop_database":     {h: hDropDatabase, throws: thDropDB},
		"alter_database":    {h: hAlterDatabase, throws: thMetaNoSuch},

		// tables
		"get_all_tables":                        {h: hGetAllTables, throws: thMeta},
		"get_tables":                            {h: hGetTables, throws: thMeta},
		"get_tables_by_type":                    {h: hGetTablesByType, throws: thMeta},
		"get_table_meta":                        {h: hGetTableMeta, throws: thMeta},
		"get_table":                             {h: hGetTable, throws: thMetaNoSuch},
		"get_table_req":                         {h: hGetTableReq, throws: thMetaNoSuch},
		"get_table_objects_by_name":             {h: hGetTableObjectsByName, throws: thNone},
		"get_table_objects_by_name_req":         {h: hGetTableObjectsByNameReq, throws: thTablesReq},
		"get_fields":                            {h: hGetFields(false), throws: thFields},
		"get_fields_with_environment_context":   {h: hGetFields(false), throws: thFields},
		"get_schema":                            {h: hGetFields(true), throws: thFields},
		"get_schema_with_environment_context":   {h: hGetFields(true), throws: thFields},
		"create_table":                          {h: hCreateTable, throws: thCreateTable},
		"create_table_with_environment_context": {h: hCreateTable, throws: thCreateTable},
		"drop_table":                            {h: hDropTable, throws: thNoSuchMeta},
		"drop_table_with_environment_context":   {h: hDropTable, throws: thNoSuchMeta},
		"alter_table":                           {h: hAlterTable(false), throws: thAlter},
		"alter_table_with_environment_context":  {h: hAlterTable(false), throws: thAlter},
		"alter_table_with_cascade":              {h: hAlterTable(true), throws: thAlter},

		// partitions: reads
		"get_partition":                {h: hGetPartition, throws: thMetaNoSuch},
		"get_partition_req":            {h: hGetPartitionReq, throws: thMetaNoSuch},
		"get_partition_by_name":        {h: hGetPartitionByName, throws: thMetaNoSuch},
		"get_partitions":               {h: hGetPartitions, throws: thNoSuchMeta},
		"get_partitions_req":           {h: hGetPartitionsReq, throws: thNoSuchMeta},
		"get_partitions_ps":            {h: hGetPartitionsPs(false), throws: thMetaNoSuch},
		"get_partition_names":          {h: hGetPartitionNames, throws: thNoSuchMeta},
		"get_partition_names_ps":       {h: hGetPartitionsPs(true), throws: thMetaNoSuch},
		"get_partitions_by_names":      {h: hGetPartitionsByNames, throws: thMetaNoSuch},
		"get_partitions_by_names_req":  {h: hGetPartitionsByNamesReq, throws: thPartsByNamesReq},
		"get_partitions_by_filter":     {h: hGetPartitionsByFilter, throws: thMetaNoSuch},
		"get_partitions_by_filter_req": {h: hGetPartitionsByFilterReq, throws: thMetaNoSuch},
		"get_num_partitions_by_filter": {h: hGetNumPartitionsByFilter, throws: thMetaNoSuch},

		// partitions: writes
		"add_partition":                                     {h: hAddPartition, throws: thAddPart},
		"add_partition_with_environment_context":            {h: hAddPartition, throws: thAddPart},
		"add_partitions":                                    {h: hAddPartitions, throws: thAddPart},
		"add_partitions_req":                                {h: hAddPartitionsReq, throws: thAddPart},
		"append_partition":                                  {h: hAppendPartition(false), throws: thAddPart},
		"append_partition_with_environment_context":         {h: hAppendPartition(false), throws: thAddPart},
		"append_partition_by_name":                          {h: hAppendPartition(true), throws: thAddPart},
		"append_partition_by_name_with_environment_context": {h: hAppendPartition(true), throws: thAddPart},
		"drop_partition":                                    {h: hDropPartition(false), throws: thNoSuchMeta},
		"drop_partition_with_environment_context":           {h: hDropPartition(false), throws: thNoSuchMeta},
		"drop_partition_by_name":                            {h: hDropPartition(true), throws: thNoSuchMeta},
		"drop_partition_by_name_with_environment_context":   {h: hDropPartition(true), throws: thNoSuchMeta},
		"drop_partitions_req":                               {h: hDropPartitionsReq, throws: thNoSuchMeta},
		"alter_partition":                                   {h: hAlterPartitions(false), throws: thAlter},
		"alter_partition_with_environment_context":          {h: hAlterPartitions(false), throws: thAlter},
		"alter_partitions":                                  {h: hAlterPartitions(true), throws: thAlter},
		"alter_partitions_with_environment_context":         {h: hAlterPartitions(true), throws: thAlter},
		"alter_partitions_req":                              {h: hAlterPartitionsReq, throws: thAlter},
		"rename_partition":                                  {h: hRenamePartition, throws: thAlter},

		// notification log (§5); none declares an exception
		"get_current_notificationEventId": {h: hCurrentEventID},
		"get_next_notification":           {h: hNextNotification},
		"get_notification_events_count":   {h: hEventsCount},

		// transactions and compactions (§6; txn.go)
		"open_txns":          {h: hOpenTxns},
		"get_open_txns_info": {h: hGetOpenTxnsInfo},
		"commit_txn":         {h: hCommitTxn, throws: thCommitTxn},
		"abort_txn":          {h: hAbortTxn, throws: thAbortTxn},
		"abort_txns":         {h: hAbortTxns, throws: thAbortTxn},
		"heartbeat":          {h: hHeartbeat, throws: thHeartbeat},
		"show_compact":       {h: hShowCompact},
		"lock":               {h: hLock, throws: thLock},
		"check_lock":         {h: hCheckLock, throws: thCheckLock},
		"unlock":             {h: hUnlock, throws: thUnlock},
		"show_locks":         {h: hShowLocks},
	}
}

// MethodNames lists the methods the demo metastore implements.
func MethodNames() []string {
	return slices.Sorted(maps.Keys(methods))
}
