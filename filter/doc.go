// Package filter parses and evaluates Hive Metastore partition filters, and matches allow/deny patterns of database and table names.
//
// # Name patterns
//
// [Compile] turns the operator's allow and deny lists into [Patterns]; the
// proxy asks [Patterns.Allowed] on every cacheable request whether the object
// may be cached. Matching is case-insensitive and does not allocate.
//
//	"sales"          database sales: its database-level objects and all its tables
//	"sales.*"        the same
//	"sales.orders"   one table (database-level objects of sales are not matched)
//	"*.tmp_*"        tables whose names start with tmp_, in every database
//	"re:^tmp_.*$"    a regular expression over "db" (database-level objects)
//	                 or "db.table" (table-level objects)
//
// # Partition filters
//
// [Parse] reads the filter string of get_partitions_by_filter and its
// relatives into an [Expr]. The grammar is the union of what Hive Metastore
// 2.3/3.1 (Filter.g) and 4.x (PartitionFilter.g4) accept, plus unary NOT and
// "key IN (...)" without parentheses round the key:
//
//	filter     := or
//	or         := and { OR and }
//	and        := unary { AND unary }
//	unary      := NOT unary | primary
//	primary    := '(' or ')'
//	            | key op literal | literal op key
//	            | key [NOT] BETWEEN literal AND literal
//	            | '(' key ')' [NOT] IN '(' literal { ',' literal } ')'
//	            | key [NOT] IN '(' literal { ',' literal } ')'
//	            | '(' STRUCT '(' key { ',' key } ')' ')' [NOT] IN
//	              '(' [CONST] STRUCT '(' literals ')' { ',' [CONST] STRUCT '(' literals ')' } ')'
//	op         := = | == | != | <> | < | <= | > | >= | LIKE
//	key        := identifier | `back-quoted identifier`
//	literal    := 'string' | "string" | [-]digits
//	            | yyyy-mm-dd | yyyy-mm-dd hh:mm:ss | DATE 'yyyy-mm-dd' | TIMESTAMP 'yyyy-mm-dd hh:mm:ss'
//
// Keywords are case-insensitive and reserved (a key named "date" must be
// back-quoted). As in the metastore, string literals keep their backslashes:
// only the surrounding quotes are removed.
//
// [Expr.Eval] decides a filter for one partition, and [Expr.Exact] says
// whether that decision is certain to equal the metastore's own. A cache
// evaluates a filter itself only when Exact is true and asks the metastore
// otherwise. Exact is true when every comparison is =, !=, <>, IN or NOT IN of
// a string (or varchar) key against string literals, or =, !=, <>, IN, NOT
// IN, <, <=, >, >=, BETWEEN or NOT BETWEEN of an integral key (tinyint,
// smallint, int, bigint) against integer literals, combined with AND, OR and
// parentheses, and the filter is written in syntax that every metastore
// version accepts (so no ==, unary NOT, bare "key IN", back-quoted keys,
// backslashes, adjacent string literals or "- 5"). Everything else (LIKE,
// ranges and BETWEEN on string keys, date, timestamp and decimal keys, mixed
// types) is evaluated on a best-effort basis but is not Exact.
//
// Integral comparisons are numeric, as in the metastore's direct SQL, which
// casts the stored value to decimal(21,0): "n >= 10" matches 10 and not 9,
// a literal beyond the key type's own range (tinyint n > 1000) is compared
// as the number it is, "n BETWEEN 10 AND 2" matches nothing and "n NOT
// BETWEEN lo AND hi" is "n < lo OR n > hi". A literal that does not fit
// int64 is a syntax error here, as the metastore's Long.parseLong refuses
// it. A range over a string key stays inexact because its order is the
// collation of the metastore's backing database (Derby, MySQL's
// case-insensitive default, Postgres), which a cache cannot know.
//
// [Expr.Bind] ties a filter to one table's partition keys, in order; the
// [Bound] filter then decides a partition from its values by position, as
// Eval does from a map, at a fraction of the cost: a cache evaluating one
// filter over thousands of partitions binds it once.
//
// Comparisons follow SQL's three-valued logic: against an integral key the
// default partition (__HIVE_DEFAULT_PARTITION__) is neither equal nor unequal
// to any number, so it matches neither "hr = 5" nor "hr != 5", as in the
// metastore's direct SQL.
//
// # Partition names
//
// [PartitionValues] and [MakePartName] convert between a partition name such
// as "ds=2024-01-01/hr=07" and its keys and values, with the metastore's %XX
// escaping of '/', '=', ':', '%' and the other characters a path cannot hold.
package filter
