package housekeeping

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/hmsproxy/hmsproxy/ops/worker"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// CompactionsConfig configures the compaction monitor. Caller is
// required.
type CompactionsConfig struct {
	Caller Caller
	// Every is the polling period. Default 5m.
	Every time.Duration
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
}

// CompactionCounts is what the last show_compact showed.
type CompactionCounts struct {
	// ByState counts elements by state string ("initiated", "working",
	// "ready for cleaning", "failed", "succeeded", ...).
	ByState map[string]int
	Total   int
	Failed  int // state "failed"
	At      time.Time
}

// Compactions is the compaction monitor.
type Compactions struct {
	cfg CompactionsConfig

	// mu guards last and seenFailed.
	mu         sync.Mutex
	last       CompactionCounts
	seenFailed map[string]bool // failed compactions already logged
}

// NewCompactions validates cfg.
func NewCompactions(cfg CompactionsConfig) (*Compactions, error) {
	if cfg.Caller == nil {
		return nil, errors.New("housekeeping: compactions needs a caller")
	}
	if cfg.Every <= 0 {
		cfg.Every = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Compactions{cfg: cfg}, nil
}

// Task polls show_compact on the leader only.
func (c *Compactions) Task() worker.Task {
	return leaderPoll("compactions", c.cfg.Every, c.run)
}

// Counts returns the last counts (ByState is a copy); false before the
// first success.
func (c *Compactions) Counts() (CompactionCounts, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.last
	out.ByState = maps.Clone(c.last.ByState)
	return out, !out.At.IsZero()
}

type compaction struct {
	db, table, part, state, workerID string
	id                               int64
}

func (x compaction) key() string {
	if x.id != 0 {
		return fmt.Sprint(x.id)
	}
	return x.db + "." + x.table + "/" + x.part + "@" + x.workerID
}

func (c *Compactions) run(ctx context.Context) error {
	// ShowCompactRequest: empty (2.3/3.1), no filters (4.0).
	d, typ, err := call(ctx, c.cfg.Caller, "show_compact", hmsreq.Req())
	if err != nil {
		return err
	}
	if typ != wire.TStruct {
		return fmt.Errorf("housekeeping: show_compact: no result (type %d)", typ)
	}
	// ShowCompactResponse{1 list<ShowCompactResponseElement>}
	var list []compaction
	d.Struct(wire.ListAt(1, func(d *wire.Decoder) {
		var x compaction
		d.Struct(wire.StringAt(1, &x.db), wire.StringAt(2, &x.table), wire.StringAt(3, &x.part),
			wire.StringAt(5, &x.state), wire.StringAt(6, &x.workerID), wire.I64At(13, &x.id))
		list = append(list, x)
	}))
	if err := d.Err(); err != nil {
		return fmt.Errorf("housekeeping: show_compact: bad reply: %w", err)
	}
	counts := CompactionCounts{ByState: map[string]int{}, Total: len(list), At: time.Now()}
	failed := map[string]bool{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range list {
		counts.ByState[x.state]++
		if x.state != "failed" {
			continue
		}
		counts.Failed++
		k := x.key()
		failed[k] = true
		if !c.seenFailed[k] {
			c.cfg.Logger.Warn("housekeeping: compaction failed", "db", x.db, "table", x.table,
				"partition", x.part, "id", x.id)
		}
	}
	c.seenFailed = failed
	c.last = counts
	return nil
}
