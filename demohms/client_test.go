package demohms

import (
	"net"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// testClient is a minimal HMS client over wire.Reader/Writer.
type testClient struct {
	t   *testing.T
	nc  net.Conn
	r   *wire.Reader
	w   *wire.Writer
	seq int32
}

func startServer(t *testing.T, tr wire.Transport) (*Server, string) {
	t.Helper()
	s := New(Config{Transport: tr})
	s.Seed(2, 3, 30)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	return s, ln.Addr().String()
}

func dial(t *testing.T, addr string, tr wire.Transport) *testClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &testClient{t: t, nc: nc, r: wire.NewReader(nc, tr, wire.Limits{}), w: wire.NewWriter(nc, tr)}
}

// send writes one message with the args struct written by args.
func (c *testClient) send(typ byte, name string, args func(e *wire.Encoder)) int32 {
	c.t.Helper()
	c.seq++
	e := wire.Encoder{B: wire.AppendHeader(nil, typ, []byte(name), c.seq)}
	if args != nil {
		args(&e)
	}
	e.Stop()
	if err := c.w.Write(e.B); err != nil {
		c.t.Fatalf("write %s: %v", name, err)
	}
	return c.seq
}

type reply struct {
	typ  byte
	name string
	seq  int32
	raw  []byte // whole message
	body []byte
	res  *tval // decoded body
}

func (c *testClient) recv() (reply, error) {
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	m, err := c.r.Read()
	if err != nil {
		return reply{}, err
	}
	rp := reply{typ: m.Type, name: string(m.Name()), seq: m.SeqID,
		raw: append([]byte(nil), m.Buf...), body: append([]byte(nil), m.Body()...)}
	rp.res, err = decodeStruct(rp.body)
	return rp, err
}

// call sends a CALL and returns its reply, checking name and seqid.
func (c *testClient) call(name string, args func(e *wire.Encoder)) reply {
	c.t.Helper()
	seq := c.send(wire.Call, name, args)
	rp, err := c.recv()
	if err != nil {
		c.t.Fatalf("%s: read reply: %v", name, err)
	}
	if rp.name != name || rp.seq != seq {
		c.t.Fatalf("%s: reply header %q seq %d, want %q seq %d", name, rp.name, rp.seq, name, seq)
	}
	return rp
}

// ok returns the success field (0) of a REPLY, failing on anything else.
func (rp reply) ok(t *testing.T) *tval {
	t.Helper()
	if rp.typ != wire.Reply {
		ex, _ := wire.DecodeApplicationException(rp.body)
		t.Fatalf("%s: got message type %d (%v), want REPLY", rp.name, rp.typ, ex)
	}
	if f := rp.res.fields[0]; f != nil {
		return f
	}
	for id, f := range rp.res.fields {
		t.Fatalf("%s: got exception field %d: %q", rp.name, id, f.str(1))
	}
	return nil // void success
}

// ---- argument builders ----

func strArg(id int16, s string) func(e *wire.Encoder) {
	return func(e *wire.Encoder) { e.StringField(id, s) }
}

func args(fs ...func(e *wire.Encoder)) func(e *wire.Encoder) {
	return func(e *wire.Encoder) {
		for _, f := range fs {
			f(e)
		}
	}
}

func listArg(id int16, l ...string) func(e *wire.Encoder) {
	return func(e *wire.Encoder) { e.StringListField(id, l) }
}

func i16Arg(id int16, v int16) func(e *wire.Encoder) {
	return func(e *wire.Encoder) { e.FieldBegin(wire.TI16, id); e.I16(v) }
}

func boolArg(id int16, v bool) func(e *wire.Encoder) {
	return func(e *wire.Encoder) { e.BoolField(id, v) }
}

func i64Arg(id int16, v int64) func(e *wire.Encoder) {
	return func(e *wire.Encoder) { e.I64Field(id, v) }
}

func i32Arg(id int16, v int32) func(e *wire.Encoder) {
	return func(e *wire.Encoder) { e.I32Field(id, v) }
}

func structArg(id int16, fs ...func(e *wire.Encoder)) func(e *wire.Encoder) {
	return func(e *wire.Encoder) {
		e.FieldBegin(wire.TStruct, id)
		for _, f := range fs {
			f(e)
		}
		e.Stop()
	}
}

func tableArg(id int16, t *table) func(e *wire.Encoder) {
	return func(e *wire.Encoder) { e.FieldBegin(wire.TStruct, id); encTable(e, t) }
}

func partArg(id int16, p *partition) func(e *wire.Encoder) {
	return func(e *wire.Encoder) { e.FieldBegin(wire.TStruct, id); encPartition(e, p) }
}

func partListArg(id int16, ps ...*partition) func(e *wire.Encoder) {
	return func(e *wire.Encoder) { e.FieldBegin(wire.TList, id); encPartitionList(e, ps) }
}

// ---- result readers ----

func strs(v *tval) []string {
	out := []string{}
	for _, x := range v.elems {
		out = append(out, x.s)
	}
	return out
}
