package demohms

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// stampDDLTime sets transient_lastDdlTime when it is missing or 0, as HMS
// does on create and alter.
func stampDDLTime(p map[string]string, now int32) {
	if v, ok := p[ddlTime]; !ok || v == "" || v == "0" {
		p[ddlTime] = strconv.Itoa(int(now))
	}
}

// ---- databases ----

func hGetAllDatabases(c *conn, a *tval, e *wire.Encoder) error {
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	return okStrings(e, slices.Sorted(maps.Keys(c.s.dbs)))
}

func hGetDatabases(c *conn, a *tval, e *wire.Encoder) error {
	cat, pat, null := splitDBName(a.str(1))
	if null {
		pat = ""
	}
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	var out []string
	if cat == defaultCatalog {
		for _, n := range slices.Sorted(maps.Keys(c.s.dbs)) {
			if matchPattern(pat, n) {
				out = append(out, n)
			}
		}
	}
	return okStrings(e, out)
}

func (c *conn) getDatabase(cat, name string, e *wire.Encoder) error {
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	de := c.s.lookupDB(cat, name)
	if de == nil {
		return noSuchObject("database " + cat + "." + name)
	}
	e.FieldBegin(wire.TStruct, 0)
	encDatabase(e, de.db)
	return nil
}

func hGetDatabase(c *conn, a *tval, e *wire.Encoder) error {
	cat, name, _ := splitDBName(a.str(1))
	return c.getDatabase(cat, name, e)
}

func hGetDatabaseReq(c *conn, a *tval, e *wire.Encoder) error {
	r := a.sub(1)
	return c.getDatabase(catOr(r.str(2)), hms.NormalizeString(r.str(1)), e)
}

func hCreateDatabase(c *conn, a *tval, e *wire.Encoder) error {
	d := decDatabase(a.sub(1))
	d.Name = hms.NormalizeString(d.Name)
	if !validName.MatchString(d.Name) {
		return invalidObject(d.Name + " is not a valid database name")
	}
	d.CatalogName = catOr(d.CatalogName)
	if d.CatalogName != defaultCatalog {
		return invalidObject("No such catalog " + d.CatalogName)
	}
	if d.LocationURI == "" {
		d.LocationURI = warehouse + "/" + d.Name + ".db"
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dbs[d.Name] != nil {
		return alreadyExists("Database " + d.Name + " already exists")
	}
	s.dbs[d.Name] = &dbEntry{db: d, tables: map[string]*tableEntry{}}
	s.emit("CREATE_DATABASE", d.Name, "", nil)
	return nil
}

func hDropDatabase(c *conn, a *tval, e *wire.Encoder) error {
	cat, name, _ := splitDBName(a.str(1))
	cascade := a.boolean(3, false)
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == "default" && cat == defaultCatalog {
		return metaErr("Can not drop default database in catalog hive")
	}
	de := s.lookupDB(cat, name)
	if de == nil {
		return noSuchObject("database " + cat + "." + name)
	}
	if len(de.tables) > 0 && !cascade {
		return invalidOperation("Database " + name + " is not empty. One or more tables exist.")
	}
	for _, tn := range de.tableNames() {
		s.emit("DROP_TABLE", name, tn, map[string]any{
			"tableType": de.tables[tn].t.TableType, "tableObjJson": tableObjJSON(name, tn)})
	}
	delete(s.dbs, name)
	s.emit("DROP_DATABASE", name, "", nil)
	return nil
}

func hAlterDatabase(c *conn, a *tval, e *wire.Encoder) error {
	cat, name, _ := splitDBName(a.str(1))
	nd := decDatabase(a.sub(2))
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	de := s.lookupDB(cat, name)
	if de == nil {
		return noSuchObject("There is no database " + cat + "." + name)
	}
	// As ObjectStore.alterDatabase: name and catalog never change.
	d := *de.db
	if nd.Parameters != nil && a.sub(2).has(4) {
		d.Parameters = nd.Parameters
	}
	if nd.OwnerName != "" {
		d.OwnerName, d.OwnerType = nd.OwnerName, nd.OwnerType
	}
	if nd.LocationURI != "" {
		d.LocationURI = nd.LocationURI
	}
	if nd.Description != "" {
		d.Description = nd.Description
	}
	de.db = &d
	s.emit("ALTER_DATABASE", name, "", nil)
	return nil
}

// ---- table listings ----

// tablesMatching lists table names of a database by pattern and type.
func (c *conn) tablesMatching(dbArg, pattern, typ string, e *wire.Encoder) error {
	cat, db, _ := splitDBName(dbArg)
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	var out []string
	if de := c.s.lookupDB(cat, db); de != nil {
		for _, n := range de.tableNames() {
			if matchPattern(pattern, n) && (typ == "" || strings.EqualFold(typ, de.tables[n].t.TableType)) && !c.hides(db, n) {
				out = append(out, n)
			}
		}
	}
	return okStrings(e, out)
}

func hGetAllTables(c *conn, a *tval, e *wire.Encoder) error {
	return c.tablesMatching(a.str(1), "", "", e)
}

func hGetTables(c *conn, a *tval, e *wire.Encoder) error {
	return c.tablesMatching(a.str(1), a.str(2), "", e)
}

func hGetTablesByType(c *conn, a *tval, e *wire.Encoder) error {
	return c.tablesMatching(a.str(1), a.str(2), a.str(3), e)
}

func hGetTableMeta(c *conn, a *tval, e *wire.Encoder) error {
	cat, dbPat, null := splitDBName(a.str(1))
	if null {
		dbPat = ""
	}
	tblPat, types := a.str(2), a.strList(3)
	s := c.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*table
	if cat == defaultCatalog {
		for _, dn := range slices.Sorted(maps.Keys(s.dbs)) {
			if !matchPattern(dbPat, dn) {
				continue
			}
			de := s.dbs[dn]
			for _, tn := range de.tableNames() {
				t := de.tables[tn].t
				if matchPattern(tblPat, tn) && (len(types) == 0 || slices.Contains(types, t.TableType)) {
					out = append(out, t)
				}
			}
		}
	}
	e.FieldBegin(wire.TList, 0)
	e.ListBegin(wire.TStruct, len(out))
	for _, t := range out {
		e.StringField(1, t.DBName)
		e.StringField(2, t.TableName)
		e.StringField(3, t.TableType)
		if cm, ok := t.Parameters["comment"]; ok {
			e.StringField(4, cm)
		}
		e.StringField(5, t.CatName)
		e.Stop()
	}
	return nil
}

// ---- table reads ----

func hGetTable(c *conn, a *tval, e *wire.Encoder) error {
	cat, db, _ := splitDBName(a.str(1))
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	te := c.s.lookupTable(cat, db, a.str(2))
	if te == nil || c.hides(db, a.str(2)) {
		return tableNotFound(cat, db, a.str(2))
	}
	e.FieldBegin(wire.TStruct, 0)
	encTable(e, te.t)
	return nil
}

func hGetTableReq(c *conn, a *tval, e *wire.Encoder) error {
	r := a.sub(1)
	cat, db, tbl := catOr(r.str(4)), hms.NormalizeString(r.str(1)), r.str(2)
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	te := c.s.lookupTable(cat, db, tbl)
	if te == nil || c.hides(db, tbl) {
		return tableNotFound(cat, db, tbl)
	}
	return okWrapped(e, wire.TStruct, func() { encTable(e, te.t) })
}

// tablesByName returns the named tables that exist, in request order
// without duplicates; names == nil means all tables of the database.
func (s *Server) tablesByName(cat, db string, names []string, all bool) ([]*table, error) {
	if db == "" {
		return nil, &hmsError{exUnknownDB, "DB name is null or empty"}
	}
	de := s.lookupDB(cat, db)
	if de == nil {
		return nil, &hmsError{exUnknownDB, "Could not find database " + cat + "." + db}
	}
	if all {
		names = de.tableNames()
	}
	var out []*table
	seen := map[string]bool{}
	for _, n := range names {
		n = hms.NormalizeString(n)
		if te := de.tables[n]; te != nil && !seen[n] {
			seen[n] = true
			out = append(out, te.t)
		}
	}
	return out, nil
}

func hGetTableObjectsByName(c *conn, a *tval, e *wire.Encoder) error {
	cat, db, _ := splitDBName(a.str(1))
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	ts, err := c.s.tablesByName(cat, db, a.strList(2), false)
	if err != nil {
		return err
	}
	ts = c.visible(db, ts)
	e.FieldBegin(wire.TList, 0)
	encTableList(e, ts)
	return nil
}

func hGetTableObjectsByNameReq(c *conn, a *tval, e *wire.Encoder) error {
	r := a.sub(1)
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	ts, err := c.s.tablesByName(catOr(r.str(4)), hms.NormalizeString(r.str(1)), r.strList(2), !r.has(2))
	if err != nil {
		return err
	}
	ts = c.visible(r.str(1), ts)
	return okWrapped(e, wire.TList, func() { encTableList(e, ts) })
}

// visible leaves out the tables Config.Hidden hides from the user.
func (c *conn) visible(db string, ts []*table) []*table {
	if c.s.cfg.Hidden == nil {
		return ts
	}
	out := ts[:0:0]
	for _, t := range ts {
		if !c.hides(db, t.TableName) {
			out = append(out, t)
		}
	}
	return out
}

// hGetFields answers get_fields (columns) and get_schema (columns then
// partition keys).
func hGetFields(withKeys bool) handler {
	return func(c *conn, a *tval, e *wire.Encoder) error {
		cat, db, _ := splitDBName(a.str(1))
		c.s.mu.RLock()
		defer c.s.mu.RUnlock()
		te := c.s.lookupTable(cat, db, a.str(2))
		if te == nil {
			return &hmsError{exUnknownTable, qualified(cat, db, strings.ToLower(a.str(2))) + " table not found"}
		}
		cols := te.t.SD.Cols
		if withKeys {
			cols = append(slices.Clone(cols), te.t.PartitionKeys...)
		}
		encFieldSchemaList(e, 0, cols)
		return nil
	}
}

// ---- table writes ----

func hCreateTable(c *conn, a *tval, e *wire.Encoder) error {
	t := decTable(a.sub(1))
	t.TableName, t.DBName = hms.NormalizeString(t.TableName), hms.NormalizeString(t.DBName)
	if !validName.MatchString(t.TableName) {
		return invalidObject(t.TableName + " is not a valid object name")
	}
	t.CatName = catOr(t.CatName)
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	de := s.lookupDB(t.CatName, t.DBName)
	if de == nil {
		return noSuchObject("The database " + t.CatName + "." + t.DBName + " does not exist")
	}
	if de.tables[t.TableName] != nil {
		return alreadyExists("Table " + qualified(t.CatName, t.DBName, t.TableName) + " already exists")
	}
	now := c.s.nowSec()
	t.CreateTime = now
	stampDDLTime(t.Parameters, now)
	if t.TableType == "" {
		t.TableType = "MANAGED_TABLE"
		if strings.EqualFold(t.Parameters["EXTERNAL"], "TRUE") {
			t.TableType = "EXTERNAL_TABLE"
		}
	}
	if t.SD.Location == "" && t.TableType != "VIRTUAL_VIEW" {
		t.SD.Location = de.db.LocationURI + "/" + t.TableName
	}
	de.tables[t.TableName] = &tableEntry{t: t, parts: map[string]*partition{}}
	s.emit("CREATE_TABLE", t.DBName, t.TableName, map[string]any{
		"tableType": t.TableType, "tableObjJson": tableObjJSON(t.DBName, t.TableName)})
	return nil
}

func hDropTable(c *conn, a *tval, e *wire.Encoder) error {
	cat, db, _ := splitDBName(a.str(1))
	tbl := hms.NormalizeString(a.str(2))
	s := c.s
	te, unlock := s.lockTable(cat, db, tbl)
	defer unlock()
	if te == nil {
		return tableNotFound(cat, db, tbl)
	}
	delete(s.dbs[db].tables, tbl)
	s.emit("DROP_TABLE", db, tbl, map[string]any{
		"tableType": te.t.TableType, "tableObjJson": tableObjJSON(db, tbl)})
	return nil
}

func sameKeys(a, b []fieldSchema) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !strings.EqualFold(a[i].Name, b[i].Name) || !strings.EqualFold(a[i].Type, b[i].Type) {
			return false
		}
	}
	return true
}

// hAlterTable handles the alter_table family, renames included: a rename
// moves the table and all its partitions (and, for a managed table in its
// default location, their locations) and logs one ALTER_TABLE event under
// the new name.
func hAlterTable(cascadeArg bool) handler {
	return func(c *conn, a *tval, e *wire.Encoder) error {
		cat, db, _ := splitDBName(a.str(1))
		old := hms.NormalizeString(a.str(2))
		nt := decTable(a.sub(3))
		cascade := cascadeArg && a.boolean(4, false) ||
			!cascadeArg && strings.EqualFold(a.sub(4).strMap(1)["CASCADE"], "true")
		nt.TableName, nt.DBName = hms.NormalizeString(nt.TableName), hms.NormalizeString(nt.DBName)
		if nt.TableName == "" {
			nt.TableName = old
		}
		if nt.DBName == "" {
			nt.DBName = db
		}
		if !validName.MatchString(nt.TableName) {
			return invalidOperation(nt.TableName + " is not a valid object name")
		}
		s := c.s
		te, unlock := s.lockTable(cat, db, old)
		defer unlock()
		if te == nil {
			return invalidOperation("table " + qualified(cat, db, old) + " doesn't exist")
		}
		rename := nt.DBName != db || nt.TableName != old
		var dst *dbEntry
		if rename {
			if dst = s.lookupDB(cat, nt.DBName); dst == nil {
				return invalidOperation("Unable to change partition or table. Database " + nt.DBName +
					" does not exist Check metastore logs for detailed stack.")
			}
			if dst.tables[nt.TableName] != nil {
				return invalidOperation("new table " + qualified(cat, nt.DBName, nt.TableName) + " already exists")
			}
		}
		if !sameKeys(te.t.PartitionKeys, nt.PartitionKeys) {
			return invalidOperation("partition keys can not be changed.")
		}
		ot := te.t
		if nt.SD.Location == "" {
			nt.SD.Location = ot.SD.Location
		}
		nt.CatName, nt.CreateTime = cat, ot.CreateTime
		if nt.TableType == "" {
			nt.TableType = ot.TableType
		}
		stampDDLTime(nt.Parameters, c.s.nowSec())
		if rename {
			oldLoc := s.dbs[db].db.LocationURI + "/" + old
			if ot.TableType == "MANAGED_TABLE" && nt.SD.Location == oldLoc {
				newLoc := dst.db.LocationURI + "/" + nt.TableName
				nt.SD.Location = newLoc
				for _, p := range te.parts {
					if rest, ok := strings.CutPrefix(p.SD.Location, oldLoc); ok {
						p.SD.Location = newLoc + rest
					}
				}
			}
			for _, p := range te.parts {
				p.DBName, p.TableName = nt.DBName, nt.TableName
			}
			delete(s.dbs[db].tables, old)
			dst.tables[nt.TableName] = te
		}
		if cascade {
			for _, p := range te.parts {
				p.SD.Cols = slices.Clone(nt.SD.Cols)
			}
		}
		te.t = nt
		s.emit("ALTER_TABLE", nt.DBName, nt.TableName, map[string]any{
			"tableType": nt.TableType, "isTruncateOp": "false",
			"oldDb": db, "oldTable": old,
			"tableObjBeforeJson": tableObjJSON(db, old),
			"tableObjAfterJson":  tableObjJSON(nt.DBName, nt.TableName),
		})
		return nil
	}
}
