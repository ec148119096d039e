package demohms

import (
	"errors"
	"fmt"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// exKind is a declared HMS exception struct (each has one field,
// 1 message:string).
type exKind uint8

const (
	exMeta exKind = iota + 1
	exNoSuchObject
	exAlreadyExists
	exInvalidObject
	exInvalidOperation
	exUnknownDB
	exUnknownTable
	exConfigValSecurity
)

// hmsError is an exception a handler throws. If the method declares its
// kind, it is sent at the declared result field; otherwise the client gets
// TApplicationException INTERNAL_ERROR, as from HMS.
type hmsError struct {
	kind exKind
	msg  string
}

func (e *hmsError) Error() string { return e.msg }

func metaErr(msg string) error      { return &hmsError{exMeta, msg} }
func noSuchObject(msg string) error { return &hmsError{exNoSuchObject, msg} }
func alreadyExists(msg string) error {
	return &hmsError{exAlreadyExists, msg}
}
func invalidObject(msg string) error    { return &hmsError{exInvalidObject, msg} }
func invalidOperation(msg string) error { return &hmsError{exInvalidOperation, msg} }

// handler runs one call. a is the decoded args struct. On success it writes
// the result struct's fields (field 0 for a value, nothing for void) to e;
// on error whatever it wrote is discarded.
type handler func(c *conn, a *tval, e *wire.Encoder) error

type method struct {
	h      handler
	throws []exKind // declared exceptions; result field id = index+1
	oneway bool     // no reply at all
}

// Exception lists shared by several methods (result field ids 1, 2, ...).
var (
	thMeta                     = []exKind{exMeta}
	thNoSuchMeta               = []exKind{exNoSuchObject, exMeta}
	thMetaNoSuch               = []exKind{exMeta, exNoSuchObject}
	thCreate                   = []exKind{exAlreadyExists, exInvalidObject, exMeta}
	thCreateTable              = []exKind{exAlreadyExists, exInvalidObject, exMeta, exNoSuchObject}
	thDropDB                   = []exKind{exNoSuchObject, exInvalidOperation, exMeta}
	thAlter                    = []exKind{exInvalidOperation, exMeta}
	thAddPart                  = []exKind{exInvalidObject, exAlreadyExists, exMeta}
	thFields                   = []exKind{exMeta, exUnknownTable, exUnknownDB}
	thTablesReq                = []exKind{exMeta, exInvalidOperation, exUnknownDB}
	thPartsByNamesReq          = []exKind{exMeta, exNoSuchObject, exInvalidObject}
	thNone            []exKind = nil
)

func (m *method) fieldFor(k exKind) int16 {
	for i, t := range m.throws {
		if t == k {
			return int16(i + 1)
		}
	}
	return 0
}

// dispatch runs one call and returns the reply message (nil for oneway), or
// an error when the connection must be closed without a reply.
func (c *conn) dispatch(name string, seq int32, body []byte) ([]byte, error) {
	m, ok := methods[name]
	if !ok {
		return wire.AppendApplicationException(nil, name, seq, wire.ExUnknownMethod,
			"Invalid method name: '"+name+"'"), nil
	}
	a, err := decodeStruct(body)
	if err != nil {
		return wire.AppendApplicationException(nil, name, seq, wire.ExProtocolError, err.Error()), nil
	}
	e := wire.Encoder{B: wire.AppendHeader(nil, wire.Reply, []byte(name), seq)}
	hdr := len(e.B)
	err = c.run(m.h, a, &e)
	if m.oneway {
		return nil, nil
	}
	if err != nil {
		if errors.Is(err, errClose) {
			return nil, err
		}
		var he *hmsError
		if errors.As(err, &he) {
			if id := m.fieldFor(he.kind); id > 0 {
				e.B = e.B[:hdr]
				e.FieldBegin(wire.TStruct, id)
				e.StringField(1, he.msg)
				e.Stop()
				e.Stop()
				return e.B, nil
			}
		}
		c.s.log.Debug("demohms: undeclared error", "method", name, "err", err)
		return wire.AppendApplicationException(nil, name, seq, wire.ExInternalError,
			"Internal error processing "+name), nil
	}
	e.Stop()
	return e.B, nil
}

// run calls h, turning a panic into an undeclared error (INTERNAL_ERROR).
func (c *conn) run(h handler, a *tval, e *wire.Encoder) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.s.log.Error("demohms: handler panic", "panic", r)
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return h(c, a, e)
}

// ---- success-field helpers ----

func okStrings(e *wire.Encoder, l []string) error {
	e.StringListField(0, nonNilS(l))
	return nil
}

func okString(e *wire.Encoder, s string) error {
	e.StringField(0, s)
	return nil
}

func okI32(e *wire.Encoder, v int32) error {
	e.I32Field(0, v)
	return nil
}

func okI64(e *wire.Encoder, v int64) error {
	e.I64Field(0, v)
	return nil
}

func okBool(e *wire.Encoder, v bool) error {
	e.BoolField(0, v)
	return nil
}

func okPartitions(e *wire.Encoder, ps []*partition) error {
	e.FieldBegin(wire.TList, 0)
	encPartitionList(e, ps)
	return nil
}

func okPartition(e *wire.Encoder, p *partition) error {
	e.FieldBegin(wire.TStruct, 0)
	encPartition(e, p)
	return nil
}

// okWrapped writes field 0 as a struct whose field 1 is written by f (the
// shape of GetTableResult, PartitionsResponse and friends).
func okWrapped(e *wire.Encoder, typ byte, f func()) error {
	e.FieldBegin(wire.TStruct, 0)
	e.FieldBegin(typ, 1)
	f()
	e.Stop()
	return nil
}
