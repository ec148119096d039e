package proxy

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

func header(name string, seq int32) []byte {
	return wire.AppendHeader(nil, wire.Call, []byte(name), seq)
}

func be32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestBadInput: each malformed input gets a clear error or a closed
// connection, the proxy keeps serving others, and no input makes it hold
// memory beyond its limits (promise 7).
func TestBadInput(t *testing.T) {
	deep := header("get_table", 7)
	for i := 0; i < 100; i++ {
		deep = append(deep, wire.TStruct, 0, 1)
	}
	cases := []struct {
		name    string
		in      []byte
		wantErr int32 // TApplicationException code expected before the close; -1: just a close
	}{
		{"truncated header", []byte{0x80, 0x01, 0x00}, -1},
		{"truncated args", cat(header("get_table", 1), []byte{wire.TString, 0, 1, 0, 0, 0, 10, 'a'}), -1},
		{"negative string length", cat(header("get_table", 2), []byte{wire.TString, 0, 1}, be32(-5)), wire.ExProtocolError},
		{"huge string length", cat(header("get_table", 3), []byte{wire.TString, 0, 1}, be32(0x7fffff00)), wire.ExProtocolError},
		{"huge list", cat(header("get_partitions_by_names", 4), []byte{wire.TList, 0, 3, wire.TString}, be32(0x7fffffff)), wire.ExProtocolError},
		{"negative map size", cat(header("get_table", 5), []byte{wire.TMap, 0, 3, wire.TString, wire.TString}, be32(-1)), wire.ExProtocolError},
		{"bad field type", cat(header("get_table", 6), []byte{99, 0, 1, 0}), wire.ExProtocolError},
		{"deep nesting", deep, wire.ExProtocolError},
		{"huge method name", cat([]byte{0x80, 1, 0, 1}, be32(0x7ffffff0)), wire.ExProtocolError},
		{"non-strict header", cat(be32(9), []byte("get_table"), []byte{1}, be32(1), []byte{0}), wire.ExInvalidProtocol},
		{"compact protocol", []byte{0x82, 0x21, 0x01, 0x09, 'g', 'e', 't', '_', 't', 'a', 'b', 'l', 'e', 0}, wire.ExInvalidProtocol},
		{"framed bytes on buffered listener", cat(be32(30), header("getName", 1), []byte{0}), wire.ExInvalidProtocol},
		{"reply sent as request", cat(wire.AppendHeader(nil, wire.Reply, []byte("getName"), 1), []byte{0}), wire.ExInvalidMsgType},
		{"bad version", []byte{0x80, 0x02, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, wire.ExInvalidProtocol},
	}
	_, addr := startDemo(t, wire.Buffered)
	_, paddr := startProxy(t, proxyOpts{}, addr)
	healthy := dial(t, paddr, wire.Buffered)

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", paddr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.Write(tc.in)
			if tc.wantErr < 0 {
				// Incomplete input: the proxy waits for more; closing our
				// write side must end it without a reply.
				nc.(*net.TCPConn).CloseWrite()
			}
			nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			all, err := readAll(nc)
			if err != nil {
				t.Fatalf("connection not closed: %v", err)
			}
			if tc.wantErr < 0 {
				if len(all) != 0 {
					t.Fatalf("got %d reply bytes; want a plain close", len(all))
				}
				return
			}
			m, err := wire.Parse(all, wire.Limits{})
			if err != nil {
				t.Fatalf("reply %x does not parse: %v", all, err)
			}
			ex, err := wire.DecodeApplicationException(m.Body())
			if m.Type != wire.Exception || err != nil || ex.Code != tc.wantErr {
				t.Fatalf("got type %d %v %v; want TApplicationException %d", m.Type, ex, err, tc.wantErr)
			}
			t.Logf("answer: %s", ex.Message)
		})
	}
	// The proxy still serves everyone else.
	call(t, healthy, "get_all_databases", hmsclient.Args())
}

func readAll(nc net.Conn) ([]byte, error) {
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := nc.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return out, err
			}
			return out, nil
		}
	}
}

// TestGarbageNeverCrashesOrBloats throws random bytes at the proxy from
// many connections and checks the heap stays bounded.
func TestGarbageNeverCrashesOrBloats(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	_, paddr := startProxy(t, proxyOpts{}, addr)
	rng := rand.New(rand.NewPCG(1, 2))
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < 300; i++ {
		in := make([]byte, rng.IntN(2048)+1)
		for j := range in {
			in[j] = byte(rng.Uint32())
		}
		if i%3 == 0 { // a valid-looking header in front of garbage
			in = append(header("get_table", int32(i)), in...)
		}
		nc, err := net.Dial("tcp", paddr)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(in)
		nc.(*net.TCPConn).CloseWrite()
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := readAll(nc); err != nil {
			t.Fatalf("input %d: connection not closed: %v", i, err)
		}
		nc.Close()
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapInuse) - int64(before.HeapInuse); grown > 64<<20 {
		t.Fatalf("heap grew by %d MiB after garbage", grown>>20)
	}
	call(t, dial(t, paddr, wire.Buffered), "get_all_databases", hmsclient.Args())
}
