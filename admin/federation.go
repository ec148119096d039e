package admin

import "github.com/prometheus/client_golang/prometheus"

// FederationGroup is what the federation counted for one upstream group.
type FederationGroup struct {
	Name string
	// Routed: calls sent to the group alone; Refused: writes its access
	// rule refused; ListingFailures: listings it failed or timed out on;
	// ListingOmitted: listings answered without it (partial results).
	Routed, Refused, ListingFailures, ListingOmitted uint64
}

// Federation is the router of a federated proxy; nil without federation.
type Federation interface {
	FederationGroups() []FederationGroup
}

// federationCollector exports the federation's counters by group, read
// at scrape time. Groups are few and named in the configuration.
type federationCollector struct {
	src                                Federation
	routed, refused, failures, omitted *prometheus.Desc
}

func newFederationCollector(src Federation) *federationCollector {
	g := []string{"group"}
	return &federationCollector{
		src: src,
		routed: prometheus.NewDesc("hmsproxy_federation_calls_total",
			"Calls routed to one upstream group by the database they name (listings not included).", g, nil),
		refused: prometheus.NewDesc("hmsproxy_federation_refused_writes_total",
			"Writes refused by the group's access rule; none reached the metastore.", g, nil),
		failures: prometheus.NewDesc("hmsproxy_federation_listing_failures_total",
			"Listings the group failed or did not answer within the listing timeout.", g, nil),
		omitted: prometheus.NewDesc("hmsproxy_federation_listing_omitted_total",
			"Listings answered without the group (listing_failure: partial).", g, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *federationCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, c.routed, c.refused, c.failures, c.omitted)
}

// Collect implements prometheus.Collector.
func (c *federationCollector) Collect(ch chan<- prometheus.Metric) {
	for _, g := range c.src.FederationGroups() {
		ch <- constMetric(c.routed, prometheus.CounterValue, float64(g.Routed), g.Name)
		ch <- constMetric(c.refused, prometheus.CounterValue, float64(g.Refused), g.Name)
		ch <- constMetric(c.failures, prometheus.CounterValue, float64(g.ListingFailures), g.Name)
		ch <- constMetric(c.omitted, prometheus.CounterValue, float64(g.ListingOmitted), g.Name)
	}
}
