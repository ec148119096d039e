package feed

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

// Event is a notification-log event, the same type as the poller's
// eventlog.Event.
type Event = hms.NotificationEvent

// unpublished are the event types that change no object a catalog
// tracks: transactions and their write ids.
var unpublished = map[string]bool{
	"OPEN_TXN": true, "COMMIT_TXN": true, "ABORT_TXN": true, "ALLOC_WRITE_ID_EVENT": true,
	"COMMIT_COMPACTION": true, "ACID_WRITE": true, "BATCH_ACID_WRITE": true, "UPDATE_WRITE_ID": true,
}

// FromEvent is the change of a notification-log event, or false for the
// events the feed leaves out (unpublished, or naming no database).
func FromEvent(group string, ev Event, defaultCat string) (*Change, bool) {
	if unpublished[ev.Type] || ev.DB == "" {
		return nil, false
	}
	cat := norm(ev.Cat)
	if cat == "" {
		cat = defaultCat
	}
	c := &Change{Schema: Schema, Version: Version, Group: group, Source: "eventlog", EventID: ev.ID,
		Key: group + "/e/" + strconv.FormatInt(ev.ID, 10), Type: ev.Type,
		Time: time.Unix(int64(ev.Time), 0).UTC(), Cat: cat, DB: norm(ev.DB), Table: norm(ev.Table)}
	m := hms.NotificationJSON(ev.Message, ev.Format)
	obj := func(k string) tstruct {
		var s string
		if json.Unmarshal(m[k], &s) != nil {
			return nil
		}
		return readJSON(s)
	}
	switch ev.Type {
	case "CREATE_TABLE":
		c.After = tableObjects(fromTable(obj("tableObjJson")))
	case "DROP_TABLE":
		c.Before = tableObjects(fromTable(obj("tableObjJson")))
	case "ALTER_TABLE":
		// The event names the table after the change; a rename is told
		// by the name before, as a node tells it.
		c.Before = tableObjects(fromTable(obj("tableObjBeforeJson")))
		c.After = tableObjects(fromTable(obj("tableObjAfterJson")))
		if c.Before != nil && c.After != nil {
			b, a := c.Before.Table, c.After.Table
			if b.DB != a.DB || b.Name != a.Name {
				c.DB, c.Table, c.NewDB, c.NewTable = b.DB, b.Name, a.DB, a.Name
			}
		}
	case "ADD_PARTITION":
		c.Partitions = valueLists(m["partitions"])
		var list []string
		json.Unmarshal(m["partitionListJson"], &list)
		if len(list) > 0 {
			c.After = &Objects{}
			for _, p := range list {
				c.After.Partitions = append(c.After.Partitions, fromPartition(readJSON(p)))
			}
		}
	case "DROP_PARTITION":
		c.Partitions = valueLists(m["partitions"])
	case "ALTER_PARTITION":
		if vals := orderedValues(m["keyValues"]); vals != nil {
			c.Partitions = [][]string{vals}
		}
		if p := obj("partitionObjBeforeJson"); p != nil {
			c.Before = &Objects{Partitions: []Partition{fromPartition(p)}}
		}
		if p := obj("partitionObjAfterJson"); p != nil {
			c.After = &Objects{Partitions: []Partition{fromPartition(p)}}
		}
	case "CREATE_DATABASE", "ALTER_DATABASE":
		for _, k := range []string{"dbObjBeforeJson"} {
			if d := fromDatabase(obj(k)); d != nil {
				c.Before = &Objects{Database: d}
			}
		}
		for _, k := range []string{"dbObjAfterJson", "dbJson", "dbObjJson"} {
			if d := fromDatabase(obj(k)); d != nil {
				c.After = &Objects{Database: d}
			}
		}
	}
	return c, true
}

func tableObjects(t *Table) *Objects {
	if t == nil {
		return nil
	}
	return &Objects{Table: t}
}

// valueLists reads a list of partition specs, each a JSON object of
// partition keys to values in the table's key order.
func valueLists(raw json.RawMessage) [][]string {
	var specs []json.RawMessage
	if json.Unmarshal(raw, &specs) != nil {
		return nil
	}
	var out [][]string
	for _, s := range specs {
		if vals := orderedValues(s); vals != nil {
			out = append(out, vals)
		}
	}
	return out
}

// orderedValues reads the values of a JSON object of strings in the
// order written: the metastore writes partition specs in key order,
// which a Go map would lose.
func orderedValues(raw json.RawMessage) []string {
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var out []string
	for d.More() {
		if _, err := d.Token(); err != nil { // the key
			return nil
		}
		t, err := d.Token()
		if err != nil {
			return nil
		}
		s, ok := t.(string)
		if !ok {
			return nil
		}
		out = append(out, s)
	}
	return out
}
