package main

import (
	"strings"
	"sync"
	"time"

	"github.com/hmsproxy/hmsproxy/admin"
	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/federation"
	"github.com/hmsproxy/hmsproxy/proxy"
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
