package twin

import (
	"slices"
	"strings"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// enc builds the args of one call. Its helpers write the fields a Java
// client writes, so that every metastore version takes them.
type enc struct {
	wire.Encoder
	ns string
	// fed is the federation the call goes through, nil for none; direct
	// says the call is the one made straight to a metastore.
	fed    *federation
	direct bool
}

func (e *enc) str(id int16, s string) { e.StringField(id, s) }

func (e *enc) name(id int16, n Name) { e.StringField(id, n.Render(e.ns)) }

// db writes a legacy db argument: a catalog folded in, and under
// federation the name the call's side uses (see dbString).
func (e *enc) db(id int16, d DBName) {
	cat, rest, folded := strings.Cut(d.Cat, "#")
	if folded && rest != "" && e.direct && e.fed.renames(d.Base) {
		// What follows the catalog's '#' is the database name as
		// written, blanks and all.
		e.StringField(id, cat+"#"+e.fed.localOf(rest+d.renderCanon(e.fed.prefix+Canon(e.ns, d.Base))))
		return
	}
	e.StringField(id, d.Cat+e.dbString(d.Name))
}

// dbName writes a database name field.
func (e *enc) dbName(id int16, n Name) { e.StringField(id, e.dbString(n)) }

// dbString is a database name as this side of a call writes it. In a
// prefixed federation a member's database is the prefix and its own name
// to clients; the proxy sends the member its own name, normalised, so
// the call made straight to the member does too.
func (e *enc) dbString(n Name) string {
	f := e.fed
	if !f.renames(n.Base) {
		return n.Render(e.ns)
	}
	if e.direct {
		return f.local(e.ns, n)
	}
	return n.renderCanon(f.prefix + Canon(e.ns, n.Base))
}

func (e *enc) strs(id int16, v []string) { e.StringListField(id, v) }

func (e *enc) i16(id int16, v int16) {
	e.FieldBegin(wire.TI16, id)
	e.I16(v)
}

func (e *enc) begin(id int16) { e.FieldBegin(wire.TStruct, id) }

func (e *enc) end() { e.Stop() }

// strMap writes a map<string,string> with its keys sorted, so that equal
// maps encode to equal bytes.
func (e *enc) strMap(id int16, m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.StringMapField(id, keys, m)
}

// Col is a column or a partition key.
type Col struct{ Name, Type string }

func (e *enc) cols(id int16, cols []Col) {
	e.FieldBegin(wire.TList, id)
	e.ListBegin(wire.TStruct, len(cols))
	for _, c := range cols {
		e.str(1, c.Name)
		e.str(2, c.Type)
		e.str(3, "")
		e.end()
	}
}

// sd writes a text-format storage descriptor.
func (e *enc) sd(id int16, cols []Col, location string) {
	e.begin(id)
	e.cols(1, cols)
	e.str(2, location)
	e.str(3, "org.apache.hadoop.mapred.TextInputFormat")
	e.str(4, "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat")
	e.BoolField(5, false)
	e.I32Field(6, -1)
	e.begin(7)
	e.str(1, "")
	e.str(2, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe")
	e.strMap(3, map[string]string{"serialization.format": "1"})
	e.end()
	e.strs(8, nil)
	e.FieldBegin(wire.TList, 9)
	e.ListBegin(wire.TStruct, 0)
	e.strMap(10, nil)
	e.end()
}

// TableKind is what sort of table a generated create makes.
type TableKind uint8

const (
	Managed    TableKind = iota // a managed text table
	External                    // EXTERNAL_TABLE
	InsertOnly                  // a managed insert-only transactional table
	Iceberg                     // an external table as Iceberg's HiveCatalog writes it
)

// TableSpec is the shape of a generated table.
type TableSpec struct {
	Kind   TableKind
	Cols   []Col
	Keys   []Col
	Params map[string]string
}

// table writes a Table struct.
func (e *enc) table(id int16, db DBName, name Name, t TableSpec, location string) {
	params := map[string]string{}
	for k, v := range t.Params {
		params[k] = v
	}
	typ := "MANAGED_TABLE"
	switch t.Kind {
	case External, Iceberg:
		typ = "EXTERNAL_TABLE"
		params["EXTERNAL"] = "TRUE"
	case InsertOnly:
		params["transactional"] = "true"
		params["transactional_properties"] = "insert_only"
	}
	e.begin(id)
	e.str(1, name.Render(e.ns))
	e.str(2, e.dbString(db.Name))
	e.str(3, "twin")
	e.I32Field(4, 0)
	e.I32Field(5, 0)
	e.I32Field(6, 0)
	e.sd(7, t.Cols, location)
	e.cols(8, t.Keys)
	e.strMap(9, params)
	e.str(12, typ)
	e.end()
}

// partition writes a Partition struct.
func (e *enc) partition(id int16, db DBName, tbl Name, vals []string, params map[string]string, cols []Col) {
	if id >= 0 {
		e.begin(id)
	}
	e.strs(1, vals)
	e.str(2, e.dbString(db.Name))
	e.str(3, tbl.Render(e.ns))
	e.I32Field(4, 0)
	e.I32Field(5, 0)
	e.sd(6, cols, "")
	e.strMap(7, params)
	e.end()
}

// colStats writes a ColumnStatistics of one column (a long or a string
// column by its type), table level when part is "".
func (e *enc) colStats(id int16, db DBName, tbl Name, part string, col Col, n int64) {
	e.begin(id)
	e.begin(1) // statsDesc
	e.BoolField(1, part == "")
	e.str(2, e.dbString(db.Name))
	e.str(3, tbl.Render(e.ns))
	if part != "" {
		e.str(4, part)
	}
	e.I64Field(5, 1_700_000_000)
	e.end()
	e.FieldBegin(wire.TList, 2) // statsObj
	e.ListBegin(wire.TStruct, 1)
	e.str(1, col.Name)
	e.str(2, col.Type)
	e.begin(3) // statsData union
	if isIntegral(col.Type) {
		e.begin(2) // longStats
		e.I64Field(1, 0)
		e.I64Field(2, n)
		e.I64Field(3, n%3)
		e.I64Field(4, n)
	} else {
		e.begin(4) // stringStats
		e.I64Field(1, n)
		e.FieldBegin(wire.TDouble, 2)
		e.Double(float64(n) / 2)
		e.I64Field(3, n%3)
		e.I64Field(4, n)
	}
	e.end()
	e.end() // union
	e.end() // obj
	e.end() // ColumnStatistics
}

func isIntegral(t string) bool {
	switch t {
	case "int", "bigint", "smallint", "tinyint":
		return true
	}
	return false
}

// function writes a Function struct.
func (e *enc) function(id int16, db DBName, fn Name, class string) {
	e.begin(id)
	e.str(1, fn.Render(e.ns))
	e.str(2, e.dbString(db.Name))
	e.str(3, class)
	e.str(4, "twin")
	e.I32Field(5, 1) // USER
	e.I32Field(6, 0)
	e.I32Field(7, 1) // JAVA
	e.FieldBegin(wire.TList, 8)
	e.ListBegin(wire.TStruct, 0)
	e.end()
}
