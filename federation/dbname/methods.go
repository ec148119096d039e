package dbname

// shape is where a method's database names are: in its args struct and
// in its result struct (field 0, success; declared exceptions are never
// rewritten). nil: none there. why says, for a side that is nil although
// a name could be expected, why it is left alone.
type shape struct {
	args, result *schema
	why          string
}

// Positional args: a string database name at each id.
func pos(ids ...int16) *schema {
	f := make([]field, len(ids))
	for i, id := range ids {
		f[i] = db(id)
	}
	return sch("args", f...)
}

// args builds an args schema from fields.
func args(f ...field) *schema { return sch("args", f...) }

// ok is the result struct with a success value of the given field shape.
func ok(f field) *schema { f.id = 0; return sch("result", f) }

var (
	rTable   = ok(st(0, sTable))
	rTables  = ok(stList(0, sTable))
	rPart    = ok(st(0, sPartition))
	rParts   = ok(stList(0, sPartition))
	rSpecs   = ok(stList(0, sPartSpec))
	rDB      = ok(st(0, sDatabase))
	rDBNames = ok(dbs(0))
	rStats   = ok(st(0, sColStats))
	rFunc    = ok(st(0, sFunction))
	rIndex   = ok(st(0, sIndex))
	rOf      = func(s *schema) *schema { return ok(st(0, s)) }

	aDB     = pos(1) // (db_name, ...)
	aTable  = args(st(1, sTable))
	aPart   = args(st(1, sPartition))
	aParts  = args(stList(1, sPartition))
	aStats  = args(st(1, sColStats))
	aSet    = args(st(1, sSetStats))
	aReq    = func(s *schema) *schema { return args(st(1, s)) }
	aCompct = args(st(1, sCompactInfo))
)

// noNames says why a method's args and reply hold no database name.
const (
	whyNone     = "no database name in args or reply"
	whyTxnIDs   = "names transactions, locks or compactions by id only"
	whyCatalog  = "catalogs and data connectors: names of their own (a REMOTE database's remote_dbname is the other system's name)"
	whyRoles    = "roles, principals and tokens: no database"
	whyWM       = "workload management: resource plans and pools, no database"
	whyConfig   = "configuration, session or server state: no database"
	whyFileMeta = "file metadata by file id: no database"
	whyPattern  = "the database argument is a pattern, not a name: the router answers it per group (fan-out listing); the reply's names are rewritten"
	whySQL      = "carries SQL text or policy names the metastore never resolves: not rewritten (see doc.go)"
)

// methods is every method of the hms table; the test fails on one missing.
var methods = map[string]shape{
	// ---- databases and catalogs ----
	"get_database":          {args: aDB, result: rDB},
	"get_database_req":      {args: aReq(sDB1), result: rDB},
	"get_databases":         {result: rDBNames, why: whyPattern},
	"get_all_databases":     {result: rDBNames},
	"get_catalog":           {why: whyCatalog},
	"get_catalogs":          {why: whyCatalog},
	"get_dataconnectors":    {why: whyCatalog},
	"get_dataconnector_req": {why: whyCatalog},
	"create_database":       {args: args(st(1, sDatabase))},
	"create_database_req":   {args: aReq(sDB1)},
	"drop_database":         {args: aDB},
	"drop_database_req":     {args: aReq(sDB1)},
	"alter_database":        {args: args(db(1), st(2, sDatabase))},
	"alter_database_req":    {args: aReq(sAlterDBReq)},
	"create_catalog":        {why: whyCatalog},
	"alter_catalog":         {why: whyCatalog},
	"drop_catalog":          {why: whyCatalog},
	"create_dataconnector":  {why: whyCatalog}, "alter_dataconnector": {why: whyCatalog}, "drop_dataconnector": {why: whyCatalog},
	"create_dataconnector_req": {why: whyCatalog}, "alter_dataconnector_req": {why: whyCatalog}, "drop_dataconnector_req": {why: whyCatalog},

	// ---- tables ----
	"get_table":                            {args: aDB, result: rTable},
	"get_table_req":                        {args: aReq(sDB1WID(6)), result: rOf(sTableResult)},
	"get_table_objects_by_name":            {args: aDB, result: rTables},
	"get_table_objects_by_name_req":        {args: aReq(sDB1), result: rOf(sTablesRes)},
	"get_tables":                           {args: aDB},
	"get_tables_by_type":                   {args: aDB},
	"get_all_tables":                       {args: aDB},
	"get_table_meta":                       {result: ok(stList(0, sTableMeta)), why: whyPattern},
	"get_tables_ext":                       {args: aReq(sDB2)}, // ExtendedTableInfo names tables only
	"get_table_names_by_filter":            {args: aDB},
	"get_fields":                           {args: aDB},
	"get_fields_with_environment_context":  {args: aDB},
	"get_fields_req":                       {args: aReq(sDB2WID5)},
	"get_schema":                           {args: aDB},
	"get_schema_with_environment_context":  {args: aDB},
	"get_schema_req":                       {args: aReq(sDB2WID5)},
	"get_materialized_views_for_rewriting": {args: aDB},
	"get_all_materialized_view_objects_for_rewriting": {result: rTables},
	"get_primary_keys":                      {args: aReq(sPKReq), result: rOf(sPKResp)},
	"get_foreign_keys":                      {args: aReq(sFKReq), result: rOf(sFKResp)},
	"get_unique_constraints":                {args: aReq(sDB2WID(4)), result: rOf(sUniqueResp)},
	"get_not_null_constraints":              {args: aReq(sDB2WID(4)), result: rOf(sNotNullResp)},
	"get_default_constraints":               {args: aReq(sDB2WID(4)), result: rOf(sDefaultResp)},
	"get_check_constraints":                 {args: aReq(sDB2WID(4)), result: rOf(sCheckResp)},
	"get_all_table_constraints":             {args: aReq(sDB1WID(4)), result: rOf(sAllConstRsp)},
	"create_table":                          {args: aTable},
	"create_table_with_environment_context": {args: aTable},
	"create_table_with_constraints": {args: args(st(1, sTable), stList(2, sPK), stList(3, sFK), stList(4, sUnique),
		stList(5, sNotNull), stList(6, sDefault), stList(7, sCheck))},
	"create_table_req":                      {args: aReq(sCreateTable)},
	"translate_table_dryrun":                {args: aReq(sCreateTable), result: rTable},
	"drop_table":                            {args: aDB},
	"drop_table_with_environment_context":   {args: aDB},
	"drop_table_req":                        {args: aReq(sDB2)},
	"alter_table":                           {args: args(db(1), st(3, sTable))},
	"alter_table_with_environment_context":  {args: args(db(1), st(3, sTable))},
	"alter_table_with_cascade":              {args: args(db(1), st(3, sTable))},
	"alter_table_req":                       {args: aReq(sAlterTable)},
	"truncate_table":                        {args: aDB},
	"truncate_table_req":                    {args: aReq(sDB1WID(5))},
	"update_creation_metadata":              {args: args(db(2), st(4, sCreationMeta))},
	"get_materialization_invalidation_info": {args: args(st(1, sCreationMeta))}, // arg 2 is a ValidTxnList: ids only

	// ---- partitions ----
	"get_partition":                                     {args: aDB, result: rPart},
	"get_partition_req":                                 {args: aReq(sDB2WID5), result: rOf(sPartResp)},
	"get_partition_by_name":                             {args: aDB, result: rPart},
	"get_partition_with_auth":                           {args: aDB, result: rPart},
	"get_partitions":                                    {args: aDB, result: rParts},
	"get_partitions_req":                                {args: aReq(sDB2WID5), result: rOf(sPartsResp)},
	"get_partitions_with_auth":                          {args: aDB, result: rParts},
	"get_partitions_pspec":                              {args: aDB, result: rSpecs},
	"get_partitions_by_names":                           {args: aDB, result: rParts},
	"get_partitions_by_names_req":                       {args: aReq(sDB1WID(8)), result: rOf(sPartsResp)},
	"get_partitions_ps":                                 {args: aDB, result: rParts},
	"get_partitions_ps_with_auth":                       {args: aDB, result: rParts},
	"get_partitions_ps_with_auth_req":                   {args: aReq(sDB2WID(8)), result: rOf(sPartsResp)},
	"get_partitions_with_specs":                         {args: aReq(sDB2WID(11)), result: rOf(sSpecsResp)},
	"get_partition_names":                               {args: aDB},
	"get_partition_names_ps":                            {args: aDB},
	"get_partition_names_ps_req":                        {args: aReq(sDB2WID(6))},
	"get_partition_names_req":                           {args: aReq(sDB1WID(8))},
	"fetch_partition_names_req":                         {args: aReq(sDB2WID5)},
	"get_partition_values":                              {args: aReq(sDB1WID(10))},
	"partition_name_to_vals":                            {why: whyNone},
	"partition_name_to_spec":                            {why: whyNone},
	"partition_name_has_valid_characters":               {why: whyNone},
	"get_partitions_by_filter":                          {args: aDB, result: rParts},
	"get_partitions_by_filter_req":                      {args: aReq(sDB2), result: rParts},
	"get_part_specs_by_filter":                          {args: aDB, result: rSpecs},
	"get_partitions_by_expr":                            {args: aReq(sDB1WID(8)), result: rOf(sPartsResp)},
	"get_partitions_spec_by_expr":                       {args: aReq(sDB1WID(8)), result: rOf(sSpecsResp)},
	"get_num_partitions_by_filter":                      {args: aDB},
	"add_partition":                                     {args: aPart, result: rPart},
	"add_partition_with_environment_context":            {args: aPart, result: rPart},
	"add_partitions":                                    {args: aParts},
	"add_partitions_pspec":                              {args: args(stList(1, sPartSpec))},
	"add_partitions_req":                                {args: aReq(sAddParts), result: rOf(sPartsResp)},
	"append_partition":                                  {args: aDB, result: rPart},
	"append_partition_with_environment_context":         {args: aDB, result: rPart},
	"append_partition_by_name":                          {args: aDB, result: rPart},
	"append_partition_by_name_with_environment_context": {args: aDB, result: rPart},
	"append_partition_req":                              {args: aReq(sDB2), result: rPart},
	"drop_partition":                                    {args: aDB},
	"drop_partition_with_environment_context":           {args: aDB},
	"drop_partition_by_name":                            {args: aDB},
	"drop_partition_by_name_with_environment_context":   {args: aDB},
	"drop_partitions_req":                               {args: aReq(sDB1), result: rOf(sPartsResp)},
	"drop_partition_req":                                {args: aReq(sDB2)},
	"alter_partition":                                   {args: args(db(1), st(3, sPartition))},
	"alter_partition_with_environment_context":          {args: args(db(1), st(3, sPartition))},
	"alter_partitions":                                  {args: args(db(1), stList(3, sPartition))},
	"alter_partitions_with_environment_context":         {args: args(db(1), stList(3, sPartition))},
	"alter_partitions_req":                              {args: aReq(sAlterParts)},
	"rename_partition":                                  {args: args(db(1), st(4, sPartition))},
	"rename_partition_req":                              {args: aReq(sRenamePart)},
	"exchange_partition":                                {args: pos(2, 4), result: rPart},
	"exchange_partitions":                               {args: pos(2, 4), result: rParts},
	"markPartitionForEvent":                             {args: aDB},
	"isPartitionMarkedForEvent":                         {args: aDB},

	// ---- statistics ----
	"get_table_column_statistics":            {args: aDB, result: rStats},
	"get_partition_column_statistics":        {args: aDB, result: rStats},
	"get_table_statistics_req":               {args: aReq(sDB1WID(5))}, // ColumnStatisticsObj: no names
	"get_partitions_statistics_req":          {args: aReq(sDB1WID(6))},
	"get_aggr_stats_for":                     {args: aReq(sDB1WID(6))},
	"update_table_column_statistics":         {args: aStats},
	"update_partition_column_statistics":     {args: aStats},
	"update_table_column_statistics_req":     {args: aSet},
	"update_partition_column_statistics_req": {args: aSet},
	"set_aggr_stats_for":                     {args: aSet},
	"delete_table_column_statistics":         {args: aDB},
	"delete_partition_column_statistics":     {args: aDB},
	"update_transaction_statistics":          {why: "names the table by numeric id only"},

	// ---- functions ----
	"get_function":      {args: aDB, result: rFunc},
	"get_functions":     {args: aDB},
	"get_all_functions": {result: rOf(sAllFuncs)},
	"get_functions_req": {args: aReq(sDB1), result: rOf(sFuncsResp)},
	"create_function":   {args: args(st(1, sFunction))},
	"drop_function":     {args: aDB},
	"alter_function":    {args: args(db(1), st(3, sFunction))},

	// ---- privileges and roles ----
	"get_privilege_set":             {args: args(st(1, sObjRef))},
	"list_privileges":               {args: args(st(3, sObjRef)), result: ok(stList(0, sObjPriv))},
	"grant_privileges":              {args: args(st(1, sPrivBag))},
	"revoke_privileges":             {args: args(st(1, sPrivBag))},
	"grant_revoke_privileges":       {args: args(st(1, sGrantReq))},
	"refresh_privileges":            {args: args(st(1, sObjRef), st(3, sGrantReq))},
	"get_role_names":                {why: whyRoles},
	"list_roles":                    {why: whyRoles},
	"get_principals_in_role":        {why: whyRoles},
	"get_role_grants_for_principal": {why: whyRoles},
	"create_role":                   {why: whyRoles}, "drop_role": {why: whyRoles}, "grant_role": {why: whyRoles},
	"revoke_role": {why: whyRoles}, "grant_revoke_role": {why: whyRoles},

	// ---- constraints ----
	"add_primary_key":         {args: aReq(sAddPK)},
	"add_foreign_key":         {args: aReq(sAddFK)},
	"add_unique_constraint":   {args: aReq(sAddUnique)},
	"add_not_null_constraint": {args: aReq(sAddNotNull)},
	"add_default_constraint":  {args: aReq(sAddDefault)},
	"add_check_constraint":    {args: aReq(sAddCheck)},
	"drop_constraint":         {args: aReq(sDB1)},

	// ---- notifications ----
	"get_current_notificationEventId":     {why: "an event id only"},
	"get_next_notification":               {result: rOf(sNotifResp)}, // NotificationEventRequest: ids and event types
	"get_notification_events_count":       {args: aReq(sNotifCount)},
	"fire_listener_event":                 {args: aReq(sFireEvent)},
	"add_write_notification_log":          {args: aReq(sWriteNotif)},
	"add_write_notification_log_in_batch": {args: aReq(sWriteBatch)},

	// ---- transactions, locks, compaction ----
	"commit_txn":                             {args: aReq(sCommitTxn)},
	"abort_txn":                              {why: whyTxnIDs},
	"abort_txns":                             {why: whyTxnIDs},
	"open_txns":                              {why: whyTxnIDs},
	"get_open_txns":                          {why: whyTxnIDs},
	"get_open_txns_req":                      {why: whyTxnIDs},
	"get_open_txns_info":                     {why: whyTxnIDs},
	"heartbeat":                              {why: whyTxnIDs},
	"heartbeat_txn_range":                    {why: whyTxnIDs},
	"lock":                                   {args: aReq(sLockReq)},
	"check_lock":                             {why: whyTxnIDs},
	"unlock":                                 {why: whyTxnIDs},
	"show_locks":                             {args: aReq(sShowLocksReq), result: rOf(sShowLocksResp)},
	"compact":                                {args: aReq(sCompactReq)},
	"compact2":                               {args: aReq(sCompactReq)},
	"show_compact":                           {args: aReq(sShowCompReq), result: rOf(sShowCompResp)},
	"abort_Compactions":                      {why: whyTxnIDs},
	"allocate_table_write_ids":               {args: aReq(sDB1)},
	"get_valid_write_ids":                    {args: aReq(sValidWIDsReq), result: rOf(sValidWIDsResp)},
	"add_dynamic_partitions":                 {args: aReq(sDynParts)},
	"get_latest_txnid_in_conflict":           {why: whyTxnIDs},
	"get_max_allocated_table_write_id":       {args: aReq(sDB1)},
	"seed_write_id":                          {args: aReq(sDB1)},
	"seed_txn_id":                            {why: whyTxnIDs},
	"repl_tbl_writeid_state":                 {args: aReq(sReplTblWID)},
	"add_write_ids_to_min_history":           {args: args(field{id: 2, k: kQualified, mapKeys: true})}, // map<"db.table", writeId>
	"get_all_write_event_info":               {args: aReq(sDB2), result: ok(stList(0, sWriteEvent))},
	"find_next_compact":                      {result: rOf(sOptCompact)},
	"find_next_compact2":                     {result: rOf(sOptCompact)},
	"update_compactor_state":                 {args: aCompct},
	"find_columns_with_stats":                {args: aCompct},
	"mark_cleaned":                           {args: aCompct},
	"mark_compacted":                         {args: aCompct},
	"mark_failed":                            {args: aCompct},
	"mark_refused":                           {args: aCompct},
	"set_hadoop_jobid":                       {why: whyTxnIDs},
	"get_latest_committed_compaction_info":   {args: aReq(sDB1), result: rOf(sLatestCompRsp)},
	"submit_for_cleanup":                     {args: aReq(sCompactReq)},
	"update_compaction_metrics_data":         {args: aReq(sCompMetrics)},
	"remove_compaction_metrics_data":         {args: aReq(sDB1)},
	"get_lock_materialization_rebuild":       {args: aDB},
	"heartbeat_lock_materialization_rebuild": {args: aDB},

	// ---- state outside the metadata ----
	"flushCache":  {why: whyConfig},
	"cm_recycle":  {why: "a file path only"},
	"create_type": {why: whyNone}, "drop_type": {why: whyNone}, "get_type": {why: whyNone}, "get_type_all": {why: whyNone},
	"put_file_metadata":         {why: whyFileMeta},
	"clear_file_metadata":       {why: whyFileMeta},
	"cache_file_metadata":       {args: aReq(sDB1)},
	"get_file_metadata":         {why: whyFileMeta},
	"get_file_metadata_by_expr": {why: whyFileMeta},

	// ---- index API (2.3) ----
	"add_index":          {args: args(st(1, sIndex), st(2, sTable)), result: rIndex},
	"alter_index":        {args: args(db(1), st(4, sIndex))},
	"drop_index_by_name": {args: aDB},
	"get_index_by_name":  {args: aDB, result: rIndex},
	"get_index_names":    {args: aDB},
	"get_indexes":        {args: aDB, result: ok(stList(0, sIndex))},

	// ---- workload management ----
	"create_resource_plan": {why: whyWM}, "get_resource_plan": {why: whyWM}, "get_active_resource_plan": {why: whyWM},
	"get_all_resource_plans": {why: whyWM}, "alter_resource_plan": {why: whyWM}, "validate_resource_plan": {why: whyWM},
	"drop_resource_plan": {why: whyWM}, "create_wm_trigger": {why: whyWM}, "alter_wm_trigger": {why: whyWM},
	"drop_wm_trigger": {why: whyWM}, "get_triggers_for_resourceplan": {why: whyWM}, "create_wm_pool": {why: whyWM},
	"alter_wm_pool": {why: whyWM}, "drop_wm_pool": {why: whyWM}, "create_or_update_wm_mapping": {why: whyWM},
	"drop_wm_mapping": {why: whyWM}, "create_or_drop_wm_trigger_to_pool_mapping": {why: whyWM},

	// ---- schema registry ----
	"create_ischema":              {args: aReq(sISchema)},
	"alter_ischema":               {args: aReq(sAlterISchema)},
	"get_ischema":                 {args: aReq(sISchemaName), result: rOf(sISchema)},
	"drop_ischema":                {args: aReq(sISchemaName)},
	"add_schema_version":          {args: aReq(sSchemaVer)},
	"get_schema_version":          {args: aReq(sSchemaVerDsc), result: rOf(sSchemaVer)},
	"get_schema_latest_version":   {args: aReq(sISchemaName), result: rOf(sSchemaVer)},
	"get_schema_all_versions":     {args: aReq(sISchemaName), result: ok(stList(0, sSchemaVer))},
	"drop_schema_version":         {args: aReq(sSchemaVerDsc)},
	"get_schemas_by_cols":         {result: rOf(sSchemasByCol)},
	"map_schema_version_to_serde": {args: aReq(sSchemaVerReq)},
	"set_schema_version_state":    {args: aReq(sSchemaVerReq)},
	"add_serde":                   {why: whyNone},
	"get_serde":                   {why: whyNone},

	// ---- runtime stats, replication, scheduled queries, procedures, packages ----
	"add_runtime_stats":           {why: whyNone},
	"get_runtime_stats":           {why: whyNone},
	"add_replication_metrics":     {why: whySQL},
	"get_replication_metrics":     {why: whySQL},
	"scheduled_query_poll":        {why: whySQL},
	"scheduled_query_maintenance": {why: whySQL},
	"scheduled_query_progress":    {why: whySQL},
	"get_scheduled_query":         {why: whySQL},
	"create_stored_procedure":     {args: aReq(sDB2)},
	"get_stored_procedure":        {args: aReq(sDB2), result: rOf(sDB2)},
	"drop_stored_procedure":       {args: aReq(sDB2)},
	"get_all_stored_procedures":   {args: aReq(sDB2)},
	"find_package":                {args: aReq(sDB2), result: rOf(sDB2)},
	"add_package":                 {args: aReq(sDB2)},
	"get_all_packages":            {args: aReq(sDB2)},
	"drop_package":                {args: aReq(sDB2)},
	"set_properties":              {why: whyConfig},
	"get_properties":              {why: whyConfig},

	// ---- identity, tokens, configuration, fb303 ----
	"set_ugi": {why: whyRoles}, "setMetaConf": {why: whyConfig}, "getMetaConf": {why: whyConfig},
	"get_config_value": {why: whyConfig}, "get_metastore_db_uuid": {why: whyConfig},
	"get_delegation_token": {why: whyRoles}, "renew_delegation_token": {why: whyRoles}, "cancel_delegation_token": {why: whyRoles},
	"add_token": {why: whyRoles}, "get_token": {why: whyRoles}, "remove_token": {why: whyRoles},
	"get_all_token_identifiers": {why: whyRoles}, "add_master_key": {why: whyRoles}, "update_master_key": {why: whyRoles},
	"remove_master_key": {why: whyRoles}, "get_master_keys": {why: whyRoles},
	"getName": {why: whyConfig}, "getVersion": {why: whyConfig}, "getStatus": {why: whyConfig},
	"getStatusDetails": {why: whyConfig}, "getCounters": {why: whyConfig}, "getCounter": {why: whyConfig},
	"setOption": {why: whyConfig}, "getOption": {why: whyConfig}, "getOptions": {why: whyConfig},
	"getCpuProfile": {why: whyConfig}, "aliveSince": {why: whyConfig}, "reinitialize": {why: whyConfig},
	"shutdown": {why: whyConfig},
}
