package chaos

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

const (
	// victimAddr is the victim's source address; the hostile clients
	// never use it.
	victimAddr = "127.0.0.1"
	// victimCallLimit: a call slower than this is an error (and its
	// latency counts as this long).
	victimCallLimit = 10 * time.Second
	// batchBytes is the size of the victim's get_partitions_by_names
	// request: the largest a header-only jam must not hold back. It
	// names a day's partitions (batchParts), then names of none, long
	// ones (the demo metastore's cost is per name, a real one's too).
	batchBytes = 1 << 20
	batchParts = 24
)

// victimKind is one kind of call the victim makes; it is measured on its
// own. Each cycle makes per of them, in order.
type victimKind struct {
	name string
	per  int
	run  func(v *victim, t *target) error
}

// victimKinds are the calls of a Java client planning queries: cached
// table reads (of both groups), an uncached one, a 1 MiB batch, and a
// new connection (connect, TLS handshake, one call). Cached reads are
// most of them, as for a planner: near a thousand a second, so that
// the flushes the budget grants a looping client (about two a second,
// each a miss for the next read of every key) turn well under 1% of
// them into misses. A client reading a key less than a few hundred
// times a second meets those misses in its p99, by design.
func victimKinds(federation bool) []victimKind {
	batch := batchArgs("demo_db1", "t0", batchBytes)
	// A new connection reads a table of the read-only group, whose
	// cache no unknown method flushes: it measures getting in, not a
	// miss.
	connDB := "demo_db0"
	if federation {
		connDB = "demo_db2"
	}
	ks := []victimKind{
		{name: "get_table cached", per: 80, run: func(v *victim, t *target) error {
			return v.call(t, "get_table", hmsclient.Args("demo_db0", "t0"), isTable("demo_db0", "t0"))
		}},
		{name: "get_table cached (ro group)", per: 20, run: func(v *victim, t *target) error {
			return v.call(t, "get_table", hmsclient.Args("demo_db2", "t0"), isTable("demo_db2", "t0"))
		}},
		{name: "get_table uncached", per: 2, run: func(v *victim, t *target) error {
			return v.call(t, "get_table", hmsclient.Args("demo_db1", "t1"), isTable("demo_db1", "t1"))
		}},
		{name: "by_names 1 MiB request", per: 1, run: func(v *victim, t *target) error {
			return v.call(t, "get_partitions_by_names", batch, isList(batchParts))
		}},
		{name: "connect + get_table", per: 2, run: func(v *victim, t *target) error {
			ctx, cancel := context.WithTimeout(context.Background(), victimCallLimit)
			defer cancel()
			c, err := v.dial(ctx, t)
			if err != nil {
				return err
			}
			defer c.Close()
			m, err := c.Call(ctx, "get_table", hmsclient.Args(connDB, "t1"))
			if err != nil {
				return err
			}
			return verify(m, isTable(connDB, "t1"))
		}},
	}
	if !federation {
		ks = slices.DeleteFunc(ks, func(k victimKind) bool { return k.name == "get_table cached (ro group)" })
	}
	return ks
}

// cacheMisses is the sum of the cache misses the admin ports report, over
// every kind.
func cacheMisses(admins []string) (uint64, error) {
	var n uint64
	for _, admin := range admins {
		resp, err := http.Get("http://" + admin + "/status.json")
		if err != nil {
			return 0, err
		}
		var st struct{ Kinds []struct{ Misses uint64 } }
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			return 0, fmt.Errorf("%s/status.json: %w", admin, err)
		}
		for _, k := range st.Kinds {
			n += k.Misses
		}
	}
	return n, nil
}

// batchArgs are get_partitions_by_names args of about size bytes: the
// batchParts partitions of 2024-01-01, then names of none.
func batchArgs(db, tbl string, size int) []byte {
	var names []string
	n := 0
	for k := range batchParts {
		s := fmt.Sprintf("ds=2024-01-01/hr=%d", k)
		names = append(names, s)
		n += 4 + len(s)
	}
	for i := 0; n < size; i++ {
		s := fmt.Sprintf("no_such_partition_%0480d", i)
		names = append(names, s)
		n += 4 + len(s)
	}
	return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, names...))
}

type victim struct {
	tls     *tls.Config
	targets []*target // the attacked proxy, then the reference
	out     *emitter
	phase   atomic.Value // string: what calls are filed under
	stop    atomic.Bool

	kinds []victimKind
	lat   map[string]map[string][]sample // phase → kind → calls
	errs  map[string]int                 // phase → errors
}

// target is a proxy the victim calls: the one under attack, and a
// reference proxy beside it that nobody attacks, measured at the same
// moments. Its phases are filed with the suffix "/ref".
type target struct {
	suffix string
	addr   string
	c      *hmsclient.Client // the persistent connection; nil after an error
}

// victimSummary is what the victim measured.
type victimSummary struct {
	Kinds  []string                        `json:"kinds"`
	Phases map[string]map[string]latencies `json:"phases"`
	Errors map[string]int                  `json:"errors"`
}

// latencies summarise one kind's calls in one phase, in microseconds.
type latencies struct {
	N             int
	P50, P99, Max float64
	Slowest       []sample // the slowest few, slowest first
}

// sample is one call: when it started (Unix ms) and how long it took;
// for a call to the attacked proxy, how long the same call to the
// reference took next to it.
type sample struct {
	T   int64
	D   time.Duration
	Ref time.Duration `json:",omitempty"`
}

const slowestKept = 5

func summarise(ss []sample) latencies {
	if len(ss) == 0 {
		return latencies{}
	}
	s := slices.Clone(ss)
	slices.SortFunc(s, func(a, b sample) int { return int(a.D - b.D) })
	at := func(p float64) float64 { // nearest rank
		i := int(math.Ceil(p/100*float64(len(s)))) - 1
		return float64(s[max(i, 0)].D) / float64(time.Microsecond)
	}
	l := latencies{N: len(s), P50: at(50), P99: at(99), Max: float64(s[len(s)-1].D) / float64(time.Microsecond)}
	for i := len(s) - 1; i >= max(len(s)-slowestKept, 0); i-- {
		l.Slowest = append(l.Slowest, s[i])
	}
	return l
}

// runVictim is the victim's process: it warms the cache, says ready,
// then makes its calls in cycles until told to stop, filing each
// latency under the phase it was told last (quiet, chaos). Every error
// is reported at once.
func runVictim() int {
	out := newEmitter()
	ca, err := os.ReadFile(os.Getenv("CHAOS_CA"))
	if err != nil {
		out.emit(event{Ev: "error", Err: err.Error()})
		return 1
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	v := &victim{tls: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}, out: out,
		targets: []*target{{addr: os.Getenv("CHAOS_ADDR")}, {suffix: "/ref", addr: os.Getenv("CHAOS_REF_ADDR")}},
		kinds:   victimKinds(os.Getenv("CHAOS_FEDERATION") == "true"),
		lat:     map[string]map[string][]sample{}, errs: map[string]int{}}

	v.phase.Store("warm-up")
	// Fill the caches (and the pools). A proxy fills its cache after it
	// replies, so cycles go on until one made no cache miss on either
	// proxy: every read they cache is then a hit, as in the phases
	// measured next.
	admins := []string{os.Getenv("CHAOS_ADMIN"), os.Getenv("CHAOS_REF_ADMIN")}
	cycles := 0
	for {
		before, err := cacheMisses(admins)
		if err == nil {
			v.cycle(cycles)
			cycles++
			var after uint64
			if after, err = cacheMisses(admins); err == nil && after == before {
				break
			}
		}
		if err != nil || cycles == 50 {
			out.emit(event{Ev: "error", Err: fmt.Sprintf("warm-up: %d cycles, still missing the cache: %v", cycles, err)})
			return 1
		}
	}
	out.emit(event{Ev: "ready", I: cycles})
	// Commands take effect at the next call: a stalled proxy can hold
	// one call for victimCallLimit, never a whole cycle.
	sc := bufio.NewScanner(os.Stdin)
	go func() {
		for sc.Scan() && sc.Text() != "stop" {
			v.phase.Store(sc.Text())
		}
		v.stop.Store(true)
	}()
	for i := 0; !v.stop.Load(); i++ {
		v.cycle(i)
	}
	out.emit(event{Ev: "summary", Victim: v.summary()})
	return 0
}

// cycle makes each kind's calls, each on both targets in turn (which
// first alternates).
func (v *victim) cycle(i int) {
	for _, k := range v.kinds {
		for j := range k.per {
			phase := v.phase.Load().(string)
			var d [2]time.Duration
			for n := range v.targets {
				if v.stop.Load() {
					return
				}
				m := (n + i + j) % len(v.targets)
				d[m] = v.measure(phase+v.targets[m].suffix, k, v.targets[m])
			}
			calls := v.lat[phase][k.name]
			calls[len(calls)-1].Ref = d[1]
		}
	}
}

func (v *victim) measure(phase string, k victimKind, t *target) time.Duration {
	start := time.Now()
	err := k.run(v, t)
	d := min(time.Since(start), victimCallLimit)
	if v.lat[phase] == nil {
		v.lat[phase] = map[string][]sample{}
	}
	v.lat[phase][k.name] = append(v.lat[phase][k.name], sample{T: start.UnixMilli(), D: d})
	if err != nil {
		v.errs[phase]++
		v.out.emit(event{Ev: "error", B: k.name, Phase: phase, Err: err.Error()})
	}
	return d
}

func (v *victim) summary() *victimSummary {
	s := &victimSummary{Phases: map[string]map[string]latencies{}, Errors: v.errs}
	for _, k := range v.kinds {
		s.Kinds = append(s.Kinds, k.name)
	}
	for ph, m := range v.lat {
		s.Phases[ph] = map[string]latencies{}
		for k, ds := range m {
			s.Phases[ph][k] = summarise(ds)
		}
	}
	return s
}

// dial opens a TLS connection from victimAddr to t.
func (v *victim) dial(ctx context.Context, t *target) (*hmsclient.Client, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(victimAddr)}}
	nc, err := d.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	tc := tls.Client(nc, v.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return hmsclient.New(tc, wire.Buffered), nil
}

// call makes one call on the persistent connection, dialing it first if
// need be; after any error the connection is dropped.
func (v *victim) call(t *target, method string, args []byte, ok func(wire.Message) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), victimCallLimit)
	defer cancel()
	if t.c == nil {
		c, err := v.dial(ctx, t)
		if err != nil {
			return err
		}
		t.c = c
	}
	m, err := t.c.Call(ctx, method, args)
	if err == nil {
		err = verify(m, ok)
	}
	if err != nil {
		t.c.Close()
		t.c = nil
	}
	return err
}

// verify applies ok to a reply that is a REPLY, and describes any
// other.
func verify(m wire.Message, ok func(wire.Message) error) error {
	if m.Type == wire.Exception {
		ex, err := wire.DecodeApplicationException(m.Body())
		return errors.Join(fmt.Errorf("%s: TApplicationException %v", m.Name(), ex), err)
	}
	if m.Type != wire.Reply {
		return fmt.Errorf("%s: message type %d", m.Name(), m.Type)
	}
	return ok(m)
}

// result positions d at the reply's result and checks it is a success
// of type typ, else describes the declared exception.
func result(m wire.Message, typ byte) (*wire.Decoder, error) {
	d := wire.NewDecoder(m.Body())
	ft, id := d.FieldBegin()
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("%s: reply: %w", m.Name(), err)
	}
	if id == 0 && ft == typ {
		return d, nil
	}
	msg := ""
	if ft == wire.TStruct {
		d.Fields(func(id int16, typ byte) bool {
			if id == 1 && typ == wire.TString {
				msg = d.String()
				return true
			}
			return false
		})
	}
	return nil, fmt.Errorf("%s: result field %d: %q", m.Name(), id, msg)
}

// isTable checks a get_table reply holds db.tbl: a reply meant for
// another call would not.
func isTable(db, tbl string) func(wire.Message) error {
	return func(m wire.Message) error {
		d, err := result(m, wire.TStruct)
		if err != nil {
			return err
		}
		var gotDB, gotTbl string
		d.Struct(wire.StringAt(1, &gotTbl), wire.StringAt(2, &gotDB))
		if err := d.Err(); err != nil {
			return fmt.Errorf("get_table reply: %w", err)
		}
		if gotDB != db || gotTbl != tbl {
			return fmt.Errorf("get_table(%s, %s) returned table %s.%s", db, tbl, gotDB, gotTbl)
		}
		return nil
	}
}

// isList checks a reply is a list of n elements.
func isList(n int) func(wire.Message) error {
	return func(m wire.Message) error {
		d, err := result(m, wire.TList)
		if err != nil {
			return err
		}
		if _, got := d.ListBegin(); got != n || d.Err() != nil {
			return fmt.Errorf("%s: %d elements (%v); want %d", m.Name(), got, d.Err(), n)
		}
		return nil
	}
}
