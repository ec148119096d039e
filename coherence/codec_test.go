package coherence

import (
	"encoding/json"
	"reflect"
	"testing"
)

var wireCases = []wireMessage{
	{Node: "node-a", Seq: 7, Time: 1764561600000000000, Layout: "0123abcd", Hello: "n0nce",
		Ents: [][]string{{"table", "hive", "db", "t"}, {"all", "", "", ""}}, Version: 2},
	{Node: "n", Bye: true},
	{Node: "n", Seq: 1, Time: -5, Ents: [][]string{{"partitions", "hive", "db", "t"}}, Added: []int{0, -1, 7}, Version: 2},
	{Node: "ünïcode", Ents: [][]string{{"table", "hive", "<db>&", "a\"b\\c\n\u2028\x7f"}}},
	{Node: "bad utf8 \xff\xfe", Layout: "\x00\x1f", Ents: [][]string{nil, {}, {"x", "y", "z", "w", "extra"}}},
	{Node: "n", Seq: 1<<64 - 1, Time: -1 << 63, Version: -3},
}

// TestAppendWireMatchesJSON: the hand-written encoder writes exactly what
// encoding/json writes, escapes included.
func TestAppendWireMatchesJSON(t *testing.T) {
	for _, w := range wireCases {
		want, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendWire(nil, &w); string(got) != string(want) {
			t.Errorf("appendWire(%+v)\ngot  %s\nwant %s", w, got, want)
		}
	}
}

// TestDecodeFastTakes: what appendWire writes from plain strings is read
// without encoding/json, and as encoding/json reads it; anything it does
// not know it leaves to encoding/json.
func TestDecodeFastTakes(t *testing.T) {
	for _, w := range wireCases[:3] {
		raw := string(appendWire(nil, &w))
		var got wireMessage
		if !decodeFast(raw, &got) {
			t.Fatalf("decodeFast refused %s", raw)
		}
		var want wireMessage
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeFast(%s) = %+v; encoding/json reads %+v", raw, got, want)
		}
	}
	for _, raw := range []string{
		`{"n":"a","s":1,"t":2,"x":1}`,   // an unknown field
		`{"s":1,"n":"a","t":2}`,         // another order
		`{"n":"a","n":"b","s":1,"t":2}`, // a repeated key
		`{"N":"a","s":1,"t":2}`,         // a key in another case
		`{"n":"a\u0062","s":1,"t":2}`,   // an escape
		`{"n":"a", "s":1,"t":2}`,        // whitespace
		`{"n":"a","s":1.0,"t":2}`,       // a fraction
		`{"n":"a","s":1,"t":2,"e":null}`,
		`{"n":"a","s":01,"t":2}`,
		`{"n":"a","s":1,"t":2}x`,
	} {
		var w wireMessage
		if decodeFast(raw, &w) {
			t.Errorf("decodeFast took %s; want it left to encoding/json", raw)
		}
	}
}

// FuzzDecode: decode reads every input as encoding/json alone would: the
// same message, or an error for both.
func FuzzDecode(f *testing.F) {
	for _, w := range wireCases {
		f.Add(string(appendWire(nil, &w)))
	}
	f.Add(`{"n":"a","s":1,"t":2,"e":[["table","hive","db","t","next"]],"a":[0],"v":3}`)
	f.Fuzz(func(t *testing.T, raw string) {
		got, gotErr := decode(raw)
		var w wireMessage
		var want message
		wantErr := json.Unmarshal([]byte(raw), &w)
		if wantErr == nil {
			// decode's checks after reading, on what encoding/json read.
			want, wantErr = decodeWire(w)
		}
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("decode(%q): error %v; encoding/json: %v", raw, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decode(%q) = %+v; encoding/json reads %+v", raw, got, want)
		}
	})
}

// FuzzAppendWire: the encoder writes what encoding/json writes for any
// strings and numbers.
func FuzzAppendWire(f *testing.F) {
	f.Add("node", "layout", "table", "db<&>", uint64(7), int64(-1), 2, true)
	f.Fuzz(func(t *testing.T, node, layout, a, b string, seq uint64, tm int64, v int, bye bool) {
		w := wireMessage{Node: node, Seq: seq, Time: tm, Layout: layout, Bye: bye, Version: v,
			Ents: [][]string{{a, b, "", a + b}}, Added: []int{v}}
		want, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendWire(nil, &w); string(got) != string(want) {
			t.Fatalf("appendWire(%+v)\ngot  %s\nwant %s", w, got, want)
		}
	})
}
