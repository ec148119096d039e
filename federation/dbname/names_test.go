package dbname

import (
	"errors"
	"slices"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TestNamesEveryShape: for every method, Names visits every database
// name Args rewrites, in wire order, bare (no catalog part), view text
// aside (the metastore resolves no name there). The federation router
// checks what Names visits (issue 22), so a name the rewriter knows is a
// name the router checks.
func TestNamesEveryShape(t *testing.T) {
	for _, m := range hms.All() {
		sh := methods[m.Name]
		if sh.args == nil {
			continue
		}
		t.Run(m.Name, func(t *testing.T) {
			g, in := generate(sh.args)
			var got []string
			if err := Names(m, in, wire.Limits{}, func(db []byte) { got = append(got, string(db)) }); err != nil {
				t.Fatal(err)
			}
			want := slices.DeleteFunc(slices.Clone(g.names), func(n string) bool { return slices.Contains(g.inView, n) })
			if !slices.Equal(got, want) {
				t.Errorf("got %q; want %q", got, want)
			}
		})
	}
}

// TestLimitsFollowTheReader (issue 22): Args and Names decode under the
// limits a request was read with, so a request nested deeper than the
// defaults, which a reader configured for it took, is rewritten and its
// names seen; and refused under the defaults.
func TestLimitsFollowTheReader(t *testing.T) {
	m := lookup(t, "drop_table")
	args := hmsreq.Args(hmsreq.Str(1, "pfx_sales"), hmsreq.Str(2, "t"), hmsreq.Nested(9, 70))
	deep := wire.Limits{MaxDepth: 100}
	if _, err := wire.Parse(append(wire.AppendHeader(nil, wire.Call, []byte("drop_table"), 1), args...), deep); err != nil {
		t.Fatalf("the reader refuses the request: %v", err)
	}
	var got []string
	if err := Names(m, args, deep, func(db []byte) { got = append(got, string(db)) }); err != nil || !slices.Equal(got, []string{"pfx_sales"}) {
		t.Errorf("Names under max depth 100: %q, %v; want [pfx_sales]", got, err)
	}
	out, err := Args(nil, m, args, deep, strip)
	if err != nil {
		t.Fatalf("Args under max depth 100: %v", err)
	}
	if len(out) != len(args)-len(prefix) {
		t.Errorf("Args under max depth 100: %d bytes; want %d (the prefix stripped)", len(out), len(args)-len(prefix))
	}
	if err := Names(m, args, wire.Limits{}, func([]byte) {}); !errors.Is(err, wire.ErrTooDeep) {
		t.Errorf("Names under the default depth: %v; want wire.ErrTooDeep", err)
	}
	if _, err := Args(nil, m, args, wire.Limits{}, strip); err == nil {
		t.Error("Args under the default depth: no error")
	}
}
