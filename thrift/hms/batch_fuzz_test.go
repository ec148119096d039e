package hms

import (
	"bytes"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// fuzzPart encodes a Partition struct with values vals.
func fuzzPart(e *wire.Encoder, vals ...string) {
	e.StringListField(1, vals)
	e.StringField(2, "db0")
	e.StringField(3, "t1")
	e.Stop()
}

// fuzzReply encodes a by-names result holding partitions of key p.
func fuzzReply(inStruct bool, vals ...string) []byte {
	var e wire.Encoder
	if inStruct {
		e.FieldBegin(wire.TStruct, 0)
		e.FieldBegin(wire.TList, 1)
	} else {
		e.FieldBegin(wire.TList, 0)
	}
	e.ListBegin(wire.TStruct, len(vals))
	for _, v := range vals {
		fuzzPart(&e, v)
	}
	if inStruct {
		e.Stop()
	}
	e.Stop()
	return e.B
}

var fuzzAsked = []string{"p=1", "p=2", "p=x"}

// FuzzBatchParse feeds random bytes to the by-names parsers:
// SplitPartitions (upstream replies), DropField and AppendRequest (client
// requests), and checks AppendReply lays a reply it split out as it came.
func FuzzBatchParse(f *testing.F) {
	for _, in := range []bool{false, true} {
		f.Add(in, fuzzReply(in, "1", "2"))
		f.Add(in, fuzzReply(in))
		f.Add(in, fuzzReply(in, "zz"))
	}
	f.Add(false, byNamesArgs(false))
	f.Add(true, byNamesArgs(true))
	f.Add(true, []byte{wire.TStruct, 0, 1, wire.TList, 0, 3, wire.TString, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, inStruct bool, data []byte) {
		// As an upstream reply.
		meth := "get_partitions_by_names"
		if inStruct {
			meth = "get_partitions_by_names_req"
		}
		shape := byName[meth].Batch
		if parts, ok := shape.SplitPartitions(wire.Reply, data, fuzzAsked); ok && len(parts) > 0 {
			var objs [][]byte
			for _, p := range parts {
				objs = append(objs, p.Body)
			}
			iov, _ := shape.AppendReply(nil, nil, objs)
			if got := bytes.Join(iov, nil); !bytes.Equal(got, data) {
				t.Fatalf("AppendReply(SplitPartitions(%x)) = %x; want the input back", data, got)
			}
		}
		// As client args.
		hdr := wire.AppendHeader(nil, wire.Call, []byte(meth), 1)
		in, inErr := wire.Parse(append(hdr[:len(hdr):len(hdr)], data...), wire.Limits{})
		for _, p := range []Path{shape.Names, {3}, {1, 3}, {1}} {
			out := DropField(nil, data, p)
			if inErr != nil || len(in.Buf) != len(hdr)+len(data) {
				continue
			}
			if _, err := wire.Parse(append(hdr[:len(hdr):len(hdr)], out...), wire.Limits{}); err != nil {
				t.Fatalf("DropField(%x, %v) = %x: %v; want a valid struct", data, p, out, err)
			}
		}
		if inErr != nil {
			return
		}
		req := shape.AppendRequest(nil, in.Header(), in.Body(), []string{"p=1", "p=2"})
		if _, err := wire.Parse(req, wire.Limits{}); err != nil {
			t.Fatalf("AppendRequest(%x) = %x: %v; want a valid message", data, req, err)
		}
	})
}

func byNamesArgs(inStruct bool) []byte {
	var e wire.Encoder
	if inStruct {
		e.FieldBegin(wire.TStruct, 1)
	}
	e.StringField(1, "@hive#db0")
	e.StringField(2, "t1")
	e.StringListField(3, []string{"p=1", "p=2"})
	e.Stop()
	if inStruct {
		e.Stop()
	}
	return e.B
}
