package admin

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hmsproxy/hmsproxy/limits/ratelimit"
)

// TestRateLimitMetrics (issue 14): refused calls are counted by class.
func TestRateLimitMetrics(t *testing.T) {
	var d ratelimit.Limits
	d[ratelimit.ClassWrite] = ratelimit.Limit{Rate: 0.001, Burst: 1}
	lim, err := ratelimit.New(ratelimit.Config{Default: d})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		lim.Allow(context.Background(), ratelimit.Caller{User: "bob"}, ratelimit.ClassWrite)
	}
	series, _ := scrape(t, serve(t, Config{Registerer: prometheus.NewRegistry(), RateLimit: lim}))
	wantSeries(t, series, map[string]float64{
		`hmsproxy_ratelimit_allowed_total{class="write"}`: 1,
		`hmsproxy_ratelimit_limited_total{class="write"}`: 2,
		`hmsproxy_ratelimit_limited_total{class="read"}`:  0,
		`hmsproxy_ratelimit_redis_errors_total`:           0,
	})
}
