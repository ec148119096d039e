package housekeeping

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/ops/worker"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// TxnState values of TxnInfo.state (§6.3).
const (
	txnAborted int32 = 2
	txnOpen    int32 = 3
)

// txnInfo is the part of TxnInfo the tasks use. Times are epoch ms on
// the metastore database's clock; 0 when the server did not send them.
type txnInfo struct {
	ID             int64
	State          int32
	User, Hostname string
	Started        int64 // field 8
	LastHeartbeat  int64 // field 9
}

// lastSign is the last sign of life: the heartbeat, else the start.
func (t txnInfo) lastSign() int64 {
	if t.LastHeartbeat > 0 {
		return t.LastHeartbeat
	}
	return t.Started
}

// getOpenTxnsInfo calls get_open_txns_info.
func getOpenTxnsInfo(ctx context.Context, c Caller) (hwm int64, txns []txnInfo, err error) {
	d, typ, err := call(ctx, c, "get_open_txns_info", hmsreq.Args())
	if err != nil {
		return 0, nil, err
	}
	if typ != wire.TStruct {
		return 0, nil, fmt.Errorf("housekeeping: get_open_txns_info: no result (type %d)", typ)
	}
	// GetOpenTxnsInfoResponse{1 txn_high_water_mark, 2 list<TxnInfo>}
	d.Struct(wire.I64At(1, &hwm), wire.ListAt(2, func(d *wire.Decoder) {
		var t txnInfo
		d.Struct(wire.I64At(1, &t.ID), wire.I32At(2, &t.State), wire.StringAt(3, &t.User),
			wire.StringAt(4, &t.Hostname), wire.I64At(8, &t.Started), wire.I64At(9, &t.LastHeartbeat))
		txns = append(txns, t)
	}))
	if err := d.Err(); err != nil {
		return 0, nil, fmt.Errorf("housekeeping: get_open_txns_info: bad reply: %w", err)
	}
	return hwm, txns, nil
}

// OpenTxnsConfig configures the open-transactions gauge. Caller is
// required.
type OpenTxnsConfig struct {
	Caller Caller
	// Every is the polling period. Default 1m.
	Every time.Duration
	// StaleAfter counts open transactions whose last heartbeat is older as
	// stale (hive.txn.timeout). Default 300s.
	StaleAfter time.Duration
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
	// Now is the clock (a test seam). Default time.Now.
	Now func() time.Time
}

// TxnCounts is what the last get_open_txns_info showed.
type TxnCounts struct {
	Open, Aborted, Stale int
	// OldestOpenAge is the age of the oldest open transaction by its
	// startedTime; 0 when none is open. Ages compare the proxy's clock
	// with the metastore database's, so skew between them shows here.
	OldestOpenAge time.Duration
	HighWaterMark int64
	At            time.Time // when the counts were taken
}

// OpenTxns is the open-transactions gauge (AcidOpenTxnsCounterService).
type OpenTxns struct {
	cfg OpenTxnsConfig

	// mu guards last.
	mu   sync.Mutex
	last TxnCounts
}

// NewOpenTxns validates cfg.
func NewOpenTxns(cfg OpenTxnsConfig) (*OpenTxns, error) {
	if cfg.Caller == nil {
		return nil, errors.New("housekeeping: open-txns needs a caller")
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Minute
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = 300 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &OpenTxns{cfg: cfg}, nil
}

// Task polls the metastore; by default on the leader only (the counts are
// the metastore's, not the node's).
func (o *OpenTxns) Task() worker.Task {
	return leaderPoll("open-txns", o.cfg.Every, o.run)
}

// Counts returns the last counts; false before the first success.
func (o *OpenTxns) Counts() (TxnCounts, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last, !o.last.At.IsZero()
}

func (o *OpenTxns) run(ctx context.Context) error {
	hwm, txns, err := getOpenTxnsInfo(ctx, o.cfg.Caller)
	if err != nil {
		return err
	}
	now := o.cfg.Now()
	nowMs := now.UnixMilli()
	c := TxnCounts{HighWaterMark: hwm, At: now}
	var oldest int64
	for _, t := range txns {
		switch t.State {
		case txnOpen:
			c.Open++
			if t.Started > 0 && (oldest == 0 || t.Started < oldest) {
				oldest = t.Started
			}
			if s := t.lastSign(); s > 0 && nowMs-s >= o.cfg.StaleAfter.Milliseconds() {
				c.Stale++
			}
		case txnAborted:
			c.Aborted++
		}
	}
	if oldest > 0 {
		c.OldestOpenAge = max(0, time.Duration(nowMs-oldest)*time.Millisecond)
	}
	o.mu.Lock()
	o.last = c
	o.mu.Unlock()
	o.cfg.Logger.Debug("housekeeping: open transactions", "open", c.Open, "aborted", c.Aborted,
		"stale", c.Stale, "oldest_open_age", c.OldestOpenAge)
	return nil
}

// ReaperConfig configures the stale-transaction reaper. Caller is
// required.
type ReaperConfig struct {
	Caller Caller
	// Enabled turns the reaper on. Default false: the task does nothing.
	Enabled bool
	// Abort makes it call abort_txns. Default false: a dry run that only
	// logs what it would abort.
	Abort bool
	// Timeout: an open transaction whose last heartbeat (else its start)
	// is older is stale (hive.txn.timeout). Default 300s. The age compares
	// the proxy's clock with the metastore database's; keep Timeout well
	// above any skew.
	Timeout time.Duration
	// Every is the period. Default 1m.
	Every time.Duration
	// Batch bounds the ids per abort_txns call. Default 1000.
	Batch int
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
	// Now is the clock (a test seam). Default time.Now.
	Now func() time.Time
}

// ReaperStats are the reaper's counters.
type ReaperStats struct {
	Stale      int    // stale transactions found by the last run
	Aborted    uint64 // aborted, total
	WouldAbort uint64 // found stale in dry-run mode, total
	Failed     uint64 // abort calls that failed, total
}

// Reaper aborts open transactions whose heartbeats stopped
// (AcidHouseKeeperService's timeout reaper). There is a window between
// reading and aborting in which a client could heartbeat again; with a
// timeout of minutes, a client silent that long is gone.
type Reaper struct {
	cfg                         ReaperConfig
	stale                       atomic.Int64
	aborted, wouldAbort, failed atomic.Uint64
}

// NewReaper validates cfg.
func NewReaper(cfg ReaperConfig) (*Reaper, error) {
	if cfg.Caller == nil {
		return nil, errors.New("housekeeping: reaper needs a caller")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 300 * time.Second
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Minute
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Reaper{cfg: cfg}, nil
}

// Task runs the reaper on the leader only.
func (r *Reaper) Task() worker.Task {
	return leaderPoll("stale-txn-reaper", r.cfg.Every, r.run)
}

// Stats returns the counters.
func (r *Reaper) Stats() ReaperStats {
	return ReaperStats{Stale: int(r.stale.Load()), Aborted: r.aborted.Load(),
		WouldAbort: r.wouldAbort.Load(), Failed: r.failed.Load()}
}

func (r *Reaper) run(ctx context.Context) error {
	if !r.cfg.Enabled {
		return nil
	}
	_, txns, err := getOpenTxnsInfo(ctx, r.cfg.Caller)
	if err != nil {
		return err
	}
	nowMs := r.cfg.Now().UnixMilli()
	var stale []int64
	for _, t := range txns {
		s := t.lastSign()
		if t.State != txnOpen || s <= 0 {
			continue
		}
		age := time.Duration(nowMs-s) * time.Millisecond
		if age < r.cfg.Timeout {
			continue
		}
		stale = append(stale, t.ID)
		msg := "housekeeping: stale transaction; would abort (dry run)"
		if r.cfg.Abort {
			msg = "housekeeping: stale transaction; aborting"
		}
		r.cfg.Logger.Warn(msg, "txn", t.ID, "user", t.User, "host", t.Hostname,
			"since_heartbeat", age.Round(time.Second), "timeout", r.cfg.Timeout)
	}
	r.stale.Store(int64(len(stale)))
	if !r.cfg.Abort {
		r.wouldAbort.Add(uint64(len(stale)))
		return nil
	}
	var errs []error
	for len(stale) > 0 {
		n := min(len(stale), r.cfg.Batch)
		if err := r.abort(ctx, stale[:n]); err != nil {
			errs = append(errs, err)
		}
		stale = stale[n:]
	}
	return errors.Join(errs...)
}

// abort calls abort_txns for ids. When it throws (say one of them
// committed meanwhile), each id is retried alone with abort_txn so the
// others are not left behind.
func (r *Reaper) abort(ctx context.Context, ids []int64) error {
	err := abortTxns(ctx, r.cfg.Caller, ids)
	if err == nil {
		r.aborted.Add(uint64(len(ids)))
		r.cfg.Logger.Info("housekeeping: aborted stale transactions", "txns", ids)
		return nil
	}
	var ce *CallError
	if !errors.As(err, &ce) {
		r.failed.Add(1)
		return err
	}
	r.cfg.Logger.Warn("housekeeping: abort_txns failed; aborting one by one", "err", err)
	var errs []error
	for _, id := range ids {
		if _, _, err := call(ctx, r.cfg.Caller, "abort_txn", hmsreq.Req(hmsreq.I64(1, id))); err != nil {
			r.failed.Add(1)
			r.cfg.Logger.Warn("housekeeping: abort_txn failed", "txn", id, "err", err)
			errs = append(errs, err)
			continue
		}
		r.aborted.Add(1)
		r.cfg.Logger.Info("housekeeping: aborted stale transaction", "txn", id)
	}
	return errors.Join(errs...)
}

// abortTxns calls abort_txns(AbortTxnsRequest{1 txn_ids}).
func abortTxns(ctx context.Context, c Caller, ids []int64) error {
	_, _, err := call(ctx, c, "abort_txns", hmsreq.Req(hmsreq.I64s(1, ids...)))
	return err
}
