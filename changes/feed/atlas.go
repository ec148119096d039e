package feed

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// The Atlas format: Apache Atlas v2 hook notifications, as Atlas's own
// HiveHook sends them to its ATLAS_HOOK topic, each in Atlas's
// notification envelope (version 1.0.0, uncompressed, one part). Atlas
// models databases, tables, their storage descriptors and columns, and
// partitions (hive_partition); functions, constraints and statistics have
// no Atlas entity and no Atlas message.
//
// Qualified names are Atlas's: "db@cluster", "db.table@cluster",
// "db.table.column@cluster", "db.table@cluster_storage" for the storage
// descriptor, and "db.table.v1/v2@cluster" (the partition's values) for a
// partition.

// atlasVersion is Atlas's MessageVersion.CURRENT_VERSION.
const atlasVersion = "1.0.0"

type atlasEnvelope struct {
	Version            atlasMsgVersion `json:"version"`
	MsgCompressionKind string          `json:"msgCompressionKind"`
	MsgSplitIdx        int             `json:"msgSplitIdx"`
	MsgSplitCount      int             `json:"msgSplitCount"`
	MsgSourceIP        string          `json:"msgSourceIP,omitempty"`
	MsgCreatedBy       string          `json:"msgCreatedBy"`
	MsgCreationTime    int64           `json:"msgCreationTime"`
	Spooled            bool            `json:"spooled"`
	Message            any             `json:"message"`
}

type atlasMsgVersion struct {
	Version      string `json:"version"`
	VersionParts []int  `json:"versionParts"`
}

type atlasEntity struct {
	TypeName               string         `json:"typeName"`
	GUID                   string         `json:"guid,omitempty"`
	Status                 string         `json:"status,omitempty"`
	Attributes             map[string]any `json:"attributes"`
	RelationshipAttributes map[string]any `json:"relationshipAttributes,omitempty"`
}

type atlasObjectID struct {
	TypeName         string            `json:"typeName"`
	GUID             string            `json:"guid,omitempty"`
	UniqueAttributes map[string]string `json:"uniqueAttributes,omitempty"`
	RelationshipType string            `json:"relationshipType,omitempty"`
}

type atlasEntities struct {
	Entities         []atlasEntity          `json:"entities"`
	ReferredEntities map[string]atlasEntity `json:"referredEntities"`
}

type atlasEntityWithExt struct {
	Entity           atlasEntity            `json:"entity"`
	ReferredEntities map[string]atlasEntity `json:"referredEntities"`
}

type atlasCreate struct {
	Type     string        `json:"type"`
	User     string        `json:"user"`
	Entities atlasEntities `json:"entities"`
}

type atlasPartialUpdate struct {
	Type     string             `json:"type"`
	User     string             `json:"user"`
	EntityID atlasObjectID      `json:"entityId"`
	Entity   atlasEntityWithExt `json:"entity"`
}

type atlasDelete struct {
	Type     string          `json:"type"`
	User     string          `json:"user"`
	Entities []atlasObjectID `json:"entities"`
}

// atlasBuilder builds one change's entities: new entities get negative
// guids, as Atlas's hook gives them, so references within a message
// resolve.
type atlasBuilder struct {
	cluster string
	guid    int
	refs    map[string]atlasEntity
}

func (b *atlasBuilder) nextGUID() string {
	b.guid--
	return strconv.Itoa(b.guid)
}

func qnDB(db, cluster string) string       { return db + "@" + cluster }
func qnTable(db, t, cluster string) string { return db + "." + t + "@" + cluster }

func byQN(typ, qn, rel string) atlasObjectID {
	return atlasObjectID{TypeName: typ, UniqueAttributes: map[string]string{"qualifiedName": qn}, RelationshipType: rel}
}

func (b *atlasBuilder) db(c *Change, d *Database) atlasEntity {
	attrs := map[string]any{"qualifiedName": qnDB(c.DB, b.cluster), "name": c.DB, "clusterName": b.cluster}
	if d != nil {
		attrs["location"], attrs["description"], attrs["owner"] = d.Location, d.Description, d.Owner
		if len(d.Parameters) > 0 {
			attrs["parameters"] = d.Parameters
		}
	}
	return atlasEntity{TypeName: "hive_db", GUID: b.nextGUID(), Status: "ACTIVE", Attributes: attrs}
}

// table builds a hive_table and, where the table is known, its storage
// descriptor and columns as referred entities.
func (b *atlasBuilder) table(db, name string, t *Table) atlasEntity {
	qn := qnTable(db, name, b.cluster)
	e := atlasEntity{TypeName: "hive_table", GUID: b.nextGUID(), Status: "ACTIVE",
		Attributes:             map[string]any{"qualifiedName": qn, "name": name},
		RelationshipAttributes: map[string]any{"db": byQN("hive_db", qnDB(db, b.cluster), "hive_table_db")}}
	if t == nil {
		return e
	}
	e.Attributes["owner"], e.Attributes["tableType"] = t.Owner, t.Type
	e.Attributes["createTime"] = t.CreateTime * 1000
	e.Attributes["temporary"] = false
	if len(t.Parameters) > 0 {
		e.Attributes["parameters"] = t.Parameters
		e.Attributes["comment"] = t.Parameters["comment"]
	}
	if t.ViewText != "" {
		e.Attributes["viewOriginalText"] = t.ViewText
	}
	self := atlasObjectID{TypeName: "hive_table", GUID: e.GUID}
	if t.Storage != nil {
		sd := b.storage(qn+"_storage", t.Storage, self)
		b.refs[sd.GUID] = sd
		e.RelationshipAttributes["sd"] = atlasObjectID{TypeName: "hive_storagedesc", GUID: sd.GUID, RelationshipType: "hive_table_storagedesc"}
		e.RelationshipAttributes["columns"] = b.columns(db, name, t.Storage.Columns, self, "hive_table_columns")
	}
	e.RelationshipAttributes["partitionKeys"] = b.columns(db, name, t.PartitionKeys, self, "hive_table_partitionkeys")
	return e
}

func (b *atlasBuilder) storage(qn string, s *Storage, owner atlasObjectID) atlasEntity {
	attrs := map[string]any{"qualifiedName": qn, "location": s.Location, "inputFormat": s.InputFormat,
		"outputFormat": s.OutputFormat, "compressed": s.Compressed, "numBuckets": s.NumBuckets,
		"storedAsSubDirectories": false,
		"serdeInfo": map[string]any{"typeName": "hive_serde", "attributes": map[string]any{
			"serializationLib": s.SerDe, "parameters": s.SerDeParams}}}
	if len(s.BucketCols) > 0 {
		attrs["bucketCols"] = s.BucketCols
	}
	if len(s.Parameters) > 0 {
		attrs["parameters"] = s.Parameters
	}
	owner.RelationshipType = "hive_table_storagedesc"
	return atlasEntity{TypeName: "hive_storagedesc", GUID: b.nextGUID(), Status: "ACTIVE", Attributes: attrs,
		RelationshipAttributes: map[string]any{"table": owner}}
}

func (b *atlasBuilder) columns(db, table string, cols []Column, owner atlasObjectID, rel string) []atlasObjectID {
	out := []atlasObjectID{}
	owner.RelationshipType = rel
	for i, col := range cols {
		e := atlasEntity{TypeName: "hive_column", GUID: b.nextGUID(), Status: "ACTIVE",
			Attributes: map[string]any{"qualifiedName": db + "." + table + "." + col.Name + "@" + b.cluster,
				"name": col.Name, "type": col.Type, "comment": col.Comment, "position": i},
			RelationshipAttributes: map[string]any{"table": owner}}
		b.refs[e.GUID] = e
		out = append(out, atlasObjectID{TypeName: "hive_column", GUID: e.GUID, RelationshipType: rel})
	}
	return out
}

func (b *atlasBuilder) partitionQN(c *Change, vals []string) string {
	return c.DB + "." + c.Table + "." + strings.Join(vals, "/") + "@" + b.cluster
}

func (b *atlasBuilder) partition(c *Change, p Partition) atlasEntity {
	attrs := map[string]any{"qualifiedName": b.partitionQN(c, p.Values), "values": p.Values,
		"table": byQN("hive_table", qnTable(c.DB, c.Table, b.cluster), "")}
	if p.CreateTime != 0 {
		attrs["createTime"] = p.CreateTime * 1000
	}
	if len(p.Parameters) > 0 {
		attrs["parameters"] = p.Parameters
	}
	return atlasEntity{TypeName: "hive_partition", GUID: b.nextGUID(), Status: "ACTIVE", Attributes: attrs}
}

// partitions are the change's partitions with what is known of them: the
// objects after the change where there are, else their values.
func (c *Change) partitionObjects() []Partition {
	if c.After != nil && len(c.After.Partitions) > 0 {
		return c.After.Partitions
	}
	var out []Partition
	for _, v := range c.Partitions {
		out = append(out, Partition{Values: v})
	}
	return out
}

// Atlas renders the change as Atlas hook notifications: none for what
// Atlas does not model, several where Atlas takes one entity per message
// (a partial update per partition).
func Atlas(c *Change, cluster string, now time.Time) ([][]byte, error) {
	b := &atlasBuilder{cluster: cluster, refs: map[string]atlasEntity{}}
	user := c.User
	var msgs []any
	create := func(es ...atlasEntity) {
		msgs = append(msgs, atlasCreate{Type: "ENTITY_CREATE_V2", User: user, Entities: atlasEntities{Entities: es, ReferredEntities: b.refs}})
	}
	update := func(id atlasObjectID, e atlasEntity) {
		msgs = append(msgs, atlasPartialUpdate{Type: "ENTITY_PARTIAL_UPDATE_V2", User: user, EntityID: id,
			Entity: atlasEntityWithExt{Entity: e, ReferredEntities: b.refs}})
	}
	del := func(ids ...atlasObjectID) {
		msgs = append(msgs, atlasDelete{Type: "ENTITY_DELETE_V2", User: user, Entities: ids})
	}
	after := func() *Objects {
		if c.After == nil {
			return &Objects{}
		}
		return c.After
	}()
	switch c.Type {
	case "CREATE_DATABASE":
		create(b.db(c, after.Database))
	case "ALTER_DATABASE":
		update(byQN("hive_db", qnDB(c.DB, cluster), ""), b.db(c, after.Database))
	case "DROP_DATABASE":
		del(byQN("hive_db", qnDB(c.DB, cluster), ""))
	case "CREATE_TABLE":
		create(b.table(c.DB, c.Table, after.Table))
	case "ALTER_TABLE":
		db, name := c.DB, c.Table
		if c.NewTable != "" {
			db, name = c.NewDB, c.NewTable
		}
		update(byQN("hive_table", qnTable(c.DB, c.Table, cluster), ""), b.table(db, name, after.Table))
	case "DROP_TABLE":
		del(byQN("hive_table", qnTable(c.DB, c.Table, cluster), ""))
	case "ADD_PARTITION":
		var es []atlasEntity
		for _, p := range c.partitionObjects() {
			es = append(es, b.partition(c, p))
		}
		create(es...)
	case "ALTER_PARTITION":
		for i, p := range c.partitionObjects() {
			old := p.Values
			if i < len(c.Partitions) {
				old = c.Partitions[i] // a rename's old values
			}
			update(byQN("hive_partition", b.partitionQN(c, old), ""), b.partition(c, p))
		}
	case "DROP_PARTITION":
		var ids []atlasObjectID
		for _, v := range c.Partitions {
			ids = append(ids, byQN("hive_partition", b.partitionQN(c, v), ""))
		}
		del(ids...)
	}
	out := make([][]byte, 0, len(msgs))
	for _, m := range msgs {
		body, err := json.Marshal(atlasEnvelope{Version: atlasMsgVersion{Version: atlasVersion, VersionParts: []int{1}},
			MsgCompressionKind: "NONE", MsgSplitIdx: 1, MsgSplitCount: 1, MsgCreatedBy: "hmsproxy",
			MsgCreationTime: now.UnixMilli(), Message: m})
		if err != nil {
			return nil, err
		}
		out = append(out, body)
	}
	return out, nil
}
