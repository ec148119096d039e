package hmsreq

import (
	"strconv"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// PartitionShape says how ShapedPartition encodes a Partition: which Hive
// version's fields it carries and in what order.
type PartitionShape struct {
	Hive     string // "2.3", "3.1" or "4.0": the fields that version writes
	NoSD     bool
	NoLoc    bool // the sd has no location (a view's partition, or unset)
	LocFirst bool // the location is the sd's first field
	SDFirst  bool // the sd comes before every other field
	Unknown  bool // fields of a later version this code has never heard of
}

// shapeSD writes a StorageDescriptor as field 6, its location loc.
func shapeSD(e *wire.Encoder, sh PartitionShape, loc string) {
	e.FieldBegin(wire.TStruct, 6)
	if sh.LocFirst && !sh.NoLoc {
		e.StringField(2, loc)
	}
	e.FieldBegin(wire.TList, 1)
	e.ListBegin(wire.TStruct, 12)
	for i := 0; i < 12; i++ {
		e.StringField(1, "col_"+strconv.Itoa(i))
		e.StringField(2, "string")
		if i%3 == 0 {
			e.StringField(3, "a comment")
		}
		e.Stop()
	}
	if !sh.LocFirst && !sh.NoLoc {
		e.StringField(2, loc)
	}
	e.StringField(3, "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat")
	e.StringField(4, "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat")
	e.BoolField(5, false)
	e.I32Field(6, -1)
	e.FieldBegin(wire.TStruct, 7)
	e.StringField(2, "org.apache.hadoop.hive.ql.io.orc.OrcSerde")
	e.StringMapField(3, []string{"serialization.format"}, map[string]string{"serialization.format": "1"})
	e.Stop()
	e.StringListField(8, nil)
	e.FieldBegin(wire.TList, 9)
	e.ListBegin(wire.TStruct, 0)
	e.StringMapField(10, nil, nil)
	if sh.Hive != "2.3" {
		e.FieldBegin(wire.TStruct, 11) // skewedInfo
		e.StringListField(1, nil)
		e.Stop()
		e.BoolField(12, false)
	}
	if sh.Unknown {
		e.I64Field(99, 42)
	}
	e.Stop()
}

// ShapedPartition encodes a Partition struct (through its STOP) of shape
// sh with values vals, its location naming vals[0]: the shapes a
// metastore of each version, or a later one, may send, for the tests of
// code that cuts partitions apart.
func ShapedPartition(sh PartitionShape, vals ...string) []byte {
	var e wire.Encoder
	loc := "hdfs://nn/warehouse/db.db/t/ds=" + vals[0]
	if sh.SDFirst && !sh.NoSD {
		shapeSD(&e, sh, loc)
	}
	e.StringListField(1, vals)
	e.StringField(2, "db")
	e.StringField(3, "t")
	e.I32Field(4, 1700000000)
	e.I32Field(5, 0)
	if !sh.SDFirst && !sh.NoSD {
		shapeSD(&e, sh, loc)
	}
	e.StringMapField(7, []string{"numRows"}, map[string]string{"numRows": vals[0]})
	if sh.Hive != "2.3" {
		e.StringField(9, "hive")
		e.I64Field(10, 7)
		e.BoolField(11, true)
	}
	if sh.Hive == "4.0" {
		e.FieldBegin(wire.TStruct, 13) // fileMetadata
		e.Stop()
	}
	if sh.Unknown {
		e.FieldBegin(wire.TStruct, 77)
		e.StringField(1, "from the future")
		e.FieldBegin(wire.TStruct, 6) // an sd-looking field nested elsewhere
		e.StringField(2, "not a location")
		e.Stop()
		e.Stop()
	}
	e.Stop()
	return e.B
}
