package main

import (
	"errors"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/internal/ratelimit"
)

// rateLimitConfig is the ratelimit section: token buckets per client
// identity (set_ugi user) and method class.
type rateLimitConfig struct {
	Read  limitConfig `yaml:"read"`  // -ratelimit-read: calls/s of read methods per user; 0 none
	Write limitConfig `yaml:"write"` // -ratelimit-write: writes and unknown methods
	Other limitConfig `yaml:"other"` // -ratelimit-other: everything else but set_ugi/setMetaConf
	// Users override the classes they name for one identity; the others
	// keep the defaults above.
	Users map[string]userLimitConfig `yaml:"users"`
	// Redis shares each user's buckets across nodes through redis.url
	// (-ratelimit-redis); calls are allowed while Redis is down.
	Redis bool `yaml:"redis"`
}

type limitConfig struct {
	Rate  float64 `yaml:"rate"`  // calls per second; 0: no limit
	Burst int     `yaml:"burst"` // default: the rate rounded up
}

type userLimitConfig struct {
	Read  *limitConfig `yaml:"read"`
	Write *limitConfig `yaml:"write"`
	Other *limitConfig `yaml:"other"`
}

func (l limitConfig) limit() ratelimit.Limit { return ratelimit.Limit{Rate: l.Rate, Burst: l.Burst} }

// newLimiter returns nil when no limit is set.
func newLimiter(cfg rateLimitConfig, rdb redis.UniversalClient, log *slog.Logger) (*ratelimit.Limiter, error) {
	var def ratelimit.Limits
	def[ratelimit.ClassRead], def[ratelimit.ClassWrite], def[ratelimit.ClassOther] =
		cfg.Read.limit(), cfg.Write.limit(), cfg.Other.limit()
	limits := func(ls ratelimit.Limits) bool {
		for _, l := range ls {
			if l.Rate != 0 {
				return true
			}
		}
		return false
	}
	on := limits(def)
	users := map[string]ratelimit.Limits{}
	for u, uc := range cfg.Users {
		ls := def
		for c, p := range []*limitConfig{uc.Read, uc.Write, uc.Other} {
			if p != nil {
				ls[c] = p.limit()
			}
		}
		users[u] = ls
		on = on || limits(ls)
	}
	if !on {
		return nil, nil
	}
	rc := ratelimit.Config{Default: def, Users: users, Logger: log}
	if cfg.Redis {
		if rdb == nil {
			return nil, errors.New("ratelimit.redis needs redis.url")
		}
		rc.Redis = rdb
	}
	return ratelimit.New(rc)
}
