package leader

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
)

// TestOnRedisCluster (issue 15, item 1): on a Redis Cluster the lease,
// its token counter and the fenced cursor live in one hash slot (the
// group's tag), so the scripts over them run; a release wakes a follower
// through the cluster's pub/sub.
func TestOnRedisCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	const lease, cursor = "hmsproxy:{thrift://hms:9083}:leader", "hmsproxy:{thrift://hms:9083}:eventlog"
	var nodes []*node
	for i := range 3 {
		nodes = append(nodes, campaign(t, Config{Client: cl.Client(), Key: lease, NodeID: fmt.Sprintf("node%d", i), TTL: 5 * time.Second, Renew: testRenew}))
	}
	l := waitLeader(t, nodes, 5*time.Second)
	_, token := l.e.IsLeader()
	if err := l.e.SetIfLeader(context.Background(), token, cursor, "42"); err != nil {
		t.Fatalf("fenced write of the cursor: %v", err)
	}
	if v, err := cl.Client().Get(context.Background(), cursor).Result(); err != nil || v != "42" {
		t.Fatalf("cursor %q, %v", v, err)
	}
	// A release, not the 5s lease expiry, hands over.
	stopped := time.Now()
	l.stop()
	rest := without(nodes, l)
	waitLeader(t, rest, 2*time.Second)
	t.Logf("hand-over after a release took %v", time.Since(stopped).Round(time.Millisecond))
}
