package hms

// How long a name the metastore can hold. The schema scripts of Hive
// 2.3.0, 3.1.0 and 4.3.0 (hive-schema-*.derby.sql; the Postgres script of
// 3.1.0 agrees) declare the same widths, in characters:
//
//   - a catalog's name, CTLGS.NAME, and a table's, TBLS.TBL_NAME, are
//     VARCHAR(256);
//   - a database's name, DBS.NAME, is VARCHAR(128);
//   - a partition's name, PARTITIONS.PART_NAME, is VARCHAR(767), and so
//     is a column's, COLUMNS_V2.COLUMN_NAME and the statistics tables'
//     COLUMN_NAME;
//   - a user, group or role appears as the owner of a table, TBLS.OWNER,
//     VARCHAR(767) (with OWNER_TYPE saying which), and in narrower
//     columns elsewhere: DBS.OWNER_NAME, ROLES.ROLE_NAME and every
//     privilege table's PRINCIPAL_NAME and GRANTOR are VARCHAR(128).
//
// The metastore creates objects only under names made of ASCII letters,
// digits and a few punctuation marks (MetaStoreUtils.validateName), so
// for a name that can exist characters and bytes are the same count. A
// longer name names nothing the metastore holds: its answer is always
// "not found", or an error.
const (
	MaxCatalogName   = 256
	MaxDatabaseName  = 128
	MaxTableName     = 256
	MaxPartitionName = 767
	MaxColumnName    = 767
	// MaxPrincipalName is the widest column a user or group name is
	// stored in (TBLS.OWNER): a longer one can own, be granted or be
	// checked against nothing.
	MaxPrincipalName = 767
)
