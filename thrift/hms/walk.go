package hms

import "github.com/hmsproxy/hmsproxy/thrift/wire"

// Walk visits the values at path p inside args, an args struct encoded in the
// Thrift binary protocol (a message body, as wire.Message.Body returns it).
//
// Each field-id step descends into a struct field, an Each step into every
// element of a list or set. fn is called for every value the path reaches,
// in wire order, with its Thrift type and its bytes, which alias args
// (capacity capped, so appending to val never writes into args):
//
//   - a string (or binary): the raw bytes, without the length prefix;
//   - a list or set of strings: fn is called once per element, typ
//     wire.TString (an empty one calls nothing);
//   - anything else (numbers, structs, maps, lists of non-strings): the whole
//     encoded value, header included.
//
// fn returns false to stop the walk. An empty path visits args itself
// (wire.TStruct).
//
// Like a Thrift-generated reader, Walk takes a field that occurs twice in one
// struct from its last occurrence, and treats a field whose wire type cannot
// carry the rest of the path (not a struct before a field id, not a list or
// set before Each) as absent. A missing field visits nothing. At the end of
// the path the field's type is not checked: callers check typ.
//
// args is validated (wire.Decoder limits) before anything is visited: a
// malformed or truncated struct returns the decoder's error and fn is not
// called. Bytes after the struct's stop field are ignored.
func Walk(args []byte, p Path, fn func(typ byte, val []byte) bool) error {
	d := wire.NewDecoder(args)
	d.Skip(wire.TStruct)
	if err := d.Err(); err != nil {
		return err
	}
	w := walker{fn: fn}
	w.walk(wire.TStruct, args[:d.Pos()], p)
	return nil
}

type walker struct {
	fn   func(typ byte, val []byte) bool
	stop bool
}

// walk visits path p inside the value of type typ encoded in b; b holds
// exactly that value and has been validated.
func (w *walker) walk(typ byte, b []byte, p Path) {
	if len(p) == 0 {
		w.emit(typ, b)
		return
	}
	step, rest := p[0], p[1:]
	if step == Each {
		if typ != wire.TList && typ != wire.TSet {
			return
		}
		d := wire.NewDecoder(b)
		et, n := d.ListBegin()
		for i := 0; i < n && !w.stop; i++ {
			from := d.Pos()
			d.Skip(et)
			w.walk(et, b[from:d.Pos()], rest)
		}
		return
	}
	if typ != wire.TStruct {
		return
	}
	d := wire.NewDecoder(b)
	var (
		found    bool
		ft       byte
		from, to int
	)
	for {
		t, id := d.FieldBegin()
		if t == wire.TStop {
			break
		}
		start := d.Pos()
		d.Skip(t)
		if id == step && fits(t, rest) {
			found, ft, from, to = true, t, start, d.Pos()
		}
	}
	if found {
		w.walk(ft, b[from:to], rest)
	}
}

// fits reports whether a field of wire type t can carry the rest of a path.
func fits(t byte, rest Path) bool {
	if len(rest) == 0 {
		return true
	}
	if rest[0] == Each {
		return t == wire.TList || t == wire.TSet
	}
	return t == wire.TStruct
}

// emit hands the value at the end of a path to fn.
func (w *walker) emit(typ byte, b []byte) {
	switch typ {
	case wire.TString:
		w.call(wire.TString, b[4:])
		return
	case wire.TList, wire.TSet:
		d := wire.NewDecoder(b)
		if et, n := d.ListBegin(); et == wire.TString {
			for i := 0; i < n && !w.stop; i++ {
				w.call(wire.TString, d.Bytes())
			}
			return
		}
	}
	w.call(typ, b)
}

func (w *walker) call(typ byte, val []byte) {
	if !w.stop && !w.fn(typ, val[:len(val):len(val)]) {
		w.stop = true
	}
}
