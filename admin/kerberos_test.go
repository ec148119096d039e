package admin

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hmsproxy/hmsproxy/auth/sasl"
)

type krbStats struct{ st sasl.ListenerStats }

func (k *krbStats) Results() *sasl.ListenerStats { return &k.st }

// TestKerberosMetrics (issue 22): handshakes are counted by result, a
// forged authenticator under its own.
func TestKerberosMetrics(t *testing.T) {
	src := &krbStats{}
	src.st.Handshakes[sasl.ResultAccepted].Add(3)
	src.st.Handshakes[sasl.ResultMismatch].Add(1)
	series, _ := scrape(t, serve(t, Config{Registerer: prometheus.NewRegistry(), Kerberos: src}))
	wantSeries(t, series, map[string]float64{
		`hmsproxy_kerberos_handshakes_total{result="accepted"}`: 3,
		`hmsproxy_kerberos_handshakes_total{result="mismatch"}`: 1,
		`hmsproxy_kerberos_handshakes_total{result="refused"}`:  0,
		`hmsproxy_kerberos_handshakes_total{result="failed"}`:   0,
	})
}
