package hms

import (
	"slices"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestDecodePrune: the selections a cache may answer are decoded; any
// field that could change the metastore's answer (a projection, a
// snapshot, another catalog, "@cat#db") makes the request undecoded.
func TestDecodePrune(t *testing.T) {
	for _, tc := range []struct {
		name, method string
		args         []byte
		ok           bool
		want         Prune
	}{
		{"filter", "get_partitions_by_filter", hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), hmsreq.Str(3, "ds = 'a'"), hmsreq.I16(4, 7)), true,
			Prune{Reply: PrunePartitions, DB: []byte("db"), Table: []byte("t"), ByFilter: true, Filter: "ds = 'a'", MaxParts: 7}},
		{"count", "get_num_partitions_by_filter", hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), hmsreq.Str(3, "x = 1")), true,
			Prune{Reply: PruneCount, DB: []byte("db"), Table: []byte("t"), ByFilter: true, Filter: "x = 1", MaxParts: -1}},
		{"ps", "get_partition_names_ps", hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), hmsreq.Strings(3, "a", ""), hmsreq.I16(4, -1)), true,
			Prune{Reply: PruneNames, DB: []byte("db"), Table: []byte("t"), PartVals: []string{"a", ""}, MaxParts: -1}},
		{"req", "get_partitions_by_filter_req", hmsreq.Req(hmsreq.Str(1, "hive"), hmsreq.Str(2, "db"), hmsreq.Str(3, "t"), hmsreq.Str(4, "f = 'x'")), true,
			Prune{Reply: PrunePartitions, DB: []byte("db"), Table: []byte("t"), ByFilter: true, Filter: "f = 'x'", MaxParts: -1, Newer: true}},
		{"names req", "get_partition_names_ps_req", hmsreq.Req(hmsreq.Str(1, "hive"), hmsreq.Str(2, "db"), hmsreq.Str(3, "t"), hmsreq.Strings(4, "a"), hmsreq.I16(5, 3)), true,
			Prune{Reply: PruneNamesInStruct, DB: []byte("db"), Table: []byte("t"), PartVals: []string{"a"}, MaxParts: 3, Newer: true}},
		// 4.0 fails some of these with "catName is null" (the twin, found_40_936896757_1850).
		{"req without catalog", "get_partitions_by_filter_req", hmsreq.Req(hmsreq.Str(2, "db"), hmsreq.Str(3, "t"), hmsreq.Str(4, "f = 'x'")), false, Prune{}},
		{"names req without catalog", "get_partition_names_ps_req", hmsreq.Req(hmsreq.Str(2, "db"), hmsreq.Str(3, "t"), hmsreq.Strings(4, "a"), hmsreq.I16(5, 3)), false, Prune{}},
		{"other catalog", "get_partitions_by_filter_req", hmsreq.Req(hmsreq.Str(1, "spark"), hmsreq.Str(2, "db"), hmsreq.Str(3, "t"), hmsreq.Str(4, "f = 'x'")), false, Prune{}},
		{"projection", "get_partitions_by_filter_req", hmsreq.Req(hmsreq.Str(2, "db"), hmsreq.Str(3, "t"), hmsreq.Str(4, "f = 'x'"), hmsreq.Bool(6, true)), false, Prune{}},
		{"snapshot", "get_partition_names_ps_req", hmsreq.Req(hmsreq.Str(2, "db"), hmsreq.Str(3, "t"), hmsreq.Strings(4, "a"), hmsreq.Str(6, "wids")), false, Prune{}},
		{"cat in db", "get_partitions_by_filter", hmsreq.Args(hmsreq.Str(1, "@hive#db"), hmsreq.Str(2, "t"), hmsreq.Str(3, "ds = 'a'")), false, Prune{}},
		{"no filter", "get_partitions_by_filter", hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "t")), false, Prune{}},
		{"wrong type", "get_partitions_by_filter", hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), hmsreq.I32(3, 1)), false, Prune{}},
		{"extra field", "get_partitions_ps", hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), hmsreq.Strings(3, "a"), hmsreq.Str(9, "x")), false, Prune{}},
		{"with auth", "get_partitions_ps_with_auth", hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), hmsreq.Strings(3, "a")), false, Prune{}},
		{"by expr", "get_partitions_by_expr", hmsreq.Req(hmsreq.Str(1, "db"), hmsreq.Str(2, "t")), false, Prune{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := DecodePrune(tc.method, tc.args, "hive")
			if ok != tc.ok {
				t.Fatalf("DecodePrune: got ok %v; want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if got.Reply != tc.want.Reply || string(got.DB) != string(tc.want.DB) || string(got.Table) != string(tc.want.Table) ||
				got.ByFilter != tc.want.ByFilter || got.Filter != tc.want.Filter || !slices.Equal(got.PartVals, tc.want.PartVals) ||
				got.MaxParts != tc.want.MaxParts || got.Newer != tc.want.Newer {
				t.Fatalf("DecodePrune: got %+v; want %+v", got, tc.want)
			}
		})
	}
}

// TestPruneReplyShapes: the replies laid out over pieces are what the
// metastore writes.
func TestPruneReplyShapes(t *testing.T) {
	join := func(iov [][]byte) []byte {
		var b []byte
		for _, p := range iov {
			b = append(b, p...)
		}
		return b
	}
	var e wire.Encoder
	e.StringListField(0, []string{"a=1", "a=2"})
	e.Stop()
	iov, _ := AppendPruneReply(nil, nil, PruneNames, nil, 2, []string{"a=1", "a=2"})
	if got := join(iov); string(got) != string(e.B) {
		t.Errorf("names: got %x; want %x", got, e.B)
	}
	e = wire.Encoder{}
	e.I32Field(0, 42)
	e.Stop()
	iov, _ = AppendPruneReply(nil, nil, PruneCount, nil, 42, nil)
	if got := join(iov); string(got) != string(e.B) {
		t.Errorf("count: got %x; want %x", got, e.B)
	}
	// Partitions split in several pieces each: the list counts two.
	p1, p2 := []byte{wire.TI32, 0, 1, 0, 0, 0, 5, wire.TStop}, []byte{wire.TStop}
	e = wire.Encoder{}
	e.FieldBegin(wire.TList, 0)
	e.ListBegin(wire.TStruct, 2)
	e.B = append(e.B, p1...)
	e.B = append(e.B, p2...)
	e.Stop()
	iov, _ = AppendPruneReply(nil, nil, PrunePartitions, [][]byte{p1[:3], p1[3:], p2}, 2, nil)
	if got := join(iov); string(got) != string(e.B) {
		t.Errorf("partitions: got %x; want %x", got, e.B)
	}
}

// FuzzPruneDecoders: the decoders of request and reply bytes a prune
// reads never panic, whatever the bytes.
func FuzzPruneDecoders(f *testing.F) {
	f.Add(hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"), hmsreq.Str(3, "ds = 'a'"), hmsreq.I16(4, 7)))
	f.Add(hmsreq.Req(hmsreq.Str(2, "db"), hmsreq.Str(3, "t"), hmsreq.Strings(4, "a"), hmsreq.I16(5, 3)))
	var e wire.Encoder
	e.StringListField(0, []string{"ds=1/hr=2"})
	e.Stop()
	f.Add(e.B)
	e = wire.Encoder{}
	hmsreq.Table{DB: "db", Name: "t", PartKeys: []hmsreq.Column{{Name: "ds", Type: "string"}}}.Append(&e, 0)
	e.Stop()
	f.Add(e.B)
	f.Fuzz(func(t *testing.T, b []byte) {
		for m := range pruneShapes {
			DecodePrune(m, b, "hive")
		}
		TablePartitionKeys(b)
		NameList(b)
	})
}
