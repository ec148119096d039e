package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/redis/go-redis/v9"
)

// Sentinel is a primary, one replica and three sentinels watching them,
// all on loopback, as a Sentinel-managed production Redis is laid out.
type Sentinel struct {
	Master    string // the name the sentinels know the primary by
	Primary   *Server
	Replica   *Server
	Sentinels []string // the sentinels' addresses
	logs      []string // the sentinels' log files, shown when a wait times out
	t         testing.TB
}

// StartSentinel runs a primary, a replica and three sentinels (quorum
// two) that declare the primary down after downAfter. replicaOf, if set,
// is where the replica replicates from instead of the primary (a Relay in
// front of it, which a test cuts to make the replica lag).
func StartSentinel(t testing.TB, downAfter time.Duration, replicaOf func(primary string) string) *Sentinel {
	t.Helper()
	s := &Sentinel{Master: "hmsproxy", t: t}
	s.Primary = Start(t)
	from := s.Primary.Addr
	if replicaOf != nil {
		from = replicaOf(from)
	}
	host, port, _ := strings.Cut(from, ":")
	s.Replica = StartArgs(t, "--replicaof", host, port)
	// The failover timeout is also how long a sentinel lets a replica
	// replicate from elsewhere than the primary before it "fixes" it: a
	// replica behind a relay must keep the relay.
	failoverTimeout := 2 * time.Second
	if replicaOf != nil {
		failoverTimeout = time.Minute
	}
	for i := 0; i < 3; i++ {
		s.Sentinels = append(s.Sentinels, s.startSentinel(downAfter, failoverTimeout))
	}
	// Ready once every sentinel knows the replica (in sync) and the
	// other two sentinels: a failover needs both.
	s.waitFor(30*time.Second, "the sentinels to learn the replica and each other", func(c *redis.SentinelClient) bool {
		reps, err := c.Replicas(context.Background(), s.Master).Result()
		if err != nil || len(reps) != 1 || reps[0]["master-link-status"] != "ok" {
			return false
		}
		sens, err := c.Sentinels(context.Background(), s.Master).Result()
		return err == nil && len(sens) == 2
	})
	return s
}

func (s *Sentinel) startSentinel(downAfter, failoverTimeout time.Duration) string {
	s.t.Helper()
	port := freePort(s.t)
	dir := s.t.TempDir()
	host, pport, _ := strings.Cut(s.Primary.Addr, ":")
	logPath := filepath.Join(dir, "sentinel.log")
	s.logs = append(s.logs, logPath)
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %q\n"+
		"sentinel monitor %s %s %s 2\n"+
		"sentinel down-after-milliseconds %s %d\n"+
		"sentinel failover-timeout %s %d\n",
		port, dir, logPath, s.Master, host, pport, s.Master, downAfter.Milliseconds(), s.Master, failoverTimeout.Milliseconds())
	path := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command("redis-server", path, "--sentinel")
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// waitFor polls every sentinel until ok holds for all of them.
func (s *Sentinel) waitFor(limit time.Duration, what string, ok func(*redis.SentinelClient) bool) {
	s.t.Helper()
	deadline := time.Now().Add(limit)
	for _, addr := range s.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: addr})
		held := wait.Poll(time.Until(deadline), 50*time.Millisecond, func() bool { return ok(c) })
		c.Close()
		if !held {
			s.dumpLogs()
			s.t.Fatalf("redistest: waited %v for %s", limit, what)
		}
	}
}

// dumpLogs writes the tail of each sentinel's log to the test output:
// why a failover did not happen is only ever in there.
func (s *Sentinel) dumpLogs() {
	for i, path := range s.logs {
		b, err := os.ReadFile(path)
		if err != nil {
			s.t.Logf("redistest: sentinel %d log: %v", i, err)
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		s.t.Logf("redistest: sentinel %d log (last %d lines):\n%s", i, min(len(lines), 30), strings.Join(lines[max(0, len(lines)-30):], "\n"))
	}
}

// PrimaryAddr is the primary's address as the sentinels report it.
func (s *Sentinel) PrimaryAddr() string {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinels[0]})
	defer c.Close()
	v, err := c.GetMasterAddrByName(context.Background(), s.Master).Result()
	if err != nil || len(v) != 2 {
		return ""
	}
	return v[0] + ":" + v[1]
}

// WaitFailover waits until every sentinel reports the replica as the
// primary, and returns how long that took from since.
func (s *Sentinel) WaitFailover(since time.Time, limit time.Duration) time.Duration {
	s.t.Helper()
	s.waitFor(limit, "the sentinels to promote the replica", func(c *redis.SentinelClient) bool {
		v, err := c.GetMasterAddrByName(context.Background(), s.Master).Result()
		return err == nil && len(v) == 2 && v[0]+":"+v[1] == s.Replica.Addr
	})
	return time.Since(since)
}

// Client returns a client that follows the primary through the
// sentinels, closed with the test.
func (s *Sentinel) Client() *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.Master, SentinelAddrs: s.Sentinels,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
	s.t.Cleanup(func() { c.Close() })
	return c
}

// Cluster is a Redis Cluster of primaries without replicas on loopback.
type Cluster struct {
	Nodes []*Server
	t     testing.TB
}

// StartCluster runs n cluster-enabled servers and joins them with
// redis-cli --cluster create, the slots split evenly.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redistest: redis-cli not found; run scripts/deps.sh")
	}
	c := &Cluster{t: t}
	args := []string{"--cluster", "create"}
	for i := 0; i < n; i++ {
		s := StartArgs(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000")
		c.Nodes = append(c.Nodes, s)
		args = append(args, s.Addr)
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range c.Nodes {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr})
		var info string
		ok := wait.Poll(time.Until(deadline), 50*time.Millisecond, func() bool {
			info, _ = rc.ClusterInfo(context.Background()).Result()
			return strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n))
		})
		rc.Close()
		if !ok {
			t.Fatalf("redistest: the cluster is not ok after 20s: %s", info)
		}
	}
	return c
}

// Client returns a cluster client, closed with the test.
func (c *Cluster) Client() *redis.ClusterClient {
	var addrs []string
	for _, s := range c.Nodes {
		addrs = append(addrs, s.Addr)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: time.Second,
		ReadTimeout: 2 * time.Second, MaxRetries: -1})
	c.t.Cleanup(func() { cc.Close() })
	return cc
}
