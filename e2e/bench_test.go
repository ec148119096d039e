package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/hmsclient"
	"github.com/hmsproxy/hmsproxy/internal/wire"
)

// TestCachedVersusRealHMS measures, side by side in one run, a cached
// get_table through the proxy against the real metastore (goal: 50x
// faster at p50) and a cached get_partitions_by_names of 1,000
// partitions (goal: 20x). It fails only if the cache is not faster at
// all: the figures are for the note, not a timed test.
func TestCachedVersusRealHMS(t *testing.T) {
	for _, v := range versions(t) {
		t.Run(v, func(t *testing.T) {
			ms := start(t, v)
			n := startProxy(t, ms, nodeOpts{})
			direct, proxied := dial(t, ms.addr), dial(t, n.addr)
			db := "e2e_bench_" + strings.ReplaceAll(v, ".", "")
			call(t, direct, "drop_database", clArgs(func(e *wire.Encoder) {
				e.StringField(1, db)
				e.BoolField(2, true)
				e.BoolField(3, true)
			}))
			clMustOK(t, "create_database", call(t, direct, "create_database", clArgs(func(e *wire.Encoder) {
				e.FieldBegin(wire.TStruct, 1)
				e.StringField(1, db)
				e.StringField(3, "file:///tmp/hmsproxy-e2e/"+db)
				e.Stop()
			})))
			clMustOK(t, "create_table", call(t, direct, "create_table", clArgs(func(e *wire.Encoder) { clTable(e, 1, db, "wide", nil) })))
			var names []string
			for i := 0; i < 1000; i++ {
				names = append(names, fmt.Sprintf("ds=%04d", i))
			}
			for lo := 0; lo < len(names); lo += 250 {
				args := clArgs(func(e *wire.Encoder) {
					e.FieldBegin(wire.TList, 1)
					e.ListBegin(wire.TStruct, 250)
					for _, nm := range names[lo : lo+250] {
						e.StringListField(1, []string{strings.TrimPrefix(nm, "ds=")})
						e.StringField(2, db)
						e.StringField(3, "wide")
						e.I32Field(4, 1700000000)
						clSD(e, 6, "file:///tmp/hmsproxy-e2e/"+db+"/wide/"+nm)
						e.Stop()
					}
				})
				clMustOK(t, "add_partitions", call(t, direct, "add_partitions", args))
			}

			getMethod, get := "get_table", clArgs(func(e *wire.Encoder) { e.StringField(1, db); e.StringField(2, "wide") })
			if v == "4.0" { // 4.0.1 has dropped get_table
				getMethod = "get_table_req"
				get = clArgs(func(e *wire.Encoder) {
					e.FieldBegin(wire.TStruct, 1)
					e.StringField(1, db)
					e.StringField(2, "wide")
					e.Stop()
				})
			}
			byNames := clArgs(func(e *wire.Encoder) {
				e.StringField(1, db)
				e.StringField(2, "wide")
				e.StringListField(3, names)
			})
			report := func(what, method string, args []byte, rounds int) float64 {
				call(t, proxied, method, args) // load it
				n.store.Wait()
				if !sameButSeqID(call(t, proxied, method, args), call(t, direct, method, args)) {
					t.Fatalf("%s: cached reply differs from the metastore's", what)
				}
				d, p := pairs(t, direct, proxied, method, args, rounds)
				r := float64(d[len(d)/2]) / float64(p[len(p)/2])
				fmt.Printf("e2e: bench HMS %s %s: direct p50 %v p99 %v, cached p50 %v p99 %v: %.0fx faster at p50 (%d pairs)\n",
					v, what, d[len(d)/2], d[len(d)*99/100], p[len(p)/2], p[len(p)*99/100], r, rounds)
				return r
			}
			if r := report("get_table", getMethod, get, 400); r < 1 {
				t.Fatalf("cached get_table is not faster than the metastore (%.2fx)", r)
			}
			if r := report("get_partitions_by_names x1000", "get_partitions_by_names", byNames, 40); r < 1 {
				t.Fatalf("cached by-names is not faster than the metastore (%.2fx)", r)
			}
		})
	}
}

// pairs alternates direct and proxied calls and returns both sorted
// latency lists.
func pairs(t *testing.T, direct, proxied *hmsclient.Client, method string, args []byte, n int) (d, p []time.Duration) {
	ctx := context.Background()
	for i := 0; i < n; i++ {
		for k := 0; k < 2; k++ {
			c, out := direct, &d
			if (i+k)%2 == 1 {
				c, out = proxied, &p
			}
			begin := time.Now()
			if _, err := c.Call(ctx, method, args); err != nil {
				t.Fatal(err)
			}
			*out = append(*out, time.Since(begin))
		}
	}
	slices.Sort(d)
	slices.Sort(p)
	return d, p
}
