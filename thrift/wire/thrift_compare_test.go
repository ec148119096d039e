package wire

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
)

// The proxy reads messages with its own scanner instead of Thrift's Go
// library. These benchmarks put both on the same job, side by side in one
// run: read one message from a stream, check it is a well-formed strict
// binary message within the limits, and walk past every field of its body.
// Thrift's TBinaryProtocol only validates and discards; the scanner also
// hands back the message's bytes in one slice, ready to forward or cache,
// which Thrift would need a second pass or a tee to produce.

// partitionsResult is a get_partitions_by_names result holding n
// partitions of a 20-column table, the proxy's largest common reply.
func partitionsResult(n int) []byte {
	var e Encoder
	e.FieldBegin(TList, 0)
	e.ListBegin(TStruct, n)
	for i := 0; i < n; i++ {
		e.StringListField(1, []string{fmt.Sprintf("2026-11-%02d", i%30+1), fmt.Sprintf("region_%d", i%7)})
		e.StringField(2, "sales_warehouse")
		e.StringField(3, "fact_orders_daily_partitioned")
		e.I32Field(4, 1700000000)
		e.I32Field(5, 0)
		e.FieldBegin(TStruct, 6) // sd
		fieldSchemas(&e, 1, 20, "order_amount_column")
		e.StringField(2, fmt.Sprintf("s3a://warehouse/sales_warehouse.db/fact_orders/ds=2026-11-%02d/region=region_%d", i%30+1, i%7))
		e.StringField(3, "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat")
		e.StringField(4, "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat")
		e.BoolField(5, false)
		e.I32Field(6, -1)
		e.FieldBegin(TStruct, 7)
		e.StringField(2, "org.apache.hadoop.hive.ql.io.orc.OrcSerde")
		e.StringMapField(3, []string{"serialization.format"}, map[string]string{"serialization.format": "1"})
		e.Stop()
		e.Stop()
		e.StringMapField(7, []string{"numFiles", "totalSize"}, map[string]string{"numFiles": "3", "totalSize": "123456"})
		e.Stop()
	}
	e.Stop()
	return e.B
}

func compareMessages() []namedMessage {
	return append(benchMessages(),
		namedMessage{"partitions1000", msg(Reply, "get_partitions_by_names", 1, partitionsResult(1000))})
}

// thriftReadSkip is the library's way to do the scanner's job: strict
// header, then skip the body struct with the depth limit applied.
func thriftReadSkip(ctx context.Context, p *thrift.TBinaryProtocol) error {
	if _, _, _, err := p.ReadMessageBegin(ctx); err != nil {
		return err
	}
	if err := thrift.SkipDefaultDepth(ctx, p, thrift.STRUCT); err != nil {
		return err
	}
	return p.ReadMessageEnd(ctx)
}

func newThriftLoop(m []byte) *thrift.TBinaryProtocol {
	var data []byte
	for i := 0; i < 7; i++ {
		data = append(data, m...)
	}
	conf := &thrift.TConfiguration{MaxMessageSize: 100 << 20, TBinaryStrictRead: thrift.BoolPtr(true)}
	tr := thrift.NewTBufferedTransport(thrift.NewStreamTransportR(&loopReader{data: data}), 64<<10)
	return thrift.NewTBinaryProtocolConf(tr, conf)
}

// TestThriftAgreesWithScanner checks the two sides of the benchmark do the
// same job: each accepts every message the other accepts here, and both
// refuse a truncated one.
func TestThriftAgreesWithScanner(t *testing.T) {
	ctx := context.Background()
	for _, cm := range compareMessages() {
		if _, err := Parse(cm.m, Limits{}); err != nil {
			t.Fatalf("%s: scanner refused: %v", cm.name, err)
		}
		if err := thriftReadSkip(ctx, newThriftLoop(cm.m)); err != nil {
			t.Fatalf("%s: thrift refused: %v", cm.name, err)
		}
		cut := cm.m[:len(cm.m)-1]
		if _, err := Parse(cut, Limits{}); err == nil {
			t.Errorf("%s: scanner accepted a truncated message", cm.name)
		}
		tr := thrift.NewTMemoryBufferLen(len(cut))
		tr.Write(cut)
		if err := thriftReadSkip(ctx, thrift.NewTBinaryProtocolConf(tr, &thrift.TConfiguration{})); err == nil {
			t.Errorf("%s: thrift accepted a truncated message", cm.name)
		}
	}
}

// BenchmarkScannerVsThrift: "scanner" and "thrift" sub-benchmarks of one
// message run back to back; compare their ns/op and allocs/op.
func BenchmarkScannerVsThrift(b *testing.B) {
	ctx := context.Background()
	for _, cm := range compareMessages() {
		b.Run(cm.name+"/scanner", func(b *testing.B) {
			r := newLoopReader(Buffered, cm.m)
			b.SetBytes(int64(len(cm.m)))
			b.ReportAllocs()
			for b.Loop() {
				m, err := r.Read()
				if err != nil || len(m.Buf) != len(cm.m) {
					b.Fatalf("Read: got (%d bytes, %v); want (%d, nil)", len(m.Buf), err, len(cm.m))
				}
			}
		})
		b.Run(cm.name+"/thrift", func(b *testing.B) {
			p := newThriftLoop(cm.m)
			b.SetBytes(int64(len(cm.m)))
			b.ReportAllocs()
			for b.Loop() {
				if err := thriftReadSkip(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
