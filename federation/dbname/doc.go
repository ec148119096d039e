// Package dbname rewrites database names inside HMS Thrift requests and replies, for federation's prefixed mode.
//
// # What it does
//
// Federation in prefixed mode shows the databases of a federated metastore
// under a per-group prefix ("lake_" + "sales"). A request names the
// database as the client sees it; the metastore must see its own name. A
// reply names it as the metastore knows it; the client must see the
// prefixed name. Args and Reply do both directions on the raw Thrift
// bytes, knowing, per method, which fields of which structs hold a
// database name (schema.go, methods.go, from the Hive 2.3, 3.1 and 4.0
// IDL); every other byte is forwarded as it came, so a rewrite with an
// identity function gives back the very bytes it was given, and a name
// that does not change costs no copy.
//
// The callback decides the mapping: Args' fn strips a prefix or resolves
// an alias and may refuse a name (the call is then refused); Reply's fn
// adds the prefix. A name may carry a catalog as 3.x/4.0 clients send it
// ("@hive#lake_sales"): the catalog part is kept and fn sees "lake_sales".
// "@cat#" (every database of the catalog) and "@cat#!" (the empty name)
// are not names and are left alone.
//
// # What it rewrites
//
// Every method of the hms table is classified in methods.go: the fields
// of its args and of its success value that hold database names, through
// nested request structs, lists of Tables and Partitions, PartitionSpecs,
// column statistics, constraints (both databases of a foreign key), lock
// and compaction structs, notification events, "db.table" strings
// (write-id lists, fullTableNames, CreationMetadata.tablesUsed) and view
// text (View). A method with no name on either side says why.
//
// # What it leaves alone, and why
//
//   - Declared exceptions and TApplicationExceptions: their messages are
//     text ("sales.orders table not found"), not names.
//   - NotificationEvent.message and WriteEventInfo.tableObj: JSON (gzip-
//     compressed in Hive 4) that only event-log consumers parse; the
//     event's dbName field is rewritten.
//   - Database patterns (get_databases, get_table_meta): not names; the
//     federation router answers them group by group.
//   - Scheduled-query SQL, replication policies and metrics, Table and
//     Partition parameters: nothing the metastore resolves as a database.
//   - In view text, a table named anywhere but after FROM, JOIN or a comma
//     of a FROM list, and unqualified function calls (see View).
//   - A field whose wire type is not what the IDL says (a list where a
//     string belongs) is forwarded unchanged: the metastore would not read
//     it as a name either.
package dbname
