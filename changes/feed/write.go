package feed

import (
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Write is a write a node passed to the metastore, which accepted it.
type Write struct {
	Group, Node string
	Seq         uint64 // the node's write sequence, for the key
	Method      string
	Args        []byte // the request's arguments struct, binary protocol
	User        string
	Cat         string // the default catalog
	At          time.Time
}

// kind is how a write's arguments give its change.
type kind struct {
	typ   string
	parse func(a tstruct, c *Change)
}

// writes maps the writes the feed describes (by method name, variants
// with environment context and cascade included) to their change. The
// others are left to the notification log: the leader publishes what it
// logs of them. A write that drops partitions by expression is left to
// it too, since only the log knows which partitions went.
var writes = map[string]kind{
	"create_database": {"CREATE_DATABASE", func(a tstruct, c *Change) {
		c.After = &Objects{Database: fromDatabase(a.rec(1))}
		if c.After.Database != nil {
			c.DB = c.After.Database.Name
		}
	}},
	"drop_database": {"DROP_DATABASE", func(a tstruct, c *Change) { c.DB = c.dbName(a.str(1)) }},
	"alter_database": {"ALTER_DATABASE", func(a tstruct, c *Change) {
		c.DB = c.dbName(a.str(1))
		c.After = &Objects{Database: fromDatabase(a.rec(2))}
	}},
	"create_table":                          {"CREATE_TABLE", createTable(func(a tstruct) tstruct { return a.rec(1) })},
	"create_table_with_environment_context": {"CREATE_TABLE", createTable(func(a tstruct) tstruct { return a.rec(1) })},
	"create_table_with_constraints":         {"CREATE_TABLE", createTable(func(a tstruct) tstruct { return a.rec(1) })},
	"create_table_req":                      {"CREATE_TABLE", createTable(func(a tstruct) tstruct { return a.rec(1).rec(1) })},
	"drop_table":                            {"DROP_TABLE", names(1, 2)},
	"drop_table_with_environment_context":   {"DROP_TABLE", names(1, 2)},
	"alter_table":                           {"ALTER_TABLE", alterTable(1, 2, 3)},
	"alter_table_with_environment_context":  {"ALTER_TABLE", alterTable(1, 2, 3)},
	"alter_table_with_cascade":              {"ALTER_TABLE", alterTable(1, 2, 3)},
	"alter_table_req": {"ALTER_TABLE", func(a tstruct, c *Change) {
		alterTable(2, 3, 4)(a.rec(1), c)
	}},
	"add_partition":                          {"ADD_PARTITION", addPartitions(func(a tstruct) []tstruct { return []tstruct{a.rec(1)} })},
	"add_partition_with_environment_context": {"ADD_PARTITION", addPartitions(func(a tstruct) []tstruct { return []tstruct{a.rec(1)} })},
	"add_partitions":                         {"ADD_PARTITION", addPartitions(func(a tstruct) []tstruct { return a.recs(1) })},
	"add_partitions_req": {"ADD_PARTITION", func(a tstruct, c *Change) {
		r := a.rec(1)
		c.DB, c.Table = norm(r.str(1)), norm(r.str(2))
		addPartitions(func(tstruct) []tstruct { return r.recs(3) })(a, c)
	}},
	"append_partition":                                  {"ADD_PARTITION", byValues(3)},
	"append_partition_with_environment_context":         {"ADD_PARTITION", byValues(3)},
	"append_partition_by_name":                          {"ADD_PARTITION", byName(3)},
	"append_partition_by_name_with_environment_context": {"ADD_PARTITION", byName(3)},
	"drop_partition":                                    {"DROP_PARTITION", byValues(3)},
	"drop_partition_with_environment_context":           {"DROP_PARTITION", byValues(3)},
	"drop_partition_by_name":                            {"DROP_PARTITION", byName(3)},
	"drop_partition_by_name_with_environment_context":   {"DROP_PARTITION", byName(3)},
	"drop_partitions_req": {"DROP_PARTITION", func(a tstruct, c *Change) {
		r := a.rec(1)
		c.DB, c.Table = norm(r.str(1)), norm(r.str(2))
		for _, n := range r.rec(3).strs(1) {
			c.Partitions = append(c.Partitions, ValuesOf(n))
		}
	}},
	"alter_partition":                           {"ALTER_PARTITION", alterPartitions(func(a tstruct) []tstruct { return []tstruct{a.rec(3)} })},
	"alter_partition_with_environment_context":  {"ALTER_PARTITION", alterPartitions(func(a tstruct) []tstruct { return []tstruct{a.rec(3)} })},
	"alter_partitions":                          {"ALTER_PARTITION", alterPartitions(func(a tstruct) []tstruct { return a.recs(3) })},
	"alter_partitions_with_environment_context": {"ALTER_PARTITION", alterPartitions(func(a tstruct) []tstruct { return a.recs(3) })},
	"alter_partitions_req": {"ALTER_PARTITION", func(a tstruct, c *Change) {
		r := a.rec(1)
		alterPartitions(func(tstruct) []tstruct { return r.recs(4) })(tstruct{1: r[2], 2: r[3]}, c)
	}},
	"rename_partition": {"ALTER_PARTITION", func(a tstruct, c *Change) {
		// The log keys the event by the partition's old values.
		c.DB, c.Table = c.dbName(a.str(1)), norm(a.str(2))
		c.Partitions = [][]string{a.strs(3)}
		c.After = &Objects{Partitions: []Partition{fromPartition(a.rec(4))}}
	}},
	"create_function": {"CREATE_FUNCTION", func(a tstruct, c *Change) { c.DB = norm(a.rec(1).str(2)) }},
	"drop_function":   {"DROP_FUNCTION", func(a tstruct, c *Change) { c.DB = c.dbName(a.str(1)) }},
}

func names(db, tbl int16) func(tstruct, *Change) {
	return func(a tstruct, c *Change) { c.DB, c.Table = c.dbName(a.str(db)), norm(a.str(tbl)) }
}

func createTable(tbl func(tstruct) tstruct) func(tstruct, *Change) {
	return func(a tstruct, c *Change) {
		if t := fromTable(tbl(a)); t != nil {
			c.DB, c.Table = t.DB, t.Name
			c.After = &Objects{Table: t}
		}
	}
}

func alterTable(db, tbl, newTbl int16) func(tstruct, *Change) {
	return func(a tstruct, c *Change) {
		c.DB, c.Table = c.dbName(a.str(db)), norm(a.str(tbl))
		t := fromTable(a.rec(newTbl))
		if t == nil {
			return
		}
		if t.DB == "" {
			t.DB = c.DB
		}
		c.After = &Objects{Table: t}
		if t.DB != c.DB || t.Name != c.Table {
			c.NewDB, c.NewTable = t.DB, t.Name
		}
	}
}

func addPartitions(parts func(tstruct) []tstruct) func(tstruct, *Change) {
	return func(a tstruct, c *Change) {
		ps := parts(a)
		after := &Objects{}
		for _, p := range ps {
			if c.DB == "" {
				c.DB, c.Table = norm(p.str(2)), norm(p.str(3))
			}
			pp := fromPartition(p)
			after.Partitions = append(after.Partitions, pp)
			c.Partitions = append(c.Partitions, pp.Values)
		}
		c.After = after
	}
}

func alterPartitions(parts func(tstruct) []tstruct) func(tstruct, *Change) {
	return func(a tstruct, c *Change) {
		c.DB, c.Table = c.dbName(a.str(1)), norm(a.str(2))
		addPartitions(parts)(a, c)
	}
}

func byValues(id int16) func(tstruct, *Change) {
	return func(a tstruct, c *Change) {
		c.DB, c.Table = c.dbName(a.str(1)), norm(a.str(2))
		c.Partitions = [][]string{a.strs(id)}
	}
}

func byName(id int16) func(tstruct, *Change) {
	return func(a tstruct, c *Change) {
		c.DB, c.Table = c.dbName(a.str(1)), norm(a.str(2))
		c.Partitions = [][]string{ValuesOf(a.str(id))}
	}
}

// dbName is the database of a legacy call's db argument, which 3.x and
// 4.x clients write as "@cat#db" (the catalog folded in; "@cat#!" is an
// empty name), as the metastore reads it; the catalog goes to c.
func (c *Change) dbName(s string) string {
	if rest, ok := strings.CutPrefix(s, "@"); ok {
		if cat, db, ok := strings.Cut(rest, "#"); ok {
			if cat != "" {
				c.Cat = norm(cat)
			}
			if db == "!" {
				db = ""
			}
			return norm(db)
		}
	}
	return norm(s)
}

// ValuesOf is the values of a partition name, "k1=v1/k2=v2", unescaped
// as the metastore escapes them (%XX).
func ValuesOf(name string) []string {
	var out []string
	for _, kv := range strings.Split(name, "/") {
		_, v, _ := strings.Cut(kv, "=")
		if u, err := url.PathUnescape(v); err == nil {
			v = u
		}
		out = append(out, v)
	}
	return out
}

// FromWrite is the change of an accepted write, or false when the feed
// leaves the write to the notification log (see writes) or its request
// cannot be read.
func FromWrite(w Write) (*Change, bool) {
	k, ok := writes[w.Method]
	if !ok {
		return nil, false
	}
	a, err := readArgs(w.Args)
	if err != nil {
		return nil, false
	}
	c := &Change{Schema: Schema, Version: Version, Group: w.Group, Source: "proxy", Node: w.Node,
		Key: w.Group + "/w/" + w.Node + "/" + strconv.FormatUint(w.Seq, 10), Type: k.typ, Method: w.Method,
		User: w.User, Time: w.At.UTC(), Cat: w.Cat}
	k.parse(a, c)
	if c.DB == "" || strings.HasSuffix(c.Type, "_PARTITION") && len(c.Partitions) == 0 {
		return nil, false
	}
	return c, true
}
