package admin

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hmsproxy/hmsproxy/limits/inflight"
	"github.com/hmsproxy/hmsproxy/proxy"
)

type fakeTimeouts [3]uint64

func (f fakeTimeouts) ClientTimeouts(t proxy.ClientTimeout) uint64 { return f[t] }

// ClientsShed makes it a ShedStats too: 10 plus the reason's number.
func (f fakeTimeouts) ClientsShed(r proxy.ShedReason) uint64 { return 10 + uint64(r) }

// The in-flight budget and the client deadlines are visible to the
// operator (#9).
func TestInFlightMetrics(t *testing.T) {
	b := inflight.New(1000)
	if !b.TryAcquire(600) {
		t.Fatal("claim refused")
	}
	reg := prometheus.NewRegistry()
	if _, err := New(Config{Registerer: reg, InFlight: b, Timeouts: fakeTimeouts{3, 4, 5}}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			switch {
			case m.Gauge != nil:
				got[name] = m.GetGauge().GetValue()
			case m.Counter != nil:
				got[name] = m.GetCounter().GetValue()
			}
		}
	}
	wantSeries(t, got, map[string]float64{
		"hmsproxy_inflight_bytes":              600,
		"hmsproxy_inflight_limit_bytes":        1000,
		"hmsproxy_inflight_waits_total":        0,
		"hmsproxy_client_timeouts_total/read":  3,
		"hmsproxy_client_timeouts_total/idle":  4,
		"hmsproxy_client_timeouts_total/write": 5,
		// Issue 22: connections shed at the connection limits.
		"hmsproxy_client_connections_shed_total/idle_evicted": 10,
		"hmsproxy_client_connections_shed_total/max_clients":  11,
		"hmsproxy_client_connections_shed_total/per_address":  12,
	})
}
