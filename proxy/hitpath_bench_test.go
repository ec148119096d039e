package proxy

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// cannedForwarder answers get_table[_req] and get_partitions_by_names[_req]
// as a metastore would, from the request alone: the warm-up of the hit-path
// benchmark. No socket, so the benchmark measures the proxy only.
type cannedForwarder struct{ calls int }

func (f *cannedForwarder) Do(_ context.Context, c upstream.Call, sink upstream.ReplySink) error {
	f.calls++
	name := string(c.Msg.Name())
	var e wire.Encoder
	e.B = wire.AppendHeader(e.B, wire.Reply, c.Msg.Name(), c.Msg.SeqID)
	tbl := hmsreq.Table{DB: "demo_db0", Name: "t0", Owner: "bench", SD: hmsreq.TextSD("file:/w/t0",
		hmsreq.Column{Name: "id", Type: "bigint"}, hmsreq.Column{Name: "v", Type: "string"})}
	switch name {
	case "get_table":
		tbl.Append(&e, 0)
	case "get_table_req":
		e.FieldBegin(wire.TStruct, 0)
		tbl.Append(&e, 1)
		e.Stop()
	case "get_partitions_by_names", "get_partitions_by_names_req":
		path := hms.Path{3, hms.Each}
		if name == "get_partitions_by_names_req" {
			path = hms.Path{1, 3, hms.Each}
		}
		var parts []hmsreq.Partition
		hms.Walk(c.Msg.Body(), path, func(_ byte, v []byte) bool {
			parts = append(parts, hmsreq.Partition{DB: "demo_db0", Table: "t0", Values: []string{string(v[2:])},
				SD: hmsreq.TextSD("file:/w/t0/" + string(v))})
			return true
		})
		if name == "get_partitions_by_names_req" {
			e.FieldBegin(wire.TStruct, 0)
			hmsreq.Partitions(1, parts...)(&e)
			e.Stop()
		} else {
			hmsreq.Partitions(0, parts...)(&e)
		}
	default:
		return fmt.Errorf("canned: no answer for %s", name)
	}
	e.Stop()
	m, err := wire.Parse(e.B, wire.Limits{})
	if err != nil {
		return err
	}
	return sink.Reply(m)
}

// benchConn is a client connection of a caching server over the canned
// forwarder, writing its replies nowhere.
func benchConn(b testing.TB) (*clientConn, *cannedForwarder) {
	b.Helper()
	caching := newCaching(b, nil)
	fwd := &cannedForwarder{}
	s, err := New(Config{Cache: caching}, fwd)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.cache.close() })
	c := &clientConn{s: s, w: wire.NewWriter(io.Discard, wire.Buffered), sess: upstream.NoSession}
	return c, fwd
}

func callMsg(b testing.TB, method string, args []byte) wire.Message {
	b.Helper()
	buf := wire.AppendHeader(nil, wire.Call, []byte(method), 7)
	m, err := wire.Parse(append(buf, args...), wire.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkHitPath: one cache hit handled in-process, from a parsed
// request to the reply written (to io.Discard): decoding the arguments,
// the key, the lookup and the write, nothing of sockets or scheduling.
// Issue 11's goal: at most one allocation per single-entry hit.
func BenchmarkHitPath(b *testing.B) {
	type tc struct {
		name, method string
		args         []byte
	}
	cases := []tc{
		{"get_table", "get_table", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))},
		{"get_table_req", "get_table_req", hmsreq.Req(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"),
			hmsreq.Bool(3, false), hmsreq.Str(4, "hive"), hmsreq.Str(6, "engine=trino"))},
	}
	for _, n := range []int{10, 1000} {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("p=%05d", i)
		}
		cases = append(cases, tc{fmt.Sprintf("get_partitions_by_names-%d", n), "get_partitions_by_names",
			hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Strings(3, names...))})
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			c, fwd := benchConn(b)
			m := callMsg(b, tc.method, tc.args)
			meth := hms.Lookup(m.Name())
			if err := c.handle(meth, m); err != nil {
				b.Fatal(err)
			}
			c.s.cache.Store.Wait()
			if err := c.handle(meth, m); err != nil || c.outcome != OutcomeHit {
				b.Fatalf("warm-up: outcome %v, err %v; want a hit", c.outcome, err)
			}
			calls := fwd.calls
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := c.handle(meth, m); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if fwd.calls != calls || c.outcome != OutcomeHit {
				b.Fatalf("%d upstream calls during the run, outcome %v: not all hits", fwd.calls-calls, c.outcome)
			}
		})
	}
}

// TestHitPathAllocs: a hit on a single entry decodes its request once,
// into buffers the connection keeps, and allocates nothing (issue 11's
// goal: at most one allocation).
func TestHitPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	for _, tc := range []struct {
		method string
		args   []byte
	}{
		{"get_table", hmsreq.Args(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"))},
		{"get_table_req", hmsreq.Req(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Str(4, "hive"))},
	} {
		t.Run(tc.method, func(t *testing.T) {
			c, _ := benchConn(t)
			m := callMsg(t, tc.method, tc.args)
			meth := hms.Lookup(m.Name())
			c.handle(meth, m)
			c.s.cache.Store.Wait()
			allocs := testing.AllocsPerRun(100, func() {
				if err := c.handle(meth, m); err != nil || c.outcome != OutcomeHit {
					t.Fatalf("outcome %v, err %v; want a hit", c.outcome, err)
				}
			})
			if allocs > 1 {
				t.Errorf("%v allocations per hit; want at most 1", allocs)
			}
		})
	}
}
