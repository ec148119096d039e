package hmsclient_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestRawCall: the raw client returns the reply's bytes as sent, large
// and small in turn on one connection (its buffer grows and is reused),
// and refuses a reply that answers another call.
func TestRawCall(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{{"small", 10}, {"large", 3 << 20}, {"small-again", 100}} {
		t.Run(tc.name, func(t *testing.T) {
			body := bytes.Repeat([]byte{7}, tc.size)
			body = append(body, wire.TStop)
			ln := proxytest.Listen(t)
			proxytest.EchoOn(t, ln, wire.Framed, body)
			r, err := hmsclient.DialRaw(context.Background(), ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for seq := int32(1); seq <= 3; seq++ {
				msg, typ, err := r.Call(context.Background(), "get_table", []byte{wire.TStop})
				if err != nil {
					t.Fatal(err)
				}
				want := append(wire.AppendHeader(nil, wire.Reply, []byte("get_table"), seq), body...)
				if typ != wire.Reply || !bytes.Equal(msg, want) {
					t.Fatalf("call %d: type %d, %d bytes; want a reply of %d bytes as sent", seq, typ, len(msg), len(want))
				}
			}
		})
	}
	t.Run("other-seqid", func(t *testing.T) {
		ln := proxytest.Listen(t)
		proxytest.ServeFake(t, ln, wire.Framed, func(c *proxytest.FakeConn, m wire.Message) error {
			c.Scratch = wire.AppendHeader(c.Scratch[:0], wire.Reply, m.Name(), m.SeqID+1)
			return c.W.Write(c.Scratch, []byte{wire.TStop})
		})
		r, err := hmsclient.DialRaw(context.Background(), ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, _, err := r.Call(context.Background(), "get_table", []byte{wire.TStop}); !errors.Is(err, hmsclient.ErrRawReply) {
			t.Fatalf("got %v; want ErrRawReply", err)
		}
	})
}
