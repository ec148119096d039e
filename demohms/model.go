package demohms

import (
	"maps"
	"slices"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// The catalog objects, with the Thrift field ids of hive_metastore.thrift
// (3.1 server view: catName/catalogName and Table.ownerType are written).
// Fields a demo has no use for (privileges, 4.0 additions) are dropped on
// decode; SkewedInfo is kept as received.

const defaultCatalog = "hive"

// PrincipalType USER.
const principalUser = 1

type fieldSchema struct {
	Name, Type, Comment string // Comment written only when non-empty
}

type serDeInfo struct {
	Name, SerializationLib string
	Parameters             map[string]string
}

type order struct {
	Col   string
	Order int32
}

type storageDescriptor struct {
	Cols                   []fieldSchema
	Location               string
	InputFormat            string
	OutputFormat           string
	Compressed             bool
	NumBuckets             int32
	SerDe                  serDeInfo
	BucketCols             []string
	SortCols               []order
	Parameters             map[string]string
	Skewed                 *tval // SkewedInfo as received; nil: empty one
	StoredAsSubDirectories bool
}

type database struct {
	Name, Description, LocationURI string
	Parameters                     map[string]string
	OwnerName                      string
	OwnerType                      int32 // 0: not set
	CatalogName                    string
}

type table struct {
	TableName, DBName, Owner       string
	CreateTime, LastAccessTime     int32
	Retention                      int32
	SD                             storageDescriptor
	PartitionKeys                  []fieldSchema
	Parameters                     map[string]string
	ViewOriginalText, ViewExpanded string // written only when non-empty
	TableType                      string
	Temporary                      *bool
	RewriteEnabled                 bool
	CatName                        string
	OwnerType                      int32
}

type partition struct {
	Values                     []string
	DBName, TableName          string
	CreateTime, LastAccessTime int32
	SD                         storageDescriptor
	Parameters                 map[string]string
	CatName                    string
	hadSD                      bool // decoded from a request that carried sd
}

type notificationEvent struct {
	EventID       int64
	EventTime     int32
	EventType     string
	DBName        string
	TableName     string // "" for database events
	Message       string
	MessageFormat string
	CatName       string
}

// ---- decoding -------------------------------------------------------------

func decFieldSchemas(l []*tval) []fieldSchema {
	out := make([]fieldSchema, 0, len(l))
	for _, f := range l {
		if f.t != wire.TStruct {
			continue
		}
		out = append(out, fieldSchema{Name: f.str(1), Type: f.str(2), Comment: f.str(3)})
	}
	return out
}

func decSD(v *tval) storageDescriptor {
	sd := storageDescriptor{
		Cols:         decFieldSchemas(v.list(1)),
		Location:     v.str(2),
		InputFormat:  v.str(3),
		OutputFormat: v.str(4),
		Compressed:   v.boolean(5, false),
		NumBuckets:   int32(v.integer(6, 0)),
		BucketCols:   v.strList(8),
		Parameters:   nonNil(v.strMap(10)),
		Skewed:       v.sub(11),

		StoredAsSubDirectories: v.boolean(12, false),
	}
	if s := v.sub(7); s != nil {
		sd.SerDe = serDeInfo{Name: s.str(1), SerializationLib: s.str(2), Parameters: nonNil(s.strMap(3))}
	} else {
		sd.SerDe.Parameters = map[string]string{}
	}
	for _, o := range v.list(9) {
		if o.t == wire.TStruct {
			sd.SortCols = append(sd.SortCols, order{Col: o.str(1), Order: int32(o.integer(2, 0))})
		}
	}
	return sd
}

func decDatabase(v *tval) *database {
	return &database{
		Name:        v.str(1),
		Description: v.str(2),
		LocationURI: v.str(3),
		Parameters:  nonNil(v.strMap(4)),
		OwnerName:   v.str(6),
		OwnerType:   int32(v.integer(7, 0)),
		CatalogName: v.str(8),
	}
}

func decTable(v *tval) *table {
	return &table{
		TableName:        v.str(1),
		DBName:           v.str(2),
		Owner:            v.str(3),
		CreateTime:       int32(v.integer(4, 0)),
		LastAccessTime:   int32(v.integer(5, 0)),
		Retention:        int32(v.integer(6, 0)),
		SD:               decSD(v.sub(7)),
		PartitionKeys:    decFieldSchemas(v.list(8)),
		Parameters:       nonNil(v.strMap(9)),
		ViewOriginalText: v.str(10),
		ViewExpanded:     v.str(11),
		TableType:        v.str(12),
		Temporary:        v.boolPtr(14),
		RewriteEnabled:   v.boolean(15, false),
		CatName:          v.str(17),
		OwnerType:        int32(v.integer(18, principalUser)),
	}
}

// decPartitions decodes the partitions of a list, passing over any
// element that is not a struct.
func decPartitions(vs []*tval) []*partition {
	var ps []*partition
	for _, v := range vs {
		if v.t == wire.TStruct {
			ps = append(ps, decPartition(v))
		}
	}
	return ps
}

func decPartition(v *tval) *partition {
	return &partition{
		Values:         nonNilS(v.strList(1)),
		DBName:         v.str(2),
		TableName:      v.str(3),
		CreateTime:     int32(v.integer(4, 0)),
		LastAccessTime: int32(v.integer(5, 0)),
		SD:             decSD(v.sub(6)),
		Parameters:     nonNil(v.strMap(7)),
		CatName:        v.str(9),
		hadSD:          v.has(6),
	}
}

// ---- encoding -------------------------------------------------------------

func encStringMap(e *wire.Encoder, id int16, m map[string]string) {
	e.StringMapField(id, slices.Sorted(maps.Keys(m)), m)
}

func encFieldSchema(e *wire.Encoder, f fieldSchema) {
	e.StringField(1, f.Name)
	e.StringField(2, f.Type)
	if f.Comment != "" {
		e.StringField(3, f.Comment)
	}
	e.Stop()
}

func encFieldSchemaList(e *wire.Encoder, id int16, l []fieldSchema) {
	if id >= 0 {
		e.FieldBegin(wire.TList, id)
	}
	e.ListBegin(wire.TStruct, len(l))
	for _, f := range l {
		encFieldSchema(e, f)
	}
}

func encSD(e *wire.Encoder, sd *storageDescriptor) {
	encFieldSchemaList(e, 1, sd.Cols)
	e.StringField(2, sd.Location)
	e.StringField(3, sd.InputFormat)
	e.StringField(4, sd.OutputFormat)
	e.BoolField(5, sd.Compressed)
	e.I32Field(6, sd.NumBuckets)
	e.FieldBegin(wire.TStruct, 7)
	if sd.SerDe.Name != "" {
		e.StringField(1, sd.SerDe.Name)
	}
	e.StringField(2, sd.SerDe.SerializationLib)
	encStringMap(e, 3, sd.SerDe.Parameters)
	e.Stop()
	e.StringListField(8, nonNilS(sd.BucketCols))
	e.FieldBegin(wire.TList, 9)
	e.ListBegin(wire.TStruct, len(sd.SortCols))
	for _, o := range sd.SortCols {
		e.StringField(1, o.Col)
		e.I32Field(2, o.Order)
		e.Stop()
	}
	encStringMap(e, 10, sd.Parameters)
	e.FieldBegin(wire.TStruct, 11)
	if sd.Skewed != nil {
		encodeValue(e, sd.Skewed)
	} else { // what HMS returns for a table without skew
		e.StringListField(1, []string{})
		e.FieldBegin(wire.TList, 2)
		e.ListBegin(wire.TList, 0)
		e.FieldBegin(wire.TMap, 3)
		e.MapBegin(wire.TList, wire.TString, 0)
		e.Stop()
	}
	e.BoolField(12, sd.StoredAsSubDirectories)
	e.Stop()
}

func encDatabase(e *wire.Encoder, d *database) {
	e.StringField(1, d.Name)
	e.StringField(2, d.Description)
	e.StringField(3, d.LocationURI)
	encStringMap(e, 4, d.Parameters)
	if d.OwnerName != "" {
		e.StringField(6, d.OwnerName)
	}
	if d.OwnerType != 0 {
		e.I32Field(7, d.OwnerType)
	}
	e.StringField(8, d.CatalogName)
	e.Stop()
}

func encTable(e *wire.Encoder, t *table) {
	e.StringField(1, t.TableName)
	e.StringField(2, t.DBName)
	e.StringField(3, t.Owner)
	e.I32Field(4, t.CreateTime)
	e.I32Field(5, t.LastAccessTime)
	e.I32Field(6, t.Retention)
	e.FieldBegin(wire.TStruct, 7)
	encSD(e, &t.SD)
	encFieldSchemaList(e, 8, t.PartitionKeys)
	encStringMap(e, 9, t.Parameters)
	if t.ViewOriginalText != "" {
		e.StringField(10, t.ViewOriginalText)
	}
	if t.ViewExpanded != "" {
		e.StringField(11, t.ViewExpanded)
	}
	e.StringField(12, t.TableType)
	if t.Temporary != nil {
		e.BoolField(14, *t.Temporary)
	}
	e.BoolField(15, t.RewriteEnabled)
	e.StringField(17, t.CatName)
	e.I32Field(18, t.OwnerType)
	e.Stop()
}

func encPartition(e *wire.Encoder, p *partition) {
	e.StringListField(1, p.Values)
	e.StringField(2, p.DBName)
	e.StringField(3, p.TableName)
	e.I32Field(4, p.CreateTime)
	e.I32Field(5, p.LastAccessTime)
	e.FieldBegin(wire.TStruct, 6)
	encSD(e, &p.SD)
	encStringMap(e, 7, p.Parameters)
	e.StringField(9, p.CatName)
	e.Stop()
}

// encPartitionList writes a list<Partition> value (no field header).
func encPartitionList(e *wire.Encoder, ps []*partition) {
	e.ListBegin(wire.TStruct, len(ps))
	for _, p := range ps {
		encPartition(e, p)
	}
}

func encTableList(e *wire.Encoder, ts []*table) {
	e.ListBegin(wire.TStruct, len(ts))
	for _, t := range ts {
		encTable(e, t)
	}
}

func encEvent(e *wire.Encoder, ev *notificationEvent) {
	e.I64Field(1, ev.EventID)
	e.I32Field(2, ev.EventTime)
	e.StringField(3, ev.EventType)
	e.StringField(4, ev.DBName)
	if ev.TableName != "" {
		e.StringField(5, ev.TableName)
	}
	e.StringField(6, ev.Message)
	e.StringField(7, ev.MessageFormat)
	e.StringField(8, ev.CatName)
	e.Stop()
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func nonNilS(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ---- copies ----------------------------------------------------------------

func (sd storageDescriptor) clone() storageDescriptor {
	sd.Cols = slices.Clone(sd.Cols)
	sd.BucketCols = slices.Clone(sd.BucketCols)
	sd.SortCols = slices.Clone(sd.SortCols)
	sd.Parameters = maps.Clone(sd.Parameters)
	sd.SerDe.Parameters = maps.Clone(sd.SerDe.Parameters)
	return sd // Skewed is never mutated, so it is shared
}
