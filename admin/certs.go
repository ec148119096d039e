package admin

import (
	"crypto/tls"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hmsproxy/hmsproxy/auth/certs"
)

// CertSource lists the TLS endpoints' certificate counters; the proxy
// binary's set of certs.Reloaders implements it.
type CertSource interface {
	CertStats() []certs.Stats
}

// certCollector exports the TLS reloaders' counters at scrape time.
type certCollector struct {
	src                              CertSource
	reloads, expiry, handshakeFailed *prometheus.Desc
}

func newCertCollector(src CertSource) *certCollector {
	ep := []string{"endpoint"}
	return &certCollector{
		src: src,
		reloads: prometheus.NewDesc("hmsproxy_tls_reloads_total",
			"Reloads of a TLS endpoint's certificate files after they changed (or on SIGHUP), by result: success, or failure (the previous certificate stays in use).",
			[]string{"endpoint", "result"}, nil),
		expiry: prometheus.NewDesc("hmsproxy_tls_certificate_expiry_timestamp_seconds",
			"Unix time at which the certificate in use by a TLS endpoint expires.", ep, nil),
		handshakeFailed: prometheus.NewDesc("hmsproxy_tls_handshake_failures_total",
			"Client TLS handshakes a listener refused or that failed (wrong or missing client certificate, plain-text client, timeout).", ep, nil),
	}
}

func (c *certCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, c.reloads, c.expiry, c.handshakeFailed)
}

func (c *certCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.src.CertStats() {
		ch <- constMetric(c.reloads, prometheus.CounterValue, float64(st.Reloads), st.Name, "success")
		ch <- constMetric(c.reloads, prometheus.CounterValue, float64(st.Failures), st.Name, "failure")
		if !st.NotAfter.IsZero() {
			ch <- constMetric(c.expiry, prometheus.GaugeValue, float64(st.NotAfter.Unix()), st.Name)
			ch <- constMetric(c.handshakeFailed, prometheus.CounterValue, float64(st.HandshakeFailures), st.Name)
		}
	}
}

// caller describes who made an admin request, for the log of flushes and
// configuration changes: the remote address, how it authenticated
// ("bearer-token", "none" or "refused"; a token itself is never logged)
// and, over mutual TLS, the subject of its verified client certificate.
func caller(r *http.Request, auth string) []any {
	attrs := []any{"remote", r.RemoteAddr, "auth", auth}
	if cn := clientCert(r.TLS); cn != "" {
		attrs = append(attrs, "client_cert", cn)
	}
	return attrs
}

// authName is how requests that reached a handler behind authorised
// proved themselves.
func (s *Server) authName() string {
	if s.cfg.Token != "" {
		return "bearer-token"
	}
	return "none"
}

func clientCert(cs *tls.ConnectionState) string {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return ""
	}
	return cs.VerifiedChains[0][0].Subject.String()
}
