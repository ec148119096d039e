package dbname

import (
	"fmt"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// getTableReply is a get_table REPLY body for a table of cols columns, as
// a metastore sends it.
func getTableReply(cols int) []byte {
	cs := make([]hmsreq.Column, cols)
	for i := range cs {
		cs[i] = hmsreq.Column{Name: fmt.Sprintf("column_%03d", i), Type: "string", Comment: "a column"}
	}
	t := hmsreq.Table{DB: "sales", Name: "orders", Owner: "etl", CreateTime: 1700000000,
		SD:       hmsreq.ORCSD("hdfs://nn:8020/warehouse/sales.db/orders", cs...),
		PartKeys: []hmsreq.Column{{Name: "ds", Type: "string"}},
		Params:   map[string]string{"transient_lastDdlTime": "1700000000", "numFiles": "120", "totalSize": "123456789"}}
	return hmsreq.Args(t.Field(0))
}

// BenchmarkReplyGetTable: the prefixed-mode cost of a get_table reply,
// beside a plain copy of the same bytes, a validating skip over them (the
// floor of any rewrite) and an identity rewrite.
func BenchmarkReplyGetTable(b *testing.B) {
	m := lookup(b, "get_table")
	for _, cols := range []int{10, 100, 1000} {
		body := getTableReply(cols)
		dst := make([]byte, 0, 2*len(body))
		b.Run(fmt.Sprintf("copy/cols=%d", cols), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				dst = append(dst[:0], body...)
			}
		})
		b.Run(fmt.Sprintf("skip/cols=%d", cols), func(b *testing.B) { // the wire validation every rewrite pays
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var d wire.Decoder
			for b.Loop() {
				d.Reset(body)
				d.Skip(wire.TStruct)
			}
		})
		b.Run(fmt.Sprintf("identity/cols=%d", cols), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				dst, _ = Reply(dst[:0], m, wire.Reply, body, func(db string) string { return db })
			}
		})
		b.Run(fmt.Sprintf("prefix/cols=%d", cols), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				dst, _ = Reply(dst[:0], m, wire.Reply, body, add)
			}
		})
	}
}

// BenchmarkArgs: the prefixed-mode cost of a request on the way in (the
// hit path of a federated read pays it).
func BenchmarkArgs(b *testing.B) {
	for _, tc := range []struct {
		method string
		args   []byte
	}{
		{"get_table", hmsreq.Args(hmsreq.Str(1, "@hive#pfx_sales"), hmsreq.Str(2, "orders"))},
		{"get_table_req", hmsreq.Req(hmsreq.Str(1, "pfx_sales"), hmsreq.Str(2, "orders"), hmsreq.Str(4, "hive"),
			hmsreq.Str(6, "pfx_sales.orders:100:100::"), hmsreq.Strings(8, "HIVEFULLACIDREAD", "HIVEMANAGEDINSERTWRITE"))},
	} {
		m := lookup(b, tc.method)
		dst := make([]byte, 0, 2*len(tc.args))
		b.Run(tc.method, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				dst, _ = Args(dst[:0], m, tc.args, wire.Limits{}, strip)
			}
		})
	}
}
