package hms

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestJavaHashOrder: the order a real HMS 3.1 wrote the partition
// statistics maps of a table with 30 day partitions in, asked for all
// of them and for five.
func TestJavaHashOrder(t *testing.T) {
	day := func(days ...int) []string {
		var out []string
		for _, d := range days {
			out = append(out, fmt.Sprintf("ds=2024-01-%02d", d))
		}
		return out
	}
	all := make([]int, 30)
	for i := range all {
		all[i] = i + 1
	}
	for _, tc := range []struct {
		name       string
		keys, want []string
	}{
		{"30 partitions", day(all...), day(30, 13, 12, 11, 10, 17, 16, 15, 14, 19, 18, 20, 2, 24, 1, 23, 22, 21, 6, 28, 5, 27, 4, 26, 3, 25, 9, 8, 7, 29)},
		{"5 partitions", day(26, 27, 28, 29, 30), day(30, 28, 27, 26, 29)},
		{"none", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := slices.Clone(tc.keys)
			slices.Sort(keys)
			order, ok := JavaHashOrder(keys)
			if !ok {
				t.Fatal("JavaHashOrder refused")
			}
			var got []string
			for _, i := range order {
				got = append(got, keys[i])
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("order:\n got %s\nwant %s", strings.Join(got, " "), strings.Join(tc.want, " "))
			}
		})
	}
}

// TestJavaHashOrderTreeBins: keys that share a bucket at every capacity
// ("Aa" and "BB" have one String.hashCode, and so do their
// concatenations) make the map grow to 64 and then turn the bucket into
// a tree, whose order is not modelled.
func TestJavaHashOrderTreeBins(t *testing.T) {
	var keys []string
	for i := 0; i < 16; i++ {
		var b strings.Builder
		for j := 0; j < 4; j++ {
			if i>>j&1 == 1 {
				b.WriteString("BB")
			} else {
				b.WriteString("Aa")
			}
		}
		keys = append(keys, b.String())
	}
	if _, ok := JavaHashOrder(keys[:8]); !ok {
		t.Fatal("8 colliding keys: refused; a bucket of 8 is still a list")
	}
	if _, ok := JavaHashOrder(keys); ok {
		t.Fatal("16 colliding keys: got an order; want a refusal (a tree bin)")
	}
}

// statsReply encodes a PartitionsStatsResult reply body whose map holds
// entries, each a partition name and its columns' names, then extra
// fields of the result struct.
func statsReply(entries [][]string, extra func(e *wire.Encoder)) []byte {
	var e wire.Encoder
	e.FieldBegin(wire.TStruct, 0)
	e.FieldBegin(wire.TMap, 1)
	e.B = append(e.B, wire.TString, wire.TList)
	e.B = binary.BigEndian.AppendUint32(e.B, uint32(len(entries)))
	for _, ent := range entries {
		e.String(ent[0])
		e.ListBegin(wire.TStruct, len(ent)-1)
		for _, col := range ent[1:] {
			e.StringField(1, col)
			e.StringField(2, "bigint")
			e.FieldBegin(wire.TStruct, 3)
			e.Stop()
			e.Stop()
		}
	}
	if extra != nil {
		extra(&e)
	}
	e.Stop()
	e.Stop()
	return e.B
}

func TestSplitPartStats(t *testing.T) {
	asked := []string{"ds=1", "ds=2", "ds=3"}
	for _, tc := range []struct {
		name    string
		typ     byte
		body    []byte
		want    []string // names in reply order; nil: refused
		ordered bool
	}{
		{"two entries", wire.Reply, statsReply([][]string{{"ds=2", "a", "b"}, {"ds=1", "a"}}, nil), []string{"ds=2", "ds=1"}, true},
		{"empty map", wire.Reply, statsReply(nil, nil), []string{}, true},
		{"out of hash order", wire.Reply, statsReply([][]string{{"ds=1", "a"}, {"ds=2", "a"}}, nil), []string{"ds=1", "ds=2"}, false},
		{"a key not asked", wire.Reply, statsReply([][]string{{"ds=9", "a"}}, nil), nil, false},
		{"a key twice", wire.Reply, statsReply([][]string{{"ds=1", "a"}, {"ds=1", "b"}}, nil), nil, false},
		{"isStatsCompliant", wire.Reply, statsReply([][]string{{"ds=1", "a"}}, func(e *wire.Encoder) { e.BoolField(2, true) }), nil, false},
		{"an exception", wire.Reply, func() []byte {
			var e wire.Encoder
			e.FieldBegin(wire.TStruct, 2)
			e.StringField(1, "no")
			e.Stop()
			e.Stop()
			return e.B
		}(), nil, false},
		{"not a reply", wire.Exception, statsReply(nil, nil), nil, false},
		{"cut short", wire.Reply, statsReply([][]string{{"ds=1", "a"}}, nil)[:20], nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := SplitPartStats(tc.typ, tc.body, asked)
			if tc.want == nil {
				if ok {
					t.Fatalf("split %d entries; want a refusal", len(got))
				}
				return
			}
			if !ok {
				t.Fatal("refused; want the entries")
			}
			names := []string{}
			var rebuilt []byte
			for _, o := range got {
				names = append(names, o.Name)
				rebuilt = append(rebuilt, o.Body...)
			}
			if !slices.Equal(names, tc.want) {
				t.Fatalf("names %q; want %q", names, tc.want)
			}
			if JavaOrdered(names) != tc.ordered {
				t.Errorf("JavaOrdered(%q) = %v; want %v", names, !tc.ordered, tc.ordered)
			}
			// The frame and the entries give the reply back, byte for byte.
			head, tail, _ := PartStatsFrame(nil, len(got))
			if whole := append(append(append([]byte{}, head...), rebuilt...), tail...); !bytes.Equal(whole, tc.body) {
				t.Fatalf("frame and entries:\n got %x\nwant %x", whole, tc.body)
			}
		})
	}
}

func TestAppendColumnSet(t *testing.T) {
	set := func(cols ...string) (string, bool) {
		var bs [][]byte
		for _, c := range cols {
			bs = append(bs, []byte(c))
		}
		b, ok := AppendColumnSet(nil, bs)
		return string(b), ok
	}
	a, _ := set("zeta", "mid")
	for _, other := range [][]string{{"mid", "zeta"}, {"MID", "Zeta", "zeta"}, {"zeta", "mid", "mid"}} {
		if b, ok := set(other...); !ok || b != a {
			t.Errorf("set %q differs from set [zeta mid]", other)
		}
	}
	for _, other := range [][]string{{"zeta"}, {"zeta", "mid", "x"}, {"zeta", "mid "}, {"zetamid"}, {"zet", "amid"}} {
		if b, _ := set(other...); b == a {
			t.Errorf("set %q equals set [zeta mid]", other)
		}
	}
	if _, ok := set("zéta"); ok {
		t.Error("a name that is not ASCII was taken")
	}
	if _, ok := set(strings.Repeat("c", MaxColumnName+1)); ok {
		t.Error("a name longer than any column was taken")
	}
	if long, ok := set(strings.Repeat("c", MaxColumnName), strings.Repeat("d", MaxColumnName)); !ok || len(long) != len(a) {
		t.Errorf("two long names: %d bytes (ok %v); want a digest of %d", len(long), ok, len(a))
	}
	if _, ok := set(make([]string, MaxStatsNames+1)...); ok {
		t.Errorf("%d names were taken; the metastore batches them", MaxStatsNames+1)
	}
}

func TestStoredPartName(t *testing.T) {
	for name, want := range map[string]bool{
		"ds=2024-01-01":                 true,
		"ds=a/hr=1":                     true,
		"ds=a%3Ab":                      true,
		"DS=a":                          false, // the metastore lower-cases the key
		"ds=a:b":                        false, // not escaped
		"ds":                            false,
		"ds=caf\u00e9":                  false,
		"ds=__HIVE_DEFAULT_PARTITION__": true,
	} {
		if got := StoredPartName(name); got != want {
			t.Errorf("StoredPartName(%q) = %v; want %v", name, got, want)
		}
	}
}

func FuzzSplitPartStats(f *testing.F) {
	f.Add(statsReply([][]string{{"ds=1", "a", "b"}, {"ds=2", "a"}}, nil), "ds=1,ds=2")
	f.Add(statsReply(nil, func(e *wire.Encoder) { e.BoolField(2, true) }), "")
	f.Fuzz(func(t *testing.T, body []byte, asked string) {
		names := strings.Split(asked, ",")
		got, ok := SplitPartStats(wire.Reply, body, names)
		if !ok {
			return
		}
		var rebuilt []byte
		for _, o := range got {
			if !slices.Contains(names, o.Name) {
				t.Fatalf("entry %q was not asked for", o.Name)
			}
			rebuilt = append(rebuilt, o.Body...)
		}
		head, tail, _ := PartStatsFrame(nil, len(got))
		if whole := append(append(append([]byte{}, head...), rebuilt...), tail...); !bytes.Equal(whole, body) && len(got) > 0 {
			t.Fatalf("entries do not give the reply back:\n got %x\nwant %x", whole, body)
		}
	})
}
