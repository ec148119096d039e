package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestOnewayGetTableReal guards issue 9 against a real metastore: Java's
// Thrift processor answers a get_table sent as ONEWAY, and the proxy used
// to hand that answer to the next client on the pooled connection with
// the same seqid (and cache it under that client's key). Through one
// upstream connection, the bad client is refused and every other client
// gets the table it asked for, cached or not.
func TestOnewayGetTableReal(t *testing.T) {
	eachVersion(t, func(t *testing.T, v string) {
		if v == "4.0" {
			t.Skip("4.0.1 has dropped get_table")
		}
		ms := start(t, v)
		direct := dial(t, ms.addr)
		db := "e2e_oneway_" + strings.ReplaceAll(v, ".", "")
		clDatabase(t, direct, db)
		for _, tbl := range []string{"t0", "t1"} {
			clMustOK(t, "create_table", call(t, direct, "create_table", hmsreq.Args(clTable(db, tbl, nil).Field(1))))
		}
		get := func(tbl string) []byte { return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl)) }
		for _, cached := range []bool{false, true} {
			t.Run(fmt.Sprintf("cache=%v", cached), func(t *testing.T) {
				n := startProxy(t, ms, nodeOpts{noCache: !cached, maxConns: 1})
				bad := dial(t, n.addr)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				if err := bad.Send(ctx, wire.Oneway, "get_table", get("t1")); err != nil {
					t.Fatal(err)
				}
				// The refusal, or (before the fix) nothing: give the
				// metastore time to answer the forwarded call first.
				bad.Conn().SetReadDeadline(time.Now().Add(3 * time.Second))
				if m, err := bad.Recv(ctx); err == nil {
					ex, _ := wire.DecodeApplicationException(m.Body())
					if m.Type != wire.Exception || ex == nil || ex.Code != wire.ExInvalidMsgType {
						t.Fatalf("bad client got type %d %v; want INVALID_MESSAGE_TYPE", m.Type, ex)
					}
				} else {
					t.Logf("bad client got no answer: %v", err)
				}
				for i := 0; i < 3; i++ {
					victim := dial(t, n.addr) // seqid 1, as the bad call
					reply := call(t, victim, "get_table", get("t0"))
					clMustOK(t, "get_table", reply)
					if got := proxytest.TableName(t, reply); got != "t0" {
						t.Fatalf("victim %d: get_table(%s, t0) returned table %q", i, db, got)
					}
				}
			})
		}
	})
}
