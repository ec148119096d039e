package cache

import (
	"bytes"
	"github.com/hmsproxy/hmsproxy/internal/hmsreq"
	"testing"
)

var fuzzMethods = []string{"get_table", "get_table_req", "get_partitions_by_names_req", "get_table_objects_by_name"}

// FuzzAppendKey feeds random args to the key builder of a few reads: it
// must not panic, and must be deterministic.
func FuzzAppendKey(f *testing.F) {
	seeds := []req{
		getTable("@hive#DB0", "t1"), getTable("db0", "t1"), getTableReq("db0", "t1", "HIVE", "db0.t1:5:"),
		byNamesReq("@spark#db0", "t1", "p=1", "p=2"), objectsByName("db0", "a", "b"),
		{"get_table", hmsreq.Args(hmsreq.Strings(1, "db0"), hmsreq.Str(2, "t1")), scA},
	}
	for i, s := range seeds {
		f.Add(uint8(i), s.args)
	}
	f.Add(uint8(0), []byte{0x0c, 0, 1, 0x0b, 0, 1, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, sel uint8, a []byte) {
		m := method(t, fuzzMethods[int(sel)%len(fuzzMethods)])
		n, err := ExtractNames(&m.Target, a, "hive")
		k1, ok1 := AppendKey(nil, Scope{Upstream: "u"}, m, &n, a)
		k2, ok2 := AppendKey(nil, Scope{Upstream: "u"}, m, &n, a)
		if ok1 != ok2 || !bytes.Equal(k1, k2) {
			t.Fatalf("AppendKey not deterministic: %q %v / %q %v", k1, ok1, k2, ok2)
		}
		if err == nil && ok1 && len(k1) == 0 {
			t.Fatalf("AppendKey ok with an empty key")
		}
	})
}
