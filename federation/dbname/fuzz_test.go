package dbname

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// fuzzMethods are the methods the fuzzers pick from by index.
var fuzzMethods = hms.All()

func fuzzSeeds(f *testing.F, result bool) {
	for i, m := range fuzzMethods {
		sh := methods[m.Name]
		s := sh.args
		if result {
			s = sh.result
		}
		if s == nil {
			continue
		}
		_, b := generate(s)
		f.Add(uint16(i), b)
	}
}

// looseStrip strips the prefix when there is one; it never refuses, so
// the fuzzer reaches every rewrite.
func looseStrip(db string) (string, error) { return strings.TrimPrefix(db, prefix), nil }

// FuzzArgs: Args never panics, never grows a request beyond a bound, and
// with an identity fn gives back the input bytes.
func FuzzArgs(f *testing.F) {
	fuzzSeeds(f, false)
	f.Fuzz(func(t *testing.T, i uint16, data []byte) {
		m := fuzzMethods[int(i)%len(fuzzMethods)]
		out, err := Args(nil, m, data, wire.Limits{}, looseStrip)
		if err != nil {
			return
		}
		// Stripping shrinks every name but the empty one, written "!" after a catalog.
		if len(out) > 2*len(data)+1 {
			t.Fatalf("%s: %d bytes in, %d out", m.Name, len(data), len(out))
		}
		id, err := Args(nil, m, data, wire.Limits{}, same)
		if err != nil || !bytes.Equal(id, data) {
			t.Fatalf("%s: identity rewrite: err %v, equal %v", m.Name, err, bytes.Equal(id, data))
		}
	})
}

// FuzzNames: Names never panics, and where Args takes the args it takes
// them too, visiting a subsequence of the names Args maps (the rest are
// in view text), so the router never sees less than the rewriter.
func FuzzNames(f *testing.F) {
	fuzzSeeds(f, false)
	f.Fuzz(func(t *testing.T, i uint16, data []byte) {
		m := fuzzMethods[int(i)%len(fuzzMethods)]
		var visited []string
		nerr := Names(m, data, wire.Limits{}, func(db []byte) { visited = append(visited, string(db)) })
		var mapped []string
		if _, err := Args(nil, m, data, wire.Limits{}, func(db string) (string, error) {
			mapped = append(mapped, db)
			return db, nil
		}); err != nil {
			return
		}
		if nerr != nil {
			t.Fatalf("%s: Args takes the args, Names fails: %v", m.Name, nerr)
		}
		j := 0
		for _, v := range visited {
			for j < len(mapped) && mapped[j] != v {
				j++
			}
			if j == len(mapped) {
				t.Fatalf("%s: Names visited %q, which Args never mapped (in order: %q)", m.Name, v, mapped)
			}
			j++
		}
	})
}

// FuzzReply: Reply never panics, grows a reply by at most the prefix per
// name (a name costs at least two bytes of input), and with an identity
// fn gives back the input bytes.
func FuzzReply(f *testing.F) {
	fuzzSeeds(f, true)
	f.Fuzz(func(t *testing.T, i uint16, data []byte) {
		m := fuzzMethods[int(i)%len(fuzzMethods)]
		out, err := Reply(nil, m, wire.Reply, data, add)
		if err != nil {
			return
		}
		if max := len(data) + (len(data)/2+1)*(len(prefix)+2); len(out) > max {
			t.Fatalf("%s: %d bytes in, %d out (bound %d)", m.Name, len(data), len(out), max)
		}
		id, err := Reply(nil, m, wire.Reply, data, func(db string) string { return db })
		if err != nil || !bytes.Equal(id, data) {
			t.Fatalf("%s: identity rewrite: err %v, equal %v", m.Name, err, bytes.Equal(id, data))
		}
	})
}

// FuzzView: View never panics, and strip(add(x)) == x but for quotes.
func FuzzView(f *testing.F) {
	for _, s := range []string{"select * from a.b", "SELECT `t`.`a` FROM `d`.`t` JOIN e.u ON 1=1", "select 'x' from (select 1 from `a``b`.c) q, d.e -- c\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Contains(s, prefix) {
			return
		}
		added, err := View(s, func(db string) (string, error) { return add(db), nil })
		if err != nil {
			t.Fatal(err)
		}
		back, err := View(added, strip)
		if err != nil {
			t.Fatalf("strip %q: %v", added, err)
		}
		// An unquoted all-digit qualifier comes back backquoted (Hive would
		// read 9.x as a number): only quotes may differ.
		if back != s && strings.ReplaceAll(back, "`", "") != strings.ReplaceAll(s, "`", "") {
			t.Fatalf("round trip: %q -> %q -> %q", s, added, back)
		}
	})
}
