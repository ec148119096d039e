package proxy

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// statsFake answers the partition statistics reads and writes of one
// table the demo metastore has no statistics for, as the metastore does
// (lower-cased columns, partitions without statistics left out, columns
// in descending name order as 3.1's Derby lists them, the map in its
// HashMap's order), and passes every other call to the demo. A
// hand-written fake: the demo keeps no statistics, and the real
// metastore's answers are compared in e2e TestPartitionStatsReal.
type statsFake struct {
	up Forwarder
	mu sync.Mutex // guards the fields below
	// stats[partition][column] is a column's statistics value.
	stats map[string]map[string]int64
	// misorder lays maps out in name order instead (a metastore whose
	// map this proxy would not lay out so).
	misorder bool
	fetched  [][]string // partition names of each statistics read answered
}

func (f *statsFake) Do(ctx context.Context, c upstream.Call, sink upstream.ReplySink) error {
	var body []byte
	switch string(c.Msg.Name()) {
	case "get_partitions_statistics_req":
		body = f.read(c.Msg.Body())
	case "update_partition_column_statistics":
		body = f.write(c.Msg.Body())
	default:
		return f.up.Do(ctx, c, sink)
	}
	msg := append(wire.AppendHeader(nil, wire.Reply, c.Msg.Name(), c.Msg.SeqID), body...)
	m, err := wire.Parse(msg, wire.Limits{})
	if err != nil {
		return err
	}
	return sink.Reply(m)
}

func strs(args []byte, p hms.Path) []string {
	var out []string
	hms.Walk(args, append(slices.Clone(p), hms.Each), func(typ byte, v []byte) bool {
		out = append(out, string(v))
		return true
	})
	return out
}

// read is the reply body to a get_partitions_statistics_req.
func (f *statsFake) read(args []byte) []byte {
	cols, parts := strs(args, hms.Path{1, 3}), strs(args, hms.Path{1, 4})
	for i := range cols {
		cols[i] = strings.ToLower(cols[i])
	}
	slices.Sort(cols)
	cols = slices.Compact(cols)
	slices.Reverse(cols)
	slices.Sort(parts)
	parts = slices.Compact(parts)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetched = append(f.fetched, parts)
	type entry struct {
		part string
		cols []string
	}
	var ents []entry
	for _, p := range parts {
		var have []string
		for _, col := range cols {
			if _, ok := f.stats[p][col]; ok {
				have = append(have, col)
			}
		}
		if len(have) > 0 {
			ents = append(ents, entry{p, have})
		}
	}
	if !f.misorder {
		keys := make([]string, len(ents))
		for i := range ents {
			keys[i] = ents[i].part
		}
		order, _ := hms.JavaHashOrder(keys)
		laid := make([]entry, len(ents))
		for i, j := range order {
			laid[i] = ents[j]
		}
		ents = laid
	}
	var e wire.Encoder
	e.FieldBegin(wire.TStruct, 0)
	e.FieldBegin(wire.TMap, 1)
	e.B = append(e.B, wire.TString, wire.TList)
	e.B = binary.BigEndian.AppendUint32(e.B, uint32(len(ents)))
	for _, ent := range ents {
		e.String(ent.part)
		e.ListBegin(wire.TStruct, len(ent.cols))
		for _, col := range ent.cols {
			e.StringField(1, col)
			e.StringField(2, "bigint")
			e.FieldBegin(wire.TStruct, 3)
			e.FieldBegin(wire.TStruct, 2)
			e.I64Field(2, f.stats[ent.part][col])
			e.Stop()
			e.Stop()
			e.Stop()
		}
	}
	e.Stop()
	e.Stop()
	return e.B
}

// write applies an update_partition_column_statistics of one column.
func (f *statsFake) write(args []byte) []byte {
	part, col := strs(args, hms.Path{1, 1, 4}), strs(args, hms.Path{1, 2, hms.Each, 1})
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(part) == 1 && len(col) == 1 {
		if f.stats[part[0]] == nil {
			f.stats[part[0]] = map[string]int64{}
		}
		f.stats[part[0]][col[0]]++
	}
	var e wire.Encoder
	e.BoolField(0, true)
	e.Stop()
	return e.B
}

// take returns the partitions of the statistics reads answered since the
// last take.
func (f *statsFake) take() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.fetched
	f.fetched = nil
	return out
}

// answer is the fake's own reply body to args, not counted as a fetch.
func (f *statsFake) answer(args []byte) []byte {
	body := f.read(args)
	f.take()
	return body
}

// TestPartitionStatsPerPartition: partition statistics are served per
// partition and set of columns: a request takes the partitions cached by
// earlier ones (whatever their order or mix, and the columns' order,
// case or repeats), fetches only the others in one call, and answers
// as the metastore would; a statistics write invalidates them; and a
// metastore whose map comes in another order than the proxy's layout
// turns per-partition answers off, its replies going through as sent.
func TestPartitionStatsPerPartition(t *testing.T) {
	_, addr := startDemo(t, wire.Buffered)
	fake := &statsFake{stats: map[string]map[string]int64{}}
	for i := 0; i < 12; i++ {
		if i%4 == 3 {
			continue // no statistics
		}
		fake.stats[partName(i)] = map[string]int64{"a": int64(i), "b": int64(10 * i)}
		if i%2 == 0 {
			fake.stats[partName(i)]["zz"] = 7
		}
	}
	caching := newCaching(t, nil)
	var srv *Server
	paddr := startProxyOver(t, caching, addr, func(up Forwarder) Forwarder { fake.up = up; return fake }, func(s *Server) { srv = s })
	c := dial(t, paddr, wire.Buffered)
	const method = "get_partitions_statistics_req"
	req := func(cols []string, parts ...int) []byte {
		names := make([]string, len(parts))
		for i, p := range parts {
			names[i] = partName(p)
		}
		return hmsreq.Req(hmsreq.Str(1, "demo_db0"), hmsreq.Str(2, "t0"), hmsreq.Strings(3, cols...), hmsreq.Strings(4, names...))
	}
	names := func(parts ...int) []string {
		out := make([]string, len(parts))
		for i, p := range parts {
			out[i] = partName(p)
		}
		slices.Sort(out)
		return out
	}
	for _, step := range []struct {
		name      string
		cols      []string
		parts     []int
		fetched   []string // nil: no call
		calls     int      // calls made for the request; default 1 when fetched is set
		outcome   Outcome
		misorder  bool
		unproven  bool
		writePart int // >= 0: a statistics write of that partition first
	}{
		{"cold", []string{"b", "a"}, []int{4, 0, 1, 2, 3}, names(0, 1, 2, 3, 4), 1, OutcomeMiss, false, false, -1},
		{"overlap: only the new fetched", []string{"A", "b", "b"}, []int{6, 2, 5, 3, 4}, names(5, 6), 1, OutcomeMiss, false, false, -1},
		{"all cached, another mix", []string{"a", "B"}, []int{6, 1, 3, 3}, nil, 0, OutcomeHit, false, false, -1},
		{"another column set", []string{"zz", "a"}, []int{1, 2}, names(1, 2), 1, OutcomeMiss, false, false, -1},
		{"a write invalidates the table's", []string{"a", "b"}, []int{6, 1}, names(1, 6), 1, OutcomeMiss, false, false, 1},
		// The request is loaded per partition, then again whole.
		{"misordered map: answered whole", []string{"a"}, []int{0, 1, 2, 4, 5, 6, 8, 9, 10}, names(0, 1, 2, 4, 5, 6, 8, 9, 10), 2, OutcomeMiss, true, true, -1},
		{"then cached whole", []string{"a"}, []int{0, 1, 2, 4, 5, 6, 8, 9, 10}, nil, 0, OutcomeHit, true, true, -1},
	} {
		t.Run(step.name, func(t *testing.T) {
			fake.mu.Lock()
			fake.misorder = step.misorder
			fake.mu.Unlock()
			if step.writePart >= 0 {
				w := hmsreq.Args(hmsreq.Struct(1,
					hmsreq.Struct(1, hmsreq.Bool(1, false), hmsreq.Str(2, "demo_db0"), hmsreq.Str(3, "t0"), hmsreq.Str(4, partName(step.writePart))),
					hmsreq.StructList(2, []hmsreq.Field{hmsreq.Str(1, "a"), hmsreq.Str(2, "bigint")})))
				call(t, c, "update_partition_column_statistics", w)
				caching.Store.Wait()
				fake.take()
			}
			args := req(step.cols, step.parts...)
			before := srv.Stats().Method(method, step.outcome)
			got := call(t, c, method, args)
			caching.Store.Wait()
			fetched := fake.take()
			m, err := wire.Parse(got, wire.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if want := fake.answer(args); string(m.Body()) != string(want) {
				t.Fatalf("reply differs from the metastore's\n got %x\nwant %x", m.Body(), want)
			}
			switch {
			case step.fetched == nil && len(fetched) != 0:
				t.Fatalf("fetched %q; want no call", fetched)
			case step.fetched != nil && (len(fetched) != step.calls || !slices.Equal(fetched[0], step.fetched)):
				t.Fatalf("fetched %q; want %d calls, the first for %q", fetched, step.calls, step.fetched)
			}
			// The proxy counts a call before it reads the next one.
			call(t, c, "get_all_databases", hmsreq.Args())
			if srv.Stats().Method(method, step.outcome) != before+1 {
				t.Errorf("not counted as %s", step.outcome)
			}
			if srv.cache.statsUnproven.Load() != step.unproven {
				t.Errorf("per-partition answers off: %v; want %v", !step.unproven, step.unproven)
			}
		})
	}
}
