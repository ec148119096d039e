package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
)

// TestRedisTopologyConfig (issue 15, item 1): redis.url, redis.sentinel
// and redis.cluster, from the file or flags, select the client; the
// passwords come from the file or the environment, which wins; two
// topologies at once, or half a Sentinel, are refused.
func TestRedisTopologyConfig(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		args      []string
		env       [2]string // HMSPROXY_REDIS_PASSWORD, HMSPROXY_REDIS_SENTINEL_PASSWORD
		want      string    // "", "single", "sentinel", "cluster", or "error"
		password  string
		sentinelP string
	}{
		{name: "none", want: ""},
		{name: "url flag", args: []string{"-redis", "127.0.0.1:6379"}, want: "single"},
		{name: "sentinel file", yaml: "redis:\n  password: p1\n  sentinel:\n    master: m\n    addrs: [a:26379, b:26379]\n    password: s1\n",
			want: "sentinel", password: "p1", sentinelP: "s1"},
		{name: "sentinel env wins", yaml: "redis:\n  password: p1\n  sentinel:\n    master: m\n    addrs: [a:26379]\n    password: s1\n",
			env: [2]string{"p2", "s2"}, want: "sentinel", password: "p2", sentinelP: "s2"},
		{name: "sentinel flags", args: []string{"-redis-sentinel-master", "m", "-redis-sentinel", "a:26379,b:26379"}, want: "sentinel"},
		{name: "cluster flag", args: []string{"-redis-cluster", "a:7000,b:7000,c:7000"}, env: [2]string{"p3", ""}, want: "cluster", password: "p3"},
		{name: "cluster file", yaml: "redis:\n  cluster:\n    addrs: [a:7000]\n", want: "cluster"},
		{name: "two topologies", args: []string{"-redis", "a:6379", "-redis-cluster", "a:7000"}, want: "error"},
		{name: "sentinel without addrs", args: []string{"-redis-sentinel-master", "m"}, want: "error"},
		{name: "sentinel without master", yaml: "redis:\n  sentinel:\n    addrs: [a:26379]\n", want: "error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HMSPROXY_CONFIG", "")
			t.Setenv("HMSPROXY_REDIS_PASSWORD", tc.env[0])
			t.Setenv("HMSPROXY_REDIS_SENTINEL_PASSWORD", tc.env[1])
			args := append([]string{"-demo"}, tc.args...)
			if tc.yaml != "" {
				args = append(args, "-config", writeConfig(t, tc.yaml))
			}
			c, err := load(args)
			if tc.want == "error" {
				if err == nil {
					t.Fatal("accepted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Redis.Password != tc.password || c.Redis.Sentinel.Password != tc.sentinelP {
				t.Errorf("passwords %q %q; want %q %q", c.Redis.Password, c.Redis.Sentinel.Password, tc.password, tc.sentinelP)
			}
			rdb, err := newRedis(c)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			switch rdb.(type) {
			case nil:
			case *redis.ClusterClient:
				got = "cluster"
			case *redis.Client:
				got = "single"
				if c.Redis.Sentinel.Master != "" {
					got = "sentinel"
				}
			}
			if rdb != nil {
				defer rdb.Close()
			}
			if got != tc.want {
				t.Fatalf("client %T (%s); want %s", rdb, got, tc.want)
			}
			if rdb != nil && coherence.Tagged(rdb) != (got == "cluster") {
				t.Fatalf("keys tagged %v for a %s client", coherence.Tagged(rdb), got)
			}
		})
	}
}

// TestRedisTopologyConnects: the clients newRedis builds from the
// config reach a real Sentinel-managed primary and a real Cluster.
func TestRedisTopologyConnects(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Sentinel and a Cluster")
	}
	s := redistest.StartSentinel(t, 5*time.Second, nil)
	cl := redistest.StartCluster(t, 3)
	var clusterAddrs []string
	for _, n := range cl.Nodes {
		clusterAddrs = append(clusterAddrs, n.Addr)
	}
	for _, args := range [][]string{
		{"-redis-sentinel-master", s.Master, "-redis-sentinel", strings.Join(s.Sentinels, ",")},
		{"-redis-cluster", strings.Join(clusterAddrs, ",")},
	} {
		rdb, err := newRedis(loadDemo(t, args...))
		if err != nil {
			t.Fatal(err)
		}
		key := coherence.Key("hmsproxy", "g", "probe", coherence.Tagged(rdb))
		if err := rdb.Set(context.Background(), key, "1", 0).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		rdb.Close()
	}
	// The Sentinel client wrote to the primary.
	pc := redis.NewClient(&redis.Options{Addr: s.Primary.Addr})
	defer pc.Close()
	if v, err := pc.Get(context.Background(), "hmsproxy:probe:g").Result(); err != nil || v != "1" {
		t.Fatalf("the primary has %q, %v", v, err)
	}
}
