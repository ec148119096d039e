package twin

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
)

// Config is one twin run.
type Config struct {
	Version string
	// Nodes is the proxies in the fleet (several share a Redis). Default 1.
	Nodes int
	// Sessions run concurrently. Default 8: on 3.1 they made 116
	// operations/s where 4 made 83, the metastore's CPU the bound.
	Sessions int
	// Duration is how long the random steps run; MinOps, when more, keeps
	// them going until that many operations were made.
	Duration time.Duration
	MinOps   int
	Seed     uint64
	// Direct is the share of writes made straight to the metastore.
	Direct float64
	// Federation, when set ("manual" or "prefixed"), puts a second
	// metastore of the version behind the fleet as a federated member.
	Federation string
	// ProxyArgs are added to every node's flags.
	ProxyArgs []string
	// Shrink is how long to spend minimising each difference (at most
	// MaxShrunk of them) into a test file; 0 does not.
	Shrink    time.Duration
	MaxShrunk int
	// FoundDir is where the test files of minimised differences go.
	// Default: this package's directory.
	FoundDir string
}

// Result is what a run found.
type Result struct {
	Ops   int
	Diffs []*Diff
	Stats Stats
	// Files are the test files written for minimised differences.
	Files []string
}

// maxDeferred bounds the reads a session puts off until direct writes
// reached every node.
const maxDeferred = 8

// nsSeq makes namespaces unique within a process.
var nsSeq atomic.Int64

func newNamespace() string {
	return "twkis" + strconv.FormatInt(time.Now().UnixNano()/1e6%1e9, 36) + strconv.FormatInt(nsSeq.Add(1), 36)
}

// Run runs the twin: each session's setup, then random steps from every
// session at once until the duration passed (and MinOps were made);
// then it minimises what it found.
func Run(t testing.TB, cfg Config) *Result {
	t.Helper()
	if cfg.Nodes <= 0 {
		cfg.Nodes = 1
	}
	if cfg.Sessions <= 0 {
		cfg.Sessions = 8
	}
	if cfg.MaxShrunk <= 0 {
		cfg.MaxShrunk = 6
	}
	ms := StartMetastore(t, cfg.Version)
	var fed *federation
	if cfg.Federation != "" {
		fed = newFederation(cfg.Federation, StartMetastore(t, cfg.Version+"m"))
	}
	fleet := startFleet(t, ms, fed, cfg.Nodes, cfg.ProxyArgs...)
	ns := newNamespace()
	fmt.Printf("twin: HMS %s, %d node(s), %d sessions, seed %d, namespace %s, federation %q\n",
		cfg.Version, cfg.Nodes, cfg.Sessions, cfg.Seed, ns, cfg.Federation)
	r, err := newRunner(ms, fleet, ns, cfg.Sessions)
	if err != nil {
		t.Fatalf("twin: %v", err)
	}
	defer r.close()
	ctx, cancel := context.WithCancel(context.Background())
	var watch sync.WaitGroup
	watch.Go(func() { r.watchApplied(ctx) })
	defer func() { cancel(); watch.Wait() }()

	gens := make([]*gen, cfg.Sessions)
	for i := range gens {
		gens[i] = newGen(cfg.Seed, i, cfg.Version, cfg.Nodes, cfg.Direct, fed != nil)
	}
	for i, g := range gens {
		for _, st := range g.setup() {
			r.do(r.sessions[i], st)
		}
	}
	start := time.Now()
	cpuBefore := r.cpuUse()
	deadline := start.Add(cfg.Duration)
	var done atomic.Bool
	var wg sync.WaitGroup
	for i := range gens {
		wg.Go(func() {
			// Reads that would wait for a direct write to reach every node
			// wait here instead while the session goes on with its next
			// steps: a seed still gives the session its steps, only later.
			var deferred []Step
			for !done.Load() {
				st, ok := Step{}, false
				for j, d := range deferred {
					if r.ready(d) {
						st, ok = d, true
						deferred = append(deferred[:j], deferred[j+1:]...)
						break
					}
				}
				if !ok {
					st = gens[i].next()
					if !r.ready(st) && len(deferred) < maxDeferred {
						deferred = append(deferred, st)
						continue
					}
				}
				r.releaseLocks(r.sessions[i], isReconnect(st.Op))
				r.do(r.sessions[i], st)
				r.dead()
				r.mu.Lock()
				ops, diffs := r.stats.Ops, len(r.diffs)
				r.mu.Unlock()
				if time.Now().After(deadline) && ops >= cfg.MinOps || diffs >= 200 {
					done.Store(true)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := r.cpuUse().perOp(cpuBefore, r.stats.Ops)
	cancel()
	watch.Wait()

	res := &Result{Ops: r.stats.Ops, Diffs: r.diffs, Stats: r.stats}
	fmt.Printf("twin: %d operations in %v (%.0f/s)\n", res.Ops, elapsed.Round(time.Second), float64(res.Ops)/elapsed.Seconds())
	fmt.Print(r.stats.Summary())
	fmt.Print(cpu)
	byClass := map[string]int{}
	fallout := 0
	for _, d := range r.diffs {
		if d.Fallout {
			fallout++
			continue
		}
		key := d.Method + " " + d.Step.Gen
		byClass[key]++
		if byClass[key] <= 2 {
			fmt.Printf("twin: difference at operation %d: %s\n  step: %+v\n", d.Index, d, d.Step.Op)
		}
	}
	if fallout > 0 {
		fmt.Printf("twin: %d more transport failures around crashes of a node\n", fallout)
	}
	if len(r.diffs) > 0 && cfg.Shrink > 0 {
		res.Files = shrinkAll(t, r, cfg)
	}
	r.dropNamespace(ns)
	return res
}

// dropNamespace drops the databases a run made, so that the metastore a
// long run or a replay uses stays small (listings grow with it).
func (r *runner) dropNamespace(ns string) {
	for i, st := range r.stores {
		bases := dbBases
		if i == 1 {
			bases = memberBases
		}
		for _, db := range bases {
			var e enc
			e.str(1, Canon(ns, db))
			e.BoolField(2, true)
			e.BoolField(3, true)
			e.Stop()
			st.call("drop_database", e.B)
		}
	}
}

// releaseLocks unlocks, as steps of the history, the session's locks
// whose hold ran out, or all of them before the session reconnects (the
// metastore keeps a lock when its connection closes).
func (r *runner) releaseLocks(s *session, all bool) {
	for i := len(s.st.locks) - 1; i >= 0; i-- {
		l := &s.st.locks[i]
		if l.hold--; l.hold < 0 || all {
			r.do(s, Step{S: s.id, Op: Unlock{Which: len(s.st.locks) - 1 - i}, Gen: "locks:release"})
		}
	}
}

// dead reports a node that died, as a difference, and starts it again:
// the run goes on, so that one crash does not hide everything else.
func (r *runner) dead() bool {
	r.restartMu.Lock()
	defer r.restartMu.Unlock()
	found := false
	for i := range r.fleet.Nodes {
		if dead, log := r.fleet.Nodes[i].Dead(); dead {
			found = true
			r.crashAt.Store(time.Now().UnixNano())
			r.mu.Lock()
			r.diffs = append(r.diffs, &Diff{Method: "process", Index: len(r.history) - 1,
				Why: fmt.Sprintf("proxy node %d died: %s", i, log)})
			r.mu.Unlock()
			r.fleet.restartNode(i)
		}
	}
	return found
}

// Setup is the fleet a replay runs on: the metastore's version, the
// number of proxies, and the federation ("", "manual", "prefixed").
type Setup struct {
	Version    string
	Nodes      int
	Federation string
}

// Replay runs steps in order, one at a time, on a fresh fleet in front
// of the metastore of the setup's version, and fails t at the first
// difference. The test files the twin writes call it.
func Replay(t *testing.T, s Setup, steps []Step) {
	t.Helper()
	if os.Getenv("TWIN_VERSIONS") == "" && os.Getenv("HMSPROXY_E2E") == "" {
		t.Skip("TWIN_VERSIONS (make twin) or HMSPROXY_E2E (make e2e) not set")
	}
	// A run of other versions leaves this one's metastore (and its port)
	// to the run that has it: make test runs the versions side by side.
	if vs := os.Getenv("TWIN_VERSIONS"); vs != "" && !slices.Contains(strings.Split(vs, ","), s.Version) {
		t.Skipf("TWIN_VERSIONS=%s has no %s", vs, s.Version)
	}
	ms := StartMetastore(t, s.Version)
	var fed *federation
	if s.Federation != "" {
		fed = newFederation(s.Federation, StartMetastore(t, s.Version+"m"))
	}
	fleet := startFleet(t, ms, fed, max(1, s.Nodes))
	if d := replay(ms, fleet, steps, newNamespace()); d != nil {
		t.Fatalf("difference at the last step: %s", d)
	}
}

// replay runs steps in order and returns the difference of the last
// one, if any: what a minimised sequence is about. A crash of a node
// ends the replay at the step it followed, whichever it is.
func replay(ms *Metastore, fleet *Fleet, steps []Step, ns string) *Diff {
	sessions := 0
	for _, st := range steps {
		sessions = max(sessions, st.S+1)
	}
	r, err := newRunner(ms, fleet, ns, sessions)
	if err != nil {
		return &Diff{Why: "replay: " + err.Error()}
	}
	defer r.close()
	defer r.dropNamespace(ns)
	ctx, cancel := context.WithCancel(context.Background())
	var watch sync.WaitGroup
	watch.Go(func() { r.watchApplied(ctx) })
	defer func() { cancel(); watch.Wait() }()
	for i, st := range steps {
		st.Racy = false
		d := r.do(r.sessions[st.S], st)
		dead := r.dead()
		if !dead && i == len(steps)-1 && d == nil {
			// A crash the last step caused shows a moment later, when the
			// node's process has exited.
			dead = wait.Until(200*time.Millisecond, r.dead)
		}
		if dead {
			r.mu.Lock()
			d = r.diffs[len(r.diffs)-1]
			r.mu.Unlock()
			d.Index = i
			return d
		}
		if i == len(steps)-1 {
			if d != nil {
				d.Index = i
			}
			return d
		}
	}
	return nil
}

// Knobs reads the twin's settings from the environment: TWIN_SECONDS,
// TWIN_VERSIONS, TWIN_NODES, TWIN_FEDERATION, TWIN_SEED, TWIN_OPS,
// TWIN_SHRINK_SECONDS, TWIN_DIRECT, TWIN_SESSIONS.
func Knobs() (versions []string, nodes []int, feds []string, cfg Config) {
	env := func(k, def string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return def
	}
	secs, _ := strconv.Atoi(env("TWIN_SECONDS", "600"))
	cfg.Duration = time.Duration(secs) * time.Second
	cfg.MinOps, _ = strconv.Atoi(env("TWIN_OPS", "0"))
	shrink, _ := strconv.Atoi(env("TWIN_SHRINK_SECONDS", "300"))
	cfg.Direct, _ = strconv.ParseFloat(env("TWIN_DIRECT", "0.3"), 64)
	cfg.Sessions, _ = strconv.Atoi(env("TWIN_SESSIONS", "8"))
	cfg.Shrink = time.Duration(shrink) * time.Second
	if s := os.Getenv("TWIN_SEED"); s != "" {
		cfg.Seed, _ = strconv.ParseUint(s, 10, 64)
	} else {
		cfg.Seed = uint64(time.Now().UnixNano() % 1_000_000_000)
	}
	versions = strings.Split(env("TWIN_VERSIONS", "2.3,3.1,4.0"), ",")
	for _, n := range strings.Split(env("TWIN_NODES", "1"), ",") {
		if v, err := strconv.Atoi(strings.TrimSpace(n)); err == nil && v > 0 {
			nodes = append(nodes, v)
		}
	}
	for _, f := range strings.Split(env("TWIN_FEDERATION", "none"), ",") {
		if f = strings.TrimSpace(f); f == "none" {
			f = ""
		}
		feds = append(feds, f)
	}
	return versions, nodes, feds, cfg
}
