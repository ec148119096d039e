package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/proxy"
)

// client is one real HMS client of the test bed.
type client struct {
	name string
	args func(root, py, uri, work, version string) []string
	// expectFail names the server versions this client cannot talk to at
	// all, with why: the same failure happens without the proxy.
	expectFail map[string]string
}

func cacheDir() string {
	if d := os.Getenv("HMSPROXY_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "hmsproxy-testbed")
}

var clients = []client{
	{name: "python-hmsclient", args: func(root, py, uri, work, version string) []string {
		return []string{py, filepath.Join(root, "testbed/clients/py_hms_client.py"), uri, "--workdir", work}
	}},
	{name: "spark-sql", args: func(root, py, uri, work, version string) []string {
		args := []string{py, filepath.Join(root, "testbed/clients/spark_client.py"), uri, work}
		if version == "4.0" { // Spark's built-in 2.3 client calls get_table, gone in 4.0
			args = append(args, "--hive-version", "3.1.3")
		}
		return args
	}},
	{name: "java-3.1", args: func(root, _, uri, work, _ string) []string {
		return []string{"bash", filepath.Join(root, "testbed/clients/java_client.sh"), "3.1", uri, work}
	}, expectFail: map[string]string{"2.3": "the 3.1 client sends @hive#db names a 2.3 server does not know"}},
	{name: "java-4.0", args: func(root, _, uri, work, _ string) []string {
		return []string{"bash", filepath.Join(root, "testbed/clients/java_client.sh"), "4.0", uri, work}
	}, expectFail: map[string]string{"2.3": "create_database_req is unknown before 4.0", "3.1": "create_database_req is unknown before 4.0"}},
}

// TestClientsThroughProxy runs every real client against every metastore
// version through a caching proxy: the client must succeed exactly as it
// does directly, and the proxy must have served some of its reads from
// the cache. Each cell of the README's compatibility matrix is one run.
func TestClientsThroughProxy(t *testing.T) {
	root := repoRoot()
	py := filepath.Join(cacheDir(), "venv", "bin", "python")
	eachVersion(t, func(t *testing.T, v string) {
		ms := start(t, v)
		for _, c := range clients {
			t.Run(c.name, func(t *testing.T) {
				n := startProxy(t, ms, nodeOpts{})
				work := t.TempDir()
				argv := c.args(root, py, "thrift://"+n.addr, work, v)
				// Spark on 3.1 also plans a dashboard several times
				// in its session (planning_test.go).
				planning := c.name == "spark-sql" && v == "3.1"
				if planning {
					argv = append(argv, "--planning", fmt.Sprint(planningRounds))
				}
				cmd := exec.Command(argv[0], argv[1:]...)
				var out []byte
				var err error
				var took time.Duration
				var round2, after methodCounts
				if planning {
					out, err, took = runRounds(cmd, clientLimit, func(round int) {
						switch round {
						case 2:
							round2 = takeCounts(n.srv.Stats())
						case 0:
							after = takeCounts(n.srv.Stats())
						}
					})
				} else {
					out, err, took = runTimed(cmd)
				}
				hits, calls := proxyCounts(n.srv.Stats())
				last := lastLine(out)
				if why, ok := c.expectFail[v]; ok {
					if err == nil {
						t.Fatalf("%s against HMS %s succeeded through the proxy; it fails directly (%s)", c.name, v, why)
					}
					fmt.Printf("e2e: client %-16s HMS %s: XFAIL in %v (%s; same without the proxy)\n", c.name, v, took, why)
					return
				}
				if err != nil {
					t.Fatalf("%s against HMS %s through the proxy: %v\n%s", c.name, v, err, tail(out, 30))
				}
				fmt.Printf("e2e: client %-16s HMS %s: PASS in %v, %d calls, %d cache hits; %s\n", c.name, v, took, calls, hits, last)
				if hits == 0 {
					t.Fatalf("%s made %d calls and none was a cache hit", c.name, calls)
				}
				if planning {
					if round2 == nil || after == nil {
						t.Fatalf("%s: the planning rounds did not run", c.name)
					}
					planningFigures(t, v, round2, after)
				}
			})
		}
	})
}

func proxyCounts(s *proxy.Stats) (hits, calls uint64) {
	s.EachMethod(func(_ string, o proxy.Outcome, n uint64) {
		calls += n
		if o == proxy.OutcomeHit || o == proxy.OutcomeCoalesced {
			hits += n
		}
	})
	return hits, calls
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func tail(out []byte, n int) string {
	lines := strings.Split(string(out), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
