package federation

import (
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// argsAt is an args struct holding val at path p (through one-element
// lists at Each steps), and nothing else.
func argsAt(p hms.Path, val string) []byte {
	var e wire.Encoder
	structAt(&e, p, val)
	e.Stop()
	return e.B
}

// structAt writes the fields of a struct (without its STOP) holding val
// at p.
func structAt(e *wire.Encoder, p hms.Path, val string) {
	id, rest := p[0], p[1:]
	switch {
	case len(rest) == 0:
		e.StringField(id, val)
	case rest[0] == hms.Each && len(rest) == 1:
		e.StringListField(id, []string{val})
	case rest[0] == hms.Each:
		e.FieldBegin(wire.TList, id)
		e.ListBegin(wire.TStruct, 1)
		structAt(e, rest[1:], val)
		e.Stop()
	default:
		e.FieldBegin(wire.TStruct, id)
		structAt(e, rest, val)
		e.Stop()
	}
}

func call(t *testing.T, name string, args []byte) wire.Message {
	t.Helper()
	b := append(wire.AppendHeader(nil, wire.Call, []byte(name), 7), args...)
	m, err := wire.Parse(b, wire.Limits{MaxMessage: len(b)})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// passDB are the databases of the passthrough calls that name one (locks,
// compactions, write ids), which the method table does not record: they
// must route to that database's group, and those that change state obey
// its access rule.
var passDB = map[string]hms.Path{
	"lock":                                   {1, 1, hms.Each, 3}, // LockRequest.component[].dbname
	"compact":                                {1, 1},              // CompactionRequest.dbname
	"compact2":                               {1, 1},
	"allocate_table_write_ids":               {1, 1}, // AllocateTableWriteIdsRequest.dbName
	"show_locks":                             {1, 1}, // ShowLocksRequest.dbname (optional)
	"fire_listener_event":                    {1, 3}, // FireEventRequest.dbName
	"add_write_notification_log":             {1, 3}, // WriteNotificationLogRequest.db
	"get_lock_materialization_rebuild":       {1},
	"markPartitionForEvent":                  {1}, // db_name, tbl_name, part_vals, eventType
	"isPartitionMarkedForEvent":              {1},
	"heartbeat_lock_materialization_rebuild": {1},
	"add_dynamic_partitions":                 {1, 3}, // AddDynamicPartitions.dbname (3.0+)
}

// dbPaths are where a method names databases by the method table (and
// passDB): the router, which finds names through federation/dbname, must
// see every one of them.
func dbPaths(m *hms.Method) []hms.Path {
	var ps []hms.Path
	switch m.Class {
	case hms.Read:
		if m.Target.DB != nil {
			ps = append(ps, m.Target.DB)
		}
	case hms.Write:
		for _, e := range m.Effects {
			for _, p := range []hms.Path{e.DB, e.NewDB} {
				if p != nil {
					ps = append(ps, p)
				}
			}
		}
	default:
		if p, ok := passDB[m.Name]; ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// lakeRouter routes between a read-write primary and a read-only group
// "lake" that holds the database lake. Both stand on a metastore address
// nothing listens on: the tests route, they do not call.
func lakeRouter(t *testing.T) *Router {
	t.Helper()
	up := proxytest.Group(t, upstream.Config{}, "127.0.0.1:1")
	r, err := New(Config{Groups: []Member{
		{Name: "primary", Up: up},
		{Name: "lake", Up: up, Databases: []string{"lake"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMethodTable walks every method of the table: each is classified,
// each write naming a database of the read-only member is refused, and
// each call naming a database goes to that database's group.
func TestMethodTable(t *testing.T) {
	r := lakeRouter(t)
	mustWrite := []string{"truncate_table", "allocate_table_write_ids", "lock", "commit_txn", "abort_txn", "open_txns",
		"add_dynamic_partitions", "compact", "alter_table", "drop_partition", "update_table_column_statistics",
		"grant_privileges", "create_function"}
	for _, name := range mustWrite {
		if !IsWrite(hms.Lookup([]byte(name))) {
			t.Errorf("%s is not classified as a write", name)
		}
	}
	if !IsWrite(nil) {
		t.Error("an unknown method is not classified as a write")
	}
	writes, routed := 0, 0
	for _, m := range hms.All() {
		switch m.Class {
		case hms.Write:
			if !IsWrite(m) {
				t.Errorf("write %s not classified as a write", m.Name)
			}
		case hms.Read:
			if IsWrite(m) {
				t.Errorf("read %s classified as a write", m.Name)
			}
		}
		if m.Class == hms.Session || m.Oneway || fanOut[m.Name] {
			continue
		}
		if m.Class == hms.Read && m.Target.Scope == hms.ScopeCatalog {
			continue // database patterns: only the fan-out listings name them
		}
		for _, p := range dbPaths(m) {
			d := r.Route(m, call(t, m.Name, argsAt(p, "@hive#Lake")))
			if IsWrite(m) {
				writes++
				if !strings.Contains(d.Refuse, `group "lake" is read-only`) {
					t.Errorf("%s naming lake at %v: %+v, want refused by the read-only rule", m.Name, p, d)
				}
			} else {
				routed++
				if d.Refuse != "" || d.Group != 1 {
					t.Errorf("%s naming lake at %v: %+v, want group 1", m.Name, p, d)
				}
			}
			if d := r.Route(m, call(t, m.Name, argsAt(p, "demo"))); d.Refuse != "" || d.Group != 0 || d.FanOut {
				t.Errorf("%s naming demo at %v: %+v, want the primary", m.Name, p, d)
			}
		}
	}
	if writes < 50 || routed < 50 {
		t.Errorf("walked %d writes and %d reads naming a database: the table walk found too few", writes, routed)
	}
	t.Logf("walked %d write paths and %d read paths", writes, routed)
}
