package hms

import (
	"bytes"
	"strings"

	"github.com/hmsproxy/hmsproxy/filter"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// The Thrift shapes of batch reads: where a by-names request keeps its
// list of names, how to ask for fewer names, how the reply wraps the list
// of objects, how to cut it into one object per name and how to lay a
// reply out again over cached objects. The cache decides which names are
// hits; the bytes are handled here.

// BatchOf says what a batch read's list names.
type BatchOf uint8

const (
	// BatchPartitions: partition names; the reply lists Partition structs.
	BatchPartitions BatchOf = iota + 1
	// BatchTables: table names; the reply lists Table structs.
	BatchTables
)

// Batch is the shape of a read that names a list of objects: a cache may
// keep one entry per object.
type Batch struct {
	Of BatchOf
	// Names is the list of names in the args (field ids, no Each).
	Names Path
	// InStruct: the args and the result wrap the list in a request
	// struct at field 1 and a result struct at field 0.
	InStruct bool
}

// Object is one object of a batch reply and the name it answers.
type Object struct {
	Name string
	Body []byte // the struct's bytes, aliasing the reply
}

// AppendRequest appends a copy of the call whose header is hdr and whose
// args are args, with its list of names replaced by names.
func (b *Batch) AppendRequest(dst, hdr, args []byte, names []string) []byte {
	dst = append(dst, hdr...)
	var e wire.Encoder
	e.StringListField(b.Names[len(b.Names)-1], names)
	return replaceField(dst, args, b.Names, e.B)
}

// SplitPartitions cuts a by-names reply (message type typ, result body)
// into partitions matched to the names asked for. ok is false when the
// reply is not a plain success this code understands: an exception,
// result fields beyond the list, or a partition it cannot name.
//
// The metastore matches the names asked for exactly against the names
// it stored (PART_NAME IN (...)), and a partition's struct carries its
// values but not its keys' names. So only a name the metastore could
// have stored can be matched: one that is the stored form of its own
// keys and values (AppendPartName: escaped, keys lower-cased). Another
// name ("ds=a:b" for the stored "ds=a%3Ab", "DS=a") never matches and
// answers nothing. A partition is named by the one such name asked for
// with its values; when two are ("ds=e" and "dt=e"), the reply cannot
// be split, since either key may be the table's.
func (b *Batch) SplitPartitions(typ byte, body []byte, asked []string) ([]Object, bool) {
	d, et, n, ok := b.openList(typ, body)
	if !ok || (et != wire.TStruct && n > 0) {
		return nil, false
	}
	byValues := make(map[string]string, len(asked))
	var buf []byte
	for _, name := range asked {
		keys, vals, err := filter.PartitionValues(name)
		if err != nil {
			continue
		}
		if buf = AppendPartName(buf[:0], keys, vals); string(buf) != name {
			continue // not a stored form: it names no partition
		}
		k := strings.Join(vals, "\x00")
		if prev, seen := byValues[k]; seen && prev != name {
			byValues[k] = "" // two names with these values: cannot tell which
			continue
		}
		byValues[k] = name
	}
	// n is a claimed count: size by what was asked, not by it.
	out := make([]Object, 0, min(n, len(asked)))
	for i := 0; i < n; i++ {
		start := d.Pos()
		vals := partValues(d)
		if d.Err() != nil {
			return nil, false
		}
		name := byValues[strings.Join(vals, "\x00")]
		if name == "" {
			return nil, false // a partition we cannot name: don't guess
		}
		out = append(out, Object{Name: name, Body: body[start:d.Pos()]})
	}
	if !b.closesList(body, d) {
		return nil, false
	}
	return out, true
}

// SplitTable takes the one Table struct out of a reply to a request for
// table tbl. ok is false when the reply is not a plain success this code
// understands: an exception, result fields beyond the list, more than one
// table, or a table not named tbl (a projection without names, say).
// obj is nil when the table does not exist.
func (b *Batch) SplitTable(typ byte, body []byte, tbl string) (obj []byte, ok bool) {
	d, et, n, ok := b.openList(typ, body)
	if !ok || n > 1 || (n == 1 && et != wire.TStruct) {
		return nil, false
	}
	if n == 1 {
		start := d.Pos()
		if name, named := tableName(d); d.Err() != nil || !named || name != tbl {
			return nil, false // a table we cannot name: don't guess
		}
		obj = body[start:d.Pos()]
	}
	if !b.closesList(body, d) {
		return nil, false
	}
	return obj, true
}

// AppendReply lays a batch result out over the objects' own bytes,
// without copying them: the wrapper bytes go in frame, and the whole reply
// body is iov, for one writev.
func (b *Batch) AppendReply(iov [][]byte, frame []byte, objs [][]byte) ([][]byte, []byte) {
	head, tail, frame := b.ReplyFrame(frame, len(objs))
	iov = append(iov, head)
	iov = append(iov, objs...)
	return append(iov, tail), frame
}

// ReplyFrame lays out in frame the wrapper of a batch result of n
// objects: the result body is head, the objects' bytes, then tail. It is
// AppendReply for objects kept in several pieces each (cache
// Entry.AppendPieces), which go between head and tail as they are.
func (b *Batch) ReplyFrame(frame []byte, n int) (head, tail, buf []byte) {
	e := wire.Encoder{B: frame[:0]}
	if b.InStruct {
		e.FieldBegin(wire.TStruct, 0)
		e.FieldBegin(wire.TList, 1)
	} else {
		e.FieldBegin(wire.TList, 0)
	}
	e.ListBegin(wire.TStruct, n)
	pre := len(e.B)
	if b.InStruct {
		e.Stop()
	}
	e.Stop()
	return e.B[:pre], e.B[pre:], e.B
}

// openList positions a decoder on the elements of the list a batch reply
// carries: result field 0, or field 1 of the result struct at field 0.
// ok is false for an exception or any other shape.
func (b *Batch) openList(typ byte, body []byte) (d *wire.Decoder, elem byte, n int, ok bool) {
	if typ != wire.Reply {
		return nil, 0, 0, false
	}
	d = wire.NewDecoder(body)
	t, id := d.FieldBegin()
	if id != 0 || d.Err() != nil {
		return nil, 0, 0, false
	}
	if b.InStruct {
		if t != wire.TStruct {
			return nil, 0, 0, false
		}
		if t, id = d.FieldBegin(); id != 1 {
			return nil, 0, 0, false
		}
	}
	if t != wire.TList {
		return nil, 0, 0, false
	}
	elem, n = d.ListBegin()
	return d, elem, n, d.Err() == nil
}

// closesList reports whether nothing but the wrappers' STOPs follows the
// list: a result field this code does not know means it cannot rebuild
// the reply.
func (b *Batch) closesList(body []byte, d *wire.Decoder) bool {
	want := []byte{wire.TStop}
	if b.InStruct {
		want = []byte{wire.TStop, wire.TStop}
	}
	return d.Err() == nil && bytes.Equal(body[d.Pos():], want)
}

// partValues reads a Partition struct, returning its values (field 1).
func partValues(d *wire.Decoder) []string {
	var vals []string
	for {
		typ, id := d.FieldBegin()
		if typ == wire.TStop || d.Err() != nil {
			return vals
		}
		if id == 1 && typ == wire.TList {
			_, n := d.ListBegin()
			for i := 0; i < n && d.Err() == nil; i++ {
				vals = append(vals, d.String())
			}
			continue
		}
		d.Skip(typ)
	}
}

// tableName reads a Table struct, returning its tableName (field 1).
func tableName(d *wire.Decoder) (name string, ok bool) {
	for {
		typ, id := d.FieldBegin()
		if typ == wire.TStop || d.Err() != nil {
			return name, ok
		}
		if id == 1 && typ == wire.TString && !ok {
			name, ok = d.String(), true
			continue
		}
		d.Skip(typ)
	}
}
