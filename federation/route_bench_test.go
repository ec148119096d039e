package federation

import (
	"strconv"
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// BenchmarkRoute is the router's own cost per call (no network): finding
// every database a request names and resolving it to its group.
func BenchmarkRoute(b *testing.B) {
	up := proxytest.Group(b, upstream.Config{}, "127.0.0.1:1")
	r, err := New(Config{Groups: []Member{{Name: "primary", Up: up}, {Name: "lake", Up: up, Databases: []string{"lake", "lake_*"}, Access: ReadWrite}}})
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, 500)
	for i := range names {
		names[i] = "ds=2024-01-01/hr=" + string(rune('a'+i%26))
	}
	var e wire.Encoder
	e.StringField(1, "lake_sales")
	e.StringField(2, "orders")
	e.StringListField(3, names)
	e.Stop()
	for _, tc := range []struct {
		name, method string
		args         []byte
	}{
		{"get_table", "get_table", hmsclient.Args("lake_sales", "orders")},
		{"get_partitions_by_names_500", "get_partitions_by_names", e.B},
		{"create_table", "create_table", tableArg("lake_sales", "t")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			meth := hms.Lookup([]byte(tc.method))
			buf := append(wire.AppendHeader(nil, wire.Call, []byte(tc.method), 1), tc.args...)
			m, err := wire.Parse(buf, wire.Limits{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if d := r.Route(meth, m); d.Refuse != "" || d.Group != 1 {
					b.Fatalf("%+v", d)
				}
			}
		})
	}
}

// BenchmarkRouteDistinctNames: a request naming n distinct databases
// (get_valid_write_ids' "db.table" names, all the primary's) costs time
// linear in n (issue 22: each addition once scanned every name before).
func BenchmarkRouteDistinctNames(b *testing.B) {
	up := proxytest.Group(b, upstream.Config{}, "127.0.0.1:1")
	r, err := New(Config{Groups: []Member{{Name: "primary", Up: up}, {Name: "lake", Up: up, Databases: []string{"lake"}}}})
	if err != nil {
		b.Fatal(err)
	}
	meth := hms.Lookup([]byte("get_valid_write_ids"))
	for _, n := range []int{100, 1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			names := make([]string, n)
			for i := range names {
				names[i] = "db" + strconv.Itoa(i) + ".t"
			}
			var e wire.Encoder
			e.FieldBegin(wire.TStruct, 1)
			e.StringListField(1, names)
			e.Stop()
			e.Stop()
			buf := append(wire.AppendHeader(nil, wire.Call, []byte("get_valid_write_ids"), 1), e.B...)
			m, err := wire.Parse(buf, wire.Limits{})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if d := r.Route(meth, m); d.Refuse != "" || d.Group != 0 {
					b.Fatalf("%+v", d)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/name")
		})
	}
}
