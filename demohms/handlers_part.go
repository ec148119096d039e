package demohms

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// legacyTable reads the (db_name, tbl_name) arguments 1 and 2.
func legacyTable(a *tval) (cat, db, tbl string) {
	cat, db, _ = splitDBName(a.str(1))
	return cat, db, hms.NormalizeString(a.str(2))
}

func limitParts(ps []*partition, max int64) []*partition {
	if max >= 0 && int64(len(ps)) > max {
		return ps[:max]
	}
	return ps
}

func partNames(ps []*partition, te *tableEntry) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = te.partName(p.Values)
	}
	return out
}

// normalizeName maps a client-supplied partition name to the stored key.
func (te *tableEntry) normalizeName(name string) (string, []string, error) {
	vals, err := valuesFromName(te.t.PartitionKeys, name)
	if err != nil {
		return "", nil, err
	}
	return te.partName(vals), vals, nil
}

// ---- reads ----

func hGetPartition(c *conn, a *tval, e *wire.Encoder) error {
	cat, db, tbl := legacyTable(a)
	return c.getPartition(cat, db, tbl, a.strList(3), e, false)
}

func hGetPartitionReq(c *conn, a *tval, e *wire.Encoder) error {
	r := a.sub(1)
	return c.getPartition(catOr(r.str(1)), hms.NormalizeString(r.str(2)), hms.NormalizeString(r.str(3)), r.strList(4), e, true)
}

func (c *conn) getPartition(cat, db, tbl string, vals []string, e *wire.Encoder, wrapped bool) error {
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	te := c.s.lookupTable(cat, db, tbl)
	var p *partition
	if te != nil && len(vals) == len(te.t.PartitionKeys) {
		p = te.parts[te.partName(vals)]
	}
	if p == nil {
		return noSuchObject("partition values=" + javaList(vals))
	}
	if wrapped {
		return okWrapped(e, wire.TStruct, func() { encPartition(e, p) })
	}
	return okPartition(e, p)
}

func hGetPartitionByName(c *conn, a *tval, e *wire.Encoder) error {
	cat, db, tbl := legacyTable(a)
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	te := c.s.lookupTable(cat, db, tbl)
	if te == nil {
		return tableNotFound(cat, db, tbl)
	}
	name, vals, err := te.normalizeName(a.str(3))
	if err != nil {
		return err
	}
	p := te.parts[name]
	if p == nil {
		return noSuchObject("partition values=" + javaList(vals))
	}
	return okPartition(e, p)
}

// allParts returns a table's partitions by name, empty when the table does
// not exist (HMS's list calls do not check the table).
func (c *conn) allParts(cat, db, tbl string, max int64) (*tableEntry, []*partition) {
	te := c.s.lookupTable(cat, db, tbl)
	if te == nil {
		return nil, nil
	}
	return te, limitParts(te.sortedParts(), max)
}

func hGetPartitions(c *conn, a *tval, e *wire.Encoder) error {
	cat, db, tbl := legacyTable(a)
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	_, ps := c.allParts(cat, db, tbl, a.integer(3, -1))
	return okPartitions(e, ps)
}

func hGetPartitionsReq(c *conn, a *tval, e *wire.Encoder) error {
	r := a.sub(1)
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	_, ps := c.allParts(catOr(r.str(1)), hms.NormalizeString(r.str(2)), hms.NormalizeString(r.str(3)), r.integer(4, -1))
	return okWrapped(e, wire.TList, func() { encPartitionList(e, ps) })
}

func hGetPartitionNames(c *conn, a *tval, e *wire.Encoder) error {
	cat, db, tbl := legacyTable(a)
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	te, ps := c.allParts(cat, db, tbl, a.integer(3, -1))
	return okStrings(e, partNames(ps, te))
}

// hGetPartitionsPs answers get_partitions_ps and get_partition_names_ps:
// partitions whose values match the partial list ("" matches anything).
func hGetPartitionsPs(names bool) handler {
	return func(c *conn, a *tval, e *wire.Encoder) error {
		cat, db, tbl := legacyTable(a)
		vals, max := a.strList(3), a.integer(4, -1)
		c.s.mu.RLock()
		defer c.s.mu.RUnlock()
		te := c.s.lookupTable(cat, db, tbl)
		if te == nil {
			return tableNotFound(cat, db, tbl)
		}
		if len(vals) > len(te.t.PartitionKeys) {
			return metaErr(fmt.Sprintf("Incorrect number of partition values. numPartitionKeys=%d, part_val=%s",
				len(te.t.PartitionKeys), javaList(vals)))
		}
		var out []*partition
		for _, p := range te.sortedParts() {
			ok := true
			for i, v := range vals {
				if v != "" && p.Values[i] != v {
					ok = false
					break
				}
			}
			if ok {
				out = append(out, p)
			}
		}
		out = limitParts(out, max)
		if names {
			return okStrings(e, partNames(out, te))
		}
		return okPartitions(e, out)
	}
}

// partsByNames returns the named partitions that exist, ordered by name.
func (c *conn) partsByNames(cat, db, tbl string, names []string) []*partition {
	te := c.s.lookupTable(cat, db, tbl)
	if te == nil {
		return nil
	}
	var keys []string
	for _, n := range names {
		if k, _, err := te.normalizeName(n); err == nil && te.parts[k] != nil {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	out := make([]*partition, len(keys))
	for i, k := range keys {
		out[i] = te.parts[k]
	}
	return out
}

func hGetPartitionsByNames(c *conn, a *tval, e *wire.Encoder) error {
	cat, db, tbl := legacyTable(a)
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	return okPartitions(e, c.partsByNames(cat, db, tbl, a.strList(3)))
}

func hGetPartitionsByNamesReq(c *conn, a *tval, e *wire.Encoder) error {
	r := a.sub(1)
	cat, db, _ := splitDBName(r.str(1))
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	ps := c.partsByNames(cat, db, hms.NormalizeString(r.str(2)), r.strList(3))
	return okWrapped(e, wire.TList, func() { encPartitionList(e, ps) })
}

// filterParts evaluates a filter over a table's partitions.
func (c *conn) filterParts(cat, db, tbl, filter string, max int64) ([]*partition, error) {
	te := c.s.lookupTable(cat, db, tbl)
	if te == nil {
		return nil, noSuchObject("Specified catalog.database.table does not exist : " + qualified(cat, db, tbl))
	}
	var out []*partition
	if strings.TrimSpace(filter) == "" {
		out = te.sortedParts()
	} else {
		f, err := parseFilter(filter, te.t.PartitionKeys)
		if err != nil {
			return nil, err
		}
		for _, p := range te.sortedParts() {
			ok, err := f.match(p.Values)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, p)
			}
		}
	}
	return limitParts(out, max), nil
}

func hGetPartitionsByFilter(c *conn, a *tval, e *wire.Encoder) error {
	cat, db, tbl := legacyTable(a)
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	ps, err := c.filterParts(cat, db, tbl, a.str(3), a.integer(4, -1))
	if err != nil {
		return err
	}
	return okPartitions(e, ps)
}

func hGetPartitionsByFilterReq(c *conn, a *tval, e *wire.Encoder) error {
	r := a.sub(1)
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	ps, err := c.filterParts(catOr(r.str(1)), hms.NormalizeString(r.str(2)), hms.NormalizeString(r.str(3)), r.str(4), r.integer(5, -1))
	if err != nil {
		return err
	}
	return okPartitions(e, ps)
}

func hGetNumPartitionsByFilter(c *conn, a *tval, e *wire.Encoder) error {
	cat, db, tbl := legacyTable(a)
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	ps, err := c.filterParts(cat, db, tbl, a.str(3), -1)
	if err != nil {
		return err
	}
	return okI32(e, int32(len(ps)))
}

// ---- writes ----

func errNoTableForAdd() error {
	return invalidObject("Unable to add partition because table or database do not exist")
}

// addParts validates all of ps, then adds them to te and logs one
// ADD_PARTITION event. The caller holds s.mu for writing.
func (s *Server) addParts(te *tableEntry, ps []*partition, ifNotExists bool) ([]*partition, error) {
	t := te.t
	now := s.nowSec()
	var added []*partition
	seen := map[string]bool{}
	for _, p := range ps {
		if p.DBName != "" && hms.NormalizeString(p.DBName) != t.DBName || p.TableName != "" && hms.NormalizeString(p.TableName) != t.TableName {
			return nil, metaErr("Partition does not belong to target table " + qualified(t.CatName, t.DBName, t.TableName) + ": " + javaList(p.Values))
		}
		if len(p.Values) != len(t.PartitionKeys) {
			keys := make([]string, len(t.PartitionKeys))
			for i, k := range t.PartitionKeys {
				keys[i] = k.Name
			}
			return nil, metaErr("Invalid partition key & values; keys " + javaList(keys) + ", values " + javaList(p.Values))
		}
		name := te.partName(p.Values)
		if seen[name] {
			return nil, metaErr("Duplicate partitions in the list: " + name)
		}
		seen[name] = true
		if te.parts[name] != nil {
			if ifNotExists {
				continue
			}
			return nil, alreadyExists("Partition already exists: " + qualified(t.CatName, t.DBName, t.TableName) + " " + name)
		}
		p.DBName, p.TableName, p.CatName = t.DBName, t.TableName, t.CatName
		if !p.hadSD {
			p.SD = t.SD.clone()
			p.SD.Location = ""
		}
		if p.SD.Location == "" {
			p.SD.Location = t.SD.Location + "/" + name
		}
		p.CreateTime = now
		stampDDLTime(p.Parameters, now)
		added = append(added, p)
	}
	if len(added) == 0 {
		return added, nil
	}
	kvs := make([]map[string]string, len(added))
	for i, p := range added {
		te.parts[te.partName(p.Values)] = p
		kvs[i] = partKV(t, p.Values)
	}
	s.emit("ADD_PARTITION", t.DBName, t.TableName, map[string]any{
		"tableObjJson": tableObjJSON(t.DBName, t.TableName), "partitions": kvs})
	return added, nil
}

func hAddPartition(c *conn, a *tval, e *wire.Encoder) error {
	p := decPartition(a.sub(1))
	s := c.s
	te, unlock := s.lockTable(catOr(p.CatName), hms.NormalizeString(p.DBName), p.TableName)
	defer unlock()
	if te == nil {
		return errNoTableForAdd()
	}
	added, err := s.addParts(te, []*partition{p}, false)
	if err != nil {
		return err
	}
	return okPartition(e, added[0])
}

func hAddPartitions(c *conn, a *tval, e *wire.Encoder) error {
	ps := decPartitions(a.list(1))
	if len(ps) == 0 {
		return okI32(e, 0)
	}
	s := c.s
	te, unlock := s.lockTable(catOr(ps[0].CatName), hms.NormalizeString(ps[0].DBName), ps[0].TableName)
	defer unlock()
	if te == nil {
		return errNoTableForAdd()
	}
	added, err := s.addParts(te, ps, false)
	if err != nil {
		return err
	}
	return okI32(e, int32(len(added)))
}

func hAddPartitionsReq(c *conn, a *tval, e *wire.Encoder) error {
	r := a.sub(1)
	ps := decPartitions(r.list(3))
	s := c.s
	te, unlock := s.lockTable(catOr(r.str(6)), hms.NormalizeString(r.str(1)), r.str(2))
	defer unlock()
	if te == nil {
		return errNoTableForAdd()
	}
	added, err := s.addParts(te, ps, r.boolean(4, false))
	if err != nil {
		return err
	}
	e.FieldBegin(wire.TStruct, 0)
	if r.boolean(5, true) {
		e.FieldBegin(wire.TList, 1)
		encPartitionList(e, added)
	}
	e.Stop()
	return nil
}

// hAppendPartition adds a partition given by values (or by name) with the
// table's storage descriptor.
func hAppendPartition(byName bool) handler {
	return func(c *conn, a *tval, e *wire.Encoder) error {
		cat, db, tbl := legacyTable(a)
		s := c.s
		te, unlock := s.lockTable(cat, db, tbl)
		defer unlock()
		if te == nil {
			return errNoTableForAdd()
		}
		vals := a.strList(3)
		if byName {
			var err error
			if _, vals, err = te.normalizeName(a.str(3)); err != nil {
				return err
			}
		}
		added, err := s.addParts(te, []*partition{{Values: nonNilS(vals), Parameters: map[string]string{}}}, false)
		if err != nil {
			return err
		}
		return okPartition(e, added[0])
	}
}

func (s *Server) dropPart(te *tableEntry, name string) {
	p := te.parts[name]
	delete(te.parts, name)
	s.emit("DROP_PARTITION", te.t.DBName, te.t.TableName, map[string]any{
		"tableObjJson": tableObjJSON(te.t.DBName, te.t.TableName),
		"partitions":   []map[string]string{partKV(te.t, p.Values)}})
}

func hDropPartition(byName bool) handler {
	return func(c *conn, a *tval, e *wire.Encoder) error {
		cat, db, tbl := legacyTable(a)
		s := c.s
		te, unlock := s.lockTable(cat, db, tbl)
		defer unlock()
		vals := a.strList(3)
		if te == nil {
			if byName {
				return tableNotFound(cat, db, tbl)
			}
			return noSuchObject("partition values=" + javaList(vals))
		}
		name := ""
		if byName {
			var err error
			if name, vals, err = te.normalizeName(a.str(3)); err != nil {
				return err
			}
		} else if len(vals) == len(te.t.PartitionKeys) {
			name = te.partName(vals)
		}
		if te.parts[name] == nil {
			return noSuchObject("partition values=" + javaList(vals))
		}
		s.dropPart(te, name)
		return okBool(e, true)
	}
}

func hDropPartitionsReq(c *conn, a *tval, e *wire.Encoder) error {
	r := a.sub(1)
	cat, db, _ := splitDBName(r.str(1))
	if r.has(9) {
		cat = catOr(r.str(9))
	}
	tbl := hms.NormalizeString(r.str(2))
	spec := r.sub(3)
	if spec.has(2) {
		return metaErr("demohms: dropping partitions by expression is not supported")
	}
	s := c.s
	te, unlock := s.lockTable(cat, db, tbl)
	defer unlock()
	if te == nil {
		return tableNotFound(cat, db, tbl)
	}
	var names []string
	for _, n := range spec.strList(1) {
		k, _, err := te.normalizeName(n)
		if err == nil && te.parts[k] != nil {
			names = append(names, k)
		} else if !r.boolean(5, true) {
			return noSuchObject("Some partitions to drop are missing")
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	dropped := make([]*partition, len(names))
	for i, n := range names {
		dropped[i] = te.parts[n]
		s.dropPart(te, n)
	}
	e.FieldBegin(wire.TStruct, 0)
	if r.boolean(8, true) {
		e.FieldBegin(wire.TList, 1)
		encPartitionList(e, dropped)
	}
	e.Stop()
	return nil
}

// alterParts replaces existing partitions of te (matched by values) with
// ps, all or nothing, logging one ALTER_PARTITION event per partition.
func (s *Server) alterParts(te *tableEntry, ps []*partition) error {
	t := te.t
	for _, p := range ps {
		if len(p.Values) != len(t.PartitionKeys) || te.parts[te.partName(p.Values)] == nil {
			return invalidOperation("alter is not possible")
		}
	}
	now := s.nowSec()
	for _, p := range ps {
		name := te.partName(p.Values)
		old := te.parts[name]
		p.DBName, p.TableName, p.CatName = t.DBName, t.TableName, t.CatName
		if p.CreateTime == 0 {
			p.CreateTime = old.CreateTime
		}
		if !p.hadSD {
			p.SD = old.SD
		} else if p.SD.Location == "" {
			p.SD.Location = old.SD.Location
		}
		stampDDLTime(p.Parameters, now)
		te.parts[name] = p
		s.emit("ALTER_PARTITION", t.DBName, t.TableName, map[string]any{
			"keyValues": partKV(t, p.Values), "isTruncateOp": "false",
			"tableObjJson": tableObjJSON(t.DBName, t.TableName)})
	}
	return nil
}

func hAlterPartitions(list bool) handler {
	return func(c *conn, a *tval, e *wire.Encoder) error {
		cat, db, tbl := legacyTable(a)
		var ps []*partition
		if list {
			ps = decPartitions(a.list(3))
		} else {
			ps = []*partition{decPartition(a.sub(3))}
		}
		s := c.s
		te, unlock := s.lockTable(cat, db, tbl)
		defer unlock()
		if te == nil {
			return metaErr("Unable to alter partition because table or database does not exist.")
		}
		return s.alterParts(te, ps)
	}
}

func hAlterPartitionsReq(c *conn, a *tval, e *wire.Encoder) error {
	r := a.sub(1)
	ps := decPartitions(r.list(4))
	s := c.s
	te, unlock := s.lockTable(catOr(r.str(1)), hms.NormalizeString(r.str(2)), r.str(3))
	defer unlock()
	if te == nil {
		return metaErr("Unable to alter partition because table or database does not exist.")
	}
	if err := s.alterParts(te, ps); err != nil {
		return err
	}
	e.FieldBegin(wire.TStruct, 0) // AlterPartitionsResponse has no fields
	e.Stop()
	return nil
}

func hRenamePartition(c *conn, a *tval, e *wire.Encoder) error {
	cat, db, tbl := legacyTable(a)
	oldVals := a.strList(3)
	np := decPartition(a.sub(4))
	s := c.s
	te, unlock := s.lockTable(cat, db, tbl)
	defer unlock()
	if te == nil {
		return metaErr("Unable to alter partition because table or database does not exist.")
	}
	t := te.t
	if len(oldVals) != len(t.PartitionKeys) || te.parts[te.partName(oldVals)] == nil {
		return invalidOperation("Unable to rename partition because old partition does not exist")
	}
	if len(np.Values) != len(t.PartitionKeys) {
		return invalidOperation("Unable to rename partition because new partition values are invalid")
	}
	oldName, newName := te.partName(oldVals), te.partName(np.Values)
	if oldName != newName && te.parts[newName] != nil {
		return invalidOperation("Unable to rename partition because new partition already exists")
	}
	old := te.parts[oldName]
	np.DBName, np.TableName, np.CatName, np.CreateTime = t.DBName, t.TableName, t.CatName, old.CreateTime
	if !np.hadSD {
		np.SD = old.SD.clone()
	}
	if np.SD.Location == t.SD.Location+"/"+oldName || np.SD.Location == "" {
		np.SD.Location = t.SD.Location + "/" + newName
	}
	stampDDLTime(np.Parameters, c.s.nowSec())
	delete(te.parts, oldName)
	te.parts[newName] = np
	s.emit("ALTER_PARTITION", t.DBName, t.TableName, map[string]any{
		"keyValues": partKV(t, np.Values), "oldKeyValues": partKV(t, oldVals), "isTruncateOp": "false",
		"tableObjJson": tableObjJSON(t.DBName, t.TableName)})
	return nil
}
