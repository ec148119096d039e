package hms

import (
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// The Thrift shapes of partition selections a cache can answer itself:
// a filter or a partial spec over one table's partitions. Which requests
// qualify, what they ask, how the table's partition keys and the name
// list are read from cached replies, and how a reply is laid out again.
// Whether an expression is evaluated exactly is the filter package's
// business; what to fetch and when to forward, the proxy's.

// PruneReply is the shape of a pruning read's reply.
type PruneReply uint8

const (
	// PrunePartitions: result field 0, list<Partition>.
	PrunePartitions PruneReply = iota + 1
	// PruneNames: result field 0, list<string>.
	PruneNames
	// PruneNamesInStruct: result field 0, a struct whose field 1 is
	// list<string> (GetPartitionNamesPsResponse).
	PruneNamesInStruct
	// PruneCount: result field 0, i32.
	PruneCount
)

// Prune is a decoded request that selects partitions of one table by a
// filter or a partial spec.
type Prune struct {
	Reply PruneReply
	// DB and Table are as sent (DB never "@cat#db": such requests are not
	// decoded).
	DB, Table []byte
	// ByFilter: Filter selects; else PartVals, a partial spec (an empty
	// value matches any).
	ByFilter bool
	Filter   string
	PartVals []string
	// MaxParts caps the reply; negative: no cap.
	MaxParts int
	// Newer: the method is one of Hive 4.0's request forms, which older
	// metastores answer with UNKNOWN_METHOD (and clients such as Trino
	// fall back on that answer): answer it only for a metastore seen to
	// know it.
	Newer bool
}

// pruneShapes are the methods DecodePrune knows. For each: the fields of
// its request it reads (legacy args, or fields of the request struct at
// arg 1), and its reply. A request with any other field is not decoded:
// a projection, a snapshot (validWriteIdList) or a table id changes what
// the metastore answers, so only the metastore answers it.
var pruneShapes = map[string]struct {
	inStruct bool
	filter   bool
	reply    PruneReply
	fields   [4]int16 // db, table, filter or part_vals, max_parts; 0: none
	cat      int16    // the catalog field of a request struct; 0: none
}{
	"get_partitions_by_filter":     {false, true, PrunePartitions, [4]int16{1, 2, 3, 4}, 0},
	"get_num_partitions_by_filter": {false, true, PruneCount, [4]int16{1, 2, 3, 0}, 0},
	"get_partitions_ps":            {false, false, PrunePartitions, [4]int16{1, 2, 3, 4}, 0},
	"get_partition_names_ps":       {false, false, PruneNames, [4]int16{1, 2, 3, 4}, 0},
	// GetPartitionsByFilterRequest: catName 1, dbName 2, tblName 3,
	// filter 4, maxParts 5; 6-8 project the partitions.
	"get_partitions_by_filter_req": {true, true, PrunePartitions, [4]int16{2, 3, 4, 5}, 1},
	// GetPartitionNamesPsRequest: catName 1, dbName 2, tblName 3,
	// partValues 4, maxParts 5; validWriteIdList 6, id 7.
	"get_partition_names_ps_req": {true, false, PruneNamesInStruct, [4]int16{2, 3, 4, 5}, 1},
}

// Prunable reports whether DecodePrune may take a request of method: a
// read of another method needs no decoding to be told it is not a prune.
func Prunable(method string) bool {
	_, ok := pruneShapes[method]
	return ok
}

// DecodePrune decodes a request of a pruning read. ok is false for any
// other method, or for a request with fields beyond the plain selection,
// a request struct without its catalog or with one other than defaultCat, a database in "@cat#db" form, or a
// field of an unexpected type.
func DecodePrune(method string, args []byte, defaultCat string) (p Prune, ok bool) {
	sh, known := pruneShapes[method]
	if !known {
		return p, false
	}
	p.Reply, p.ByFilter, p.MaxParts, p.Newer = sh.reply, sh.filter, -1, sh.inStruct
	d := wire.NewDecoder(args)
	if sh.inStruct {
		typ, id := d.FieldBegin()
		if typ != wire.TStruct || id != 1 {
			return p, false
		}
	}
	var seen [4]bool
	good, catSeen := true, false
	d.Fields(func(id int16, typ byte) bool {
		if !good {
			return false
		}
		switch {
		case sh.cat != 0 && id == sh.cat && typ == wire.TString:
			if string(d.Bytes()) != defaultCat {
				good = false
			}
			catSeen = true
			return true
		case id == sh.fields[0] && typ == wire.TString:
			p.DB, seen[0] = d.Bytes(), true
		case id == sh.fields[1] && typ == wire.TString:
			p.Table, seen[1] = d.Bytes(), true
		case id == sh.fields[2] && sh.filter && typ == wire.TString:
			p.Filter, seen[2] = d.String(), true
		case id == sh.fields[2] && !sh.filter && typ == wire.TList:
			et, n := d.ListBegin()
			if et != wire.TString && n > 0 {
				good = false
				return false
			}
			p.PartVals = make([]string, 0, min(n, 64))
			for i := 0; i < n && d.Err() == nil; i++ {
				p.PartVals = append(p.PartVals, d.String())
			}
			seen[2] = true
		case sh.fields[3] != 0 && id == sh.fields[3] && typ == wire.TI16:
			p.MaxParts = int(d.I16())
		default:
			good = false
			return false
		}
		return true
	})
	if !good || d.Err() != nil || !seen[0] || !seen[1] || !seen[2] {
		return p, false
	}
	if sh.cat != 0 && !catSeen {
		// Hive 4.0 does not take an absent catalog for the default one
		// on every path: where its direct SQL declines a filter, the
		// request fails ("catName is null"). Only the metastore knows
		// which path it takes.
		return p, false
	}
	if sh.inStruct {
		// Nothing after the request struct but the args' STOP.
		if typ, _ := d.FieldBegin(); typ != wire.TStop || d.Err() != nil || d.Pos() != len(args) {
			return p, false
		}
	} else if d.Pos() != len(args) {
		return p, false
	}
	if len(p.DB) > 0 && p.DB[0] == '@' {
		return p, false
	}
	return p, true
}

// appendDBTable appends the database and table fields (1 and 2) that
// begin the args of the calls on one table, and of their requests.
func appendDBTable(e *wire.Encoder, db, tbl []byte) {
	e.FieldBegin(wire.TString, 1)
	e.Bytes(db)
	e.FieldBegin(wire.TString, 2)
	e.Bytes(tbl)
}

// AppendTableArgs appends the args of get_table(db, table).
func AppendTableArgs(dst, db, tbl []byte) []byte {
	e := wire.Encoder{B: dst}
	appendDBTable(&e, db, tbl)
	e.Stop()
	return e.B
}

// AppendTableReqArgs appends the args of get_table_req(GetTableRequest{
// dbName, tblName}).
func AppendTableReqArgs(dst, db, tbl []byte) []byte {
	e := wire.Encoder{B: dst}
	e.FieldBegin(wire.TStruct, 1)
	appendDBTable(&e, db, tbl)
	e.Stop()
	e.Stop()
	return e.B
}

// AppendPartitionNamesArgs appends the args of get_partition_names(db,
// table, -1): every name of the table.
func AppendPartitionNamesArgs(dst, db, tbl []byte) []byte {
	e := wire.Encoder{B: dst}
	appendDBTable(&e, db, tbl)
	e.FieldBegin(wire.TI16, 3)
	e.I16(-1)
	e.Stop()
	return e.B
}

// AppendPartitionsByNamesArgs appends the args of
// get_partitions_by_names(db, table, names): the legacy by-names read
// whose per-partition entries a prune shares.
func AppendPartitionsByNamesArgs(dst, db, tbl []byte, names []string) []byte {
	e := wire.Encoder{B: dst}
	appendDBTable(&e, db, tbl)
	e.StringListField(3, names)
	e.Stop()
	return e.B
}

// PartitionKey is a partition key of a table: its name as stored
// (lower-case in every metastore) and its Hive type.
type PartitionKey struct {
	Name, Type string
}

// TablePartitionKeys reads the partition keys (Table field 8) out of a
// get_table result body. ok is false when the body is not a success
// carrying a table.
//
// A get_table_req result (GetTableResult, its Table at field 1) is read
// too: its first field is a struct, where a Table's is its name.
func TablePartitionKeys(body []byte) (keys []PartitionKey, ok bool) {
	d := wire.NewDecoder(body)
	typ, id := d.FieldBegin()
	if typ != wire.TStruct || id != 0 {
		return nil, false
	}
	if len(body) > d.Pos() && body[d.Pos()] == wire.TStruct {
		if typ, id := d.FieldBegin(); typ != wire.TStruct || id != 1 {
			return nil, false
		}
	}
	d.Fields(func(id int16, typ byte) bool {
		if id != 8 || typ != wire.TList {
			return false
		}
		et, n := d.ListBegin()
		ok = et == wire.TStruct || n == 0
		for i := 0; i < n && d.Err() == nil; i++ {
			if !ok {
				d.Skip(et)
				continue
			}
			var k PartitionKey
			d.Fields(func(id int16, typ byte) bool {
				switch {
				case id == 1 && typ == wire.TString:
					k.Name = d.String()
				case id == 2 && typ == wire.TString:
					k.Type = d.String()
				default:
					return false
				}
				return true
			})
			keys = append(keys, k)
		}
		return true
	})
	return keys, ok && d.Err() == nil
}

// NameList reads the list<string> of a get_partition_names result body.
// ok is false for anything but a plain success.
func NameList(body []byte) (names []string, ok bool) {
	d := wire.NewDecoder(body)
	typ, id := d.FieldBegin()
	if typ != wire.TList || id != 0 {
		return nil, false
	}
	et, n := d.ListBegin()
	if et != wire.TString && n > 0 {
		return nil, false
	}
	names = make([]string, 0, min(n, 1<<16))
	for i := 0; i < n && d.Err() == nil; i++ {
		names = append(names, d.String())
	}
	if t, _ := d.FieldBegin(); t != wire.TStop || d.Err() != nil || d.Pos() != len(body) {
		return nil, false
	}
	return names, true
}

// AppendPruneReply lays out the result body of a pruning read, as the
// metastore writes it: n partitions over pieces (PrunePartitions: the
// partition structs' own bytes, in order, however many pieces each one
// takes; they are not copied), names, or the count n. The wrapper bytes go
// in frame and the body is iov, for one writev.
func AppendPruneReply(iov [][]byte, frame []byte, shape PruneReply, pieces [][]byte, n int, names []string) ([][]byte, []byte) {
	e := wire.Encoder{B: frame[:0]}
	switch shape {
	case PrunePartitions:
		e.FieldBegin(wire.TList, 0)
		e.ListBegin(wire.TStruct, n)
		pre := len(e.B)
		e.Stop()
		iov = append(iov, e.B[:pre])
		iov = append(iov, pieces...)
		return append(iov, e.B[pre:]), e.B
	case PruneCount:
		e.I32Field(0, int32(n))
	case PruneNamesInStruct:
		e.FieldBegin(wire.TStruct, 0)
		e.StringListField(1, names)
		e.Stop()
	default:
		e.StringListField(0, names)
	}
	e.Stop()
	return append(iov, e.B), e.B
}
