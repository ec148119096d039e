package hms

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"slices"

	"github.com/hmsproxy/hmsproxy/filter"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Table statistics (get_table_statistics_req: TableStatsRequest {1
// dbName, 2 tblName, 3 colNames, 4 catName, 5 validWriteIdList, 6
// engine}) are one list of the columns' statistics in the database's
// order (ascending names on 3.1's Derby), whatever the order, case or
// repeats of the names asked for: their key holds the set.
//
// The shape of get_partitions_statistics_req: PartitionsStatsRequest
// {1 dbName, 2 tblName, 3 colNames, 4 partNames, 5 catName,
// 6 validWriteIdList, 7 engine} answered by PartitionsStatsResult
// {1 partStats: map<string, list<ColumnStatisticsObj>>, 2 isStatsCompliant}.
//
// What the metastore does with it (HiveMetaStore
// get_partitions_statistics_req, 2.3 to 4.0, checked against 3.1):
//   - column names are lower-cased, partition names have their keys
//     lower-cased; the store is asked for the rows of those columns and
//     partitions, ordered by partition name (direct SQL "order by
//     PARTITION_NAME");
//   - each partition with stats of at least one of the columns becomes
//     one entry of a java.util.HashMap keyed by its stored name, in that
//     order; partitions and columns without stats (unknown ones too) are
//     simply absent;
//   - the map is written in the HashMap's iteration order (JavaHashOrder).
//
// So the entry of a partition depends on the request without its
// partition list, on the set of columns asked for (not on their order,
// case or repeats: the SQL IN list is a set) and on the partition; the
// order of the columns inside an entry is the database's own, and is
// kept as the metastore sent it. A reply is assembled from such
// entries, laid out in the order the metastore's HashMap would have.

// StatsShape is where a partition statistics read keeps its lists.
type StatsShape struct {
	// Parts is the list of partition names (nil for table statistics),
	// Cols the list of column names in the args (field ids, no Each).
	Parts, Cols Path
}

// AppendRequest appends a copy of the call whose header is hdr and whose
// args are args, with its list of partition names replaced by names.
func (s *StatsShape) AppendRequest(dst, hdr, args []byte, names []string) []byte {
	dst = append(dst, hdr...)
	var e wire.Encoder
	e.StringListField(s.Parts[len(s.Parts)-1], names)
	return replaceField(dst, args, s.Parts, e.B)
}

// MaxStatsNames is the most columns or partitions a statistics request
// may name to be answered per partition: the metastore runs larger
// lists in batches of hive.direct.sql.max.elements.in.clause (1,000 by
// default), and a partition whose rows span two batches appears in its
// reply twice over (the later one wins), which only it can reproduce.
const MaxStatsNames = 1000

// AppendColumnSet appends a digest (SHA-256) of the set of column names
// cols stand for, as the metastore reads them (lower-cased), in any
// order and with repeats: requests naming one set get one digest. A
// digest, not the names, goes into a key that every partition's entry
// repeats, so a request naming many long columns for many partitions
// costs its entries no more than its own size. ok is false for a name
// that is not ASCII (Java's lower case of it is not worth guessing) or
// longer than MaxColumnName (it names no column), or for more than
// MaxStatsNames names.
func AppendColumnSet(dst []byte, cols [][]byte) ([]byte, bool) {
	if len(cols) > MaxStatsNames {
		return dst, false
	}
	low := make([]string, 0, len(cols))
	for _, c := range cols {
		if len(c) > MaxColumnName {
			return dst, false
		}
		b := make([]byte, len(c))
		for i, ch := range c {
			if ch >= 0x80 {
				return dst, false
			}
			if 'A' <= ch && ch <= 'Z' {
				ch += 'a' - 'A'
			}
			b[i] = ch
		}
		low = append(low, string(b))
	}
	slices.Sort(low)
	low = slices.Compact(low)
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, c := range low {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(c)))])
		h.Write([]byte(c))
	}
	return h.Sum(dst), true
}

// StoredPartName reports whether name is a partition name in the form
// the metastore stores it: ASCII, keys in lower case, values escaped as
// FileUtils.escapePathName escapes them. Only such a name can be matched
// against a reply's keys, which are stored names.
func StoredPartName(name string) bool {
	for i := 0; i < len(name); i++ {
		if name[i] >= 0x80 {
			return false
		}
	}
	keys, vals, err := filter.PartitionValues(name)
	if err != nil {
		return false
	}
	for _, k := range keys {
		for i := 0; i < len(k); i++ {
			if 'A' <= k[i] && k[i] <= 'Z' {
				return false
			}
		}
	}
	return string(AppendPartName(nil, keys, vals)) == name
}

// SplitPartStats cuts a partition statistics reply (message type typ,
// result body) into its map entries, each named by its key: Body is the
// entry's bytes, key and list together, as they go back into a map. ok
// is false when the reply is not a plain success this code understands
// (an exception, isStatsCompliant or another field, a key not among
// asked, a key twice): the metastore's own reply then goes to the
// client, uncached. The entries come in the reply's order (see
// JavaOrdered).
func SplitPartStats(typ byte, body []byte, asked []string) ([]Object, bool) {
	if typ != wire.Reply {
		return nil, false
	}
	d := wire.NewDecoder(body)
	if t, id := d.FieldBegin(); id != 0 || t != wire.TStruct || d.Err() != nil {
		return nil, false
	}
	if t, id := d.FieldBegin(); id != 1 || t != wire.TMap || d.Err() != nil {
		return nil, false
	}
	kt, vt, n := d.MapBegin()
	if d.Err() != nil || n > 0 && (kt != wire.TString || vt != wire.TList) || n > len(asked) {
		return nil, false
	}
	want := make(map[string]bool, len(asked))
	for _, a := range asked {
		want[a] = true
	}
	out := make([]Object, 0, n)
	for i := 0; i < n; i++ {
		start := d.Pos()
		name := d.String()
		d.Skip(wire.TList)
		if d.Err() != nil || !want[name] {
			return nil, false
		}
		want[name] = false // a second time: not asked any more
		out = append(out, Object{Name: name, Body: body[start:d.Pos()]})
	}
	if d.Err() != nil || !bytes.Equal(body[d.Pos():], []byte{wire.TStop, wire.TStop}) {
		return nil, false
	}
	return out, true
}

// JavaOrdered reports whether names, the keys of a reply in its order,
// are in the order JavaHashOrder gives for them put in name order: the
// order a reply assembled from entries would have.
func JavaOrdered(names []string) bool {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	order, ok := JavaHashOrder(sorted)
	if !ok {
		return false
	}
	for i, j := range order {
		if names[i] != sorted[j] {
			return false
		}
	}
	return true
}

// PartStatsFrame lays out in frame the wrapper of a partition statistics
// result of n entries: the result body is head, the entries' bytes in
// JavaHashOrder, then tail.
func PartStatsFrame(frame []byte, n int) (head, tail, buf []byte) {
	e := wire.Encoder{B: frame[:0]}
	e.FieldBegin(wire.TStruct, 0)
	e.FieldBegin(wire.TMap, 1)
	e.B = append(e.B, wire.TString, wire.TList)
	e.B = binary.BigEndian.AppendUint32(e.B, uint32(n))
	pre := len(e.B)
	e.Stop()
	e.Stop()
	return e.B[:pre], e.B[pre:], e.B
}

// JavaHashOrder is the order in which a java.util.HashMap<String, ?>,
// made with new HashMap<>() and given keys (distinct, ASCII) by put in
// the order listed, iterates them: order[i] is the index in keys of the
// i-th key iterated. A bucket's keys keep their insertion order through
// every resize; ok is false when a bucket would reach the 9 keys at
// which the map turns it into a tree (a capacity of 64 or more), whose
// order this does not model.
func JavaHashOrder(keys []string) (order []int, ok bool) {
	capacity, threshold := 16, 12
	count := make(map[uint32]int, len(keys)) // keys per bucket, at the current capacity
	hashes := make([]uint32, len(keys))
	for i, k := range keys {
		h := javaHash(k)
		hashes[i] = h ^ h>>16
		b := hashes[i] & uint32(capacity-1)
		count[b]++
		resize := false
		if count[b] >= 9 {
			if capacity >= 64 {
				return nil, false
			}
			resize = true // treeifyBin resizes a small table instead
		}
		if i+1 > threshold {
			resize = true
		}
		for resize {
			capacity, threshold = capacity*2, threshold*2
			clear(count)
			resize = false
			for _, h := range hashes[:i+1] {
				count[h&uint32(capacity-1)]++
			}
			// Only the growth at the threshold may repeat (one put
			// passes it once); a split bucket cannot hold 9 again.
		}
	}
	order = make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	mask := uint32(capacity - 1)
	slices.SortStableFunc(order, func(a, b int) int {
		return int(hashes[a]&mask) - int(hashes[b]&mask)
	})
	return order, true
}

// javaHash is java.lang.String.hashCode of an ASCII string.
func javaHash(s string) uint32 {
	var h uint32
	for i := 0; i < len(s); i++ {
		h = 31*h + uint32(s[i])
	}
	return h
}
