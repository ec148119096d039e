package bench

import (
	"bytes"
	"context"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestEchoAnswersAsSource: the echo answers a call with the bytes its
// source gave to the same call, asking the source once; both are read
// raw on framed transport (the reply sizes land in the report).
func TestEchoAnswersAsSource(t *testing.T) {
	d, err := StartDemo(DemoConfig{Transport: wire.Framed})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	e, err := StartEcho(d.Direct, wire.Framed)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	direct, echo := &conn{addr: d.Direct.Addr, tr: wire.Framed}, &conn{addr: e.Addr, tr: wire.Framed}
	defer direct.close()
	defer echo.close()
	args := hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))
	_, want, err := direct.call(ctx, "get_table", args, 0)
	if err != nil {
		t.Fatal(err)
	}
	want = bytes.Clone(want)
	before := d.metastore.CallCount("get_table")
	for i := 0; i < 3; i++ {
		out, got, err := echo.call(ctx, "get_table", args, 0)
		if err != nil || out != outOK || !bytes.Equal(got, want) {
			t.Fatalf("call %d: outcome %v, %d bytes, %v; want the source's %d bytes", i, out, len(got), err, len(want))
		}
	}
	if n := d.metastore.CallCount("get_table") - before; n != 1 {
		t.Fatalf("the source was asked %d times; want once", n)
	}
}
