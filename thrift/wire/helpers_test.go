package wire

import (
	"encoding/binary"
	"fmt"
)

// msg builds a complete strict message: header plus body.
func msg(typ byte, name string, seq int32, body []byte) []byte {
	return append(AppendHeader(nil, typ, []byte(name), seq), body...)
}

// frame prefixes b with its 4-byte big-endian length.
func frame(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// rawFrame prefixes b with an arbitrary length word.
func rawFrame(n uint32, b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, n), b...)
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func be32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

// getTableArgs is a get_table_req args struct shaped like what Trino or
// Hive 4 send (~300 bytes with its header).
func getTableArgs() []byte {
	var e Encoder
	e.FieldBegin(TStruct, 1) // req: GetTableRequest
	e.StringField(1, "sales_warehouse")
	e.StringField(2, "fact_orders_daily_partitioned")
	e.FieldBegin(TStruct, 3) // capabilities: ClientCapabilities
	e.FieldBegin(TList, 1)
	e.ListBegin(TI32, 2)
	e.I32(1)
	e.I32(2)
	e.Stop()
	e.StringField(4, "hive")
	e.StringField(6, "sales_warehouse.fact_orders_daily_partitioned:1234:9223372036854775807::")
	e.BoolField(7, false)
	e.StringListField(8, []string{"HIVEFULLACIDREAD", "HIVEFULLACIDWRITE", "HIVEMANAGEDINSERTWRITE", "EXTREAD", "EXTWRITE", "HIVEMANAGESTATS"})
	e.StringField(9, "trino-coordinator-1.prod.example.com")
	e.StringField(10, "hive")
	e.I64Field(11, -1)
	e.Stop()
	e.Stop()
	return e.B
}

func fieldSchemas(e *Encoder, id int16, n int, prefix string) {
	e.FieldBegin(TList, id)
	e.ListBegin(TStruct, n)
	for i := 0; i < n; i++ {
		e.StringField(1, fmt.Sprintf("%s_%03d", prefix, i))
		e.StringField(2, "decimal(18,4)")
		e.StringField(3, "amount in the order currency, net of tax")
		e.Stop()
	}
}

// getTableResult is a get_table_req result struct (success set) holding a
// wide table: about 20 KiB with its header.
func getTableResult() []byte {
	var e Encoder
	e.FieldBegin(TStruct, 0) // success: GetTableResult
	e.FieldBegin(TStruct, 1) // table: Table
	e.StringField(1, "fact_orders_daily_partitioned")
	e.StringField(2, "sales_warehouse")
	e.StringField(3, "etl_service")
	e.I32Field(4, 1700000000)
	e.I32Field(5, 0)
	e.I32Field(6, 0)
	e.FieldBegin(TStruct, 7) // sd: StorageDescriptor
	fieldSchemas(&e, 1, 280, "order_amount_column")
	e.StringField(2, "s3a://warehouse/sales_warehouse.db/fact_orders_daily_partitioned")
	e.StringField(3, "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat")
	e.StringField(4, "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat")
	e.BoolField(5, false)
	e.I32Field(6, -1)
	e.FieldBegin(TStruct, 7) // serdeInfo
	e.StringField(2, "org.apache.hadoop.hive.ql.io.orc.OrcSerde")
	e.StringMapField(3, []string{"serialization.format"}, map[string]string{"serialization.format": "1"})
	e.Stop()
	e.StringListField(8, nil)
	e.FieldBegin(TList, 9)
	e.ListBegin(TStruct, 0)
	e.StringMapField(10, nil, nil)
	e.Stop()
	fieldSchemas(&e, 8, 2, "ds")
	keys := []string{"COLUMN_STATS_ACCURATE", "numFiles", "numRows", "totalSize", "transient_lastDdlTime"}
	e.StringMapField(9, keys, map[string]string{
		"COLUMN_STATS_ACCURATE": `{"BASIC_STATS":"true"}`, "numFiles": "1200",
		"numRows": "987654321", "totalSize": "123456789012", "transient_lastDdlTime": "1700000000",
	})
	e.FieldBegin(TDouble, 20) // an unknown field of every kind the skipper knows
	e.Double(3.5)
	e.FieldBegin(TI16, 21)
	e.I16(-2)
	e.FieldBegin(TByte, 22)
	e.Byte(7)
	e.FieldBegin(TSet, 23)
	e.ListBegin(TI64, 3)
	e.I64(1)
	e.I64(2)
	e.I64(3)
	e.FieldBegin(TUUID, 24)
	e.B = append(e.B, make([]byte, 16)...)
	e.StringField(12, "MANAGED_TABLE")
	e.Stop()
	e.Stop()
	e.Stop()
	return e.B
}

// nested returns a body of structs nested so that the nesting depth,
// counting the body struct itself as 1, is depth.
func nested(depth int) []byte {
	var e Encoder
	for level := 1; level < depth; level++ {
		e.FieldBegin(TStruct, 1)
	}
	for level := 0; level < depth; level++ {
		e.Stop()
	}
	return e.B
}

// nestedLists returns a body with a list<list<...<i32>>> field so that
// the value nesting (body struct included) reaches depth.
func nestedLists(depth int) []byte {
	var e Encoder
	e.FieldBegin(TList, 1)
	for level := 2; level < depth; level++ {
		e.ListBegin(TList, 1)
	}
	e.ListBegin(TI32, 1)
	e.I32(42)
	e.Stop()
	return e.B
}
