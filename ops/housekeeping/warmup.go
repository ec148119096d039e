package housekeeping

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/filter"
	"github.com/hmsproxy/hmsproxy/ops/worker"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// The warm-up loads through the proxy's own client path (Callers reach
// the proxy, in the binary through proxy.Server.DialBackground), never
// around it: what it loads is then cached under the keys a client's call
// looks up, with the metastore's bytes, and a load that began before an
// invalidation is refused by the same generation check as a client's.
// Per table it asks:
//
//   - get_table: the table object, the entry get_table clients hit.
//     (get_table_objects_by_name of many tables is cached as one reply
//     per request, since the metastore's order cannot be rebuilt, so a
//     bulk fetch of tables would fill an entry no client asks for.)
//   - get_partition_names with max -1: the names list entry;
//   - get_partitions_by_names in batches of Batch names: the proxy keeps
//     each partition as an entry of its own, which any later
//     by-names read of that partition hits.
//
// Batches of every table are spread over the Callers, one call in flight
// per Caller, so len(Callers) is the concurrency.

// Target is what to warm: DB and Table are globs or names (see
// ParseTargets); Table "" means every table of the database.
type Target struct {
	DB, Table string
	// spec is the pattern as given; pat matches it, dbPat its database
	// glob alone (nil for a literal name or a re: pattern).
	spec  string
	pat   *filter.Patterns
	dbPat *filter.Patterns
}

// String is the target as it was given.
func (t Target) String() string { return t.spec }

// ParseTargets reads targets in the syntax of cache.allow (package
// filter): "db", "db.table", globs over either side ("sales_*",
// "web.*_daily") and "re:EXPR" over "db" and "db.table".
func ParseTargets(specs []string) ([]Target, error) {
	out := make([]Target, 0, len(specs))
	for _, s := range specs {
		s = strings.TrimSpace(s)
		pat, err := filter.Compile([]string{s}, nil)
		if err != nil {
			return nil, fmt.Errorf("housekeeping: warm-up target %q: %w", s, err)
		}
		t := Target{spec: s, pat: pat}
		if !strings.HasPrefix(s, "re:") {
			t.DB, t.Table, _ = strings.Cut(s, ".")
			if isGlob(t.DB) {
				if t.dbPat, err = filter.Compile([]string{t.DB}, nil); err != nil {
					return nil, fmt.Errorf("housekeeping: warm-up target %q: %w", s, err)
				}
			}
		}
		out = append(out, t)
	}
	return out, nil
}

func isGlob(s string) bool { return strings.ContainsAny(s, "*?") }

// WarmUpConfig configures the warm-up. Callers is required.
type WarmUpConfig struct {
	// Callers reach the proxy itself (not the metastore), so that what
	// is loaded lands in the proxy's cache. One call is in flight per
	// Caller: their number is the warm-up's concurrency.
	Callers []Caller
	// Targets are warmed by the Task (at start). Default none: the Task
	// does nothing and warm-ups run only through Start.
	Targets []Target
	// Batch bounds the names per get_partitions_by_names call. Default
	// 500: a batch of a wide table is 2-3 MiB, held whole by the proxy.
	Batch int
	// Ready, if set, is waited for before a run loads anything (the
	// node's coherence being in sync, without which loads are not
	// cached). Default nil: ready at once.
	Ready func(ctx context.Context) error
	// LogEvery is the period of the progress log of a run. Default 10s.
	LogEvery time.Duration
	// Logger receives progress logs. Default: discard.
	Logger *slog.Logger
}

// ErrWarmUpRunning is returned by Start while a warm-up runs.
var ErrWarmUpRunning = errors.New("housekeeping: a warm-up is already running")

// WarmUpProgress is how far the latest warm-up run got.
type WarmUpProgress struct {
	Targets    []string  // the run's targets as given
	Running    bool      // a run is in progress
	Started    time.Time // zero: no run yet
	Finished   time.Time // zero: not finished
	Tables     int64     // tables found so far
	TablesDone int64     // tables loaded, with or without error
	// PartitionsFound is the partition names listed so far; Partitions
	// the partitions loaded.
	PartitionsFound, Partitions int64
	// TablesListed is the tables whose partition names are listed.
	TablesListed int64
	Errors       int64  // tables (or listings) that failed
	LastError    string // of the latest failure; "" if none
	Runs         uint64 // runs finished, failed or cancelled included
}

// Rate is the partitions loaded per second of the run so far.
func (p WarmUpProgress) Rate(now time.Time) float64 {
	if p.Started.IsZero() {
		return 0
	}
	end := now
	if !p.Finished.IsZero() {
		end = p.Finished
	}
	if d := end.Sub(p.Started).Seconds(); d > 0 {
		return float64(p.Partitions) / d
	}
	return 0
}

// ETA is the time left at the current rate, counting the tables whose
// names are not listed yet at the average size of those that are; 0 when
// done or unknown.
func (p WarmUpProgress) ETA(now time.Time) time.Duration {
	r := p.Rate(now)
	if !p.Running || r <= 0 {
		return 0
	}
	left := float64(p.PartitionsFound - p.Partitions)
	if listed := p.TablesListed; listed > 0 && p.Tables > listed {
		left += float64(p.Tables-listed) * float64(p.PartitionsFound) / float64(listed)
	}
	return time.Duration(left / r * float64(time.Second))
}

// WarmUp loads tables, their partition names and their partitions
// through the proxy, at start (Task) and on demand (Start).
type WarmUp struct {
	cfg WarmUpConfig

	// mu guards prog and first; the counters below are added to
	// atomically during a run and folded into prog by Progress.
	mu    sync.Mutex
	prog  WarmUpProgress
	first error // the run's first failure

	running                                  atomic.Bool
	tableReq                                 atomic.Bool // the metastore knows no get_table: use get_table_req
	tables, tablesDone, found, parts, errors atomic.Int64
	listedTables                             atomic.Int64

	// Start's runs: owned by the WarmUp, stopped by Close.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// batchHook, if set, runs before each get_partitions_by_names
	// batch: a seam for tests.
	batchHook func(db, tbl string, names []string)
}

// NewWarmUp validates cfg.
func NewWarmUp(cfg WarmUpConfig) (*WarmUp, error) {
	if len(cfg.Callers) == 0 {
		return nil, errors.New("housekeeping: warm-up needs at least one caller")
	}
	for _, c := range cfg.Callers {
		if c == nil {
			return nil, errors.New("housekeeping: warm-up caller is nil")
		}
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.LogEvery <= 0 {
		cfg.LogEvery = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &WarmUp{cfg: cfg}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	return w, nil
}

// Task runs the warm-up of Targets once, at start, on every node (each
// node has its own cache). Without Targets it does nothing.
func (w *WarmUp) Task() worker.Task {
	return worker.Task{Name: "warm-up", Scope: worker.EveryNode, Run: func(ctx context.Context) error {
		if len(w.cfg.Targets) == 0 {
			return nil
		}
		return w.Run(ctx, w.cfg.Targets)
	}}
}

// Start runs a warm-up of targets in the background; Progress follows it
// and Close cancels it. It fails with ErrWarmUpRunning while another run
// (Start's or the Task's) is in progress.
func (w *WarmUp) Start(targets []Target) error {
	if len(targets) == 0 {
		return errors.New("housekeeping: warm-up needs targets")
	}
	if !w.running.CompareAndSwap(false, true) {
		return ErrWarmUpRunning
	}
	// Under the lock Close cancels under: either Close sees this run
	// counted and waits for it, or this sees Close's cancel.
	w.mu.Lock()
	if w.ctx.Err() != nil {
		w.mu.Unlock()
		w.running.Store(false)
		return ErrClosed
	}
	w.wg.Add(1)
	w.mu.Unlock()
	start := w.begin(targets)
	go func() {
		defer w.wg.Done()
		w.run(w.ctx, targets, start) // logged and in Progress
	}()
	return nil
}

// Close cancels a run started by Start and waits for it. Safe to call
// twice. The Task's run is cancelled by its runner.
func (w *WarmUp) Close() {
	w.mu.Lock()
	w.cancel()
	w.mu.Unlock()
	w.wg.Wait()
}

// Run warms targets and returns when done or when ctx is cancelled; it
// fails with ErrWarmUpRunning while another run is in progress.
func (w *WarmUp) Run(ctx context.Context, targets []Target) error {
	if !w.running.CompareAndSwap(false, true) {
		return ErrWarmUpRunning
	}
	return w.run(ctx, targets, w.begin(targets))
}

// Progress reports the latest run.
func (w *WarmUp) Progress() WarmUpProgress {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.progressLocked()
}

// progressLocked is Progress with w.mu held.
func (w *WarmUp) progressLocked() WarmUpProgress {
	p := w.prog
	p.Targets = append([]string(nil), p.Targets...)
	p.Tables, p.TablesDone = w.tables.Load(), w.tablesDone.Load()
	p.PartitionsFound, p.Partitions, p.Errors = w.found.Load(), w.parts.Load(), w.errors.Load()
	p.TablesListed = w.listedTables.Load()
	return p
}

// fail counts a failure and keeps its message.
func (w *WarmUp) fail(err error) {
	w.errors.Add(1)
	w.mu.Lock()
	w.prog.LastError = err.Error()
	if w.first == nil {
		w.first = err
	}
	w.mu.Unlock()
}

// begin records a run as started, with its targets and nothing counted
// yet, and returns its start; the caller has set running. Start calls it
// before it returns, not in the run's goroutine: whoever is told a run
// started (POST /cache/warm's 202) and then reads Progress sees that run,
// not the previous one's finished record.
func (w *WarmUp) begin(targets []Target) time.Time {
	start := time.Now()
	specs := make([]string, len(targets))
	for i, t := range targets {
		specs[i] = t.spec
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.prog = WarmUpProgress{Targets: specs, Running: true, Started: start, Runs: w.prog.Runs}
	w.first = nil
	// Under the lock, with the record: Progress never shows this run
	// with the previous one's counts.
	for _, c := range []*atomic.Int64{&w.tables, &w.tablesDone, &w.found, &w.parts, &w.errors, &w.listedTables} {
		c.Store(0)
	}
	return start
}

// run is one warm-up, begun at start; the caller has set running and
// called begin.
func (w *WarmUp) run(ctx context.Context, targets []Target, start time.Time) (err error) {
	log := w.cfg.Logger
	defer func() {
		// Whoever reads this run as finished can start the next: the
		// flag drops with the record, under the lock, and the next run
		// resets the record only after it.
		w.mu.Lock()
		w.prog.Running, w.prog.Finished = false, time.Now()
		w.prog.Runs++
		p := w.progressLocked()
		w.running.Store(false)
		w.mu.Unlock()
		attrs := []any{"tables", p.TablesDone, "partitions", p.Partitions, "errors", p.Errors,
			"took", time.Since(start).Round(time.Millisecond), "partitions_per_second", int64(p.Rate(time.Now()))}
		switch {
		case ctx.Err() != nil:
			log.Warn("housekeeping: warm-up cancelled", attrs...)
		case err != nil:
			log.Warn("housekeeping: warm-up finished with errors", append(attrs, "err", err)...)
		default:
			log.Info("housekeeping: warm-up finished", attrs...)
		}
	}()
	if w.cfg.Ready != nil {
		if err := w.cfg.Ready(ctx); err != nil {
			return fmt.Errorf("housekeeping: warm-up: wait until ready: %w", err)
		}
	}
	log.Info("housekeeping: warm-up started", "targets", w.Progress().Targets, "concurrency", len(w.cfg.Callers), "batch", w.cfg.Batch)

	// Progress in the log while the run lasts.
	logCtx, stopLog := context.WithCancel(ctx)
	var logWG sync.WaitGroup
	logWG.Go(func() {
		t := time.NewTicker(w.cfg.LogEvery)
		defer t.Stop()
		for {
			select {
			case <-logCtx.Done():
				return
			case now := <-t.C:
				p := w.Progress()
				log.Info("housekeeping: warm-up progress", "tables_done", p.TablesDone, "tables", p.Tables,
					"partitions", p.Partitions, "partitions_found", p.PartitionsFound, "errors", p.Errors,
					"partitions_per_second", int64(p.Rate(now)), "eta", p.ETA(now).Round(time.Second))
			}
		}
	})
	defer func() { stopLog(); logWG.Wait() }()

	// Callers are handed out one call at a time.
	callers := make(chan Caller, len(w.cfg.Callers))
	for _, c := range w.cfg.Callers {
		callers <- c
	}
	acquire := func() (Caller, error) {
		select {
		case c := <-callers:
			return c, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	release := func(c Caller) { callers <- c }

	tables, err := w.resolve(ctx, acquire, release, targets)
	if err != nil {
		return err
	}
	w.tables.Store(int64(len(tables)))
	// Tables in flight hold their partition names; at most twice the
	// concurrency of them, so the memory of a run over thousands of
	// tables stays that of a few.
	inFlight := make(chan struct{}, 2*len(w.cfg.Callers))
	var wg sync.WaitGroup
	for _, t := range tables {
		select {
		case inFlight <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-inFlight }()
			if err := w.table(ctx, acquire, release, t[0], t[1]); err != nil {
				if ctx.Err() == nil {
					log.Warn("housekeeping: warm-up: table failed", "db", t[0], "table", t[1], "err", err)
					w.fail(err)
				}
			}
			w.tablesDone.Add(1)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return fmt.Errorf("housekeeping: warm-up: %w", ctx.Err())
	}
	w.mu.Lock()
	first := w.first
	w.mu.Unlock()
	if first != nil {
		return fmt.Errorf("housekeeping: warm-up: %d failures, first: %w", w.errors.Load(), first)
	}
	return nil
}

// resolve lists the tables the targets name, each once, in target order.
func (w *WarmUp) resolve(ctx context.Context, acquire func() (Caller, error), release func(Caller), targets []Target) ([][2]string, error) {
	c, err := acquire()
	if err != nil {
		return nil, err
	}
	defer release(c)
	var allDBs []string // listed once, if a target needs it
	seen := map[[2]string]bool{}
	var out [][2]string
	for _, t := range targets {
		dbs := []string{t.DB}
		if t.DB == "" || isGlob(t.DB) {
			if allDBs == nil {
				if allDBs, err = allDatabases(ctx, c); err != nil {
					w.fail(err)
					return nil, fmt.Errorf("housekeeping: warm-up: list databases: %w", err)
				}
			}
			dbs = dbs[:0]
			for _, db := range allDBs {
				// re: patterns (DB "") are matched per table below
				if t.DB == "" || t.dbPat.Allowed(db, "") {
					dbs = append(dbs, db)
				}
			}
		}
		for _, db := range dbs {
			tbls := []string{t.Table}
			if t.Table == "" || isGlob(t.Table) || t.DB == "" {
				all, err := stringsResult(ctx, c, "get_all_tables", hmsclient.Args(db))
				if err != nil {
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					w.fail(err)
					w.cfg.Logger.Warn("housekeeping: warm-up: cannot list tables", "db", db, "err", err)
					continue
				}
				tbls = tbls[:0]
				for _, tbl := range all {
					if t.pat.Allowed(db, tbl) {
						tbls = append(tbls, tbl)
					}
				}
			}
			for _, tbl := range tbls {
				k := [2]string{db, tbl}
				if !seen[k] {
					seen[k] = true
					out = append(out, k)
				}
			}
		}
	}
	return out, nil
}

func allDatabases(ctx context.Context, c Caller) ([]string, error) {
	return stringsResult(ctx, c, "get_all_databases", hmsclient.Args())
}

// table loads one table: its object, its partition names, then its
// partitions in batches spread over the callers.
func (w *WarmUp) table(ctx context.Context, acquire func() (Caller, error), release func(Caller), db, tbl string) error {
	c, err := acquire()
	if err != nil {
		return err
	}
	names, err := w.head(ctx, c, db, tbl)
	release(c)
	if err != nil {
		return err
	}
	w.listedTables.Add(1)
	w.found.Add(int64(len(names)))
	var wg sync.WaitGroup
	var errMu sync.Mutex // guards first
	var first error
	for len(names) > 0 && ctx.Err() == nil {
		n := min(len(names), w.cfg.Batch)
		batch := names[:n]
		names = names[n:]
		c, err := acquire()
		if err != nil {
			break
		}
		wg.Go(func() {
			defer release(c)
			if w.batchHook != nil {
				w.batchHook(db, tbl, batch)
			}
			got, err := w.batch(ctx, c, db, tbl, batch)
			w.parts.Add(int64(got))
			if err != nil {
				errMu.Lock()
				if first == nil {
					first = err
				}
				errMu.Unlock()
			}
		})
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	if first != nil {
		return fmt.Errorf("housekeeping: warm-up %s.%s: %w", db, tbl, first)
	}
	return nil
}

// head loads the table object and returns the partition names.
func (w *WarmUp) head(ctx context.Context, c Caller, db, tbl string) ([]string, error) {
	if err := w.tableObject(ctx, c, db, tbl); err != nil {
		return nil, err
	}
	return stringsResult(ctx, c, "get_partition_names", hms.AppendPartitionNamesArgs(nil, []byte(db), []byte(tbl)))
}

// tableObject loads the table with get_table, or with get_table_req
// where the metastore no longer knows get_table (Hive 4.0.1 on): the
// TApplicationException of an unknown method, after which every later
// table of the WarmUp goes straight to get_table_req.
func (w *WarmUp) tableObject(ctx context.Context, c Caller, db, tbl string) error {
	if !w.tableReq.Load() {
		_, _, err := call(ctx, c, "get_table", hmsclient.Args(db, tbl))
		var ce *CallError
		if !errors.As(err, &ce) || ce.Field != 0 {
			return err
		}
		w.tableReq.Store(true)
	}
	_, _, err := call(ctx, c, "get_table_req", hms.AppendTableReqArgs(nil, []byte(db), []byte(tbl)))
	return err
}

// batch loads partitions by name; it returns how many came back.
func (w *WarmUp) batch(ctx context.Context, c Caller, db, tbl string, names []string) (int, error) {
	args := hms.AppendPartitionsByNamesArgs(nil, []byte(db), []byte(tbl), names)
	d, typ, err := call(ctx, c, "get_partitions_by_names", args)
	if err != nil {
		return 0, err
	}
	if typ != wire.TList {
		return 0, fmt.Errorf("housekeeping: get_partitions_by_names: no list result (type %d)", typ)
	}
	_, got := d.ListBegin()
	return got, d.Err()
}

// stringsResult makes a call whose success is a list<string>.
func stringsResult(ctx context.Context, c Caller, method string, args []byte) ([]string, error) {
	d, typ, err := call(ctx, c, method, args)
	if err != nil {
		return nil, err
	}
	if typ != wire.TList {
		return nil, fmt.Errorf("housekeeping: %s: no list result (type %d)", method, typ)
	}
	l := stringList(d)
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("housekeeping: %s: bad reply: %w", method, err)
	}
	return l, nil
}
