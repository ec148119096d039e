package hms

import (
	"encoding/binary"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Resolving a read: one walk over its args finds everything the cache
// needs, so a hit decodes its request once. The walk copies the args
// without the name fields (the key remainder), picks up the names at
// the Target's Cat, DB and Table paths as sent, and, for a batch read
// split into entries, the names of its list and where that list sits.
// What the names mean (catalog forms, case) is the cache's business: the
// values here are bytes as sent, aliasing the args.

// Resolved is what one walk over a read's args found. Its slices are
// reused by the next Resolve: a connection keeps one.
type Resolved struct {
	// Cat and DB are the strings at Target.Cat and Target.DB; nil when
	// absent. Tables are the strings at Target.Table (each element of the
	// list when the path ends in Each).
	Cat, DB []byte
	Tables  [][]byte
	// List is, for a read whose Batch splits partitions into entries (or
	// a partition statistics read, PartStats), the strings of its list
	// of names, in request order; empty when the request has none.
	List [][]byte
	// Cols is, for a partition statistics read, the strings of its list
	// of column names, in request order.
	Cols [][]byte
	// Rest is the args without the fields at Target.Cat, Target.DB and
	// Target.Table: with the names, the rest of the read's cache key, so
	// every other field that can change the reply counts as sent.
	Rest []byte
	// Cuts are the spans of Rest that hold the Batch list field (and a
	// statistics read's column list): an entry's key is Rest without
	// them.
	Cuts []Span
	// Bad: a name field has a wire type the metastore would not read as
	// a name (a list where a string belongs). Such a request must not be
	// cached: keyed as the name it seems to hold, the reply for a missing
	// name would be served for a real one.
	Bad bool
}

// Forget drops r's views of the last args, so that a connection keeping
// r does not pin the buffer a large request was read into. Rest, r's own
// buffer, is kept for the next request.
func (r *Resolved) Forget() {
	r.Cat, r.DB = nil, nil
	clear(r.Tables[:cap(r.Tables)])
	clear(r.List[:cap(r.List)])
	clear(r.Cols[:cap(r.Cols)])
	r.Tables, r.List, r.Cols = r.Tables[:0], r.List[:0], r.Cols[:0]
}

// Span is a range of bytes, From inclusive, To exclusive.
type Span struct{ From, To int }

// slot says which value of Resolved a path fills.
type slot uint8

const (
	slotCat slot = iota
	slotDB
	slotTable
	slotList // a Batch list: kept in Rest, its spans cut
	slotCols // a statistics read's column list: kept in Rest, cut
	slotDrop // only left out (DropField, request surgery)
)

// target is a path the walk looks for: the steps left, and where the
// value goes. each: the path ends in Each, the value is a list of names.
type target struct {
	p    Path
	slot slot
	each bool
}

// resolvePlan is built once per Read method from its Target and Batch.
func resolvePlan(m *Method) []target {
	var ts []target
	add := func(p Path, s slot) {
		if len(p) == 0 {
			return
		}
		each := p[len(p)-1] == Each
		if each {
			p = p[:len(p)-1]
		}
		for _, step := range p {
			if step == Each {
				// The key drops name fields; inside a list of structs
				// it could not drop only those.
				panic("hms: read " + m.Name + ": a name path runs through a list")
			}
		}
		ts = append(ts, target{p: p, slot: s, each: each})
	}
	add(m.Target.Cat, slotCat)
	add(m.Target.DB, slotDB)
	add(m.Target.Table, slotTable)
	if b := m.Batch; b != nil && b.Of == BatchPartitions {
		add(append(b.Names[:len(b.Names):len(b.Names)], Each), slotList)
	}
	if s := m.PartStats; s != nil {
		if s.Parts != nil {
			add(append(s.Parts[:len(s.Parts):len(s.Parts)], Each), slotList)
		}
		add(append(s.Cols[:len(s.Cols):len(s.Cols)], Each), slotCols)
	}
	return ts
}

// Resolve walks args, the args struct of a call of Read method m, once
// and fills r. A malformed struct returns the decoder's error; r is then
// not to be used.
//
// The names follow Walk: a field that occurs twice is taken from its last
// occurrence, and a field whose wire type cannot carry the rest of a path
// is absent. Rest leaves out every occurrence of a name field.
func (m *Method) Resolve(r *Resolved, args []byte) error {
	r.Cat, r.DB = nil, nil
	r.Tables, r.List, r.Cols, r.Cuts = r.Tables[:0], r.List[:0], r.Cols[:0], r.Cuts[:0]
	r.Bad = false
	c := copier{src: args, out: r.Rest[:0], r: r}
	c.d.Reset(args)
	c.structBody(m.plan, 0, 1<<len(m.plan)-1)
	r.Rest = c.out
	return c.d.Err()
}

// copier copies a struct from src to out, leaving out dropped fields and
// noting the values of its targets in r (nil: copy only).
type copier struct {
	src []byte
	d   wire.Decoder
	out []byte
	r   *Resolved
	// insert, when set, is written before the STOP of every struct that
	// directly holds a slotDrop target: the replacement of the dropped
	// field (request surgery).
	insert []byte
}

// structBody copies the fields of the struct at the decoder's position,
// through its STOP. The targets in play are those of ts whose bit is set
// in active, at step depth of their paths (no slices of targets are
// made: the walk allocates nothing but its output).
func (c *copier) structBody(ts []target, depth int, active uint8) {
	for {
		start := c.d.Pos()
		typ, id := c.d.FieldBegin()
		if c.d.Err() != nil {
			return
		}
		if typ == wire.TStop {
			if c.insert != nil && holdsDrop(ts, depth, active) {
				c.out = append(c.out, c.insert...)
			}
			c.out = append(c.out, wire.TStop)
			return
		}
		var inner uint8
		drop, list := false, false
		for i := range ts {
			t := &ts[i]
			if active&(1<<i) == 0 || t.p[depth] != id {
				continue
			}
			if len(t.p) > depth+1 {
				if typ == wire.TStruct {
					c.reset(t.slot) // a later struct replaces an earlier one
					inner |= 1 << i
				}
				continue
			}
			if t.slot == slotList || t.slot == slotCols {
				list = true
			} else {
				drop = true
			}
		}
		if drop || list {
			// A leaf: note its value, then leave it out or keep it.
			from := c.d.Pos()
			c.d.Skip(typ)
			if c.d.Err() != nil {
				return
			}
			if c.r != nil {
				for i := range ts {
					t := &ts[i]
					if active&(1<<i) != 0 && t.p[depth] == id && len(t.p) == depth+1 {
						c.leaf(t, typ, c.src[from:c.d.Pos()])
					}
				}
			}
			if !drop {
				c.r.Cuts = append(c.r.Cuts, Span{len(c.out), len(c.out) + c.d.Pos() - start})
				c.out = append(c.out, c.src[start:c.d.Pos()]...)
			}
			continue
		}
		if inner != 0 {
			c.out = append(c.out, c.src[start:c.d.Pos()]...)
			c.structBody(ts, depth+1, inner)
			continue
		}
		c.d.Skip(typ)
		c.out = append(c.out, c.src[start:c.d.Pos()]...)
	}
}

// holdsDrop reports whether the struct being copied directly holds the
// field of an active slotDrop target.
func holdsDrop(ts []target, depth int, active uint8) bool {
	for i, t := range ts {
		if active&(1<<i) != 0 && t.slot == slotDrop && len(t.p) == depth+1 {
			return true
		}
	}
	return false
}

// reset forgets what an earlier occurrence of a path's field gave.
func (c *copier) reset(s slot) {
	if c.r == nil {
		return
	}
	switch s {
	case slotCat:
		c.r.Cat = nil
	case slotDB:
		c.r.DB = nil
	case slotTable:
		c.r.Tables = c.r.Tables[:0]
	case slotList:
		c.r.List = c.r.List[:0]
	case slotCols:
		c.r.Cols = c.r.Cols[:0]
	}
}

// leaf notes the value v (of wire type typ, header excluded) at the end
// of target t's path.
func (c *copier) leaf(t *target, typ byte, v []byte) {
	r := c.r
	if t.slot == slotDrop {
		return
	}
	if t.each {
		if typ != wire.TList && typ != wire.TSet {
			// Not a list: absent, as for Walk; a name list of another
			// type is not what the metastore reads as names.
			r.Bad = r.Bad || t.slot != slotList && t.slot != slotCols
			return
		}
		c.reset(t.slot)
		var d wire.Decoder
		d.Reset(v)
		et, n := d.ListBegin()
		if et != wire.TString || d.Err() != nil {
			return
		}
		// v was skipped whole, so its strings' lengths are known to
		// lie within it: read them without a second check each (a
		// by-names request names thousands).
		pos := d.Pos()
		for i := 0; i < n && pos+4 <= len(v); i++ {
			l := int(binary.BigEndian.Uint32(v[pos:]))
			pos += 4
			if l < 0 || l > len(v)-pos {
				return // not so after all: keep what was read
			}
			s := v[pos : pos+l : pos+l]
			pos += l
			switch t.slot {
			case slotList:
				r.List = append(r.List, s)
			case slotCols:
				r.Cols = append(r.Cols, s)
			default:
				r.Tables = append(r.Tables, s)
			}
		}
		return
	}
	c.reset(t.slot)
	if typ != wire.TString {
		r.Bad = true
		return
	}
	s := v[4:len(v):len(v)]
	switch t.slot {
	case slotCat:
		r.Cat = s
	case slotDB:
		r.DB = s
	case slotTable:
		r.Tables = append(r.Tables, s)
	}
}

// DropField appends args without every occurrence of the field at path
// (the field ids of nested structs, no Each). A malformed struct stops
// the copy: the result then ends early, with a STOP.
func DropField(dst, args []byte, path Path) []byte {
	return replaceField(dst, args, path, nil)
}

// replaceField appends args without the field at path, and with insert
// written at the end of each struct that held it (or would have).
func replaceField(dst, args []byte, path Path, insert []byte) []byte {
	c := copier{src: args, out: dst, insert: insert}
	c.d.Reset(args)
	c.structBody([]target{{p: path, slot: slotDrop}}, 0, 1)
	if c.d.Err() != nil {
		c.out = append(c.out, wire.TStop)
	}
	return c.out
}
