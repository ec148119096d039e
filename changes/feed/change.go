// Package feed turns the metastore writes a proxy node passed and the
// notification log's events into the change feed's records, and renders
// them as the feed's messages: the native versioned JSON schema, or
// Apache Atlas v2 hook notifications.
//
// A record has a stable key (the group, then "w" and the node's write
// sequence, or "e" and the event id), so consumers drop duplicates, and
// a partition key, the table's "db.table" (or the database's name), so
// the changes of one table stay in order on one partition. It also has
// claim keys: what the notification log will show of the write, so that
// the leader, which publishes the log's events that no node published,
// can tell them apart (see the claims in package kafka).
package feed

import (
	"strings"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

// Schema and Version name the native format; Version grows when a field
// changes meaning (new fields may appear within a version).
const (
	Schema  = "hmsproxy.change"
	Version = 1
)

// Change is one normalised change: the native message.
type Change struct {
	Schema  string `json:"schema"`
	Version int    `json:"version"`
	// Key is the record's key: "<group>/w/<node>/<seq>" for a write seen
	// by a node, "<group>/e/<event id>" for a notification-log event.
	Key   string `json:"key"`
	Group string `json:"group"`
	// Source is "proxy" (a write through a node) or "eventlog".
	Source  string `json:"source"`
	Node    string `json:"node,omitempty"`
	EventID int64  `json:"event_id,omitempty"`
	// Type is the notification-log event type the change is, or would
	// be (CREATE_TABLE, ALTER_PARTITION, ...).
	Type   string    `json:"type"`
	Method string    `json:"method,omitempty"` // the Thrift call, source "proxy"
	User   string    `json:"user,omitempty"`   // who, where known
	Time   time.Time `json:"time"`
	Cat    string    `json:"cat,omitempty"`
	DB     string    `json:"db,omitempty"`
	Table  string    `json:"table,omitempty"`
	// NewDB and NewTable name a renamed table after the rename.
	NewDB    string `json:"new_db,omitempty"`
	NewTable string `json:"new_table,omitempty"`
	// Partitions lists the values of the partitions changed, where known.
	Partitions [][]string `json:"partitions,omitempty"`
	// Before and After are the objects before and after the change,
	// where known.
	Before *Objects `json:"before,omitempty"`
	After  *Objects `json:"after,omitempty"`
}

// Objects are metastore objects as a change knows them.
type Objects struct {
	Database   *Database   `json:"database,omitempty"`
	Table      *Table      `json:"table,omitempty"`
	Partitions []Partition `json:"partitions,omitempty"`
}

// Database is a metastore database.
type Database struct {
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Location    string            `json:"location,omitempty"`
	Owner       string            `json:"owner,omitempty"`
	Parameters  map[string]string `json:"parameters,omitempty"`
}

// Table is a metastore table.
type Table struct {
	DB            string            `json:"db"`
	Name          string            `json:"name"`
	Owner         string            `json:"owner,omitempty"`
	Type          string            `json:"table_type,omitempty"`
	CreateTime    int64             `json:"create_time,omitempty"`
	Storage       *Storage          `json:"storage,omitempty"`
	PartitionKeys []Column          `json:"partition_keys,omitempty"`
	Parameters    map[string]string `json:"parameters,omitempty"`
	ViewText      string            `json:"view_text,omitempty"`
}

// Storage is a storage descriptor.
type Storage struct {
	Location     string            `json:"location,omitempty"`
	InputFormat  string            `json:"input_format,omitempty"`
	OutputFormat string            `json:"output_format,omitempty"`
	Compressed   bool              `json:"compressed,omitempty"`
	NumBuckets   int64             `json:"num_buckets,omitempty"`
	SerDe        string            `json:"serde,omitempty"`
	SerDeParams  map[string]string `json:"serde_parameters,omitempty"`
	BucketCols   []string          `json:"bucket_cols,omitempty"`
	Columns      []Column          `json:"columns,omitempty"`
	Parameters   map[string]string `json:"parameters,omitempty"`
}

// Column is a column or a partition key.
type Column struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Comment string `json:"comment,omitempty"`
}

// Partition is a metastore partition.
type Partition struct {
	Values     []string          `json:"values"`
	CreateTime int64             `json:"create_time,omitempty"`
	Storage    *Storage          `json:"storage,omitempty"`
	Parameters map[string]string `json:"parameters,omitempty"`
}

// PartitionKey is the Kafka partition key: the table's name before the
// change, or the database's for a database change. A rename's later
// changes go by the new name (and may land on another partition).
func (c *Change) PartitionKey() string {
	if c.Table == "" {
		return c.DB
	}
	return c.DB + "." + c.Table
}

// ClaimKeys are what the notification log shows of the change: one key
// per event it is expected to write, "TYPE|db|table" and, for partition
// events, one per partition, "TYPE|db|table|v1\x00v2". The log names a
// renamed table by its new name (the listener takes the table after).
func (c *Change) ClaimKeys() []string {
	db, tbl := c.DB, c.Table
	if c.NewTable != "" {
		db, tbl = c.NewDB, c.NewTable
	}
	base := c.Type + "|" + db + "|" + tbl
	if !strings.HasSuffix(c.Type, "_PARTITION") {
		return []string{base}
	}
	out := make([]string, 0, len(c.Partitions))
	for _, vals := range c.Partitions {
		out = append(out, base+"|"+strings.Join(vals, "\x00"))
	}
	return out
}

func fromColumns(cs []tstruct) []Column {
	var out []Column
	for _, c := range cs {
		out = append(out, Column{Name: strings.ToLower(c.str(1)), Type: c.str(2), Comment: c.str(3)})
	}
	return out
}

func fromStorage(sd tstruct) *Storage {
	if sd == nil {
		return nil
	}
	s := &Storage{Location: sd.str(2), InputFormat: sd.str(3), OutputFormat: sd.str(4), NumBuckets: sd.i64(6),
		BucketCols: sd.strs(8), Columns: fromColumns(sd.recs(1)), Parameters: sd.strMap(10)}
	s.Compressed, _ = sd[5].(bool)
	if serde := sd.rec(7); serde != nil {
		s.SerDe, s.SerDeParams = serde.str(2), serde.strMap(3)
	}
	return s
}

func fromTable(t tstruct) *Table {
	if t == nil || t.str(1) == "" {
		return nil
	}
	return &Table{DB: norm(t.str(2)), Name: norm(t.str(1)), Owner: t.str(3), Type: t.str(12), CreateTime: t.i64(4),
		Storage: fromStorage(t.rec(7)), PartitionKeys: fromColumns(t.recs(8)), Parameters: t.strMap(9),
		ViewText: t.str(10)}
}

func fromPartition(p tstruct) Partition {
	return Partition{Values: p.strs(1), CreateTime: p.i64(4), Storage: fromStorage(p.rec(6)), Parameters: p.strMap(7)}
}

func fromDatabase(d tstruct) *Database {
	if d == nil || d.str(1) == "" {
		return nil
	}
	return &Database{Name: norm(d.str(1)), Description: d.str(2), Location: d.str(3), Parameters: d.strMap(4), Owner: d.str(6)}
}

// norm normalises a name as the metastore does.
func norm(s string) string { return hms.NormalizeString(s) }
