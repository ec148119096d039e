package hmsreq

import "github.com/hmsproxy/hmsproxy/thrift/wire"

// The metastore structs below write every field a Java client writes for a
// complete object (field ids of shared/hms-protocol.md §4.11), with zero
// values where the Go field is zero, so that real metastores accept them.

// Column is a FieldSchema: a column or a partition key.
type Column struct{ Name, Type, Comment string }

func appendColumns(e *wire.Encoder, id int16, cols []Column) {
	appendList(e, id, wire.TStruct, cols, func(e *wire.Encoder, c Column) {
		e.StringField(1, c.Name)
		e.StringField(2, c.Type)
		e.StringField(3, c.Comment)
		e.Stop()
	})
}

// SerDeInfo names a table's serializer.
type SerDeInfo struct {
	Name, Lib string // Lib is the serializationLib class
	Params    map[string]string
}

// StorageDescriptor is where and how a table or partition is stored. It is
// written unbucketed (numBuckets -1), unsorted and uncompressed.
type StorageDescriptor struct {
	Cols                      []Column
	Location                  string
	InputFormat, OutputFormat string
	SerDe                     SerDeInfo
	Params                    map[string]string
}

// TextSD is a text-format StorageDescriptor with LazySimpleSerDe, Hive's
// default for a new table.
func TextSD(location string, cols ...Column) StorageDescriptor {
	return formatSD(location, cols, "org.apache.hadoop.mapred.TextInputFormat",
		"org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat", "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe")
}

// ORCSD is an ORC StorageDescriptor.
func ORCSD(location string, cols ...Column) StorageDescriptor {
	return formatSD(location, cols, "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
		"org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat", "org.apache.hadoop.hive.ql.io.orc.OrcSerde")
}

// formatSD is a StorageDescriptor of one file format: its input and
// output format classes and its SerDe, which Hive gives
// serialization.format 1.
func formatSD(location string, cols []Column, input, output, serde string) StorageDescriptor {
	return StorageDescriptor{Cols: cols, Location: location, InputFormat: input, OutputFormat: output,
		SerDe: SerDeInfo{Lib: serde, Params: map[string]string{"serialization.format": "1"}}}
}

// Append writes sd as struct field id.
func (sd StorageDescriptor) Append(e *wire.Encoder, id int16) {
	e.FieldBegin(wire.TStruct, id)
	appendColumns(e, 1, sd.Cols)
	e.StringField(2, sd.Location)
	e.StringField(3, sd.InputFormat)
	e.StringField(4, sd.OutputFormat)
	e.BoolField(5, false)
	e.I32Field(6, -1)
	e.FieldBegin(wire.TStruct, 7)
	e.StringField(1, sd.SerDe.Name)
	e.StringField(2, sd.SerDe.Lib)
	appendMap(e, 3, sd.SerDe.Params)
	e.Stop()
	e.StringListField(8, nil)
	e.FieldBegin(wire.TList, 9) // sortCols
	e.ListBegin(wire.TStruct, 0)
	appendMap(e, 10, sd.Params)
	e.Stop()
}

// Database is a Database. Its owner, when set, is a user.
type Database struct {
	Name, Description, Location string
	Params                      map[string]string
	Owner                       string // "": no ownerName and ownerType fields
}

// Append writes d as struct field id.
func (d Database) Append(e *wire.Encoder, id int16) {
	e.FieldBegin(wire.TStruct, id)
	e.StringField(1, d.Name)
	e.StringField(2, d.Description)
	e.StringField(3, d.Location)
	appendMap(e, 4, d.Params)
	if d.Owner != "" {
		e.StringField(6, d.Owner)
		e.I32Field(7, 1) // PrincipalType USER
	}
	e.Stop()
}

// Field is d as struct field id of an args or request struct.
func (d Database) Field(id int16) Field { return func(e *wire.Encoder) { d.Append(e, id) } }

// Table is a Table.
type Table struct {
	DB, Name, Owner string
	CreateTime      int32
	SD              StorageDescriptor
	PartKeys        []Column
	Params          map[string]string
	// TableType defaults to MANAGED_TABLE, or EXTERNAL_TABLE when External.
	TableType string
	// External adds the parameter EXTERNAL=TRUE, which Hive requires of an
	// external table.
	External bool
}

// Append writes t as struct field id.
func (t Table) Append(e *wire.Encoder, id int16) {
	params, typ := t.Params, t.TableType
	if t.External {
		params = make(map[string]string, len(t.Params)+1)
		for k, v := range t.Params {
			params[k] = v
		}
		params["EXTERNAL"] = "TRUE"
		if typ == "" {
			typ = "EXTERNAL_TABLE"
		}
	}
	if typ == "" {
		typ = "MANAGED_TABLE"
	}
	e.FieldBegin(wire.TStruct, id)
	e.StringField(1, t.Name)
	e.StringField(2, t.DB)
	e.StringField(3, t.Owner)
	e.I32Field(4, t.CreateTime)
	e.I32Field(5, 0) // lastAccessTime
	e.I32Field(6, 0) // retention
	t.SD.Append(e, 7)
	appendColumns(e, 8, t.PartKeys)
	appendMap(e, 9, params)
	e.StringField(12, typ)
	e.Stop()
}

// Field is t as struct field id of an args or request struct.
func (t Table) Field(id int16) Field { return func(e *wire.Encoder) { t.Append(e, id) } }

// Partition is a Partition.
type Partition struct {
	DB, Table  string
	Values     []string
	CreateTime int32
	SD         StorageDescriptor
	Params     map[string]string
}

// Append writes p as struct field id.
func (p Partition) Append(e *wire.Encoder, id int16) {
	e.FieldBegin(wire.TStruct, id)
	p.appendBody(e)
}

func (p Partition) appendBody(e *wire.Encoder) {
	e.StringListField(1, p.Values)
	e.StringField(2, p.DB)
	e.StringField(3, p.Table)
	e.I32Field(4, p.CreateTime)
	e.I32Field(5, 0) // lastAccessTime
	p.SD.Append(e, 6)
	appendMap(e, 7, p.Params)
	e.Stop()
}

// Field is p as struct field id of an args or request struct.
func (p Partition) Field(id int16) Field { return func(e *wire.Encoder) { p.Append(e, id) } }

// Partitions is a list<Partition> field, as add_partitions takes.
func Partitions(id int16, ps ...Partition) Field {
	return func(e *wire.Encoder) {
		appendList(e, id, wire.TStruct, ps, func(e *wire.Encoder, p Partition) { p.appendBody(e) })
	}
}
