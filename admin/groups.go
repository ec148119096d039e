package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/proxy"
)

// Federation: each upstream group has its own metastores, cache scope,
// bus and event-log poller. /readyz stays about the primary (Config's
// own fields): a dead federated member must not take the node out of its
// load balancer, since every call to another group still works. The
// status, the flush API (?group=) and the hmsproxy_group_* families
// cover every group.

// GroupSurface is one upstream group of a federated proxy on the admin surface.
type GroupSurface struct {
	// Name names the group in ?group=, /status.json and the group label.
	// Required, unique.
	Name string
	// Upstreams is the group's metastores' health. Nil: left out.
	Upstreams Upstreams
	// Flusher invalidates the group's entries only (its writes' way: on
	// this node and on its bus). Nil: flushes of the group answer 501.
	Flusher Flusher
	// Calls counts the calls the group answered alone. Nil: left out.
	Calls GroupCalls
	// Bus is the group's invalidation bus. Nil: no Redis.
	Bus Bus
	// EventLog is the group's notification-log poller. Nil: none.
	EventLog EventLog
}

// GroupCalls counts the calls one group answered alone, by outcome.
type GroupCalls interface {
	GroupCalls(o proxy.Outcome) uint64
}

// groupStatus is one group in /status.json.
type groupStatus struct {
	Name      string            `json:"name"`
	Upstreams []upstreamSnap    `json:"upstreams"` // null: not reported
	Healthy   *bool             `json:"healthy"`   // some metastore of the group is up; null: not reported
	Calls     map[string]uint64 `json:"calls"`     // by outcome; null: not reported
	// HitRatio is hits / (hits + misses + coalesced); null before the
	// group's first cached read.
	HitRatio *float64        `json:"hit_ratio"`
	Bus      *groupBus       `json:"bus"`      // null: no Redis
	EventLog *eventLogStatus `json:"eventlog"` // null: no poller
}

type groupBus struct {
	Connected bool              `json:"connected"`
	Synced    bool              `json:"synced"`
	Losses    map[string]uint64 `json:"losses"`
}

var groupOutcomes = []proxy.Outcome{proxy.OutcomeHit, proxy.OutcomeMiss, proxy.OutcomeCoalesced,
	proxy.OutcomePassthrough, proxy.OutcomeWrite, proxy.OutcomeError}

func takeGroup(g *GroupSurface) groupStatus {
	st := groupStatus{Name: g.Name}
	if u := g.Upstreams; u != nil {
		addrs, healthy := u.Addrs(), u.Healthy()
		st.Upstreams = make([]upstreamSnap, 0, len(addrs))
		up := false
		for i := range min(len(addrs), len(healthy)) {
			st.Upstreams = append(st.Upstreams, upstreamSnap{Addr: addrs[i], Healthy: healthy[i]})
			up = up || healthy[i]
		}
		st.Healthy = &up
	}
	if c := g.Calls; c != nil {
		st.Calls = map[string]uint64{}
		for _, o := range groupOutcomes {
			st.Calls[o.String()] = c.GroupCalls(o)
		}
		hits := st.Calls["hit"]
		if n := hits + st.Calls["miss"] + st.Calls["coalesced"]; n > 0 {
			r := float64(hits) / float64(n)
			st.HitRatio = &r
		}
	}
	if b := g.Bus; b != nil {
		st.Bus = &groupBus{Connected: b.Connected(), Synced: b.Synced(), Losses: map[string]uint64{}}
		b.Stats().Losses.Range(func(k, v any) bool {
			st.Bus.Losses[k.(string)] = v.(interface{ Load() uint64 }).Load()
			return true
		})
	}
	if el := g.EventLog; el != nil {
		es := el.Stats()
		st.EventLog = &eventLogStatus{Health: eventlog.HealthState(es.Health.Load()).String(),
			Latest: es.Latest.Load(), Applied: es.Applied.Load()}
	}
	return st
}

// group is the group named name, nil when there is none.
func (s *Server) group(name string) *GroupSurface {
	for i := range s.cfg.Groups {
		if s.cfg.Groups[i].Name == name {
			return &s.cfg.Groups[i]
		}
	}
	return nil
}

// groupCollector exports every group's health and counts with a group
// label, read at scrape time. Groups are few and named in the
// configuration.
type groupCollector struct {
	groups                                 []GroupSurface
	up, calls, busSynced, elApplied, elLag *prometheus.Desc
	elHealth                               *prometheus.Desc
}

func newGroupCollector(groups []GroupSurface) *groupCollector {
	return &groupCollector{groups: groups,
		up: prometheus.NewDesc("hmsproxy_group_upstream_up",
			"Whether the group's metastore at addr passes its health check (1) or not (0).", []string{"group", "addr"}, nil),
		calls: prometheus.NewDesc("hmsproxy_group_requests_total",
			"Calls the group answered, by outcome; a listing that asks every group counts in each, as its part.", []string{"group", "outcome"}, nil),
		busSynced: prometheus.NewDesc("hmsproxy_group_bus_synced",
			"Whether the group's invalidation bus is connected and caught up (1): its cache is served.", []string{"group"}, nil),
		elApplied: prometheus.NewDesc("hmsproxy_group_eventlog_applied_event_id",
			"The last notification-log event of the group's metastore applied to its cache.", []string{"group"}, nil),
		elLag: prometheus.NewDesc("hmsproxy_group_eventlog_behind_events",
			"Events of the group's notification log not yet applied (latest - applied).", []string{"group"}, nil),
		elHealth: prometheus.NewDesc("hmsproxy_group_eventlog_health",
			"The group's notification log as this node judges it, one series per state, 1 for the current one.", []string{"group", "state"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *groupCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, c.up, c.calls, c.busSynced, c.elApplied, c.elLag, c.elHealth)
}

// Collect implements prometheus.Collector.
func (c *groupCollector) Collect(ch chan<- prometheus.Metric) {
	for i := range c.groups {
		g := &c.groups[i]
		if u := g.Upstreams; u != nil {
			addrs, healthy := u.Addrs(), u.Healthy()
			for j := range min(len(addrs), len(healthy)) {
				ch <- constMetric(c.up, prometheus.GaugeValue, b2f(healthy[j]), g.Name, addrs[j])
			}
		}
		if g.Calls != nil {
			for _, o := range groupOutcomes {
				ch <- constMetric(c.calls, prometheus.CounterValue, float64(g.Calls.GroupCalls(o)), g.Name, o.String())
			}
		}
		if g.Bus != nil {
			ch <- constMetric(c.busSynced, prometheus.GaugeValue, b2f(g.Bus.Synced()), g.Name)
		}
		if g.EventLog != nil {
			es := g.EventLog.Stats()
			latest, applied := es.Latest.Load(), es.Applied.Load()
			ch <- constMetric(c.elApplied, prometheus.GaugeValue, float64(applied), g.Name)
			ch <- constMetric(c.elLag, prometheus.GaugeValue, float64(max(latest-applied, 0)), g.Name)
			cur := eventlog.HealthState(es.Health.Load())
			for _, st := range []eventlog.HealthState{eventlog.HealthUnknown, eventlog.HealthOK, eventlog.HealthMissing} {
				ch <- constMetric(c.elHealth, prometheus.GaugeValue, b2f(st == cur), g.Name, st.String())
			}
		}
	}
}
