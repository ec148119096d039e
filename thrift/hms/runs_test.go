package hms

import (
	"bytes"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestSharedRuns: the runs of two partitions of one table are the same
// bytes (their storage descriptors less the locations), every byte
// outside them differs or belongs to the partition, and they cut the
// struct where fields begin.
func TestSharedRuns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sh    hmsreq.PartitionShape
		nruns int
	}{
		{"hive2.3", hmsreq.PartitionShape{Hive: "2.3"}, 2},
		{"hive3.1", hmsreq.PartitionShape{Hive: "3.1"}, 2},
		{"hive4.0", hmsreq.PartitionShape{Hive: "4.0"}, 2},
		{"sd first", hmsreq.PartitionShape{Hive: "3.1", SDFirst: true}, 2},
		{"location first", hmsreq.PartitionShape{Hive: "3.1", LocFirst: true}, 2},
		{"no location", hmsreq.PartitionShape{Hive: "3.1", NoLoc: true}, 1},
		{"no sd", hmsreq.PartitionShape{Hive: "3.1", NoSD: true}, 0},
		{"unknown fields", hmsreq.PartitionShape{Hive: "4.0", Unknown: true}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := hmsreq.ShapedPartition(tc.sh, "2024-01-01"), hmsreq.ShapedPartition(tc.sh, "2024-01-02")
			ra, rb := SharedRuns(nil, a), SharedRuns(nil, b)
			if len(ra) != tc.nruns || len(rb) != tc.nruns {
				t.Fatalf("got %d and %d runs; want %d", len(ra), len(rb), tc.nruns)
			}
			shared := 0
			for i := range ra {
				x, y := a[ra[i].Start:ra[i].End], b[rb[i].Start:rb[i].End]
				if !bytes.Equal(x, y) {
					t.Errorf("run %d differs between partitions:\n%q\n%q", i, x, y)
				}
				if bytes.Contains(x, []byte("2024-01-0")) {
					t.Errorf("run %d holds the partition's own location", i)
				}
				shared += len(x)
			}
			if tc.nruns > 0 && shared < len(a)/2 {
				t.Errorf("runs cover %d of %d bytes; want most of them", shared, len(a))
			}
			// The first run starts at the sd's field header.
			if tc.nruns > 0 && (a[ra[0].Start] != wire.TStruct || a[ra[0].Start+2] != 6) {
				t.Errorf("first run starts at % x; want the sd field header", a[ra[0].Start:ra[0].Start+3])
			}
		})
	}
}

// TestSharedRunsMalformed: a struct that does not decode gets no runs.
func TestSharedRunsMalformed(t *testing.T) {
	p := hmsreq.ShapedPartition(hmsreq.PartitionShape{Hive: "3.1"}, "2024-01-01")
	for _, cut := range []int{1, 40, len(p) / 2, len(p) - 1} {
		if r := SharedRuns(nil, p[:cut]); len(r) != 0 {
			t.Errorf("cut at %d of %d: got runs %v; want none", cut, len(p), r)
		}
	}
}
