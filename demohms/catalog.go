package demohms

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

const warehouse = "file:/tmp/demohms/warehouse"

// ddlTime is the parameter HMS stamps on every created or altered table and
// partition.
const ddlTime = "transient_lastDdlTime"

// dbEntry and tableEntry are the catalog tree; all access is under
// Server.mu.
type dbEntry struct {
	db     *database
	tables map[string]*tableEntry // key: lower-case table name
}

type tableEntry struct {
	t     *table
	parts map[string]*partition // key: partition name "k1=v1/k2=v2"
}

func (te *tableEntry) partName(vals []string) string { return partName(te.t.PartitionKeys, vals) }

// sortedParts returns the partitions ordered by name, as HMS orders them.
func (te *tableEntry) sortedParts() []*partition {
	names := slices.Sorted(maps.Keys(te.parts))
	out := make([]*partition, len(names))
	for i, n := range names {
		out[i] = te.parts[n]
	}
	return out
}

func (de *dbEntry) tableNames() []string { return slices.Sorted(maps.Keys(de.tables)) }

// splitDBName splits a legacy db-name argument "@cat#db" (§1.11) into a
// lower-cased catalog and database. dbNull is true for "@cat#" (no db).
func splitDBName(s string) (cat, db string, dbNull bool) {
	cat = defaultCatalog
	if strings.HasPrefix(s, "@") {
		if i := strings.IndexByte(s, '#'); i > 0 {
			cat, s = hms.NormalizeString(s[1:i]), s[i+1:]
			switch s {
			case "":
				return cat, "", true
			case "!":
				return cat, "", false
			}
		}
	}
	return cat, hms.NormalizeString(s), false
}

func catOr(cat string) string {
	if cat == "" {
		return defaultCatalog
	}
	return hms.NormalizeString(cat)
}

func (s *Server) lookupDB(cat, db string) *dbEntry {
	if cat != defaultCatalog {
		return nil
	}
	return s.dbs[db]
}

// lockTable takes s.mu and looks the table up (nil if there is none); the
// caller releases s.mu with unlock.
func (s *Server) lockTable(cat, db, tbl string) (te *tableEntry, unlock func()) {
	s.mu.Lock()
	return s.lookupTable(cat, db, tbl), s.mu.Unlock
}

func (s *Server) lookupTable(cat, db, tbl string) *tableEntry {
	de := s.lookupDB(cat, db)
	if de == nil {
		return nil
	}
	return de.tables[hms.NormalizeString(tbl)]
}

func qualified(cat, db, tbl string) string { return cat + "." + db + "." + tbl }

func tableNotFound(cat, db, tbl string) error {
	return noSuchObject(qualified(cat, db, strings.ToLower(tbl)) + " table not found")
}

var validName = regexp.MustCompile(`^[\w_]+$`)

// matchPattern matches HMS name patterns: alternatives split by '|', '*'
// for any run of characters, case-insensitive. Like HMS, the rest is a
// regular expression; one that does not compile matches literally.
func matchPattern(pattern, name string) bool {
	if pattern == "" || pattern == "*" {
		return true
	}
	for _, sub := range strings.Split(pattern, "|") {
		sub = strings.TrimSpace(sub)
		re, err := regexp.Compile("(?i)^(?:" + strings.ReplaceAll(sub, "*", ".*") + ")$")
		if err != nil {
			if strings.EqualFold(sub, name) {
				return true
			}
			continue
		}
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// ---- partition names ----

// escapePathName escapes a partition key or value as HMS's
// FileUtils.escapePathName does.
func escapePathName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x20, c == 0x7f, strings.IndexByte("\"#%'*/:=?\\{[]^", c) >= 0:
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func unescapePathName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func partName(keys []fieldSchema, vals []string) string {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(escapePathName(strings.ToLower(k.Name)))
		b.WriteByte('=')
		if i < len(vals) {
			b.WriteString(escapePathName(vals[i]))
		}
	}
	return b.String()
}

// valuesFromName parses "k1=v1/k2=v2" into values in the order of keys.
func valuesFromName(keys []fieldSchema, name string) ([]string, error) {
	kv := map[string]string{}
	for _, part := range strings.Split(name, "/") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, metaErr("Invalid partition name " + name)
		}
		kv[strings.ToLower(unescapePathName(k))] = unescapePathName(v)
	}
	if len(kv) != len(keys) {
		return nil, metaErr("Invalid partition name " + name)
	}
	vals := make([]string, len(keys))
	for i, k := range keys {
		v, ok := kv[strings.ToLower(k.Name)]
		if !ok {
			return nil, metaErr("Invalid partition name " + name)
		}
		vals[i] = v
	}
	return vals, nil
}

// javaList renders a list the way java.util.List.toString does.
func javaList(l []string) string { return "[" + strings.Join(l, ", ") + "]" }

// ---- notification log ----

const messageFormat = "json-0.2"

// emit appends an event; the caller holds s.mu. The message is a JSON
// object (keys sorted by encoding/json) using the key names of HMS's
// JSON messages where they exist; table objects are reduced to their
// TJSON name fields ("1" tableName, "2" dbName).
func (s *Server) emit(typ, db, tbl string, msg map[string]any) {
	if s.cfg.NoEventLog {
		return
	}
	now := s.cfg.now()
	if msg == nil {
		msg = map[string]any{}
	}
	msg["server"] = "demohms"
	msg["servicePrincipal"] = ""
	msg["db"] = db
	if tbl != "" {
		msg["table"] = tbl
	}
	msg["timestamp"] = now.Unix()
	b, _ := json.Marshal(msg)
	s.events = append(s.events, notificationEvent{
		EventID: s.nextEvent, EventTime: int32(now.Unix()), EventType: typ,
		DBName: db, TableName: tbl, Message: string(b), MessageFormat: messageFormat,
		CatName: defaultCatalog,
	})
	s.nextEvent++
}

func tableObjJSON(db, tbl string) string {
	b, _ := json.Marshal(map[string]any{"1": map[string]string{"str": tbl}, "2": map[string]string{"str": db}})
	return string(b)
}

func partKV(t *table, vals []string) map[string]string {
	m := make(map[string]string, len(vals))
	for i, k := range t.PartitionKeys {
		if i < len(vals) {
			m[strings.ToLower(k.Name)] = vals[i]
		}
	}
	return m
}

// ---- sample data ----

const seedTime = 1700000000

// Seed adds a deterministic sample catalog: databases demo_db0..demo_db<dbs-1>,
// each with tables t0..t<tablesPerDB-1> (every third one, t2, t5, ..., an
// EXTERNAL_TABLE, the rest MANAGED_TABLE) partitioned by (ds string, hr int)
// with partsPerTable partitions: hour k%24 of day 2024-01-01 + k/24.
// Existing databases of the same names are replaced. Seeding writes no
// notification events.
func (s *Server) Seed(dbs, tablesPerDB, partsPerTable int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < dbs; i++ {
		dbName := fmt.Sprintf("demo_db%d", i)
		de := &dbEntry{
			db: &database{
				Name: dbName, Description: fmt.Sprintf("demo database %d", i),
				LocationURI: warehouse + "/" + dbName + ".db",
				Parameters:  map[string]string{"created_by": "demohms", "seed_index": strconv.Itoa(i)},
				OwnerName:   "demo", OwnerType: principalUser, CatalogName: defaultCatalog,
			},
			tables: map[string]*tableEntry{},
		}
		s.dbs[dbName] = de
		for j := 0; j < tablesPerDB; j++ {
			tn := fmt.Sprintf("t%d", j)
			t := seedTable(de.db, tn, j)
			te := &tableEntry{t: t, parts: map[string]*partition{}}
			de.tables[tn] = te
			for k := 0; k < partsPerTable; k++ {
				vals := []string{time.Date(2024, 1, 1+k/24, 0, 0, 0, 0, time.UTC).Format("2006-01-02"), strconv.Itoa(k % 24)}
				name := te.partName(vals)
				sd := t.SD.clone()
				sd.Location = t.SD.Location + "/" + name
				te.parts[name] = &partition{
					Values: vals, DBName: dbName, TableName: tn,
					CreateTime: seedTime, SD: sd, CatName: defaultCatalog,
					Parameters: map[string]string{
						"numFiles": "1", "numRows": strconv.Itoa(100 + k), "totalSize": strconv.Itoa(4096 + 16*k),
						ddlTime: strconv.Itoa(seedTime),
					},
				}
			}
		}
	}
}

func seedTable(db *database, name string, j int) *table {
	typ := "MANAGED_TABLE"
	params := map[string]string{
		"comment": "demo table " + name, "numRows": "0", ddlTime: strconv.Itoa(seedTime),
		"orc.compress": "ZLIB",
	}
	if j%3 == 2 {
		typ = "EXTERNAL_TABLE"
		params["EXTERNAL"] = "TRUE"
	}
	return &table{
		TableName: name, DBName: db.Name, Owner: "demo", CreateTime: seedTime,
		SD: storageDescriptor{
			Cols: []fieldSchema{
				{Name: "id", Type: "bigint", Comment: "row id"},
				{Name: "name", Type: "string"},
				{Name: "amount", Type: "decimal(10,2)"},
				{Name: "tags", Type: "array<string>"},
			},
			Location:     db.LocationURI + "/" + name,
			InputFormat:  "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
			OutputFormat: "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
			NumBuckets:   -1,
			SerDe: serDeInfo{
				SerializationLib: "org.apache.hadoop.hive.ql.io.orc.OrcSerde",
				Parameters:       map[string]string{"serialization.format": "1"},
			},
			BucketCols: []string{},
			Parameters: map[string]string{},
		},
		PartitionKeys: []fieldSchema{{Name: "ds", Type: "string"}, {Name: "hr", Type: "int"}},
		Parameters:    params,
		TableType:     typ,
		CatName:       defaultCatalog,
		OwnerType:     principalUser,
	}
}
