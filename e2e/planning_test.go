package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

// Repeated planning through the proxy, with a real engine: the Spark
// client of the test bed, after its own steps and in the same session
// (a Spark session takes most of the client's time), makes a table of 12
// partitions with statistics and runs a dashboard of ten queries several
// rounds (testbed/clients/spark_client.py --planning). The proxy's
// per-method counters are taken between rounds; after the first round
// every read of the dashboard should come from the cache.

// planningRounds is how many times the dashboard runs.
const planningRounds = 4

// planningGoal is the least share of read calls after the first round
// that must be served from the cache (issue 24).
const planningGoal = 0.95

// methodCounts are the proxy's counts by method and outcome at a moment.
type methodCounts map[string][proxy.OutcomeError + 1]uint64

func takeCounts(s *proxy.Stats) methodCounts {
	out := methodCounts{}
	s.EachMethod(func(name string, o proxy.Outcome, n uint64) {
		row := out[name]
		row[o] = n
		out[name] = row
	})
	return out
}

var roundReady = regexp.MustCompile(`^planning: round (\d+) ready$`)

// runRounds runs a test-bed client as runFor does, with a conversation:
// each time it prints "planning: round N ready" (and once it prints
// "planning: done", as round 0) at is called, and then the client is
// told to go on.
func runRounds(cmd *exec.Cmd, limit time.Duration, at func(round int)) ([]byte, error, time.Duration) {
	cmd.Env = append(os.Environ(), "HMSPROXY_CACHE="+cacheDir())
	var out bytes.Buffer
	cmd.Stderr = &out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err, 0
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err, 0
	}
	g, err := startGroup(cmd, limit)
	if err != nil {
		return nil, err, 0
	}
	// The lines are kept apart from stderr's: the last line is the
	// client's summary.
	var lines bytes.Buffer
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		lines.WriteString(line + "\n")
		switch m := roundReady.FindStringSubmatch(line); {
		case m != nil:
			n, _ := strconv.Atoi(m[1])
			at(n)
			io.WriteString(stdin, "go\n")
		case line == "planning: done":
			at(0)
		}
	}
	stdin.Close()
	err = g.wait()
	out.Write(lines.Bytes())
	return out.Bytes(), err, g.took()
}

// planningFigures checks the counts taken before round 2 (from) and
// after the last round (to): at least planningGoal of the read calls
// between them came from the cache. It prints them by method.
func planningFigures(t *testing.T, v string, from, to methodCounts) {
	t.Helper()
	var names []string
	for name := range to {
		if m := hms.Lookup([]byte(name)); m != nil && m.Class == hms.Read {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var reads, cached uint64
	var lines []string
	for _, name := range names {
		var d [proxy.OutcomeError + 1]uint64
		var calls uint64
		for o := range d {
			d[o] = to[name][o] - from[name][o]
			calls += d[o]
		}
		if calls == 0 {
			continue
		}
		hit := d[proxy.OutcomeHit] + d[proxy.OutcomeCoalesced]
		reads += calls
		cached += hit
		lines = append(lines, fmt.Sprintf("%s %d/%d", name, hit, calls))
	}
	if reads == 0 {
		t.Fatalf("no read calls after the first planning round")
	}
	share := float64(cached) / float64(reads)
	fmt.Printf("e2e: spark planning HMS %s: rounds 2-%d: %d of %d read calls from the cache (%.1f%%): %s\n",
		v, planningRounds, cached, reads, 100*share, strings.Join(lines, ", "))
	if share < planningGoal {
		t.Errorf("rounds 2-%d: %.1f%% of the read calls came from the cache; want at least %.0f%% (%s)",
			planningRounds, 100*share, 100*planningGoal, strings.Join(lines, ", "))
	}
}
