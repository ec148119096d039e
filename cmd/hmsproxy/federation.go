package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/admin"
	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/coherence/leader"
	"github.com/hmsproxy/hmsproxy/federation"
	"github.com/hmsproxy/hmsproxy/ops/housekeeping"
	"github.com/hmsproxy/hmsproxy/ops/worker"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// federationConfig puts several metastore groups behind the listener:
// the primary (upstream.*) and the federated groups. Absent: one group,
// as before. File only.
type federationConfig struct {
	// DatabaseResolution: manual (each federated group lists its
	// databases) or prefixed. Default manual.
	DatabaseResolution string `yaml:"database_resolution" defdoc:"manual" doc:"manual (each federated group lists its databases) or prefixed"`
	// ListingTimeout bounds each group's part of a listing that asks
	// every group (get_all_databases, get_databases, get_table_meta,
	// get_all_functions). Default 10s.
	ListingTimeout time.Duration `yaml:"listing_timeout" defdoc:"10s" doc:"bound on each group's part of a listing that asks every group"`
	// ListingFailure: fail (a group that fails or times out fails the
	// listing with a MetaException naming it) or partial (it is left out,
	// counted and logged). Default fail.
	ListingFailure string `yaml:"listing_failure" defdoc:"fail" doc:"fail (a group that fails or times out fails the listing) or partial (it is left out, counted and logged)"`
	// Primary is the access rule of the primary group (upstream.*).
	Primary struct {
		Access            string   `yaml:"access" defdoc:"read-write" doc:"read-only, read-write or read-write-on-listed"`
		WritableDatabases []string `yaml:"writable_databases" doc:"with read-write-on-listed: the databases it may write"`
	} `yaml:"primary" doc:"the access rule of the primary group (upstream.*)"`
	Federated []federatedGroupConfig `yaml:"federated" doc:"the federated groups"`
}

// federatedGroupConfig is one federated group. Every upstream.* setting
// but uris and name applies to it as to the primary.
type federatedGroupConfig struct {
	// Name names the group in Redis keys, cache keys, metrics and the
	// messages clients get. Required, unique.
	Name string   `yaml:"name" doc:"names the group in Redis keys, cache keys, metrics and messages; required, unique"`
	URIs []string `yaml:"uris" doc:"its metastores, in failover order"`
	// Databases it serves (manual): names or patterns (glob, re:).
	Databases []string `yaml:"databases" doc:"manual: the databases it serves, names or patterns (glob, re:)"`
	// Access: read-only (default), read-write, read-write-on-listed.
	Access            string   `yaml:"access" defdoc:"read-only" doc:"read-only, read-write or read-write-on-listed"`
	WritableDatabases []string `yaml:"writable_databases" doc:"with read-write-on-listed: the databases it may write"`
	// Prefix (prefixed mode): how its databases are seen by clients.
	Prefix string `yaml:"prefix" doc:"prefixed: how its databases are seen by clients"`
	// DatabaseNameMapping: client name → the metastore's name.
	DatabaseNameMapping map[string]string `yaml:"database_name_mapping" doc:"client name to the metastore's name"`
}

// enabled reports whether any federated group is configured.
func (f federationConfig) enabled() bool { return len(f.Federated) > 0 }

// fedGroup is a federated group running: its pools, cache and the
// machinery that keeps that cache coherent.
type fedGroup struct {
	cfg     federatedGroupConfig
	up      *upstream.Metastores
	caching *proxy.Caching
	bus     *coherence.Bus
	poller  *eventlog.Poller // its event-log poller, nil when off; set by groupCoherence
	// writes feeds its event-log health check the writes through the
	// proxy to its metastore (attached by groupCoherence).
	writes *writeObservers
}

// newFederatedGroups builds each federated group's upstream and cache
// settings (its own Upstream name, its own bus). The caller closes them.
func newFederatedGroups(cfg fileConfig, base upstream.Config, primary *proxy.Caching, rdb redis.UniversalClient, log *slog.Logger) ([]*fedGroup, error) {
	var out []*fedGroup
	names := map[string]bool{cfg.groupName(): true}
	for i, fc := range cfg.Federation.Federated {
		if fc.Name == "" {
			return out, fmt.Errorf("federation.federated[%d]: no name", i)
		}
		if names[fc.Name] {
			return out, fmt.Errorf("federation.federated[%d]: name %q is already a group's (upstream.name included)", i, fc.Name)
		}
		names[fc.Name] = true
		if len(fc.URIs) == 0 {
			return out, fmt.Errorf("federation.federated[%d] (%s): no uris", i, fc.Name)
		}
		uc := base
		uc.URIs = fc.URIs
		uc.Logger = log.With("component", "upstream", "group", fc.Name)
		up, err := upstream.New(uc)
		if err != nil {
			return out, fmt.Errorf("federation group %s: %w", fc.Name, err)
		}
		g := &fedGroup{cfg: fc, up: up, writes: &writeObservers{}}
		out = append(out, g)
		if primary != nil {
			c := *primary
			c.Upstream = fc.Name
			// The change-event stream is the primary's alone (README).
			c.Coherence, c.Writes = nil, g.writes
			c.Policy = clientPolicy(c.Policy, cfg.Federation, fc)
			g.caching = &c
			if rdb != nil {
				g.bus, err = coherence.New(coherence.Config{Client: rdb, Group: fc.Name, Layout: coherence.Layout(fc.URIs),
					NodeID: cfg.Redis.NodeID, Heartbeat: cfg.Redis.Heartbeat, HeartbeatTimeout: cfg.Redis.HeartbeatTimeout,
					PeerGone: cfg.Redis.PeerGone, Logger: log.With("component", "bus", "group", fc.Name)})
				if err != nil {
					return out, err
				}
				c.Coherence = g.bus
			}
		}
	}
	return out, nil
}

// newRouter compiles the federation's routing over the running groups.
func newRouter(cfg fileConfig, primary *upstream.Metastores, groups []*fedGroup, log *slog.Logger) (*federation.Router, error) {
	fed := cfg.Federation
	mode, err := federation.ParseMode(fed.DatabaseResolution)
	if err != nil {
		return nil, err
	}
	pacc, err := federation.ParseAccess(fed.Primary.Access)
	if err != nil {
		return nil, fmt.Errorf("federation.primary: %w", err)
	}
	partial := false
	switch strings.ToLower(fed.ListingFailure) {
	case "", "fail":
	case "partial":
		partial = true
	default:
		return nil, fmt.Errorf("federation.listing_failure must be fail or partial, got %q", fed.ListingFailure)
	}
	fc := federation.Config{Mode: mode, ListingTimeout: fed.ListingTimeout, Partial: partial, Limits: cfg.requestLimits(),
		Logger: log.With("component", "federation"),
		Groups: []federation.Member{{Name: cfg.groupName(), Up: primary, Access: pacc, WritableDatabases: fed.Primary.WritableDatabases}}}
	for _, g := range groups {
		acc, err := federation.ParseAccess(g.cfg.Access)
		if err != nil {
			return nil, fmt.Errorf("federation group %s: %w", g.cfg.Name, err)
		}
		fc.Groups = append(fc.Groups, federation.Member{Name: g.cfg.Name, Up: g.up, Databases: g.cfg.Databases,
			Access: acc, WritableDatabases: g.cfg.WritableDatabases, Prefix: g.cfg.Prefix, Aliases: g.cfg.DatabaseNameMapping})
	}
	return federation.New(fc)
}

// groupCoherence runs, for each federated group, what keeps its cache in
// step: its invalidation bus and its event-log poller (on the holder of
// the group's own Redis lease, or here without Redis). The returned stop
// ends them all; on an error it ends what was started, and the caller
// calls it once the server takes no more calls, so that no write
// reaches a group whose bus has already said goodbye.
func groupCoherence(cfg fileConfig, srv *proxy.Server, groups []*fedGroup, rdb redis.UniversalClient, upTransport wire.Transport,
	upAuth func(context.Context, net.Conn, string) (net.Conn, error), caps *ttlCaps, log *slog.Logger) (func(), error) {
	var stops []func()
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	for i, g := range groups {
		gc := srv.FederatedCache(i + 1)
		if gc == nil {
			continue
		}
		glog := log.With("group", g.cfg.Name)
		nodeID := cfg.Redis.NodeID
		if g.bus != nil {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				if err := g.bus.Run(ctx, gc); !errors.Is(err, context.Canceled) {
					glog.Error("invalidation bus stopped", "err", err)
				}
			}()
			stops = append(stops, func() { cancel(); <-done })
			nodeID = g.bus.NodeID()
		}
		if cfg.EventLog.Interval <= 0 {
			continue
		}
		var lead worker.Leadership = leader.Solo{}
		var el *leader.Elector
		if rdb != nil {
			var stopLeader func()
			var err error
			if el, stopLeader, err = runLeader(rdb, g.cfg.Name, nodeID, glog); err != nil {
				return stop, err
			}
			stops = append(stops, stopLeader)
			lead = el
		}
		var addrs []string
		for _, u := range g.cfg.URIs {
			addrs = append(addrs, strings.TrimPrefix(u, "thrift://"))
		}
		caller, err := housekeeping.NewClient(housekeeping.ClientConfig{Addrs: addrs, Transport: upTransport,
			User: cfg.Housekeeping.User, Handshake: upAuth, Logger: glog.With("component", "housekeeping")})
		if err != nil {
			return stop, err
		}
		stops = append(stops, func() { caller.Close() })
		// As the primary's; a member without a log caps the TTLs of the
		// shared store.
		var groupSynced func() bool
		if g.bus != nil {
			groupSynced = g.bus.Synced
		}
		poller, health, tasks, err := eventLogTasks(cfg, eventLogGroup{name: g.cfg.Name, caller: caller, rdb: rdb, lease: el,
			catalog: g.caching.DefaultCatalog, flush: gc.Flush, suffix: ":" + g.cfg.Name, synced: groupSynced}, caps, glog)
		if err != nil {
			return stop, err
		}
		g.poller = poller
		if health != nil {
			g.writes.health.Store(health)
		}
		runner, err := worker.New(worker.Config{Leadership: lead, LeaderCheck: 100 * time.Millisecond,
			Logger: glog.With("component", "workers")}, tasks...)
		if err != nil {
			return stop, err
		}
		runner.Start()
		stops = append(stops, runner.Close)
	}
	return stop, nil
}

// federationMetrics shows the router's counters on the admin port.
type federationMetrics struct{ r *federation.Router }

func (f federationMetrics) FederationGroups() []admin.FederationGroup {
	var out []admin.FederationGroup
	for _, g := range f.r.Counts() {
		out = append(out, admin.FederationGroup{Name: g.Name, Routed: g.Routed, Refused: g.Refused,
			ListingFailures: g.ListingFailures, ListingOmitted: g.ListingOmitted})
	}
	return out
}

// adminGroups are every group on the admin surface, the primary first:
// its status, metrics and ?group= flushes.
func adminGroups(cfg fileConfig, srv *proxy.Server, primary *upstream.Metastores, bus *coherence.Bus, wk *workers, groups []*fedGroup) []admin.GroupSurface {
	p := admin.GroupSurface{Name: cfg.groupName(), Upstreams: primary, Flusher: srv, Calls: groupCalls{srv, 0}}
	if bus != nil { // a nil pointer in the interface would be called
		p.Bus = bus
	}
	if wk != nil && wk.poller != nil {
		p.EventLog = wk.poller
	}
	out := []admin.GroupSurface{p}
	for i, g := range groups {
		ag := admin.GroupSurface{Name: g.cfg.Name, Upstreams: g.up, Calls: groupCalls{srv, i + 1}}
		if gc := srv.FederatedCache(i + 1); gc != nil {
			ag.Flusher = gc
		}
		if g.bus != nil {
			ag.Bus = g.bus
		}
		if g.poller != nil {
			ag.EventLog = g.poller
		}
		out = append(out, ag)
	}
	return out
}

// groupCalls counts one group's calls for the admin surface.
type groupCalls struct {
	srv *proxy.Server
	i   int
}

func (g groupCalls) GroupCalls(o proxy.Outcome) uint64 { return g.srv.GroupCalls(g.i, o) }

// ttlCaps combines the TTL caps that several groups' event-log health
// checks ask of the one store they share: the shortest cap asked holds,
// so one group's log found again never lifts the cap another's missing
// log needs.
type ttlCaps struct {
	store eventlog.TTLCapper // nil: no cache
	mu    sync.Mutex         // guards asks
	asks  map[string]time.Duration
}

func newTTLCaps(store eventlog.TTLCapper) *ttlCaps {
	return &ttlCaps{store: store, asks: map[string]time.Duration{}}
}

// For is what group name's health check caps the store through.
func (c *ttlCaps) For(name string) eventlog.TTLCapper { return capAsk{c, name} }

type capAsk struct {
	c    *ttlCaps
	name string
}

func (a capAsk) SetTTLCap(d time.Duration) {
	c := a.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asks[a.name] = d
	var least time.Duration
	for _, v := range c.asks {
		if v > 0 && (least == 0 || v < least) {
			least = v
		}
	}
	if c.store != nil {
		c.store.SetTTLCap(least)
	}
}

// clientNames is a never-cache policy, written in the names clients use,
// applied to a group whose calls reach the cache renamed (prefixed mode,
// database_name_mapping): the cache sees the metastore's names, which
// the operator's patterns do not.
type clientNames struct {
	inner  proxy.Allower
	prefix string            // prefixed mode: the group's prefix
	alias  map[string]string // the metastore's name → the client's, lower-cased
}

func (p clientNames) Allowed(db, table string) bool {
	if a, ok := p.alias[strings.ToLower(db)]; ok {
		return p.inner.Allowed(a, table)
	}
	return p.inner.Allowed(p.prefix+db, table)
}

// clientPolicy is the policy of federated group fc's cache: the
// primary's, in the names its clients use.
func clientPolicy(pol proxy.Allower, fed federationConfig, fc federatedGroupConfig) proxy.Allower {
	prefixed := strings.EqualFold(fed.DatabaseResolution, "prefixed")
	if pol == nil || (!prefixed && len(fc.DatabaseNameMapping) == 0) {
		return pol
	}
	p := clientNames{inner: pol, alias: map[string]string{}}
	if prefixed {
		p.prefix = fc.Prefix
	}
	for client, local := range fc.DatabaseNameMapping {
		p.alias[strings.ToLower(local)] = strings.ToLower(client)
	}
	return p
}
