package twin_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/hmsproxy/hmsproxy/e2e/twin"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proctest"
)

func TestMain(m *testing.M) {
	code := proctest.Run(m)
	twin.StopAll()
	os.Exit(code)
}

// TestTwin is make twin: the twin's random sequences against each
// version in TWIN_VERSIONS, with each fleet size in TWIN_NODES.
func TestTwin(t *testing.T) {
	if os.Getenv("TWIN_VERSIONS") == "" {
		t.Skip("TWIN_VERSIONS not set (make twin sets it)")
	}
	versions, nodes, feds, cfg := twin.Knobs()
	ops, diffs := 0, 0
	for _, v := range versions {
		for _, n := range nodes {
			for _, fed := range feds {
				name := fmt.Sprintf("%s/nodes=%d", v, n)
				if fed != "" {
					name += "/federation=" + fed
				}
				t.Run(name, func(t *testing.T) {
					c := cfg
					c.Version, c.Nodes, c.Federation = v, n, fed
					res := twin.Run(t, c)
					ops += res.Ops
					diffs += len(res.Diffs)
					if len(res.Diffs) > 0 {
						t.Errorf("%d differences (seed %d: TWIN_SEED=%d replays it)", len(res.Diffs), c.Seed, c.Seed)
					}
				})
			}
		}
	}
	fmt.Printf("twin: %d operations, %d differences\n", ops, diffs)
}
