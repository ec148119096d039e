package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hmsproxy/hmsproxy/limits/ratelimit"
)

// RateLimits is the per-client rate limiter; *ratelimit.Limiter implements it.
type RateLimits interface {
	Stats() *ratelimit.Stats
}

// rateLimitCollector exports the limiter's counters, read at scrape time.
// Clients are not a label: there may be any number of them (the limiter
// logs who was limited).
type rateLimitCollector struct {
	src                           RateLimits
	allowed, limited, redisErrors *prometheus.Desc
}

func newRateLimitCollector(src RateLimits) *rateLimitCollector {
	class := []string{"class"}
	return &rateLimitCollector{
		src: src,
		allowed: prometheus.NewDesc("hmsproxy_ratelimit_allowed_total",
			"Calls a per-user rate limit let through, by method class (read, write, other).", class, nil),
		limited: prometheus.NewDesc("hmsproxy_ratelimit_limited_total",
			"Calls refused because their client (authenticated identity, else source address) was over the rate limit, by method class; each got a MetaException.", class, nil),
		redisErrors: prometheus.NewDesc("hmsproxy_ratelimit_redis_errors_total",
			"Calls allowed without a limit because Redis failed (the limiter fails open).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *rateLimitCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, c.allowed, c.limited, c.redisErrors)
}

// Collect implements prometheus.Collector.
func (c *rateLimitCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats()
	for k := ratelimit.Class(0); k < ratelimit.NumClasses; k++ {
		ch <- constMetric(c.allowed, prometheus.CounterValue, float64(st.Allowed[k].Load()), k.String())
		ch <- constMetric(c.limited, prometheus.CounterValue, float64(st.Limited[k].Load()), k.String())
	}
	ch <- constMetric(c.redisErrors, prometheus.CounterValue, float64(st.RedisErrors.Load()))
}
