package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/hmsproxy/hmsproxy/federation/dbname"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestDBNamePrefixedReal (issue 13) plays federation's prefixed mode by
// hand against a real HMS 3.1: requests naming "fed_<db>" are rewritten
// by dbname.Args for the metastore (which must then find its objects),
// and the metastore's replies are rewritten by dbname.Reply and decoded
// by Apache Thrift's own binary protocol, which must read the whole
// message and see the prefixed names: Table.dbName and its view text,
// Partition.dbName, the database list. Rewriting the reply back with the
// prefix stripped gives the metastore's bytes again.
func TestDBNamePrefixedReal(t *testing.T) {
	if !slices.Contains(versions(t), "3.1") {
		t.Skip("needs HMS 3.1 in HMSPROXY_E2E")
	}
	ms := start(t, "3.1")
	direct := dial(t, ms.addr)
	const db, pfx = "dbn31", "fed_"
	strip := func(name string) (string, error) {
		if !strings.HasPrefix(name, pfx) {
			return "", fmt.Errorf("not a federated name: %q", name)
		}
		return name[len(pfx):], nil
	}
	add := func(name string) string { return pfx + name }
	loc := "file://" + ms.work + "/dbn-wh/" + db + ".db"

	// Set up directly on the metastore: a partitioned table, a partition, a view.
	dropDatabase(t, direct, db)
	clMustOK(t, "create_database", call(t, direct, "create_database",
		hmsreq.Args(hmsreq.Database{Name: db, Description: "dbname", Location: loc, Owner: "e2e"}.Field(1))))
	clMustOK(t, "create_table", call(t, direct, "create_table",
		hmsreq.Args(corpusTable(db, "t1", loc+"/t1", true).Field(1))))
	clMustOK(t, "add_partition", call(t, direct, "add_partition",
		hmsreq.Args(corpusPartition(db, "t1", loc+"/t1", "2024").Field(1))))
	orig, expanded := "select id from "+db+".t1", "SELECT `t1`.`id` FROM `"+db+"`.`t1`"
	view := corpusTable(db, "v1", loc+"/t1", false) // a view has no data: any existing directory
	view.TableType = "VIRTUAL_VIEW"
	clMustOK(t, "create_table view", call(t, direct, "create_table",
		hmsreq.Args(withFields(view.Field(1), hmsreq.Str(10, orig), hmsreq.Str(11, expanded)))))

	// proxyCall sends args as a federation client wrote them (prefixed
	// names), rewritten for the metastore, and returns the metastore's
	// reply rewritten for the client, decoded by Apache Thrift.
	proxyCall := func(method string, clientArgs []byte) map[int16]any {
		t.Helper()
		m := hms.Lookup([]byte(method))
		args, err := dbname.Args(nil, m, clientArgs, wire.Limits{}, strip)
		if err != nil {
			t.Fatalf("%s: Args: %v", method, err)
		}
		reply := call(t, direct, method, args)
		clMustOK(t, method, reply)
		msg, err := wire.Parse(reply, wire.Limits{MaxMessage: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		body, err := dbname.Reply(nil, m, msg.Type, msg.Body(), add)
		if err != nil {
			t.Fatalf("%s: Reply: %v", method, err)
		}
		back, err := dbname.Reply(nil, m, msg.Type, body, func(s string) string { n, _ := strip(s); return n })
		if err != nil || string(back) != string(msg.Body()) {
			t.Errorf("%s: stripping the rewritten reply does not give the metastore's bytes back (err %v)", method, err)
		}
		rewritten := append(msg.Header()[:len(msg.Header()):len(msg.Header())], body...)
		return thriftDecode(t, method, rewritten)
	}

	pdb := pfx + db
	t.Run("get_table", func(t *testing.T) {
		tbl := proxyCall("get_table", hmsreq.Args(hmsreq.Str(1, pdb), hmsreq.Str(2, "t1")))[0].(map[int16]any)
		if tbl[2] != pdb || tbl[1] != "t1" {
			t.Errorf("Table.dbName, tableName: got %v, %v; want %s, t1", tbl[2], tbl[1], pdb)
		}
	})
	t.Run("get_table view with catalog", func(t *testing.T) {
		tbl := proxyCall("get_table", hmsreq.Args(hmsreq.Str(1, "@hive#"+pdb), hmsreq.Str(2, "v1")))[0].(map[int16]any)
		if tbl[2] != pdb {
			t.Errorf("Table.dbName: got %v; want %s", tbl[2], pdb)
		}
		if want := "select id from " + pdb + ".t1"; tbl[10] != want {
			t.Errorf("viewOriginalText: got %q; want %q", tbl[10], want)
		}
		if want := "SELECT `t1`.`id` FROM `" + pdb + "`.`t1`"; tbl[11] != want {
			t.Errorf("viewExpandedText: got %q; want %q", tbl[11], want)
		}
	})
	t.Run("get_table_req", func(t *testing.T) {
		res := proxyCall("get_table_req", hmsreq.Req(hmsreq.Str(1, pdb), hmsreq.Str(2, "t1"), hmsreq.Str(4, "hive")))[0].(map[int16]any)
		if tbl := res[1].(map[int16]any); tbl[2] != pdb {
			t.Errorf("GetTableResult.table.dbName: got %v; want %s", tbl[2], pdb)
		}
	})
	t.Run("get_partitions", func(t *testing.T) {
		parts := proxyCall("get_partitions", hmsreq.Args(hmsreq.Str(1, pdb), hmsreq.Str(2, "t1"), hmsreq.I16(3, -1)))[0].([]any)
		if len(parts) != 1 {
			t.Fatalf("got %d partitions; want 1", len(parts))
		}
		if p := parts[0].(map[int16]any); p[2] != pdb || p[3] != "t1" {
			t.Errorf("Partition.dbName, tableName: got %v, %v; want %s, t1", p[2], p[3], pdb)
		}
	})
	t.Run("get_all_databases", func(t *testing.T) {
		names := proxyCall("get_all_databases", hmsreq.Args())[0].([]any)
		if !slices.Contains(names, any(pdb)) || !slices.Contains(names, any(pfx+"default")) {
			t.Errorf("got %v; want %s and %sdefault among them", names, pdb, pfx)
		}
		for _, n := range names {
			if !strings.HasPrefix(n.(string), pfx) {
				t.Errorf("unprefixed name %q in the list", n)
			}
		}
	})
	t.Run("get_table_meta", func(t *testing.T) {
		// The pattern is the router's business and passes as sent.
		metas := proxyCall("get_table_meta", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "*"), hmsreq.Strings(3)))[0].([]any)
		if len(metas) != 2 {
			t.Fatalf("got %d tables; want 2", len(metas))
		}
		for _, m := range metas {
			if m := m.(map[int16]any); m[1] != pdb {
				t.Errorf("TableMeta.dbName: got %v; want %s", m[1], pdb)
			}
		}
	})
	t.Run("create_table through Args", func(t *testing.T) {
		// A client creates a view in the federated database, naming it
		// and its source table with the prefix: the metastore must
		// store its own names.
		v2 := corpusTable(pdb, "v2", loc+"/t1", false)
		v2.TableType = "VIRTUAL_VIEW"
		clientArgs := hmsreq.Args(withFields(v2.Field(1), hmsreq.Str(10, "select id from "+pdb+".t1"), hmsreq.Str(11, "SELECT `t1`.`id` FROM `"+pdb+"`.`t1`")))
		args, err := dbname.Args(nil, hms.Lookup([]byte("create_table")), clientArgs, wire.Limits{}, strip)
		if err != nil {
			t.Fatal(err)
		}
		clMustOK(t, "create_table", call(t, direct, "create_table", args))
		reply := call(t, direct, "get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "v2")))
		clMustOK(t, "get_table v2", reply)
		tbl := thriftDecode(t, "get_table", reply)[0].(map[int16]any)
		if tbl[2] != db || tbl[10] != "select id from "+db+".t1" || tbl[11] != "SELECT `t1`.`id` FROM `"+db+"`.`t1`" {
			t.Errorf("stored: dbName %v, view text %q / %q; want the metastore's own names", tbl[2], tbl[10], tbl[11])
		}
	})
	t.Run("refused", func(t *testing.T) {
		if _, err := dbname.Args(nil, hms.Lookup([]byte("get_table")), hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "t1")), wire.Limits{}, strip); err == nil {
			t.Error("an unprefixed name was not refused")
		}
	})
}

// withFields adds fields to the struct field f writes.
func withFields(f hmsreq.Field, more ...hmsreq.Field) hmsreq.Field {
	return func(e *wire.Encoder) {
		f(e)
		e.B = e.B[:len(e.B)-1] // the struct's STOP
		for _, m := range more {
			m(e)
		}
		e.Stop()
	}
}

// thriftDecode reads a whole REPLY message with Apache Thrift's binary
// protocol into generic values: a struct is map[field id]value, a list or
// set []any, a string string. It fails the test unless every byte is read.
func thriftDecode(t *testing.T, method string, msg []byte) map[int16]any {
	t.Helper()
	ctx := context.Background()
	buf := thrift.NewTMemoryBufferLen(len(msg))
	buf.Write(msg)
	p := thrift.NewTBinaryProtocolConf(buf, &thrift.TConfiguration{TBinaryStrictRead: thrift.BoolPtr(true)})
	name, typ, _, err := p.ReadMessageBegin(ctx)
	if err != nil || name != method || typ != thrift.REPLY {
		t.Fatalf("message header: %q %v %v", name, typ, err)
	}
	v, err := thriftValue(ctx, p, thrift.STRUCT)
	if err != nil {
		t.Fatalf("%s: thrift cannot read the rewritten reply: %v", method, err)
	}
	if err := p.ReadMessageEnd(ctx); err != nil || buf.Len() != 0 {
		t.Fatalf("%s: %d bytes left after the message (%v)", method, buf.Len(), err)
	}
	return v.(map[int16]any)
}

func thriftValue(ctx context.Context, p thrift.TProtocol, typ thrift.TType) (any, error) {
	switch typ {
	case thrift.STRUCT:
		if _, err := p.ReadStructBegin(ctx); err != nil {
			return nil, err
		}
		m := map[int16]any{}
		for {
			_, ft, id, err := p.ReadFieldBegin(ctx)
			if err != nil {
				return nil, err
			}
			if ft == thrift.STOP {
				return m, p.ReadStructEnd(ctx)
			}
			if m[id], err = thriftValue(ctx, p, ft); err != nil {
				return nil, err
			}
			if err := p.ReadFieldEnd(ctx); err != nil {
				return nil, err
			}
		}
	case thrift.LIST, thrift.SET:
		et, n, err := p.ReadListBegin(ctx)
		if err != nil {
			return nil, err
		}
		l := make([]any, n)
		for i := range l {
			if l[i], err = thriftValue(ctx, p, et); err != nil {
				return nil, err
			}
		}
		return l, p.ReadListEnd(ctx)
	case thrift.MAP:
		kt, vt, n, err := p.ReadMapBegin(ctx)
		if err != nil {
			return nil, err
		}
		l := make([][2]any, n)
		for i := range l {
			if l[i][0], err = thriftValue(ctx, p, kt); err != nil {
				return nil, err
			}
			if l[i][1], err = thriftValue(ctx, p, vt); err != nil {
				return nil, err
			}
		}
		return l, p.ReadMapEnd(ctx)
	case thrift.STRING:
		return p.ReadString(ctx)
	case thrift.BOOL:
		return p.ReadBool(ctx)
	case thrift.BYTE:
		return p.ReadByte(ctx)
	case thrift.I16:
		return p.ReadI16(ctx)
	case thrift.I32:
		return p.ReadI32(ctx)
	case thrift.I64:
		return p.ReadI64(ctx)
	case thrift.DOUBLE:
		return p.ReadDouble(ctx)
	}
	return nil, fmt.Errorf("thrift type %v", typ)
}
