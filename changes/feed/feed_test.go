package feed

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
)

var at = time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)

func orders(name string) hmsreq.Table {
	return hmsreq.Table{DB: "Sales", Name: name, Owner: "alice",
		SD:       hmsreq.TextSD("file:/w/sales/"+name, hmsreq.Column{Name: "ID", Type: "bigint"}, hmsreq.Column{Name: "amount", Type: "double"}),
		PartKeys: []hmsreq.Column{{Name: "dt", Type: "string"}}}
}

func part(vals ...string) hmsreq.Partition {
	return hmsreq.Partition{DB: "sales", Table: "orders", Values: vals, SD: hmsreq.TextSD("file:/w/p")}
}

// TestFromWrite: each write the feed describes gives its type, names,
// partitions and objects; the others are left to the log.
func TestFromWrite(t *testing.T) {
	for _, tc := range []struct {
		name, method string
		args         []byte
		ok           bool
		typ, db, tbl string
		newTbl       string
		parts        [][]string
		claims       []string
	}{
		{name: "create table", method: "create_table", args: hmsreq.Args(orders("Orders").Field(1)), ok: true,
			typ: "CREATE_TABLE", db: "sales", tbl: "orders", claims: []string{"CREATE_TABLE|sales|orders"}},
		{name: "create table req", method: "create_table_req", args: hmsreq.Req(orders("orders").Field(1)), ok: true,
			typ: "CREATE_TABLE", db: "sales", tbl: "orders", claims: []string{"CREATE_TABLE|sales|orders"}},
		{name: "rename", method: "alter_table_with_environment_context",
			args: hmsreq.Args(hmsreq.Str(1, "sales"), hmsreq.Str(2, "orders"), orders("orders_v2").Field(3)), ok: true,
			typ: "ALTER_TABLE", db: "sales", tbl: "orders", newTbl: "orders_v2", claims: []string{"ALTER_TABLE|sales|orders_v2"}},
		{name: "drop table", method: "drop_table", args: hmsreq.Args(hmsreq.Str(1, "SALES"), hmsreq.Str(2, "Orders"), hmsreq.Bool(3, true)), ok: true,
			typ: "DROP_TABLE", db: "sales", tbl: "orders", claims: []string{"DROP_TABLE|sales|orders"}},
		{name: "catalog folded into the db", method: "drop_table", args: hmsreq.Args(hmsreq.Str(1, "@hive#Sales"), hmsreq.Str(2, "orders")), ok: true,
			typ: "DROP_TABLE", db: "sales", tbl: "orders", claims: []string{"DROP_TABLE|sales|orders"}},
		{name: "add partitions", method: "add_partitions", args: hmsreq.Args(hmsreq.Partitions(1, part("1"), part("2"))), ok: true,
			typ: "ADD_PARTITION", db: "sales", tbl: "orders", parts: [][]string{{"1"}, {"2"}},
			claims: []string{"ADD_PARTITION|sales|orders|1", "ADD_PARTITION|sales|orders|2"}},
		{name: "drop by name", method: "drop_partition_by_name",
			args: hmsreq.Args(hmsreq.Str(1, "sales"), hmsreq.Str(2, "orders"), hmsreq.Str(3, "dt=2026-12-03/h=a%2Fb"), hmsreq.Bool(4, false)), ok: true,
			typ: "DROP_PARTITION", db: "sales", tbl: "orders", parts: [][]string{{"2026-12-03", "a/b"}},
			claims: []string{"DROP_PARTITION|sales|orders|2026-12-03\x00a/b"}},
		{name: "alter partitions", method: "alter_partitions",
			args: hmsreq.Args(hmsreq.Str(1, "sales"), hmsreq.Str(2, "orders"), hmsreq.Partitions(3, part("1"), part("3"))), ok: true,
			typ: "ALTER_PARTITION", db: "sales", tbl: "orders", parts: [][]string{{"1"}, {"3"}},
			claims: []string{"ALTER_PARTITION|sales|orders|1", "ALTER_PARTITION|sales|orders|3"}},
		{name: "drop by expression", method: "drop_partitions_req",
			args: hmsreq.Req(hmsreq.Str(1, "sales"), hmsreq.Str(2, "orders"), hmsreq.Struct(3, hmsreq.Str(2, "expr"))), ok: false},
		{name: "statistics", method: "update_table_column_statistics", args: hmsreq.Args(), ok: false},
		{name: "garbage", method: "create_table", args: []byte{12, 0, 1, 11}, ok: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := FromWrite(Write{Group: "g", Node: "n1", Seq: 7, Method: tc.method, Args: tc.args, User: "bob", Cat: "hive", At: at})
			if ok != tc.ok {
				t.Fatalf("got ok %v; want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if c.Type != tc.typ || c.DB != tc.db || c.Table != tc.tbl || c.NewTable != tc.newTbl || c.Key != "g/w/n1/7" || c.User != "bob" {
				t.Fatalf("got %s %s.%s -> %s key %s user %s; want %s %s.%s -> %s", c.Type, c.DB, c.Table, c.NewTable, c.Key, c.User, tc.typ, tc.db, tc.tbl, tc.newTbl)
			}
			if !reflect.DeepEqual(c.Partitions, tc.parts) {
				t.Fatalf("got partitions %q; want %q", c.Partitions, tc.parts)
			}
			if got := c.ClaimKeys(); !slices.Equal(got, tc.claims) {
				t.Fatalf("got claims %q; want %q", got, tc.claims)
			}
		})
	}
}

// TestFromWriteTableObject: the table after a create carries its
// columns, storage and partition keys, names normalised.
func TestFromWriteTableObject(t *testing.T) {
	c, ok := FromWrite(Write{Group: "g", Method: "create_table", Args: hmsreq.Args(orders("Orders").Field(1)), At: at})
	if !ok || c.After == nil || c.After.Table == nil {
		t.Fatalf("no table after the create: %+v", c)
	}
	tb := c.After.Table
	if tb.Name != "orders" || tb.DB != "sales" || tb.Owner != "alice" || tb.Type != "MANAGED_TABLE" ||
		tb.Storage == nil || len(tb.Storage.Columns) != 2 || tb.Storage.Columns[0].Name != "id" ||
		tb.Storage.SerDe != "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe" || len(tb.PartitionKeys) != 1 {
		t.Fatalf("got table %+v, storage %+v", tb, tb.Storage)
	}
}

// tjson is a table in the Thrift JSON protocol, as the 3.1 log writes it.
const tjson = `{"1":{"str":"orders"},"2":{"str":"sales"},"3":{"str":"alice"},"4":{"i32":1764745200},` +
	`"7":{"rec":{"1":{"lst":["rec",1,{"1":{"str":"id"},"2":{"str":"bigint"}}]},"2":{"str":"file:/w/sales/orders"},` +
	`"7":{"rec":{"2":{"str":"org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"},"3":{"map":["str","str",1,{"serialization.format":"1"}]}}}}},` +
	`"8":{"lst":["rec",1,{"1":{"str":"dt"},"2":{"str":"string"}}]},"9":{"map":["str","str",0,{}]},"12":{"str":"MANAGED_TABLE"}}`

func message(t *testing.T, m map[string]any) string {
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFromEvent: events give the same claim keys as the writes that
// cause them, and the objects their messages carry.
func TestFromEvent(t *testing.T) {
	renamed := strings.Replace(tjson, `"orders"`, `"orders_v2"`, 1)
	for _, tc := range []struct {
		name   string
		ev     Event
		ok     bool
		claims []string
		check  func(t *testing.T, c *Change)
	}{
		{"create table", Event{ID: 5, Type: "CREATE_TABLE", DB: "sales", Table: "orders",
			Message: message(t, map[string]any{"tableObjJson": tjson})}, true, []string{"CREATE_TABLE|sales|orders"},
			func(t *testing.T, c *Change) {
				if c.After == nil || c.After.Table == nil || c.After.Table.Storage.Columns[0].Name != "id" || c.After.Table.PartitionKeys[0].Name != "dt" {
					t.Fatalf("got after %+v", c.After)
				}
			}},
		{"rename", Event{ID: 6, Type: "ALTER_TABLE", DB: "sales", Table: "orders_v2", // the log names the table after
			Message: message(t, map[string]any{"tableObjBeforeJson": tjson, "tableObjAfterJson": renamed})}, true, []string{"ALTER_TABLE|sales|orders_v2"},
			func(t *testing.T, c *Change) {
				if c.Table != "orders" || c.NewTable != "orders_v2" || c.Before.Table.Name != "orders" || c.PartitionKey() != "sales.orders" {
					t.Fatalf("got rename to %q, before %+v", c.NewTable, c.Before)
				}
			}},
		{"add partitions, keys in order", Event{ID: 7, Type: "ADD_PARTITION", DB: "sales", Table: "orders",
			Message: `{"partitions":[{"z":"1","a":"x"},{"z":"2","a":"y"}]}`}, true,
			[]string{"ADD_PARTITION|sales|orders|1\x00x", "ADD_PARTITION|sales|orders|2\x00y"}, nil},
		{"alter partition", Event{ID: 8, Type: "ALTER_PARTITION", DB: "sales", Table: "orders",
			Message: `{"keyValues":{"dt":"1"}}`}, true, []string{"ALTER_PARTITION|sales|orders|1"}, nil},
		{"4.0 gzip", Event{ID: 9, Type: "DROP_PARTITION", DB: "sales", Table: "orders", Format: "gzip(json-2.0)",
			Message: "H4sIAAAAAAACA6tWKkgsKsksyczPK1ayiq5WSilRslKyVKqNrQUAMcGssBsAAAA="}, true, []string{"DROP_PARTITION|sales|orders|9"}, nil},
		{"transaction", Event{ID: 10, Type: "OPEN_TXN"}, false, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := FromEvent("g", tc.ev, "hive")
			if ok != tc.ok {
				t.Fatalf("got ok %v; want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if c.Key != "g/e/"+strings.TrimPrefix(c.Key, "g/e/") || c.EventID != tc.ev.ID || c.Source != "eventlog" {
				t.Fatalf("got key %s, event %d, source %s", c.Key, c.EventID, c.Source)
			}
			if got := c.ClaimKeys(); !slices.Equal(got, tc.claims) {
				t.Fatalf("got claims %q; want %q", got, tc.claims)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

// TestAtlasMessages: each change type gives the Atlas notification type
// and the entities with Atlas's qualified names.
func TestAtlasMessages(t *testing.T) {
	create, _ := FromWrite(Write{Group: "g", Method: "create_table", Args: hmsreq.Args(orders("orders").Field(1)), User: "bob", At: at})
	rename, _ := FromWrite(Write{Group: "g", Method: "alter_table", Args: hmsreq.Args(hmsreq.Str(1, "sales"), hmsreq.Str(2, "orders"), orders("orders_v2").Field(3)), At: at})
	drop, _ := FromWrite(Write{Group: "g", Method: "drop_partition", Args: hmsreq.Args(hmsreq.Str(1, "sales"), hmsreq.Str(2, "orders"), hmsreq.Strings(3, "1")), At: at})
	fn, _ := FromWrite(Write{Group: "g", Method: "drop_function", Args: hmsreq.Args(hmsreq.Str(1, "sales"), hmsreq.Str(2, "f")), At: at})
	for _, tc := range []struct {
		name  string
		c     *Change
		types []string
		want  []string // substrings of the message
	}{
		{"create", create, []string{"ENTITY_CREATE_V2"}, []string{`"typeName":"hive_table"`, `"qualifiedName":"sales.orders@prod"`,
			`"qualifiedName":"sales.orders@prod_storage"`, `"qualifiedName":"sales.orders.id@prod"`, `"qualifiedName":"sales@prod"`, `"user":"bob"`,
			`"version":{"version":"1.0.0"`}},
		{"rename", rename, []string{"ENTITY_PARTIAL_UPDATE_V2"}, []string{`"entityId":{"typeName":"hive_table","uniqueAttributes":{"qualifiedName":"sales.orders@prod"}}`,
			`"qualifiedName":"sales.orders_v2@prod"`}},
		{"drop partition", drop, []string{"ENTITY_DELETE_V2"}, []string{`"typeName":"hive_partition"`, `"qualifiedName":"sales.orders.1@prod"`}},
		{"function", fn, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := Atlas(tc.c, "prod", at)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != len(tc.types) {
				t.Fatalf("got %d messages; want %d", len(msgs), len(tc.types))
			}
			for i, m := range msgs {
				var env struct {
					Message struct{ Type string } `json:"message"`
				}
				if err := json.Unmarshal(m, &env); err != nil || env.Message.Type != tc.types[i] {
					t.Fatalf("message %d: type %q (%v); want %s", i, env.Message.Type, err, tc.types[i])
				}
				for _, w := range tc.want {
					if !strings.Contains(string(m), w) {
						t.Fatalf("message %s lacks %s", m, w)
					}
				}
			}
		})
	}
}

// FuzzFromWrite: a client's request bytes never crash the feed.
func FuzzFromWrite(f *testing.F) {
	f.Add("create_table", hmsreq.Args(orders("orders").Field(1)))
	f.Add("add_partitions", hmsreq.Args(hmsreq.Partitions(1, part("1"))))
	f.Add("alter_partitions_req", hmsreq.Req(hmsreq.Str(2, "d"), hmsreq.Str(3, "t"), hmsreq.Partitions(4, part("1"))))
	f.Fuzz(func(t *testing.T, method string, args []byte) {
		if c, ok := FromWrite(Write{Group: "g", Method: method, Args: args, At: at}); ok {
			Atlas(c, "c", at)
			json.Marshal(c)
		}
	})
}

// FuzzFromEvent: a notification message never crashes the feed.
func FuzzFromEvent(f *testing.F) {
	f.Add("CREATE_TABLE", `{"tableObjJson":"`+strings.ReplaceAll(tjson, `"`, `\"`)+`"}`)
	f.Add("ADD_PARTITION", `{"partitions":[{"a":"1"}],"partitionListJson":["{\"1\":{\"lst\":[\"str\",1,\"1\"]}}"]}`)
	f.Add("ALTER_PARTITION", `{"keyValues":{"a":"1"}}`)
	f.Fuzz(func(t *testing.T, typ, msg string) {
		if c, ok := FromEvent("g", Event{ID: 1, Type: typ, DB: "d", Table: "t", Message: msg}, "hive"); ok {
			Atlas(c, "c", at)
			json.Marshal(c)
		}
	})
}
