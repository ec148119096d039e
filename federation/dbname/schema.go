package dbname

import "github.com/hmsproxy/hmsproxy/thrift/wire"

// The shapes of the Hive Metastore structs that carry database names,
// from the Thrift IDL of Hive 2.3, 3.1 and 4.0 (field ids are stable
// across versions but where a comment says otherwise). Only the fields
// that hold a name, or lead to a struct that does, are listed; every other
// field is copied as it came.

// kind says what a field's value is.
type kind uint8

const (
	kDB          kind = iota + 1 // a database name, maybe "@cat#db"
	kQualified                   // "db.table", or a table's write-id list "db.table:hwm:..."
	kTxnWriteIDs                 // ValidTxnWriteIdList "txnid$db.t:...$db2.t2:..."
	kView                        // HiveQL text: db qualifiers of table references (view.go)
	kStruct                      // a struct, described by sub
)

// field is one field of a struct (or of an args/result struct).
type field struct {
	id      int16
	k       kind
	sub     *schema
	list    bool // a list or set of k
	mapKeys bool // a map whose string keys are of kind k; values copied
}

// schema is a struct type: the fields that matter, or, when variant is
// set, a function choosing the schema from the struct's bytes (a struct
// whose field ids moved between versions).
type schema struct {
	name    string
	fields  []field
	variant func(body []byte, lim wire.Limits) *schema
}

func (s *schema) field(id int16) *field {
	for i := range s.fields {
		if s.fields[i].id == id {
			return &s.fields[i]
		}
	}
	return nil
}

// Field constructors, to keep the tables below one line per struct.
func db(id int16) field                   { return field{id: id, k: kDB} }
func dbs(id int16) field                  { return field{id: id, k: kDB, list: true} }
func qual(id int16) field                 { return field{id: id, k: kQualified} }
func quals(id int16) field                { return field{id: id, k: kQualified, list: true} }
func view(id int16) field                 { return field{id: id, k: kView} }
func st(id int16, s *schema) field        { return field{id: id, k: kStruct, sub: s} }
func stList(id int16, s *schema) field    { return field{id: id, k: kStruct, sub: s, list: true} }
func sch(name string, f ...field) *schema { return &schema{name: name, fields: f} }

// Structs that carry names. Request structs with a validWriteIdList
// carry the table's "db.table:..." write-id list there (qual).
var (
	sColStatsDesc = sch("ColumnStatisticsDesc", db(2))
	sColStats     = sch("ColumnStatistics", st(1, sColStatsDesc))
	sTable        = &schema{name: "Table"} // recursive through CreationMetadata: filled in init
	sSourceTable  = sch("SourceTable", st(1, sTable))
	sCreationMeta = sch("CreationMetadata", db(2), quals(4), field{id: 5, k: kTxnWriteIDs}, stList(7, sSourceTable))
	sPartition    = sch("Partition", db(2), st(12, sColStats))
	sPartList     = sch("PartitionListComposingSpec", stList(1, sPartition))
	sPartSpec     = sch("PartitionSpec", db(1), st(5, sPartList))
	sDatabase     = sch("Database", db(1))
	sFunction     = sch("Function", db(2))
	sTableMeta    = sch("TableMeta", db(1))
	sIndex        = sch("Index", db(3)) // 2.3 only

	sPK       = sch("SQLPrimaryKey", db(1))
	sFK       = sch("SQLForeignKey", db(1), db(4)) // pktable_db, fktable_db
	sUnique   = sch("SQLUniqueConstraint", db(2))
	sNotNull  = sch("SQLNotNullConstraint", db(2))
	sDefault  = sch("SQLDefaultConstraint", db(2))
	sCheck    = sch("SQLCheckConstraint", db(2))
	sAllConst = sch("SQLAllTableConstraints", stList(1, sPK), stList(2, sFK), stList(3, sUnique), stList(4, sNotNull), stList(5, sDefault), stList(6, sCheck))

	sObjRef   = sch("HiveObjectRef", db(2))
	sObjPriv  = sch("HiveObjectPrivilege", st(1, sObjRef))
	sPrivBag  = sch("PrivilegeBag", stList(1, sObjPriv))
	sGrantReq = sch("GrantRevokePrivilegeRequest", st(2, sPrivBag))

	sNotifEvent = sch("NotificationEvent", db(4))
	sNotifResp  = sch("NotificationEventResponse", stList(1, sNotifEvent))
	sNotifCount = sch("NotificationEventsCountRequest", db(2))
	sFireEvent  = sch("FireEventRequest", db(3))
	sWriteNotif = sch("WriteNotificationLogRequest", db(3))
	sWriteBatch = sch("WriteNotificationLogBatchRequest", db(2), stList(4, sWriteNotif))

	sLockComp      = sch("LockComponent", db(3))
	sLockReq       = sch("LockRequest", stList(1, sLockComp))
	sShowLocksReq  = sch("ShowLocksRequest", db(1))
	sShowLocksElem = sch("ShowLocksResponseElement", db(2))
	sShowLocksResp = sch("ShowLocksResponse", stList(1, sShowLocksElem))
	sCompactReq    = sch("CompactionRequest", db(1))
	sCompactInfo   = sch("CompactionInfoStruct", db(2))
	sOptCompact    = sch("OptionalCompactionInfoStruct", st(1, sCompactInfo))
	sShowCompReq   = sch("ShowCompactRequest", db(3))
	sShowCompElem  = sch("ShowCompactResponseElement", db(1))
	sShowCompResp  = sch("ShowCompactResponse", stList(1, sShowCompElem))
	sCompMetrics   = sch("CompactionMetricsDataStruct", db(1))
	sLatestCompRsp = sch("GetLatestCommittedCompactionInfoResponse", stList(1, sCompactInfo))
	sWriteEvent    = sch("WriteEventInfo", db(2))
	sReplLastID    = sch("ReplLastIdInfo", db(1))
	sCommitTxn     = sch("CommitTxnRequest", stList(3, sWriteEvent), st(4, sReplLastID))
	sValidWIDsReq  = sch("GetValidWriteIdsRequest", quals(1))
	sTableWIDs     = sch("TableValidWriteIds", qual(1))
	sValidWIDsResp = sch("GetValidWriteIdsResponse", stList(1, sTableWIDs))
	sReplTblWID    = sch("ReplTblWriteIdStateRequest", qual(1), db(4))
	// AddDynamicPartitions: 2.3 has dbname at 2 (writeid came in at 2 in
	// 3.0 and pushed dbname to 3); the wire type of field 2 tells which.
	sDynParts23 = sch("AddDynamicPartitions(2.3)", db(2))
	sDynParts30 = sch("AddDynamicPartitions", db(3))
	sDynParts   = &schema{name: "AddDynamicPartitions", variant: func(b []byte, lim wire.Limits) *schema {
		if fieldType(b, 2, lim) == wire.TString {
			return sDynParts23
		}
		return sDynParts30
	}}

	sISchema      = sch("ISchema", db(4))
	sISchemaName  = sch("ISchemaName", db(2))
	sAlterISchema = sch("AlterISchemaRequest", st(1, sISchemaName), st(3, sISchema))
	sSchemaVer    = sch("SchemaVersion", st(1, sISchemaName))
	sSchemaVerDsc = sch("SchemaVersionDescriptor", st(1, sISchemaName))
	sSchemasByCol = sch("FindSchemasByColsResp", stList(1, sSchemaVerDsc))
	sSchemaVerReq = sch("MapSchemaVersionToSerdeRequest/SetSchemaVersionStateRequest", st(1, sSchemaVerDsc))

	// Requests and responses of the *_req methods.
	sDB1         = sch("request with dbName 1", db(1))                              // GetDatabaseRequest, DropDatabaseRequest, CreateDatabaseRequest, GetTablesRequest, DropConstraintRequest, DropPartitionsRequest, CacheFileMetadataRequest, CompactionMetricsDataRequest, GetLatestCommittedCompactionInfoRequest, Allocate/MaxAllocated/SeedTableWriteIdsRequest, GetFunctionsRequest
	sDB2         = sch("request with dbName 2", db(2))                              // GetTablesExtRequest, DropTableRequest, GetPartitionsByFilterRequest, AppendPartitionsRequest, DropPartitionRequest, StoredProcedureRequest, ListStoredProcedureRequest, StoredProcedure, package requests, Package, GetAllWriteEventInfoRequest
	sDB2WID5     = sch("request with dbName 2, validWriteIdList 5", db(2), qual(5)) // GetFieldsRequest, GetSchemaRequest, GetPartitionRequest, PartitionsRequest
	sDB1WID      = func(w int16) *schema { return sch("request with dbName 1", db(1), qual(w)) }
	sDB2WID      = func(w int16) *schema { return sch("request with dbName 2", db(2), qual(w)) }
	sAlterDBReq  = sch("AlterDatabaseRequest", db(1), st(2, sDatabase))
	sTableResult = sch("GetTableResult", st(1, sTable))
	sTablesRes   = sch("GetTablesResult", stList(1, sTable))
	sPKReq       = sch("PrimaryKeysRequest", db(1), qual(4))
	sFKReq       = sch("ForeignKeysRequest", db(1), db(3), qual(6))
	sPKResp      = sch("PrimaryKeysResponse", stList(1, sPK))
	sFKResp      = sch("ForeignKeysResponse", stList(1, sFK))
	sUniqueResp  = sch("UniqueConstraintsResponse", stList(1, sUnique))
	sNotNullResp = sch("NotNullConstraintsResponse", stList(1, sNotNull))
	sDefaultResp = sch("DefaultConstraintsResponse", stList(1, sDefault))
	sCheckResp   = sch("CheckConstraintsResponse", stList(1, sCheck))
	sAllConstRsp = sch("AllTableConstraintsResponse", st(1, sAllConst))
	sPartResp    = sch("GetPartitionResponse", st(1, sPartition))
	sPartsResp   = sch("PartitionsResponse and its kin", stList(1, sPartition)) // PartitionsResponse, GetPartitionsByNamesResult, GetPartitionsPsWithAuthResponse, PartitionsByExprResult, AddPartitionsResult, DropPartitionsResult
	sSpecsResp   = sch("GetPartitionsResponse/PartitionsSpecByExprResult", stList(1, sPartSpec))
	sCreateTable = sch("CreateTableRequest", st(1, sTable), stList(3, sPK), stList(4, sFK), stList(5, sUnique), stList(6, sNotNull), stList(7, sDefault), stList(8, sCheck))
	sAlterTable  = sch("AlterTableRequest", db(2), st(4, sTable), qual(7))
	sAddParts    = sch("AddPartitionsRequest", db(1), stList(3, sPartition), qual(7))
	sAlterParts  = sch("AlterPartitionsRequest", db(2), stList(4, sPartition), qual(7))
	sRenamePart  = sch("RenamePartitionRequest", db(2), st(5, sPartition), qual(6))
	sSetStats    = sch("SetPartitionsStatsRequest", stList(1, sColStats), qual(4))
	sAddPK       = sch("AddPrimaryKeyRequest", stList(1, sPK))
	sAddFK       = sch("AddForeignKeyRequest", stList(1, sFK))
	sAddUnique   = sch("AddUniqueConstraintRequest", stList(1, sUnique))
	sAddNotNull  = sch("AddNotNullConstraintRequest", stList(1, sNotNull))
	sAddDefault  = sch("AddDefaultConstraintRequest", stList(1, sDefault))
	sAddCheck    = sch("AddCheckConstraintRequest", stList(1, sCheck))
	sAllFuncs    = sch("GetAllFunctionsResponse", stList(1, sFunction))
	// GetFunctionsResponse (4.1-dev): 2 the Function objects when
	// returnNames is false. The id is unverified (no 4.1 IDL on hand); a
	// field of another shape there is copied unchanged.
	sFuncsResp = sch("GetFunctionsResponse", stList(2, sFunction))
)

func init() {
	sTable.fields = []field{db(2), view(10), view(11), st(16, sCreationMeta), st(21, sColStats)}
}

// fieldType returns the wire type of field id in the struct at the start
// of b, decoded under lim, or wire.TStop when it is absent or b is
// malformed.
func fieldType(b []byte, id int16, lim wire.Limits) byte {
	var d wire.Decoder
	d.ResetLimits(b, lim)
	found := wire.TStop
	for {
		typ, fid := d.FieldBegin()
		if typ == wire.TStop || d.Err() != nil {
			return found
		}
		if fid == id {
			found = typ
		}
		d.Skip(typ)
	}
}
