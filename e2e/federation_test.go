package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/federation"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// fedNode is an in-process federated hmsproxy: a primary and one member
// ("lake"), each with its own pools and cache scope.
type fedNode struct {
	node
	router *federation.Router
}

type fedOpts struct {
	mode    federation.Mode
	prefix  string // prefixed mode: the member's
	lakeDBs []string
	access  federation.Access
	timeout time.Duration
	partial bool
	noCache bool
}

func startFederated(t *testing.T, primary, member *metastore, o fedOpts) *fedNode {
	t.Helper()
	pg := proxytest.Group(t, upstream.Config{}, primary.addr)
	mg := proxytest.Group(t, upstream.Config{}, member.addr)
	r, err := federation.New(federation.Config{Groups: []federation.Member{
		{Name: "main", Up: pg},
		{Name: "lake", Up: mg, Databases: o.lakeDBs, Access: o.access, Prefix: o.prefix},
	}, Mode: o.mode, ListingTimeout: o.timeout, Partial: o.partial, Logger: proxytest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	n := &fedNode{router: r}
	cfg := proxy.Config{Logger: proxytest.Logger(t), Router: r, Federated: []proxy.Backend{{Name: "lake", Up: mg}}}
	if !o.noCache {
		n.store = proxytest.Store(t, cache.Config{})
		cfg.Cache = &proxy.Caching{Store: n.store, Upstream: "main"}
		cfg.Federated[0].Cache = &proxy.Caching{Store: n.store, Upstream: "lake"}
	}
	if n.srv, err = proxy.New(cfg, pg); err != nil {
		t.Fatal(err)
	}
	n.addr = proxytest.Serve(t, n.srv)
	return n
}

func fedVersions(t *testing.T) (primary, member *metastore) {
	t.Helper()
	versions(t) // skips unless HMSPROXY_E2E is set
	var wg sync.WaitGroup
	wg.Go(func() { primary = start(t, "3.1") })
	member = start(t, "2.3")
	wg.Wait()
	return primary, member
}

func mustOK(t *testing.T, what string, reply []byte) {
	t.Helper()
	if o := outcome(t, reply); o != "ok" {
		t.Fatalf("%s: %s", what, o)
	}
}

// TestFederation: HMS 3.1 as the primary, HMS 2.3 as a read-only member.
// Spark sees both, joins a table of each, writes to the primary and is
// refused on the member; hmsclient and the Java client list the merged
// databases.
func TestFederation(t *testing.T) {
	primary, member := fedVersions(t)
	testFederation(t, primary, member, fedOpts{lakeDBs: []string{"fed_lake*"}, timeout: 30 * time.Second}, "")
}

// TestFederationPrefixed is TestFederation with the member's databases
// seen under the prefix lk_.
func TestFederationPrefixed(t *testing.T) {
	primary, member := fedVersions(t)
	testFederation(t, primary, member, fedOpts{mode: federation.Prefixed, prefix: "lk_", timeout: 30 * time.Second}, "lk_")
}

func testFederation(t *testing.T, primary, member *metastore, o fedOpts, prefix string) {
	root := repoRoot()
	wh := t.TempDir()
	mainDB, lakeDB := "fed_main", "fed_lake"

	// The member's table, with one row, made directly on HMS 2.3.
	lc := dial(t, member.addr)
	dropDatabase(t, lc, lakeDB)
	mustOK(t, "create the member's database", call(t, lc, "create_database", hmsreq.Args(
		hmsreq.Database{Name: lakeDB, Location: "file:" + wh + "/" + lakeDB + ".db"}.Field(1))))
	loc := wh + "/" + lakeDB + ".db/people_lake"
	if err := os.MkdirAll(loc, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(loc+"/000000_0", []byte("1\x01from-lake\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustOK(t, "create the member's table", call(t, lc, "create_table", hmsreq.Args(
		corpusTable(lakeDB, "people_lake", "file:"+loc, false).Field(1))))
	pc := dial(t, primary.addr)
	dropDatabase(t, pc, mainDB)
	if prefix != "" {
		mainDB += "_p" // the manual run's table is still in it
		dropDatabase(t, pc, mainDB)
	}
	mustOK(t, "create the primary's database", call(t, pc, "create_database", hmsreq.Args(
		hmsreq.Database{Name: mainDB, Location: "file:" + wh + "/" + mainDB + ".db"}.Field(1))))

	n := startFederated(t, primary, member, o)
	uri := "thrift://" + n.addr
	seen := prefix + lakeDB // the member's database as clients name it

	py := filepath.Join(cacheDir(), "venv", "bin", "python")
	t.Run("python-hmsclient", func(t *testing.T) {
		script := "import sys\nfrom hmsclient import hmsclient\nc = hmsclient.HMSClient(host='127.0.0.1', port=int(sys.argv[1]))\n" +
			"c.open()\nprint('databases=' + ','.join(c.get_all_databases()))\nc.close()\n"
		_, port, _ := strings.Cut(n.addr, ":")
		out, err, took := runTimed(exec.Command(py, "-c", script, port))
		checkListed(t, "python-hmsclient", out, err, took, mainDB, seen)
	})
	t.Run("java-3.1", func(t *testing.T) {
		cp, err := exec.Command("bash", filepath.Join(root, "testbed/hms.sh"), "classpath", "3.1").Output()
		if err != nil {
			t.Fatal(err)
		}
		out, err, took := runTimed(exec.Command("java", "-Xmx512m", "-cp", strings.TrimSpace(string(cp)),
			filepath.Join(root, "testbed/clients/ListDatabases.java"), uri))
		checkListed(t, "java-3.1", out, err, took, mainDB, seen)
	})
	t.Run("spark-sql", func(t *testing.T) {
		out, err, took := runTimed(exec.Command(py, filepath.Join(root, "testbed/clients/spark_federation.py"),
			uri, t.TempDir(), mainDB, seen, "people_lake"))
		if err != nil {
			t.Fatalf("spark through the federation: %v\n%s", err, tail(out, 30))
		}
		fmt.Printf("e2e: federation spark-sql HMS 3.1+2.3 (%s): PASS in %v; %s\n", map[bool]string{true: "prefixed", false: "manual"}[prefix != ""], took, lastLine(out))
		if n.router.Stats(1).Refused.Load() == 0 {
			t.Error("spark's write on the member was not refused by the proxy's access rule")
		}
	})
}

func checkListed(t *testing.T, who string, out []byte, err error, took time.Duration, want ...string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s through the federation: %v\n%s", who, err, tail(out, 30))
	}
	var dbs []string
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "databases="); ok {
			dbs = strings.Split(strings.TrimSpace(v), ",")
		}
	}
	for _, w := range want {
		if !slices.Contains(dbs, w) {
			t.Fatalf("%s listed %v, without %s\n%s", who, dbs, w, tail(out, 20))
		}
	}
	fmt.Printf("e2e: federation %s HMS 3.1+2.3: PASS in %v, lists %v\n", who, took, want)
}

// TestFederationCorpus replays the transparency corpus through a
// federation against each member: the steps that name the member's
// database go to it and must answer as the member does directly. Steps
// naming no database go to the primary by design, and are replayed
// only against it.
func TestFederationCorpus(t *testing.T) {
	primary, member := fedVersions(t)
	for _, tc := range []struct {
		ms     *metastore
		member bool
	}{{primary, false}, {member, true}} {
		t.Run(tc.ms.version, func(t *testing.T) {
			tag := "f" + strings.ReplaceAll(tc.ms.version, ".", "")
			dbDirect, dbProxy := "cdir_"+tag, "cprx_"+tag
			lake := []string{"nothing_here_*"}
			if tc.member {
				lake = []string{dbProxy}
			}
			n := startFederated(t, primary, member, fedOpts{lakeDBs: lake, access: federation.ReadWrite, timeout: 30 * time.Second})
			wh := tc.ms.work + "/corpus-wh"
			all := corpusSteps(dbProxy, wh)
			g := 0
			if tc.member {
				g = 1
			}
			// Listings fan out and are not cached: replay's every-read-hit
			// rule does not apply to them; they are compared below.
			dsteps, psteps := routedTo(t, n.router, g, !tc.member, corpusSteps(dbDirect, wh), all)
			r := replay(t, tc.ms, &n.node, dsteps, psteps, dbDirect, dbProxy)
			if !tc.member {
				// The merged listings, the member claiming nothing that
				// exists, are the primary's own bytes.
				c, direct := dial(t, n.addr), dial(t, tc.ms.addr)
				for _, s := range all {
					if m := hms.Lookup([]byte(s.method)); m == nil || !fanOutMethod(m.Name) {
						continue
					}
					got, want := call(t, c, s.method, s.args), call(t, direct, s.method, s.args)
					if !sameButSeqID(got, want) {
						t.Errorf("listing %s through the federation differs from the primary's\n got %x\nwant %x", s.method, got, want)
					}
				}
			}
			fmt.Printf("e2e: federation corpus HMS %s (%s): %d steps, %d methods, %d/%d reads byte-equal, %d/%d writes same outcome, %d cache hits\n",
				tc.ms.version, map[bool]string{true: "member", false: "primary"}[tc.member], len(psteps), len(r.methods),
				r.readsEqual, r.reads, r.writesSame, r.writes, r.hits)
		})
	}
}

func fanOutMethod(name string) bool {
	switch name {
	case "get_all_databases", "get_databases", "get_table_meta", "get_all_functions":
		return true
	}
	return false
}

// routedTo keeps the corpus steps the router sends to group g alone, and
// with sessions the session calls (which go to the primary).
func routedTo(t *testing.T, r *federation.Router, g int, sessions bool, dsteps, psteps []step) ([]step, []step) {
	t.Helper()
	var d, p []step
	for i, s := range psteps {
		b := append(wire.AppendHeader(nil, wire.Call, []byte(s.method), 1), s.args...)
		m, err := wire.Parse(b, wire.Limits{MaxMessage: len(b)})
		if err != nil {
			t.Fatal(err)
		}
		meth := hms.Lookup([]byte(s.method))
		if meth == nil || meth.Class == hms.Session {
			if sessions && meth != nil {
				d, p = append(d, dsteps[i]), append(p, s)
			}
			continue
		}
		if rt := r.Route(meth, m); !rt.FanOut && rt.Refuse == "" && rt.Group == g {
			d, p = append(d, dsteps[i]), append(p, s)
		}
	}
	names := map[string]bool{}
	for _, s := range p {
		names[s.method] = true
	}
	ms := keys(names)
	sort.Strings(ms)
	t.Logf("%d of %d steps go to group %d: %v", len(p), len(psteps), g, ms)
	return d, p
}

// TestFederationCorpusPrefixed replays the corpus steps that name the
// member's database through a prefixed federation: each answer must be
// the member's own, byte for byte once its database names are the
// client's (lk_ + its name). Declared exceptions compare by outcome:
// their messages are text, carrying the member's own names.
func TestFederationCorpusPrefixed(t *testing.T) {
	primary, member := fedVersions(t)
	// Names of one length, so that the direct run's replies mirror onto
	// the proxied run's with a plain replacement.
	dbDirect, dbClient := "zzzcdir_p23", "lk_cprx_p23"
	wh := member.work + "/corpus-wh"
	n := startFederated(t, primary, member, fedOpts{mode: federation.Prefixed, prefix: "lk_", access: federation.ReadWrite, timeout: 30 * time.Second})
	dsteps, psteps := routedTo(t, n.router, 1, false, corpusSteps(dbDirect, wh), corpusSteps(dbClient, wh))
	direct, c := dial(t, member.addr), dial(t, n.addr)
	want := make([][]byte, len(dsteps))
	for i, s := range dsteps {
		want[i] = call(t, direct, s.method, s.args)
	}
	equal, reads := 0, 0
	for i, s := range psteps {
		got := call(t, c, s.method, s.args)
		wo, po := outcome(t, want[i]), outcome(t, got)
		if wo != po {
			t.Errorf("step %d %s: outcome through the federation %s; directly %s", i, s.method, po, wo)
			continue
		}
		if !s.read || wo != "ok" || s.volatile {
			continue
		}
		reads++
		if !sameMirrored(want[i], got, dbDirect, dbClient, s.unordered) {
			t.Errorf("step %d %s: reply differs beyond the rewritten names\n got %x\nwant %x", i, s.method, got, want[i])
			continue
		}
		equal++
		// Asked again at once: served by the member's cache where the
		// read is cached, and the same bytes as the miss.
		if again := call(t, c, s.method, s.args); !sameButSeqID(again, got) {
			t.Errorf("step %d %s: asked again, a different reply (a hit must equal the miss)\n got %x\nwant %x", i, s.method, again, got)
		}
	}
	// The member's renamed reads go through its cache (issue 13): the
	// replies above were hits and misses alike.
	fmt.Printf("e2e: federation corpus HMS 2.3 (prefixed member): %d steps, %d/%d successful reads byte-equal but for the names; member cache %d hits, %d misses\n",
		len(psteps), equal, reads, n.srv.GroupCalls(1, proxy.OutcomeHit), n.srv.GroupCalls(1, proxy.OutcomeMiss))
}

// TestFederationMemberKilled measures the primary's p50 through a
// federation while its member (an HMS 2.3 of its own) is up, and while
// it is dead and its clients keep calling it every 10 ms (issue 13's
// goal: a ratio of at most 1.2). The member is reached through a relay
// that is cut and restored in alternating rounds, so that both sides see
// the same machine (its JVM's start-up work, other load) and the ratio
// is the median of the rounds'. Then the member is killed for real, and
// listings must fail naming it. It fails only on a gross slowdown (3x):
// the figure is for the note, not a timed test.
func TestFederationMemberKilled(t *testing.T) {
	primary, _ := fedVersions(t)
	member := startShared(t, "2.3", "2.3-killed", 40)
	// A cut relay accepts and closes, where a dead JVM's port refuses:
	// both fail every call at once, which is what the primary must not
	// feel. The real kill follows the rounds.
	relay := redistest.NewRelay(t, member.addr)
	n := startFederated(t, primary, &metastore{version: member.version, addr: relay.Addr, work: member.work},
		fedOpts{lakeDBs: []string{"lake_*"}, timeout: 2 * time.Second, noCache: true})
	c := dial(t, n.addr)
	get := hmsreq.Args(hmsreq.Str(1, "default"))
	// Uncached (the federation has no cache): every call reaches the
	// primary metastore.
	p50 := func() time.Duration {
		lat := make([]time.Duration, 300)
		for i := range lat {
			t0 := time.Now()
			call(t, c, "get_database", get)
			lat[i] = time.Since(t0)
		}
		slices.Sort(lat)
		return lat[len(lat)/2]
	}
	// The member's clients, as a pool of engines would keep calling a
	// dead metastore: a connection, a call, every 10 ms each.
	memberClients := func() (stop func()) {
		return proxytest.Reconnecting(n.addr, 4, 10*time.Millisecond, func(ctx context.Context, mc *hmsclient.Client) {
			mc.Call(ctx, "get_database", hmsreq.Args(hmsreq.Str(1, "lake_x")))
		})
	}
	p50() // warm-up
	var ratios []float64
	var quiet, dead []time.Duration
	for range 5 {
		q := p50()
		relay.Cut()
		stop := memberClients()
		d := p50()
		stop()
		relay.Restore()
		quiet, dead = append(quiet, q), append(dead, d)
		ratios = append(ratios, float64(d)/float64(q))
	}
	slices.Sort(ratios)
	r := ratios[len(ratios)/2]
	fmt.Printf("e2e: federation primary p50 with the member up / dead and called: %v / %v: ratios %.2f, median of 5 alternated rounds %.2f (goal <= 1.2)\n",
		quiet, dead, ratios, r)
	if r > 3 {
		t.Errorf("the primary slowed down %.1fx with the member dead", r)
	}

	member.hms.Stop(true) // stopAll deletes its work directory
	defer memberClients()()
	lc := dial(t, n.addr)
	reply := call(t, lc, "get_all_databases", hmsreq.Args())
	if o := outcome(t, reply); o != "ex1" || !strings.Contains(string(reply), `"lake"`) {
		t.Errorf("listing with the member killed: %s %q; want a MetaException naming lake", o, reply)
	}
	killed := p50()
	fmt.Printf("e2e: federation primary p50 after the member was killed, its clients calling: %v\n", killed)
	slices.Sort(quiet)
	if r := float64(killed) / float64(quiet[len(quiet)/2]); r > 3 {
		t.Errorf("the primary slowed down %.1fx with the member killed", r)
	}
}
