package hms

import "github.com/hmsproxy/hmsproxy/thrift/wire"

// Run is the byte range [Start, End) of an encoded object.
type Run struct{ Start, End int }

// Field ids of Partition (12) and of its StorageDescriptor.
const (
	partFieldSD     = 6
	sdFieldLocation = 2
)

// SharedRuns appends to dst the runs of a Partition struct's bytes
// (part, through its STOP) that the partitions of one table usually have
// in common: its storage descriptor, field header and STOP included,
// less the location, which names each partition's own directory. That
// is at most two runs, in order: before the location and after it. The
// columns, serde, formats and bucketing in them are most of a
// partition's bytes, and the same in every partition of a table.
//
// Only the first sd field and its first location are looked at, and nothing is decoded beyond
// skipping: the runs are cut where fields begin, so the bytes outside
// and inside them rejoin as they were. A struct that does not decode
// gets no runs.
func SharedRuns(dst []Run, part []byte) []Run {
	d, n0, found := wire.NewDecoder(part), len(dst), false
	for {
		start := d.Pos()
		typ, id := d.FieldBegin()
		if d.Err() != nil {
			return dst[:n0]
		}
		if typ == wire.TStop {
			return dst
		}
		if id != partFieldSD || typ != wire.TStruct || found {
			d.Skip(typ)
			continue
		}
		found = true
		from, n := start, len(dst)
		for {
			at := d.Pos()
			typ, id := d.FieldBegin()
			if typ == wire.TStop || d.Err() != nil {
				break
			}
			d.Skip(typ)
			if id == sdFieldLocation && typ == wire.TString && len(dst) == n {
				dst = append(dst, Run{from, at})
				from = d.Pos()
			}
		}
		dst = append(dst, Run{from, d.Pos()})
	}
}
