package housekeeping

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/wire"
	"github.com/hmsproxy/hmsproxy/internal/worker"
)

// Target is what to warm: one table, or every table of a database when
// Table is "".
type Target struct {
	DB, Table string
}

// ParseTargets reads "db" and "db.table" strings.
func ParseTargets(specs []string) ([]Target, error) {
	out := make([]Target, 0, len(specs))
	for _, s := range specs {
		db, tbl, _ := strings.Cut(strings.TrimSpace(s), ".")
		if db == "" || strings.Contains(tbl, ".") {
			return nil, fmt.Errorf("housekeeping: warm-up target %q: want db or db.table", s)
		}
		out = append(out, Target{DB: db, Table: tbl})
	}
	return out, nil
}

// WarmUpConfig configures the warm-up. Caller and Targets are required.
type WarmUpConfig struct {
	// Caller reaches the proxy itself (not the metastore), so that what
	// is loaded lands in the proxy's cache.
	Caller  Caller
	Targets []Target
	// Batch bounds the names per get_partitions_by_names call. Default 500.
	Batch int
	// Logger receives progress logs. Default: discard.
	Logger *slog.Logger
}

// WarmUpProgress is how far the warm-up got.
type WarmUpProgress struct {
	Tables     int64 // tables found so far
	TablesDone int64 // tables loaded, with or without error
	Partitions int64 // partitions loaded
	Errors     int64 // tables that failed
	Done       bool
}

// WarmUp loads tables, their partition names and their partitions
// through the proxy at start.
type WarmUp struct {
	cfg                                      WarmUpConfig
	tables, tablesDone, partitions, failures atomic.Int64
	done                                     atomic.Bool
}

// NewWarmUp validates cfg.
func NewWarmUp(cfg WarmUpConfig) (*WarmUp, error) {
	if cfg.Caller == nil || len(cfg.Targets) == 0 {
		return nil, errors.New("housekeeping: warm-up needs a caller and targets")
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &WarmUp{cfg: cfg}, nil
}

// Task runs the warm-up once, at start, on every node (each node has its
// own cache).
func (w *WarmUp) Task() worker.Task {
	return worker.Task{Name: "warm-up", Scope: worker.EveryNode, Run: w.run}
}

// Progress reports how far the warm-up got.
func (w *WarmUp) Progress() WarmUpProgress {
	return WarmUpProgress{Tables: w.tables.Load(), TablesDone: w.tablesDone.Load(),
		Partitions: w.partitions.Load(), Errors: w.failures.Load(), Done: w.done.Load()}
}

func (w *WarmUp) run(ctx context.Context) error {
	start := time.Now()
	log := w.cfg.Logger
	log.Info("housekeeping: warm-up started", "targets", len(w.cfg.Targets))
	var errs []error
	for _, t := range w.cfg.Targets {
		tables := []string{t.Table}
		if t.Table == "" {
			var err error
			if tables, err = w.allTables(ctx, t.DB); err != nil {
				w.failures.Add(1)
				log.Warn("housekeeping: warm-up: cannot list tables", "db", t.DB, "err", err)
				errs = append(errs, err)
				continue
			}
		}
		w.tables.Add(int64(len(tables)))
		for _, tbl := range tables {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			n, err := w.table(ctx, t.DB, tbl)
			w.tablesDone.Add(1)
			if err != nil {
				w.failures.Add(1)
				log.Warn("housekeeping: warm-up: table failed", "db", t.DB, "table", tbl, "err", err)
				errs = append(errs, err)
				continue
			}
			log.Info("housekeeping: warm-up: table loaded", "db", t.DB, "table", tbl, "partitions", n,
				"tables_done", w.tablesDone.Load(), "tables", w.tables.Load())
		}
	}
	w.done.Store(true)
	log.Info("housekeeping: warm-up finished", "tables", w.tablesDone.Load(), "partitions", w.partitions.Load(),
		"errors", w.failures.Load(), "took", time.Since(start).Round(time.Millisecond))
	if len(errs) > 0 {
		return fmt.Errorf("housekeeping: warm-up: %d failures, first: %w", len(errs), errs[0])
	}
	return nil
}

func (w *WarmUp) allTables(ctx context.Context, db string) ([]string, error) {
	var e wire.Encoder
	e.StringField(1, db)
	e.Stop()
	return stringsResult(ctx, w.cfg.Caller, "get_all_tables", e.B)
}

// table loads one table; it returns the number of partitions loaded.
func (w *WarmUp) table(ctx context.Context, db, tbl string) (int, error) {
	var e wire.Encoder
	e.StringField(1, db)
	e.StringField(2, tbl)
	e.Stop()
	if _, _, err := call(ctx, w.cfg.Caller, "get_table", e.B); err != nil {
		return 0, err
	}
	e.B = e.B[:len(e.B)-1]
	e.FieldBegin(wire.TI16, 3)
	e.I16(-1)
	e.Stop()
	names, err := stringsResult(ctx, w.cfg.Caller, "get_partition_names", e.B)
	if err != nil {
		return 0, err
	}
	loaded := 0
	for len(names) > 0 {
		n := min(len(names), w.cfg.Batch)
		var b wire.Encoder
		b.StringField(1, db)
		b.StringField(2, tbl)
		b.StringListField(3, names[:n])
		b.Stop()
		d, typ, err := call(ctx, w.cfg.Caller, "get_partitions_by_names", b.B)
		if err != nil {
			return loaded, err
		}
		if typ == wire.TList {
			_, got := d.ListBegin()
			loaded += got
			w.partitions.Add(int64(got))
		}
		names = names[n:]
	}
	return loaded, nil
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
