package main

import (
	"strings"
	"sync"
	"time"

	"github.com/hmsproxy/hmsproxy/admin"
	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/federation"
	"github.com/hmsproxy/hmsproxy/proxy"
)

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
func clientPolicy(pol proxy.Allower, fed settings.Federation, fc settings.FederatedGroup) proxy.Allower {
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
