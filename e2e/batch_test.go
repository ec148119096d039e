package e2e

import (
	"fmt"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/proxy"
)

// TestBatchOrderReal: get_partitions_by_names (and _req where the
// metastore has it) answered through the proxy per partition, from a mix
// of cached and fetched entries, is byte-equal to the metastore's own
// answer to the same request: order, duplicates and missing names
// included.
func TestBatchOrderReal(t *testing.T) {
	eachVersion(t, runBatchOrder)
}

func runBatchOrder(t *testing.T, v string) {
	ms := start(t, v)
	begin := time.Now()
	db, dbLoc, direct, mustOK := scratchDB(t, ms, v, "batch", "batch order")
	tblLoc := dbLoc + "/events"
	mustOK("create_table", hmsreq.Args(corpusTable(db, "events", tblLoc, true).Field(1)))

	// ~60 partitions whose names sort differently as strings than as
	// numbers or dates, added in random order, some in batches.
	rng := rand.New(rand.NewSource(42))
	var vals []string
	for i := 0; i < 60; i++ {
		switch i % 4 {
		case 0:
			vals = append(vals, fmt.Sprintf("2024-%02d-%02d", 1+i%12, 1+i%28))
		case 1:
			vals = append(vals, fmt.Sprint(i*37%101))
		case 2:
			vals = append(vals, fmt.Sprintf("Z%d_x", i))
		default:
			vals = append(vals, fmt.Sprintf("a%d", i))
		}
	}
	rng.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
	for i := 0; i < len(vals); {
		k := 1 + rng.Intn(4)
		if i+k > len(vals) {
			k = len(vals) - i
		}
		if k == 1 {
			mustOK("add_partition", hmsreq.Args(corpusPartition(db, "events", tblLoc, vals[i]).Field(1)))
		} else {
			var parts []hmsreq.Partition
			for _, val := range vals[i : i+k] {
				parts = append(parts, corpusPartition(db, "events", tblLoc, val))
			}
			mustOK("add_partitions", hmsreq.Args(hmsreq.Partitions(1, parts...)))
		}
		i += k
	}
	names := make([]string, len(vals))
	for i, val := range vals {
		names[i] = "ds=" + val
	}

	n := startProxy(t, ms, nodeOpts{})
	c := dial(t, n.addr)
	methods := []string{"get_partitions_by_names"}
	if v != "2.3" && v != "3.1" {
		methods = append(methods, "get_partitions_by_names_req")
	}
	var checks int
	for _, method := range methods {
		args := func(names []string) []byte {
			if method == "get_partitions_by_names_req" {
				return hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, names...))
			}
			return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, names...))
		}
		pick := func(k int) []string {
			out := make([]string, 0, k+3)
			for _, i := range rng.Perm(len(names))[:k] {
				out = append(out, names[i])
			}
			// A duplicate and a missing name.
			out = append(out, out[rng.Intn(len(out))], "ds=1999-12-31")
			rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
			return out
		}
		sets := [][]string{pick(5), pick(12), pick(25), pick(40), pick(59)}
		sets = append(sets, append(append([]string{}, names...), names[3], "ds=missing"))
		sets = append(sets, []string{"ds=nope"}, []string{names[7], names[2], names[30], names[11]})
		for round := 0; round < 2; round++ {
			for si, set := range sets {
				a := args(set)
				want := call(t, direct, method, a)
				got := call(t, c, method, a)
				if !sameButSeqID(got, want) {
					t.Errorf("%s round %d set %d (%d names): reply through the proxy differs from the metastore's\nnames %q\n got %x\nwant %x",
						method, round, si, len(set), set, got, want)
				}
				checks++
				n.store.Wait()
			}
		}
		if h := n.srv.Stats().Method(method, proxy.OutcomeHit); h == 0 {
			t.Errorf("%s: no call was served wholly from the cache", method)
		}
	}
	fmt.Printf("e2e: batch order HMS %s: %d partitions, %d by-names replies compared (%s), %v\n",
		v, len(names), checks, strings.Join(methods, ", "), time.Since(begin).Round(100*time.Millisecond))
}
