package eventlog

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
)

// HealthState is the verdict of a Health check.
type HealthState int32

const (
	// HealthUnknown: not checked yet, or no evidence either way.
	HealthUnknown HealthState = iota
	// HealthOK: the log has events and moved with the writes seen.
	HealthOK
	// HealthMissing: the metastore keeps no notification log (none ever
	// written), or writes passed through and the log did not move.
	// Writes that bypass the proxy are then invisible until TTLs end.
	HealthMissing
)

func (s HealthState) String() string {
	switch s {
	case HealthOK:
		return "ok"
	case HealthMissing:
		return "missing"
	}
	return "unknown"
}

// HealthConfig configures a Health check. Caller is required.
type HealthConfig struct {
	Caller Caller
	// Strikes is how many checks in a row must find that writes passed
	// and the log stayed put before it is declared missing. A write whose
	// reply was in flight while a check read the event id can make one
	// such check by itself; two cannot. Default 2.
	Strikes int
	// OnChange, if set, is told of each change of verdict, with why. It
	// runs in Check's goroutine.
	OnChange func(st HealthState, why string)
	// Stats, if set, gets the verdict too (Stats.Health), for the admin
	// port, which reads the poller's Stats.
	Stats *Stats
	// Logger receives the changes of verdict. Default: discard.
	Logger *slog.Logger
}

// Health finds out whether the metastore keeps a notification log: a
// metastore without one (no DbNotificationListener) looks exactly like an
// idle one to the poller. Writes that the log must record, seen passing
// through this node (Wrote), are the evidence: after them the current
// event id must have moved.
type Health struct {
	cfg    HealthConfig
	log    *slog.Logger
	writes atomic.Uint64 // logged writes the metastore accepted
	state  atomic.Int32  // a HealthState

	// mu serialises checks and guards what they compare.
	mu         sync.Mutex
	checked    bool
	lastID     int64
	lastWrites uint64
	strikes    int
}

// NewHealth validates cfg.
func NewHealth(cfg HealthConfig) (*Health, error) {
	if cfg.Caller == nil {
		return nil, errors.New("eventlog: health: caller is required")
	}
	if cfg.Strikes <= 0 {
		cfg.Strikes = 2
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Health{cfg: cfg, log: cfg.Logger}, nil
}

// State is the current verdict.
func (h *Health) State() HealthState { return HealthState(h.state.Load()) }

// Wrote is told of every write through the proxy (proxy.Caching.Wrote's
// shape): it counts those the metastore accepted and must log.
func (h *Health) Wrote(method string, _ []cache.Entity, ok bool) {
	if ok && Logged(method) {
		h.writes.Add(1)
	}
}

// Logged reports whether a metastore with a notification log records an
// event for every successful call of method, on every version: the
// creates and drops of databases and functions, and the creates, drops
// and alters of tables and partitions. Calls that may succeed without
// changing anything (add_partitions with ifNotExists,
// drop_partitions_req with ifExists, truncate, exchange) are left out,
// as are the writes some version does not record (alter_database on
// 2.3, alter_function, constraints, statistics: hms.UnloggedWrites) and
// transactions.
func Logged(method string) bool {
	switch {
	case strings.HasPrefix(method, "add_partitions"), strings.HasPrefix(method, "drop_partitions"):
		return false
	case method == "create_function", method == "drop_function":
		return true
	}
	for _, p := range []string{"create_database", "drop_database",
		"create_table", "drop_table", "alter_table",
		"add_partition", "append_partition", "drop_partition", "alter_partition", "rename_partition"} {
		if strings.HasPrefix(method, p) {
			return true
		}
	}
	return false
}

// Check reads the current event id and updates the verdict: missing when
// the log has never had an event, or when writes the log must record
// passed through in Strikes check periods in a row and the id did not
// move; ok as soon as it moves.
func (h *Health) Check(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	// The writes first: every write counted here had its reply, so its
	// event (written in the write's own transaction) is in the id read
	// next.
	writes := h.writes.Load()
	id, err := currentID(ctx, h.cfg.Caller)
	if err != nil {
		return err
	}
	first := !h.checked
	prevID, prevWrites := h.lastID, h.lastWrites
	h.checked, h.lastID, h.lastWrites = true, id, writes
	switch {
	case first && id == 0:
		h.set(HealthMissing, "the metastore's notification log is empty: no DbNotificationListener?")
	case first:
		// Events were logged at some time; whether they still are is
		// known after the next writes.
	case id > prevID:
		h.strikes = 0
		h.set(HealthOK, "the notification log advances")
	case id < prevID:
		h.strikes = 0 // a reset log; the poller handles it as a gap
	case writes > prevWrites:
		h.strikes++
		if h.strikes >= h.cfg.Strikes {
			h.set(HealthMissing, "writes through the proxy were not logged: the notification log does not advance")
		}
	}
	return nil
}

// TTLCapper is the part of cache.Store that a missing log shortens.
type TTLCapper interface{ SetTTLCap(time.Duration) }

// CapWhileMissing returns a HealthConfig.OnChange that bounds every TTL
// of c by d while the log is missing, and lifts the bound when it is not.
func CapWhileMissing(c TTLCapper, d time.Duration) func(HealthState, string) {
	return func(st HealthState, _ string) {
		if st == HealthMissing {
			c.SetTTLCap(d)
		} else {
			c.SetTTLCap(0)
		}
	}
}

func (h *Health) set(st HealthState, why string) {
	if h.cfg.Stats != nil {
		h.cfg.Stats.Health.Store(int32(st))
	}
	if HealthState(h.state.Swap(int32(st))) == st {
		return
	}
	if st == HealthMissing {
		h.log.Warn("eventlog: no notification log; writes that bypass the proxy are seen only when entries expire", "why", why)
	} else {
		h.log.Info("eventlog: notification log healthy", "why", why)
	}
	if h.cfg.OnChange != nil {
		h.cfg.OnChange(st, why)
	}
}
