package hms

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/wire"
)

// partShape says how a test Partition is encoded: which Hive version's
// fields it carries and in what order.
type partShape struct {
	hive     string // "2.3", "3.1" or "4.0": the fields that version writes
	noSD     bool
	noLoc    bool // the sd has no location (a view's partition, or unset)
	locFirst bool // the location is the sd's first field
	sdFirst  bool // the sd comes before every other field
	unknown  bool // fields of a later version this code has never heard of
}

// testSD writes a StorageDescriptor as field 6, its location loc.
func testSD(e *wire.Encoder, sh partShape, loc string) {
	e.FieldBegin(wire.TStruct, 6)
	if sh.locFirst && !sh.noLoc {
		e.StringField(2, loc)
	}
	e.FieldBegin(wire.TList, 1)
	e.ListBegin(wire.TStruct, 12)
	for i := 0; i < 12; i++ {
		e.StringField(1, "col_"+strconv.Itoa(i))
		e.StringField(2, "string")
		if i%3 == 0 {
			e.StringField(3, "a comment")
		}
		e.Stop()
	}
	if !sh.locFirst && !sh.noLoc {
		e.StringField(2, loc)
	}
	e.StringField(3, "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat")
	e.StringField(4, "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat")
	e.BoolField(5, false)
	e.I32Field(6, -1)
	e.FieldBegin(wire.TStruct, 7)
	e.StringField(2, "org.apache.hadoop.hive.ql.io.orc.OrcSerde")
	e.StringMapField(3, []string{"serialization.format"}, map[string]string{"serialization.format": "1"})
	e.Stop()
	e.StringListField(8, nil)
	e.FieldBegin(wire.TList, 9)
	e.ListBegin(wire.TStruct, 0)
	e.StringMapField(10, nil, nil)
	if sh.hive != "2.3" {
		e.FieldBegin(wire.TStruct, 11) // skewedInfo
		e.StringListField(1, nil)
		e.Stop()
		e.BoolField(12, false)
	}
	if sh.unknown {
		e.I64Field(99, 42)
	}
	e.Stop()
}

// testPart encodes a Partition struct (through its STOP) of shape sh
// with values vals.
func testPart(sh partShape, vals ...string) []byte {
	var e wire.Encoder
	loc := "hdfs://nn/warehouse/db.db/t/ds=" + vals[0]
	if sh.sdFirst && !sh.noSD {
		testSD(&e, sh, loc)
	}
	e.StringListField(1, vals)
	e.StringField(2, "db")
	e.StringField(3, "t")
	e.I32Field(4, 1700000000)
	e.I32Field(5, 0)
	if !sh.sdFirst && !sh.noSD {
		testSD(&e, sh, loc)
	}
	e.StringMapField(7, []string{"numRows"}, map[string]string{"numRows": vals[0]})
	if sh.hive != "2.3" {
		e.StringField(9, "hive")
		e.I64Field(10, 7)
		e.BoolField(11, true)
	}
	if sh.hive == "4.0" {
		e.FieldBegin(wire.TStruct, 13) // fileMetadata
		e.Stop()
	}
	if sh.unknown {
		e.FieldBegin(wire.TStruct, 77)
		e.StringField(1, "from the future")
		e.FieldBegin(wire.TStruct, 6) // an sd-looking field nested elsewhere
		e.StringField(2, "not a location")
		e.Stop()
		e.Stop()
	}
	e.Stop()
	return e.B
}

// TestSharedRuns: the runs of two partitions of one table are the same
// bytes (their storage descriptors less the locations), every byte
// outside them differs or belongs to the partition, and they cut the
// struct where fields begin.
func TestSharedRuns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sh    partShape
		nruns int
	}{
		{"hive2.3", partShape{hive: "2.3"}, 2},
		{"hive3.1", partShape{hive: "3.1"}, 2},
		{"hive4.0", partShape{hive: "4.0"}, 2},
		{"sd first", partShape{hive: "3.1", sdFirst: true}, 2},
		{"location first", partShape{hive: "3.1", locFirst: true}, 2},
		{"no location", partShape{hive: "3.1", noLoc: true}, 1},
		{"no sd", partShape{hive: "3.1", noSD: true}, 0},
		{"unknown fields", partShape{hive: "4.0", unknown: true}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := testPart(tc.sh, "2024-01-01"), testPart(tc.sh, "2024-01-02")
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
	p := testPart(partShape{hive: "3.1"}, "2024-01-01")
	for _, cut := range []int{1, 40, len(p) / 2, len(p) - 1} {
		if r := SharedRuns(nil, p[:cut]); len(r) != 0 {
			t.Errorf("cut at %d of %d: got runs %v; want none", cut, len(p), r)
		}
	}
}
