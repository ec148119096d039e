package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hmsproxy/hmsproxy/admin"
	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/coherence/leader"
	"github.com/hmsproxy/hmsproxy/federation"
	"github.com/hmsproxy/hmsproxy/ops/housekeeping"
	"github.com/hmsproxy/hmsproxy/ops/worker"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// metastoreGroup is one group of metastores behind the listener: the
// primary (group 0, upstream.*) or a federated one. Each has its pools,
// its cache settings and the machinery that keeps that cache coherent.
type metastoreGroup struct {
	name    string
	uris    []string
	fed     *settings.FederatedGroup // nil for the primary
	up      *upstream.Metastores
	caching *proxy.Caching // nil without a cache
	bus     *coherence.Bus // nil without Redis or a cache
	// writes feeds the group's event-log health check (and, for the
	// primary, the change-event stream) the writes through the proxy.
	writes *writeObservers
	poller *eventlog.Poller // nil when off; set by startGroupWorkers
}

// suffix ends the names of the group's tasks: "" for the primary.
func (g *metastoreGroup) suffix() string {
	if g.fed == nil {
		return ""
	}
	return ":" + g.name
}

// logger is the node's log for the group's component ("": none).
func (g *metastoreGroup) logger(n *node, component string) *slog.Logger {
	log := n.log
	if g.fed != nil {
		log = log.With("group", g.name)
	}
	if component != "" {
		log = log.With("component", component)
	}
	return log
}

// newGroups builds every group: the primary, then the federated groups,
// each with its upstream pools, its cache settings (the primary's, under
// its own name) and its bus. The node closes them.
func (n *node) newGroups(base upstream.Config, caching *proxy.Caching) error {
	cfg := n.cfg
	n.groups = []*metastoreGroup{{name: cfg.GroupName(), uris: cfg.Upstream.URIs, writes: &writeObservers{changes: n.changes}}}
	names := map[string]bool{cfg.GroupName(): true}
	for i := range cfg.Federation.Federated {
		fc := &cfg.Federation.Federated[i]
		switch {
		case fc.Name == "":
			return fmt.Errorf("federation.federated[%d]: no name", i)
		case names[fc.Name]:
			return fmt.Errorf("federation.federated[%d]: name %q is already a group's (upstream.name included)", i, fc.Name)
		case len(fc.URIs) == 0:
			return fmt.Errorf("federation.federated[%d] (%s): no uris", i, fc.Name)
		}
		names[fc.Name] = true
		n.groups = append(n.groups, &metastoreGroup{name: fc.Name, uris: fc.URIs, fed: fc, writes: &writeObservers{}})
	}
	for _, g := range n.groups {
		if err := n.buildGroup(g, base, caching); err != nil {
			return err
		}
	}
	return nil
}

// buildGroup connects group g's pools, cache settings and bus.
func (n *node) buildGroup(g *metastoreGroup, base upstream.Config, caching *proxy.Caching) error {
	uc := base
	uc.URIs = g.uris
	uc.Logger = g.logger(n, "upstream")
	up, err := upstream.New(uc)
	if err != nil {
		if g.fed != nil {
			err = fmt.Errorf("federation group %s: %w", g.name, err)
		}
		return err
	}
	g.up = up
	n.onClose(func() { up.Close() })
	if caching == nil {
		return nil
	}
	c := *caching
	c.Upstream, c.Writes = g.name, g.writes
	if g.fed != nil {
		c.Policy = clientPolicy(c.Policy, n.cfg.Federation, *g.fed)
	}
	g.caching = &c
	if n.rdb == nil {
		return nil
	}
	r := n.cfg.Redis
	g.bus, err = coherence.New(coherence.Config{Client: n.rdb, Group: g.name, Layout: coherence.Layout(g.uris),
		NodeID: r.NodeID, Heartbeat: r.Heartbeat, HeartbeatTimeout: r.HeartbeatTimeout,
		PeerGone: r.PeerGone, Logger: g.logger(n, "bus")})
	if err != nil {
		return err
	}
	// Given to the proxy as its Coherence, writes publish what they
	// changed before replying, and the cache is not served while the
	// node may have missed another node's invalidation.
	c.Coherence = g.bus
	return nil
}

// cacheOf is group i's cache as the bus, the event log and the admin
// flushes reach it: the server itself for the primary. Nil without a
// cache.
func (n *node) cacheOf(i int) groupCache {
	if i == 0 {
		if n.groups[0].caching == nil {
			return nil
		}
		return n.srv
	}
	if gc := n.srv.FederatedCache(i); gc != nil { // a nil pointer in the interface would be called
		return gc
	}
	return nil
}

// groupCache is what keeps a group's cache coherent: the methods of
// proxy.Server for the primary, of proxy.GroupCache for the others.
type groupCache interface {
	coherence.Cache
	Flush(context.Context, []cache.Entity) error
}

// runBuses runs each group's invalidation bus; they stop when the node
// closes, after the server takes no more calls, so that no write reaches
// a group whose bus has already said goodbye.
func (n *node) runBuses() {
	for i, g := range n.groups {
		gc := n.cacheOf(i)
		if g.bus == nil || gc == nil {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		glog := g.logger(n, "bus")
		go func() {
			defer close(done)
			if err := g.bus.Run(ctx, gc); !errors.Is(err, context.Canceled) {
				glog.Error("invalidation bus stopped", "err", err)
			}
		}()
		n.onClose(func() { cancel(); <-done })
		glog.Info("invalidation bus on", "redis", redisName(n.cfg), "node", g.bus.NodeID(), "group", g.bus.Group())
	}
}

// nodeID is this node's name on group g's bus.
func (n *node) nodeID(g *metastoreGroup) string {
	if g.bus != nil {
		return g.bus.NodeID()
	}
	return n.cfg.Redis.NodeID
}

// startGroupWorkers starts group i's background work on w: its
// event-log poller and health check, and for the primary the
// housekeeping tasks and the warm-up. Cluster-singleton tasks run on the
// holder of the group's Redis lease, or on this node without Redis.
func (n *node) startGroupWorkers(w *workers, i int) error {
	g := n.groups[i]
	gc := n.cacheOf(i)
	evlog := gc != nil && n.cfg.EventLog.Interval > 0
	if i > 0 && !evlog {
		return nil
	}
	var lead worker.Leadership = leader.Solo{}
	var el *leader.Elector
	if n.rdb != nil {
		var stop func()
		var err error
		if el, stop, err = runLeader(n.rdb, g.name, n.nodeID(g), g.logger(n, "")); err != nil {
			return err
		}
		w.closers = append(w.closers, stop)
		lead = el
	}
	var tasks []worker.Task
	if evlog {
		evTasks, err := n.eventLogTasks(w, g, gc, el)
		if err != nil {
			return err
		}
		tasks = append(tasks, evTasks...)
	}
	if i == 0 {
		w.elector = el
		more, err := n.housekeepingTasks(w)
		if err != nil {
			return err
		}
		tasks = append(tasks, more...)
		if more, err = n.feedTasks(w, g, el); err != nil {
			return err
		}
		tasks = append(tasks, more...)
	}
	if len(tasks) == 0 {
		return nil
	}
	// A new leader's poller starts within LeaderCheck of the election:
	// short, so that a hand-over stays well inside the one second the
	// staleness bound allows beyond the poll interval. The check is a
	// local read of the elector's state.
	runner, err := worker.New(worker.Config{Leadership: lead, LeaderCheck: 100 * time.Millisecond,
		Logger: g.logger(n, "workers")}, tasks...)
	if err != nil {
		return err
	}
	runner.Start()
	if i == 0 {
		w.runner = runner // on the admin port
	} else {
		w.closers = append(w.closers, runner.Close)
	}
	return nil
}

// housekeepingClient is a metastore client of the workers for group g.
func (n *node) housekeepingClient(w *workers, g *metastoreGroup) (*housekeeping.Client, error) {
	var addrs []string
	for _, u := range g.uris {
		addrs = append(addrs, strings.TrimPrefix(u, "thrift://"))
	}
	c, err := housekeeping.NewClient(housekeeping.ClientConfig{Addrs: addrs, Transport: n.upTransport,
		User: n.cfg.Housekeeping.User, Handshake: n.upAuth, Logger: g.logger(n, "housekeeping")})
	if err == nil {
		w.closers = append(w.closers, func() { c.Close() })
	}
	return c, err
}

// newRouter compiles the federation's routing over the groups.
func (n *node) newRouter() (*federation.Router, error) {
	fed := n.cfg.Federation
	mode, err := federation.ParseMode(fed.DatabaseResolution)
	if err != nil {
		return nil, err
	}
	partial := false
	switch strings.ToLower(fed.ListingFailure) {
	case "", "fail":
	case "partial":
		partial = true
	default:
		return nil, fmt.Errorf("federation.listing_failure must be fail or partial, got %q", fed.ListingFailure)
	}
	fc := federation.Config{Mode: mode, ListingTimeout: fed.ListingTimeout, Partial: partial, Limits: n.cfg.RequestLimits(),
		Logger: n.log.With("component", "federation")}
	for _, g := range n.groups {
		fg := federation.Member{Name: g.name, Up: g.up}
		access, writable := fed.Primary.Access, fed.Primary.WritableDatabases
		if g.fed != nil {
			access, writable = g.fed.Access, g.fed.WritableDatabases
			fg.Databases, fg.Prefix, fg.Aliases = g.fed.Databases, g.fed.Prefix, g.fed.DatabaseNameMapping
		}
		if fg.Access, err = federation.ParseAccess(access); err != nil {
			if g.fed == nil {
				return nil, fmt.Errorf("federation.primary: %w", err)
			}
			return nil, fmt.Errorf("federation group %s: %w", g.name, err)
		}
		fg.WritableDatabases = writable
		fc.Groups = append(fc.Groups, fg)
	}
	return federation.New(fc)
}

// adminGroups are every group on the admin surface, the primary first:
// its status, metrics and ?group= flushes.
func (n *node) adminGroups() []admin.GroupSurface {
	var out []admin.GroupSurface
	for i, g := range n.groups {
		ag := admin.GroupSurface{Name: g.name, Upstreams: g.up, Calls: groupCalls{n.srv, i}}
		if i == 0 {
			ag.Flusher = n.srv
		} else if gc := n.srv.FederatedCache(i); gc != nil {
			ag.Flusher = gc
		}
		if g.bus != nil { // a nil pointer in the interface would be called
			ag.Bus = g.bus
		}
		if g.poller != nil {
			ag.EventLog = g.poller
		}
		out = append(out, ag)
	}
	return out
}
