package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hmsproxy/hmsproxy/auth/sasl"
)

// KerberosSource is the Kerberos client listener; *sasl.Listener
// implements it.
type KerberosSource interface {
	Results() *sasl.ListenerStats
}

// kerberosCollector exports the listener's handshake outcomes at scrape
// time. Principals are not a label: the listener logs who was refused.
type kerberosCollector struct {
	src        KerberosSource
	handshakes *prometheus.Desc
}

func newKerberosCollector(src KerberosSource) *kerberosCollector {
	return &kerberosCollector{src: src,
		handshakes: prometheus.NewDesc("hmsproxy_kerberos_handshakes_total",
			"Client SASL/GSSAPI handshakes by result: accepted; mismatch (the authenticator named another principal than the ticket, a forgery); "+
				"refused (credentials: expired, another service, no identity); mechanism (not GSSAPI); authzid (asked to act as another user); "+
				"failed (broken framing, no common protection, timeout, closed).",
			[]string{"result"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *kerberosCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.handshakes }

// Collect implements prometheus.Collector.
func (c *kerberosCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Results()
	for r := sasl.Result(0); r < sasl.NumResults; r++ {
		ch <- constMetric(c.handshakes, prometheus.CounterValue, float64(st.Handshakes[r].Load()), r.String())
	}
}
