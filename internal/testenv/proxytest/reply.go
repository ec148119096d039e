package proxytest

import (
	"errors"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

var errNoTable = errors.New("proxytest: no table in reply")

// table positions a decoder on the fields of the Table a get_table (or
// get_table_req: GetTableResult.table) reply holds.
func table(reply []byte) (*wire.Decoder, error) {
	m, err := wire.Parse(reply, wire.Limits{MaxMessage: 1 << 30})
	if err != nil {
		return nil, err
	}
	d := wire.NewDecoder(m.Body())
	if typ, id := d.FieldBegin(); typ != wire.TStruct || id != 0 {
		return nil, errNoTable
	}
	if string(m.Name()) == "get_table_req" {
		if typ, id := d.FieldBegin(); typ != wire.TStruct || id != 1 {
			return nil, errNoTable
		}
	}
	return d, d.Err()
}

// TableName is the tableName of the Table in a get_table reply; the test
// fails when the reply holds none.
func TableName(t testing.TB, reply []byte) string {
	t.Helper()
	d, err := table(reply)
	if err != nil {
		t.Fatalf("%v: %x", err, reply)
	}
	for {
		typ, id := d.FieldBegin()
		if typ == wire.TStop || d.Err() != nil {
			t.Fatalf("no tableName in reply: %v", d.Err())
		}
		if id == 1 && typ == wire.TString {
			return d.String()
		}
		d.Skip(typ)
	}
}

// TableParam is one parameter of the Table in a get_table reply, "" when
// the table lacks it; ok is false when the reply holds no table.
func TableParam(reply []byte, key string) (value string, ok bool) {
	d, err := table(reply)
	if err != nil {
		return "", false
	}
	for {
		typ, id := d.FieldBegin()
		if typ == wire.TStop || d.Err() != nil {
			return "", d.Err() == nil
		}
		if id != 9 || typ != wire.TMap {
			d.Skip(typ)
			continue
		}
		_, _, n := d.MapBegin()
		for range n {
			if k, v := d.String(), d.String(); k == key {
				return v, true
			}
		}
		return "", d.Err() == nil
	}
}
