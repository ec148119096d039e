package hms

import (
	"slices"
	"strings"
)

// Version is a metastore's major version, as far as its answers differ
// by it. VersionUnknown stands for every version at once: whoever acts
// on a version-specific rule then takes the rules of all of them.
type Version uint8

const (
	VersionUnknown Version = iota
	Version2               // 2.x: no catalogs
	Version3               // 3.x
	Version4               // 4.x
)

func (v Version) String() string {
	switch v {
	case Version2:
		return "2"
	case Version3:
		return "3"
	case Version4:
		return "4"
	}
	return "unknown"
}

// Is reports whether rules for version w apply to a metastore of version
// v: v is w, or v is unknown.
func (v Version) Is(w Version) bool { return v == w || v == VersionUnknown }

// DetectVersion tells a metastore's version from two answers:
// get_catalogs, which 2.x does not know (catalogs, false: it answered
// UNKNOWN_METHOD), and fb303 getVersion (2.3.9 and 3.1.3 both say
// "3.0"; 4.0.1 says "4.0.1"). A 3.x or 4.x metastore knows get_catalogs.
func DetectVersion(catalogs bool, getVersion string) Version {
	switch {
	case !catalogs:
		return Version2
	case strings.HasPrefix(getVersion, "4."):
		return Version4
	case strings.HasPrefix(getVersion, "3."):
		return Version3
	}
	return VersionUnknown
}

// Writes the notification log does not record when they are made
// straight to the metastore, by version, as measured on the test bed
// (e2e TestEventLogCoverage checks this table against the real
// metastores). A cache learns of them only when its entries expire, so
// the kinds they change are bounded by cache.ttl_without_eventlog there.
// 2.3 and 3.1 run DbNotificationListener; the test bed's 4.0 runs a
// listener of its own (no DbNotificationListener for 4.0 is on Maven
// Central) that records databases, tables, partitions and functions: a
// 4.0 metastore with DbNotificationListener records statistics and
// constraints too, which cache.unlogged_writes can say. None of the
// three listeners records alter_function (no version has an event for
// it) or column statistics (set_aggr_stats_for included); 2.3's records
// no alter_database and no constraints, 3.1's no default or check
// constraints (their event types came with 4.0).
var unloggedWrites = map[Version][]string{
	Version2: {"alter_function", "alter_database", "add_primary_key", "add_foreign_key", "drop_constraint",
		"update_table_column_statistics", "update_partition_column_statistics",
		"delete_table_column_statistics", "delete_partition_column_statistics", "set_aggr_stats_for"},
	Version3: {"alter_function", "add_default_constraint", "add_check_constraint",
		"update_table_column_statistics", "update_partition_column_statistics",
		"delete_table_column_statistics", "delete_partition_column_statistics", "set_aggr_stats_for"},
	Version4: {"alter_function",
		"add_primary_key", "add_foreign_key", "add_unique_constraint", "add_not_null_constraint",
		"add_default_constraint", "add_check_constraint", "drop_constraint",
		"update_table_column_statistics", "update_partition_column_statistics",
		"update_table_column_statistics_req", "update_partition_column_statistics_req",
		"delete_table_column_statistics", "delete_partition_column_statistics", "set_aggr_stats_for"},
}

// UnloggedWrites lists the writes the notification log of a metastore of
// version v does not record (every version's for VersionUnknown).
func UnloggedWrites(v Version) []string {
	if v != VersionUnknown {
		return unloggedWrites[v]
	}
	var all []string
	for _, w := range []Version{Version2, Version3, Version4} {
		for _, m := range unloggedWrites[w] {
			if !slices.Contains(all, m) {
				all = append(all, m)
			}
		}
	}
	return all
}

// statsWriteKinds are what a column-statistics write changes: the
// statistics, and the COLUMN_STATS_ACCURATE parameter of the table or of
// the partitions it names (so every read that returns them).
var statsWriteKinds = []Kind{KindStatistics, KindTable, KindPartition, KindPartitions, KindPartitionFilter}

// ChangedKinds lists the cache kinds whose answers a write may change.
func ChangedKinds(method string) []Kind {
	m := byName[method]
	switch {
	case m == nil || m.Class != Write:
		return nil
	case strings.Contains(method, "statistics") || method == "set_aggr_stats_for":
		return statsWriteKinds
	case strings.Contains(method, "constraint") || strings.HasSuffix(method, "_key"):
		return []Kind{KindConstraints}
	}
	var out []Kind
	add := func(ks ...Kind) {
		for _, k := range ks {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	for _, e := range m.Effects {
		switch e.Scope {
		case ScopeFunction:
			add(KindFunction)
		case ScopeDatabase:
			add(KindDatabase, KindDatabaseNames, KindTableNames, KindTable, KindPartition, KindPartitions,
				KindPartitionNames, KindPartitionFilter, KindStatistics, KindFunction, KindConstraints)
		case ScopeTable:
			add(KindTable, KindTableNames, KindPartition, KindPartitions, KindPartitionNames,
				KindPartitionFilter, KindStatistics, KindConstraints)
		case ScopePartition:
			add(KindPartition, KindPartitions, KindPartitionNames, KindPartitionFilter, KindStatistics)
		default:
			for k := KindNone + 1; k < KindOther+1; k++ {
				add(k)
			}
		}
	}
	return out
}
