package bench

import (
	"context"
	"os"
	"testing"
)

// TestPruneMix: on the pruning mix, local pruning saves at least 95 % of
// the metastore calls at steady state (the goal; what remains is
// the name list of each table and the new day's partitions, fetched once
// per new day, see the README), and more than caching filter replies
// whole (#12). Both proxies' filter replies are compared on every query.
func TestPruneMix(t *testing.T) {
	rep, err := RunPruneMix(context.Background(), PruneMixConfig{})
	if err != nil {
		t.Fatal(err)
	}
	rep.Write(os.Stdout)
	whole, pruned := rep.Modes[0], rep.Modes[1]
	if pruned.Saved() < 0.95 {
		t.Errorf("local pruning saved %.2f%% of metastore calls; want >= 95%%", 100*pruned.Saved())
	}
	if pruned.Saved() <= whole.Saved() {
		t.Errorf("local pruning saved %.2f%%, whole replies %.2f%%; want pruning ahead", 100*pruned.Saved(), 100*whole.Saved())
	}
}
