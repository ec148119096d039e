package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/admin"
	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/changes"
	"github.com/hmsproxy/hmsproxy/changes/kafka"
	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/coherence/leader"
	"github.com/hmsproxy/hmsproxy/ops/housekeeping"
	"github.com/hmsproxy/hmsproxy/ops/worker"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// newChanges starts the change-event stream when Redis is configured.
// It is built before the proxy, which is given it as the observer of its
// writes; the caller closes it once the proxy has stopped.
func newChanges(rdb redis.UniversalClient, upName string, log *slog.Logger) (*changes.Stream, error) {
	if rdb == nil {
		return nil, nil
	}
	return changes.New(changes.Config{Client: rdb, Key: coherence.Key("hmsproxy", upName, "changes", coherence.Tagged(rdb)), Logger: log.With("component", "changes")})
}

// closeChanges drains the stream, bounded. Safe on nil.
func closeChanges(st *changes.Stream) {
	if st == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st.Close(ctx)
}

// writeObservers fans the writes through the proxy out to the change-event
// stream and the event-log health check. It is given to proxy.New, which
// keeps its collaborators from construction on; the health check needs the
// poller, which needs the server, so it is attached here before any worker
// runs, and writes before that only miss a check that has not started.
type writeObservers struct {
	changes *changes.Stream // nil without Redis
	feed    *kafka.Feed     // nil without the Kafka feed; set before the proxy exists
	health  atomic.Pointer[eventlog.Health]
}

func (o *writeObservers) Wrote(method string, ents []cache.Entity, ok bool) {
	if o.changes != nil {
		o.changes.Wrote(method, ents, ok)
	}
	if h := o.health.Load(); h != nil {
		h.Wrote(method, ents, ok)
	}
}

// WroteRequest gives the Kafka feed the request of each write through
// the proxy (proxy.RequestObserver).
func (o *writeObservers) WroteRequest(method string, args []byte, user string, ok bool) {
	if o.feed != nil {
		o.feed.Wrote(method, args, user, ok)
	}
}

// workers are the proxy's background tasks and what they need.
type workers struct {
	runner   *worker.Runner
	poller   *eventlog.Poller
	health   *eventlog.Health // nil when the poller or its health check is off
	openTxns *housekeeping.OpenTxns
	reaper   *housekeeping.Reaper
	compact  *housekeeping.Compactions
	warmUp   *housekeeping.WarmUp
	elector  *leader.Elector // nil without Redis
	changes  *changes.Stream // nil without Redis

	closers []func()
	once    sync.Once // Close runs once
}

// startWorkers builds and starts every group's background work (see
// startGroupWorkers).
func (n *node) startWorkers() (*workers, error) {
	w := &workers{changes: n.changes}
	for i := range n.groups {
		if err := n.startGroupWorkers(w, i); err != nil {
			w.Close()
			return nil, err
		}
	}
	return w, nil
}

// eventLogTasks are group g's event-log poller and health check, on the
// cache gc; el is the group's lease, nil without Redis.
func (n *node) eventLogTasks(w *workers, g *metastoreGroup, gc groupCache, el *leader.Elector) ([]worker.Task, error) {
	caller, err := n.housekeepingClient(w, g)
	if err != nil {
		return nil, err
	}
	eg := eventLogGroup{name: g.name, caller: caller, rdb: n.rdb, lease: el, catalog: g.caching.DefaultCatalog,
		// Through Flush: applied here and published to the other nodes.
		flush: gc.Flush, suffix: g.suffix()}
	if g.bus != nil {
		eg.synced = g.bus.Synced
	}
	if g.fed == nil {
		eg.changed = func(ev eventlog.Event, ents []cache.Entity) {
			if w.changes != nil {
				w.changes.Add(changes.FromEntities(ev.Type, "eventlog", true, ev.ID, time.Unix(int64(ev.Time), 0), ents)...)
			}
		}
	}
	poller, health, tasks, err := eventLogTasks(n.cfg, eg, n.caps, g.logger(n, ""))
	if err != nil {
		return nil, err
	}
	g.poller = poller
	if health != nil {
		g.writes.health.Store(health)
	}
	if g.fed == nil {
		w.poller, w.health = poller, health
	}
	return tasks, nil
}

// housekeepingTasks are the primary's transaction and compaction tasks
// and its warm-up.
func (n *node) housekeepingTasks(w *workers) ([]worker.Task, error) {
	cfg, log := n.cfg, n.log
	var tasks []worker.Task
	hk := cfg.Housekeeping
	if hk.OpenTxnsInterval > 0 || hk.Reaper.Enabled || hk.CompactionsInterval > 0 {
		caller, err := n.housekeepingClient(w, n.groups[0])
		if err != nil {
			return nil, err
		}
		if hk.OpenTxnsInterval > 0 {
			if w.openTxns, err = housekeeping.NewOpenTxns(housekeeping.OpenTxnsConfig{Caller: caller, Every: hk.OpenTxnsInterval,
				StaleAfter: hk.Reaper.Timeout, Logger: log.With("task", "open-txns")}); err != nil {
				return nil, err
			}
			tasks = append(tasks, w.openTxns.Task())
		}
		if w.reaper, err = housekeeping.NewReaper(housekeeping.ReaperConfig{Caller: caller, Enabled: hk.Reaper.Enabled,
			Abort: hk.Reaper.Abort, Timeout: hk.Reaper.Timeout, Logger: log.With("task", "txn-reaper")}); err != nil {
			return nil, err
		}
		if hk.Reaper.Enabled {
			tasks = append(tasks, w.reaper.Task())
		}
		if hk.CompactionsInterval > 0 {
			if w.compact, err = housekeeping.NewCompactions(housekeeping.CompactionsConfig{Caller: caller,
				Every: hk.CompactionsInterval, Logger: log.With("task", "compactions")}); err != nil {
				return nil, err
			}
			tasks = append(tasks, w.compact.Task())
		}
	}
	if n.groups[0].caching != nil && !cfg.Kerberos.Enabled {
		// Built whenever there is a cache, so that the admin endpoint can
		// start a warm-up on demand; its callers connect on first use.
		if err := w.newWarmUp(cfg, log, n.srv, n.coherence(), n.clientTransport); err != nil {
			return nil, err
		}
		if len(hk.WarmUp) > 0 {
			tasks = append(tasks, w.warmUp.Task())
		}
	} else if len(hk.WarmUp) > 0 {
		log.Warn("housekeeping.warm_up ignored: there is no cache to warm")
	}
	return tasks, nil
}

// newWarmUp builds the warm-up of the housekeeping.warm_up targets. It
// loads through in-process background connections to the proxy
// (proxy.Server.DialBackground), as housekeeping.warm_up_user.
func (w *workers) newWarmUp(cfg settings.File, log *slog.Logger, srv *proxy.Server, coh proxy.Coherence, tr wire.Transport) error {
	hk := cfg.Housekeeping
	targets, err := housekeeping.ParseTargets(hk.WarmUp)
	if err != nil {
		return err
	}
	if hk.WarmUpBatch < 0 || hk.WarmUpConcurrency < 0 {
		return fmt.Errorf("housekeeping.warm_up_batch %d, warm_up_concurrency %d: want 0 (default) or more",
			hk.WarmUpBatch, hk.WarmUpConcurrency)
	}
	n := warmUpConcurrency(hk.WarmUpConcurrency, cfg.Upstream.MaxConns, cfg.Upstream.ReservedReadConns)
	if hk.WarmUpConcurrency > n {
		log.Warn("housekeeping.warm_up_concurrency lowered to half the unreserved upstream connections",
			"configured", hk.WarmUpConcurrency, "used", n)
	}
	// The warm-up loads as a stated identity: with a per-user cache
	// scope the entries it fills are that user's.
	user := hk.WarmUpUser
	if user == "" {
		user = hk.User
	}
	callers, closeCallers, err := housekeeping.NewClients(housekeeping.ClientConfig{Transport: tr, User: user,
		Dial: func(context.Context) (net.Conn, error) { return srv.DialBackground() }}, n)
	if err != nil {
		return err
	}
	w.closers = append(w.closers, closeCallers)
	w.warmUp, err = housekeeping.NewWarmUp(housekeeping.WarmUpConfig{Callers: callers, Targets: targets,
		Batch: hk.WarmUpBatch, Logger: log.With("task", "warm-up", "user", user),
		// Loads made before the node is in sync with the others are not
		// cached; wait so the warm-up is not wasted.
		Ready: func(ctx context.Context) error {
			for coh != nil && !coh.Synced() {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
			return nil
		}})
	if err != nil {
		return err
	}
	// Before the callers close (closers run in reverse).
	w.closers = append(w.closers, w.warmUp.Close)
	return nil
}

// warmUpConcurrency is the configured concurrency (default 4) bounded by
// half the connections per metastore that reads do not reserve: warm-up
// calls are background ones, which take only those, and client writes
// keep the other half.
func warmUpConcurrency(conf, maxConns, reserved int) int {
	if conf == 0 {
		conf = 4
	}
	if maxConns <= 0 {
		maxConns = 64
	}
	switch {
	case reserved == 0:
		reserved = maxConns / 4
	case reserved < 0:
		reserved = 0
	}
	reserved = min(reserved, maxConns-1)
	return max(1, min(conf, (maxConns-reserved)/2))
}

// Close stops the tasks, then what they used. Safe on nil.
func (w *workers) Close() {
	if w == nil {
		return
	}
	w.once.Do(func() {
		if w.runner != nil {
			w.runner.Close()
		}
		for i := len(w.closers) - 1; i >= 0; i-- {
			w.closers[i]()
		}
	})
}

// workerStatuses shows the runner's tasks on the admin port.
type workerStatuses struct{ r *worker.Runner }

func (w workerStatuses) Snapshot() []admin.WorkerStatus {
	var out []admin.WorkerStatus
	for _, t := range w.r.Snapshot() {
		out = append(out, admin.WorkerStatus{Name: t.Name, Runs: t.Runs, Failures: t.Failures,
			LastSuccess: t.LastSuccess, LastError: t.LastError})
	}
	return out
}

// runLeader campaigns for group's Redis lease until the returned stop:
// the holder runs the group's cluster-singleton tasks.
func runLeader(rdb redis.UniversalClient, group, nodeID string, log *slog.Logger) (*leader.Elector, func(), error) {
	el, err := leader.New(leader.Config{Client: rdb, Key: coherence.Key("hmsproxy", group, "leader", coherence.Tagged(rdb)), NodeID: nodeID,
		Logger: log.With("component", "leader")})
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		el.Run(ctx, func(ctx context.Context, token int64) {
			log.Info("this node now runs the cluster-singleton workers", "token", token)
			<-ctx.Done()
		})
	}()
	return el, func() { cancel(); <-done }, nil
}

// eventLogGroup is what one upstream group's event-log poller works on.
type eventLogGroup struct {
	name    string // the group's name in Redis keys and TTL caps
	caller  *housekeeping.Client
	rdb     redis.UniversalClient // nil: the cursor lives in memory
	lease   *leader.Elector       // the group's lease, with rdb
	catalog string
	// flush applies the event log's invalidations to the group's cache
	// (and publishes them to the other nodes).
	flush   func(context.Context, []cache.Entity) error
	changed func(eventlog.Event, []cache.Entity) // nil: no change stream
	// suffix ends the names of its tasks: "" for the primary, ":name"
	// for a federated group.
	suffix string
	// synced reports whether the group's bus is in step (nil: no bus).
	synced func() bool
}

// eventLogTasks builds a group's event-log poller and, when configured,
// its health check, with their worker tasks: the poller on the lease
// holder, the health check on every node (each sees only the writes
// through itself, and caps the TTLs of its own cache). health is nil when
// the check is off.
func eventLogTasks(cfg settings.File, g eventLogGroup, caps *ttlCaps, log *slog.Logger) (*eventlog.Poller, *eventlog.Health, []worker.Task, error) {
	var cursor eventlog.Cursor = &eventlog.MemCursor{}
	if g.rdb != nil && g.lease != nil {
		cursor = &eventlog.RedisCursor{Client: g.rdb, Lease: g.lease, Key: coherence.Key("hmsproxy", g.name, "eventlog", coherence.Tagged(g.rdb))}
	}
	all := []cache.Entity{{Level: cache.LevelAll}}
	poller, err := eventlog.New(eventlog.Config{
		Caller: g.caller, Cursor: cursor, Batch: cfg.EventLog.Batch, DefaultCatalog: g.catalog,
		Apply:   func(ctx context.Context, ents []cache.Entity) { g.flush(ctx, ents) },
		Drop:    func(string) { g.flush(context.Background(), all) },
		Changed: g.changed,
		Logger:  log.With("component", "eventlog"),
		Synced:  g.synced,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	tasks := []worker.Task{{Name: "eventlog" + g.suffix, Every: cfg.EventLog.Interval, Jitter: 0.1,
		Timeout: time.Minute, Scope: worker.LeaderOnly, Run: poller.Poll}}
	if g.rdb != nil {
		// The other nodes report how far the shared cursor came.
		tasks = append(tasks, worker.Task{Name: "eventlog-follow" + g.suffix, Every: cfg.EventLog.Interval,
			Timeout: time.Minute, Scope: worker.EveryNode, Run: poller.Follow})
	}
	if cfg.EventLog.HealthInterval <= 0 {
		return poller, nil, tasks, nil
	}
	health, err := eventlog.NewHealth(eventlog.HealthConfig{Caller: g.caller, Stats: poller.Stats(),
		OnChange: eventlog.CapWhileMissing(caps.For(g.name), cfg.Cache.TTLWithoutEventLog),
		Logger:   log.With("component", "eventlog-health")})
	if err != nil {
		return nil, nil, nil, err
	}
	tasks = append(tasks, worker.Task{Name: "eventlog-health" + g.suffix, Every: cfg.EventLog.HealthInterval,
		Timeout: time.Minute, Scope: worker.EveryNode, Run: health.Check})
	return poller, health, tasks, nil
}
