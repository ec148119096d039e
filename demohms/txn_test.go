package demohms

import (
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

func openTxns(t *testing.T, c *testClient, n int32) []int64 {
	t.Helper()
	res := c.call("open_txns", structArg(1, i32Arg(1, n), strArg(2, "alice"), strArg(3, "host1"))).ok(t)
	var ids []int64
	for _, v := range res.list(1) {
		ids = append(ids, v.i)
	}
	return ids
}

func txnIDList(id int16, ids ...int64) func(e *wire.Encoder) {
	return func(e *wire.Encoder) {
		e.FieldBegin(wire.TList, id)
		e.ListBegin(wire.TI64, len(ids))
		for _, x := range ids {
			e.I64(x)
		}
	}
}

// exField returns the declared exception field a reply carries, 0 if none.
func exField(rp reply) int16 {
	for id := range rp.res.fields {
		if id != 0 {
			return id
		}
	}
	return 0
}

func TestTxnLifecycle(t *testing.T) {
	s, addr := startServer(t, wire.Buffered)
	c := dial(t, addr, wire.Buffered)
	ids := openTxns(t, c, 3)
	if len(ids) != 3 || ids[0] != 1 || ids[2] != 3 {
		t.Fatalf("open_txns: got %v; want [1 2 3]", ids)
	}
	c.call("heartbeat", structArg(1, i64Arg(2, 1))).ok(t)
	c.call("commit_txn", structArg(1, i64Arg(1, 1))).ok(t)
	c.call("abort_txns", structArg(1, txnIDList(1, 2))).ok(t)

	info := c.call("get_open_txns_info", nil).ok(t)
	if hwm := info.integer(1, 0); hwm != 3 {
		t.Fatalf("high water mark: got %d; want 3", hwm)
	}
	got := map[int64]int64{}
	for _, ti := range info.list(2) {
		got[ti.integer(1, 0)] = ti.integer(2, 0)
		if ti.integer(8, 0) == 0 || ti.integer(9, 0) == 0 {
			t.Errorf("txn %d: startedTime/lastHeartbeatTime not set", ti.integer(1, 0))
		}
	}
	if len(got) != 2 || got[2] != int64(txnAborted) || got[3] != int64(txnOpen) {
		t.Fatalf("txns by id->state: got %v; want 2 aborted, 3 open, 1 gone", got)
	}
	if s.TxnState(2) != "aborted" || s.TxnState(3) != "open" || s.TxnState(1) != "" {
		t.Fatalf("TxnState: got %q %q %q", s.TxnState(1), s.TxnState(2), s.TxnState(3))
	}

	for _, tc := range []struct {
		name   string
		method string
		args   func(e *wire.Encoder)
		field  int16
	}{
		{"commit aborted", "commit_txn", structArg(1, i64Arg(1, 2)), 2},
		{"commit unknown", "commit_txn", structArg(1, i64Arg(1, 99)), 1},
		{"heartbeat aborted", "heartbeat", structArg(1, i64Arg(2, 2)), 3},
		{"heartbeat unknown", "heartbeat", structArg(1, i64Arg(2, 99)), 2},
		{"abort unknown", "abort_txn", structArg(1, i64Arg(1, 99)), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if f := exField(c.call(tc.method, tc.args)); f != tc.field {
				t.Fatalf("exception field: got %d; want %d", f, tc.field)
			}
		})
	}
}

func TestShowCompact(t *testing.T) {
	s, addr := startServer(t, wire.Buffered)
	c := dial(t, addr, wire.Buffered)
	if l := c.call("show_compact", structArg(1)).ok(t).list(1); len(l) != 0 {
		t.Fatalf("fresh server: got %d compactions; want 0", len(l))
	}
	s.SeedCompaction(Compaction{DB: "d", Table: "t", Type: 2, State: "failed"})
	s.SeedCompaction(Compaction{DB: "d", Table: "t", Partition: "p=1", Type: 1, State: "initiated"})
	l := c.call("show_compact", structArg(1)).ok(t).list(1)
	if len(l) != 2 || l[0].str(5) != "failed" || l[1].str(3) != "p=1" {
		t.Fatalf("show_compact: got %d elements", len(l))
	}
}
