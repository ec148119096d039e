package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Config configures a run. The zero value of each field selects the
// default in its comment; Targets is required.
type Config struct {
	// Targets are measured side by side, interleaved call by call.
	Targets []Target
	// Baseline names the target ratios are computed against. Default:
	// the first target.
	Baseline string
	// Ops are operation and mix names (OpNames). Default DefaultOps.
	Ops []string
	// Concurrency is the closed-loop sweep: one measurement per level,
	// each level the number of workers. Default [8]. Ignored when Rates
	// is set.
	Concurrency []int
	// Rates, if set, runs open loop instead: one measurement per rate, in
	// operations per second per target, served by OpenWorkers workers.
	Rates []float64
	// OpenWorkers bounds calls in flight in open loop. Default 64.
	OpenWorkers int
	// Duration of each warm measurement. Default 10s.
	Duration time.Duration
	// Warmup runs before each warm measurement, unrecorded. Default 1s;
	// negative: none.
	Warmup time.Duration
	// Phases are "cold" and/or "warm". Default ["warm"].
	Phases []string
	// KeyDist is "uniform" (default) or "zipf"; ZipfS its exponent
	// (default 1.1).
	KeyDist string
	ZipfS   float64
	// Spec is the catalog the operations read (created by Setup).
	Spec Spec
	// NamesBatch is the number of names per getPartitionsByNames call.
	// Default 50.
	NamesBatch int
	// WriteBatch is the partitions per addPartitions/dropPartitions call.
	// Default 1.
	WriteBatch int
	// FlushURL, if set, is POSTed before each cold phase (an hmsproxy
	// admin /cache/flush); FlushToken is sent as a bearer token.
	FlushURL, FlushToken string
	// Transport is the framing of every target. Default buffered.
	Transport wire.Transport
	// Timeout bounds each call. Default 30s.
	Timeout time.Duration
	// Seed makes the key sequence reproducible. Default 1.
	Seed uint64
	// Progress receives live progress. Nil: none.
	Progress io.Writer
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Targets) == 0 {
		return c, errors.New("bench: no targets")
	}
	seen := map[string]bool{}
	for _, t := range c.Targets {
		if seen[t.Name] {
			return c, fmt.Errorf("bench: target %q named twice", t.Name)
		}
		seen[t.Name] = true
	}
	if c.Baseline == "" {
		c.Baseline = c.Targets[0].Name
	}
	if !seen[c.Baseline] {
		return c, fmt.Errorf("bench: baseline %q is not a target", c.Baseline)
	}
	if len(c.Ops) == 0 {
		c.Ops = DefaultOps
	}
	for _, o := range c.Ops {
		if lookupOp(o) == nil {
			return c, fmt.Errorf("bench: unknown operation %q (have %s)", o, strings.Join(OpNames(), ", "))
		}
	}
	if len(c.Concurrency) == 0 {
		c.Concurrency = []int{8}
	}
	for _, n := range c.Concurrency {
		if n <= 0 {
			return c, fmt.Errorf("bench: concurrency must be positive, got %d", n)
		}
	}
	for _, r := range c.Rates {
		if r <= 0 {
			return c, fmt.Errorf("bench: rate must be positive, got %g", r)
		}
	}
	if c.OpenWorkers <= 0 {
		c.OpenWorkers = 64
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Warmup == 0 {
		c.Warmup = time.Second
	}
	if len(c.Phases) == 0 {
		c.Phases = []string{"warm"}
	}
	for _, p := range c.Phases {
		if p != "cold" && p != "warm" {
			return c, fmt.Errorf("bench: phase must be cold or warm, got %q", p)
		}
	}
	if c.KeyDist == "" {
		c.KeyDist = "uniform"
	}
	if c.ZipfS == 0 {
		c.ZipfS = 1.1
	}
	if _, err := NewKeyDist(c.KeyDist, c.ZipfS, 1, rand.New(rand.NewPCG(1, 1))); err != nil {
		return c, err
	}
	c.Spec = c.Spec.withDefaults()
	if c.NamesBatch <= 0 {
		c.NamesBatch = 50
	}
	if c.WriteBatch <= 0 {
		c.WriteBatch = 1
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c, nil
}

// worker is one load generator: a connection per target, and series of
// its own (merged after each measurement).
type worker struct {
	id    int
	conns []*conn
	ws    []*scratch
	skip  []map[string]bool // per target: methods answered with UNKNOWN_METHOD
	hists map[string][]*Hist
}

func (w *worker) hist(label string, t int) *Hist {
	hs := w.hists[label]
	if hs == nil {
		hs = make([]*Hist, len(w.conns))
		for i := range hs {
			hs[i] = &Hist{}
		}
		w.hists[label] = hs
	}
	return hs[t]
}

type runner struct {
	cfg   Config
	env   opEnv
	calls []atomic.Int64 // per target, for progress
}

// load is one level of the sweep.
type load struct {
	workers int
	rate    float64 // 0: closed loop
}

func (l load) String() string {
	if l.rate > 0 {
		return fmt.Sprintf("rate=%g/s", l.rate)
	}
	return fmt.Sprintf("c=%d", l.workers)
}

// Run measures every operation at every load level and phase, and
// returns the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, env: opEnv{spec: cfg.Spec, namesBatch: cfg.NamesBatch, writeBatch: cfg.WriteBatch},
		calls: make([]atomic.Int64, len(cfg.Targets))}
	rep := &Report{Started: time.Now().UTC(), Baseline: cfg.Baseline, KeyDist: cfg.KeyDist,
		Duration: cfg.Duration.String(), Spec: cfg.Spec}
	for _, t := range cfg.Targets {
		rep.Targets = append(rep.Targets, t.Name)
	}
	var loads []load
	if len(cfg.Rates) > 0 {
		for _, rt := range cfg.Rates {
			loads = append(loads, load{workers: cfg.OpenWorkers, rate: rt})
		}
	} else {
		for _, n := range cfg.Concurrency {
			loads = append(loads, load{workers: n})
		}
	}
	for _, name := range cfg.Ops {
		o := lookupOp(name)
		for _, l := range loads {
			rows, err := r.measureAll(ctx, o, l)
			rep.Rows = append(rep.Rows, rows...)
			if err != nil {
				return rep, err
			}
		}
	}
	rep.fillRatios()
	return rep, nil
}

// measureAll runs the phases of one operation at one load level.
func (r *runner) measureAll(ctx context.Context, o *op, l load) ([]Row, error) {
	workers := make([]*worker, l.workers)
	for i := range workers {
		w := &worker{id: i, hists: map[string][]*Hist{}}
		for _, t := range r.cfg.Targets {
			w.conns = append(w.conns, &conn{addr: t.Addr, tr: r.cfg.Transport, timeout: r.cfg.Timeout})
			w.ws = append(w.ws, &scratch{db: scratchDB, table: scratchName(t.Name, i), alt: scratchName(t.Name, i) + "_r"})
			w.skip = append(w.skip, map[string]bool{})
		}
		workers[i] = w
	}
	defer func() {
		for _, w := range workers {
			for _, c := range w.conns {
				c.close()
			}
		}
	}()
	if o.write {
		for _, w := range workers {
			for t, c := range w.conns {
				if err := prepareScratch(ctx, c, r.cfg.Spec, w.ws[t]); err != nil {
					return nil, fmt.Errorf("bench: %s on %s: %w", o.name, r.cfg.Targets[t].Name, err)
				}
			}
		}
	}
	var rows []Row
	for _, phase := range r.cfg.Phases {
		if phase == "cold" && o.write {
			continue // a write has no cache to be cold for
		}
		if err := ctx.Err(); err != nil {
			return rows, err
		}
		if phase == "cold" && r.cfg.FlushURL != "" {
			if err := Flush(ctx, r.cfg.FlushURL, r.cfg.FlushToken); err != nil {
				return rows, err
			}
		}
		if phase == "warm" && r.cfg.Warmup > 0 {
			r.run(ctx, o, l, workers, "warmup", r.cfg.Warmup)
		}
		before := r.scrape(ctx)
		elapsed := r.run(ctx, o, l, workers, phase, r.cfg.Duration)
		after := r.scrape(ctx)
		rows = append(rows, r.rows(o, l, phase, workers, elapsed, before, after)...)
	}
	return rows, nil
}

// run is one measurement window: the cold pass over the key set, or a
// timed warm (or warm-up) window. It resets the workers' series first.
func (r *runner) run(ctx context.Context, o *op, l load, workers []*worker, phase string, d time.Duration) time.Duration {
	for _, w := range workers {
		w.hists = map[string][]*Hist{}
	}
	for i := range r.calls {
		r.calls[i].Store(0)
	}
	nkeys := o.keys(r.env)
	start := time.Now()
	stopProgress := r.progress(o.name, phase, l, start, d, nkeys)
	defer stopProgress()
	nt := len(r.cfg.Targets)
	var wg sync.WaitGroup
	switch {
	case phase == "cold":
		var next atomic.Int64
		for _, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					k := int(next.Add(1) - 1)
					if k >= nkeys {
						return
					}
					r.closedRound(ctx, o, w, k, k)
				}
			}()
		}
		wg.Wait()
	case l.rate > 0:
		sched := newSchedule(start, time.Duration(float64(time.Second)/(l.rate*float64(nt))))
		var mu sync.Mutex // guards dist
		dist, _ := NewKeyDist(r.cfg.KeyDist, r.cfg.ZipfS, nkeys, rand.New(rand.NewPCG(r.cfg.Seed, 0)))
		keys := map[int64]int{} // pair -> key, drawn once per pair of slots
		runOpen(realClock{}, sched, start.Add(d), len(workers), func(wi int, slot int64) (*Hist, error) {
			if ctx.Err() != nil {
				return nil, nil
			}
			pair := slot / int64(nt)
			mu.Lock()
			k, ok := keys[pair]
			if !ok {
				k = dist.Key()
				keys[pair] = k
			}
			if slot%int64(nt) == int64(nt-1) {
				delete(keys, pair)
			}
			mu.Unlock()
			t := int((slot + pair) % int64(nt))
			w := workers[wi]
			_, n, err := r.runOp(ctx, o, w, t, k)
			r.calls[t].Add(1)
			h := w.hist(o.name, t)
			if err == nil {
				h.Bytes += n
			}
			return h, err
		})
	default:
		deadline := start.Add(d)
		for _, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				dist, _ := NewKeyDist(r.cfg.KeyDist, r.cfg.ZipfS, nkeys, rand.New(rand.NewPCG(r.cfg.Seed, uint64(w.id)+1)))
				for i := w.id; ctx.Err() == nil && time.Now().Before(deadline); i++ {
					r.closedRound(ctx, o, w, dist.Key(), i)
				}
			}()
		}
		wg.Wait()
	}
	return time.Since(start)
}

// closedRound runs op on key k against every target in turn, starting at
// target round%n so no target is always first.
func (r *runner) closedRound(ctx context.Context, o *op, w *worker, k, round int) {
	nt := len(r.cfg.Targets)
	for i := 0; i < nt; i++ {
		t := (round + i) % nt
		total, n, err := r.runOp(ctx, o, w, t, k)
		h := w.hist(o.name, t)
		switch {
		case err == nil:
			h.Record(total)
			h.Bytes += n
		case errors.Is(err, errUnsupported):
			h.Unsupported++
		default:
			h.Errors++
		}
		r.calls[t].Add(1)
	}
}

// runOp runs the steps of one operation on target t and returns the sum
// of its timed calls. Step rows of a mix are recorded here.
func (r *runner) runOp(ctx context.Context, o *op, w *worker, t, k int) (time.Duration, int64, error) {
	var total time.Duration
	var bytes int64
	for _, s := range o.steps(r.env, k, w.ws[t]) {
		var h *Hist
		if s.label != "" {
			h = w.hist(o.name+"/"+s.label, t)
		}
		if w.skip[t][s.method] {
			if h != nil {
				h.Unsupported++
			}
			continue
		}
		start := time.Now()
		out, body, err := w.conns[t].call(ctx, s.method, s.args, s.exists)
		d := time.Since(start)
		switch out {
		case outOK:
			if h != nil {
				h.Record(d)
				h.Bytes += int64(len(body))
			}
			if s.timed {
				total += d
				bytes += int64(len(body))
			}
			if s.onOK != nil {
				s.onOK()
			}
			continue
		case outUnsupported:
			w.skip[t][s.method] = true
			if h != nil {
				h.Unsupported++
			}
			if o.mix {
				continue
			}
			return 0, 0, errUnsupported
		}
		if h != nil {
			h.Errors++
		}
		return 0, 0, err
	}
	return total, bytes, nil
}

// progress prints live progress every second until the returned func is
// called.
func (r *runner) progress(op, phase string, l load, start time.Time, d time.Duration, nkeys int) func() {
	out := r.cfg.Progress
	if out == io.Discard {
		return func() {}
	}
	tty := false
	if f, ok := out.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	line := func(final bool) {
		var b strings.Builder
		el := time.Since(start)
		if phase == "cold" {
			fmt.Fprintf(&b, "%-22s %-6s %-10s %6.1fs %d keys", op, phase, l, el.Seconds(), nkeys)
		} else {
			fmt.Fprintf(&b, "%-22s %-6s %-10s %4.0fs/%.0fs", op, phase, l, min(el, d).Seconds(), d.Seconds())
		}
		for i, t := range r.cfg.Targets {
			n := r.calls[i].Load()
			fmt.Fprintf(&b, "  %s %d (%.0f/s)", t.Name, n, float64(n)/max(el.Seconds(), 1e-9))
		}
		switch {
		case tty && final:
			fmt.Fprintf(out, "\r\033[K%s\n", b.String())
		case tty:
			fmt.Fprintf(out, "\r\033[K%s", b.String())
		case final:
			fmt.Fprintln(out, b.String())
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				line(true)
				return
			case <-tick.C:
				line(false)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// scrape reads each metrics target's request counters (nil for targets
// without a metrics URL or whose scrape failed).
func (r *runner) scrape(ctx context.Context) []map[string]float64 {
	out := make([]map[string]float64, len(r.cfg.Targets))
	for i, t := range r.cfg.Targets {
		if t.MetricsURL == "" {
			continue
		}
		m, err := ScrapeOutcomes(ctx, t.MetricsURL)
		if err != nil {
			fmt.Fprintf(r.cfg.Progress, "metrics of %s: %v\n", t.Name, err)
			continue
		}
		out[i] = m
	}
	return out
}

// rows merges the workers' series into report rows.
func (r *runner) rows(o *op, l load, phase string, workers []*worker, elapsed time.Duration, before, after []map[string]float64) []Row {
	labels := []string{o.name}
	seen := map[string]bool{o.name: true}
	for _, s := range o.steps(r.env, 0, &scratch{}) {
		if lb := o.name + "/" + s.label; s.label != "" && !seen[lb] {
			seen[lb] = true
			labels = append(labels, lb)
		}
	}
	for _, w := range workers {
		for lb := range w.hists { // labels only some keys produce
			if !seen[lb] {
				seen[lb] = true
				labels = append(labels, lb)
			}
		}
	}
	var rows []Row
	for _, lb := range labels {
		for t, tg := range r.cfg.Targets {
			var h Hist
			for _, w := range workers {
				if hs := w.hists[lb]; hs != nil {
					h.Merge(hs[t])
				}
			}
			row := newRow(lb, phase, l.String(), tg.Name, &h, elapsed)
			if lb == o.name && before[t] != nil && after[t] != nil {
				row.setSaved(before[t], after[t])
			}
			rows = append(rows, row)
		}
	}
	return rows
}
