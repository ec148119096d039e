package dbname

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// ErrTooDeep is returned for a message whose structs nest deeper than
// the limits' MaxDepth along the schema (a Table holding a
// CreationMetadata holding a Table ...): the wire limits bound skipping,
// this bounds the rewrite.
var ErrTooDeep = errors.New("dbname: structs nest too deep")

// ErrTooLong is returned when a rewritten string would not fit a Thrift
// length.
var ErrTooLong = errors.New("dbname: rewritten string too long")

// Args appends to dst the args struct args of a call of m, with every
// database name it carries replaced by fn's answer. fn gets the bare
// database name (no catalog part); an error from fn stops the rewrite and
// is returned wrapped, so the caller can refuse the call (errors.Is/As see
// fn's error). A method the package does not know (m nil, or a name not in
// its table) and a method whose args name no database are copied unchanged.
// args is decoded under lim (zero fields: wire's defaults), which should be
// the limits it was read under, so that nothing the reader took fails
// here; a malformed struct returns the decoder's error.
func Args(dst []byte, m *hms.Method, args []byte, lim wire.Limits, fn func(db string) (string, error)) ([]byte, error) {
	sh := shapeOf(m)
	if sh.args == nil {
		return append(dst, args...), nil
	}
	out, err := rewrite(dst, sh.args, args, rewriter{fn: fn, lim: lim})
	if err != nil {
		return dst, fmt.Errorf("dbname: %s args: %w", m.Name, err)
	}
	return out, nil
}

// Reply appends to dst the body of a reply to a call of m, of message type
// typ (wire.Reply or wire.Exception), with every database name in its
// success value replaced by fn's answer. Declared exceptions and
// TApplicationExceptions are copied unchanged (their messages are text; see
// doc.go), as are replies of methods whose success value names no database.
func Reply(dst []byte, m *hms.Method, typ byte, body []byte, fn func(db string) string) ([]byte, error) {
	sh := shapeOf(m)
	if typ != wire.Reply || sh.result == nil {
		return append(dst, body...), nil
	}
	out, err := rewrite(dst, sh.result, body, rewriter{reply: fn})
	if err != nil {
		return dst, fmt.Errorf("dbname: %s reply: %w", m.Name, err)
	}
	return out, nil
}

// Names calls fn with every database name the args struct of a call of m
// carries, wherever Args would rewrite one: the bare name (no catalog
// part) as the client wrote it, not normalised, aliasing args; for
// "db.table" strings and write-id lists, their database part. View text
// is not visited: the metastore stores it and resolves no name in it.
// A method whose args name no database (or one the package does not
// know) visits nothing. args is decoded under lim, as in Args; a
// malformed struct returns the decoder's error, and fn may have been
// called for names before it.
func Names(m *hms.Method, args []byte, lim wire.Limits, fn func(db []byte)) error {
	sh := shapeOf(m)
	if sh.args == nil {
		return nil
	}
	r := rewriter{src: args, names: fn, lim: lim.WithDefaults()}
	r.d.ResetLimits(args, r.lim)
	r.structBody(sh.args)
	if r.err == nil {
		r.err = r.d.Err()
	}
	if r.err != nil {
		return fmt.Errorf("dbname: %s args: %w", m.Name, r.err)
	}
	return nil
}

// shapeOf returns m's shape; the zero shape (nothing to rewrite) for a
// method the table does not know.
func shapeOf(m *hms.Method) shape {
	if m == nil {
		return shape{}
	}
	return methods[m.Name]
}

// rewrite copies the struct in src, as s describes it, to dst. Bytes after
// the struct's STOP are copied too.
// r carries the mapping (fn or reply) and the limits (zero fields:
// wire's defaults); the rest of it is set here.
func rewrite(dst []byte, s *schema, src []byte, r rewriter) ([]byte, error) {
	r.src, r.out, r.lim = src, dst, r.lim.WithDefaults()
	r.d.ResetLimits(src, r.lim)
	r.structBody(s)
	if r.err == nil {
		r.err = r.d.Err()
	}
	if r.err != nil {
		return dst, r.err
	}
	return append(r.out, src[r.mark:]...), nil
}

// rewriter walks src with d, rewriting the values its schema marks. The
// bytes it passes are copied lazily: out holds src up to mark, with the
// rewritten strings in place; a name that does not change costs no copy.
type rewriter struct {
	src  []byte
	d    wire.Decoder
	out  []byte
	mark int // src[:mark] is in out
	// The mapping: fn (requests, may refuse) or, when it is nil, reply;
	// or, when names is set, no rewrite: each name is handed to it.
	fn    func(string) (string, error)
	reply func(string) string
	names func([]byte)
	lim   wire.Limits // with defaults; MaxDepth bounds the schema walk too
	err   error       // the first error of fn or of a limit; the decoder keeps its own
	depth int
}

func (r *rewriter) failed() bool { return r.err != nil || r.d.Err() != nil }

func (r *rewriter) structBody(s *schema) {
	if r.depth++; r.depth > r.lim.MaxDepth {
		r.err = ErrTooDeep
		return
	}
	defer func() { r.depth-- }()
	if s.variant != nil {
		s = s.variant(r.src[r.d.Pos():], r.lim)
	}
	for !r.failed() {
		typ, id := r.d.FieldBegin()
		if typ == wire.TStop || r.d.Err() != nil {
			return
		}
		if f := s.field(id); f != nil {
			r.value(f, typ)
		} else {
			r.d.Skip(typ)
		}
	}
}

// value rewrites one field value of wire type typ as f describes it; a
// value of another shape than f expects is passed unchanged (it is not
// what the metastore would read there).
func (r *rewriter) value(f *field, typ byte) {
	switch {
	case f.mapKeys:
		if typ != wire.TMap {
			r.d.Skip(typ)
			return
		}
		kt, vt, n := r.d.MapBegin()
		for i := 0; i < n && !r.failed(); i++ {
			if kt == wire.TString {
				r.str(f.k)
			} else {
				r.d.Skip(kt)
			}
			r.d.Skip(vt)
		}
	case f.list:
		if typ != wire.TList && typ != wire.TSet {
			r.d.Skip(typ)
			return
		}
		et, n := r.d.ListBegin()
		for i := 0; i < n && !r.failed(); i++ {
			r.elem(f, et)
		}
	default:
		r.elem(f, typ)
	}
}

// elem rewrites one value that is not a container of f's kind.
func (r *rewriter) elem(f *field, typ byte) {
	switch {
	case f.k == kStruct && typ == wire.TStruct:
		r.structBody(f.sub)
	case f.k != kStruct && typ == wire.TString:
		r.str(f.k)
	default:
		r.d.Skip(typ)
	}
}

// str reads a string at the decoder's position and, when kind k's
// mapping changes it, writes the new value with its length in its place.
func (r *rewriter) str(k kind) {
	from := r.d.Pos()
	v := r.d.Bytes()
	if r.failed() {
		return
	}
	if r.names != nil {
		r.visit(k, v)
		return
	}
	if k == kDB {
		r.db(from, v)
		return
	}
	var (
		s   string
		err error
	)
	switch k {
	case kQualified:
		s, err = mapQualified(string(v), r)
	case kTxnWriteIDs:
		s, err = mapTxnWriteIDs(string(v), r)
	case kView:
		s, err = View(string(v), r.mapName)
	default:
		panic("dbname: string of kind " + fmt.Sprint(k))
	}
	if err != nil {
		r.err = err
		return
	}
	if s != string(v) {
		r.replace(from, nil, s)
	}
}

// visit hands the database names in v, a string of kind k, to r.names.
func (r *rewriter) visit(k kind, v []byte) {
	switch k {
	case kDB:
		if name, ok := bareName(v); ok {
			r.names(name)
		}
	case kQualified:
		visitQualified(v, r.names)
	case kTxnWriteIDs:
		// "txnid$db.t:...$db2.t2:...": the tables after the first '$'.
		parts := bytes.Split(v, []byte("$"))
		for _, p := range parts[min(1, len(parts)):] {
			visitQualified(p, r.names)
		}
	}
}

// visitQualified hands fn the database of a "db.table" name, as
// mapQualified finds it.
func visitQualified(v []byte, fn func([]byte)) {
	dot := bytes.IndexByte(v, '.')
	if dot < 0 {
		return
	}
	if c := bytes.IndexByte(v, ':'); c >= 0 && c < dot {
		return
	}
	fn(v[:dot:dot])
}

// bareName is the database name in v without its catalog part
// ("@cat#db"); false for "@cat#" (every database) and "@cat#!" (the empty
// name), which are not names.
func bareName(v []byte) ([]byte, bool) {
	if len(v) > 0 && v[0] == '@' {
		if i := bytes.IndexByte(v, '#'); i > 0 {
			name := v[i+1:]
			if len(name) == 0 || string(name) == "!" {
				return nil, false
			}
			return name, true
		}
	}
	return v, true
}

// db maps a database name v, read at from, that may carry a catalog
// ("@cat#db"): the catalog part is kept. "@cat#" (every database) and
// "@cat#!" (the empty name) are not names.
func (r *rewriter) db(from int, v []byte) {
	name, ok := bareName(v)
	if !ok {
		return
	}
	cat := v[:len(v)-len(name)]
	n, err := r.mapName(string(name))
	if err != nil {
		r.err = err
		return
	}
	if n == string(name) {
		return
	}
	if n == "" && len(cat) > 0 {
		n = "!"
	}
	r.replace(from, cat, n)
}

// replace writes a+b, with its length, in place of the string read at
// from (the decoder is past it).
func (r *rewriter) replace(from int, a []byte, b string) {
	if len(a)+len(b) > 1<<31-1 {
		r.err = ErrTooLong
		return
	}
	r.out = append(r.out, r.src[r.mark:from]...)
	r.out = binary.BigEndian.AppendUint32(r.out, uint32(len(a)+len(b)))
	r.out = append(append(r.out, a...), b...)
	r.mark = r.d.Pos()
}

// mapName maps one bare database name.
func (r *rewriter) mapName(db string) (string, error) {
	if r.fn != nil {
		return r.fn(db)
	}
	return r.reply(db), nil
}

// mapQualified maps the database of a "db.table" name, or of a
// single-table write-id list "db.table:hwm:min:open:aborted". A string
// with no '.' before its first ':' is not such a name and is kept.
func mapQualified(s string, r *rewriter) (string, error) {
	dot := strings.IndexByte(s, '.')
	if dot < 0 {
		return s, nil
	}
	if c := strings.IndexByte(s, ':'); c >= 0 && c < dot {
		return s, nil
	}
	n, err := r.mapName(s[:dot])
	if err != nil {
		return "", err
	}
	return n + s[dot:], nil
}

// mapTxnWriteIDs maps a ValidTxnWriteIdList, "txnid$db.t:...$db2.t2:...":
// each table's write-id list after the first '$'.
func mapTxnWriteIDs(s string, r *rewriter) (string, error) {
	parts := strings.Split(s, "$")
	for i := 1; i < len(parts); i++ {
		n, err := mapQualified(parts[i], r)
		if err != nil {
			return "", err
		}
		parts[i] = n
	}
	return strings.Join(parts, "$"), nil
}
