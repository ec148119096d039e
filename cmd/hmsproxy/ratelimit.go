package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/limits/ratelimit"
)

// rateLimitConfig is the ratelimit section: token buckets per client and
// method class. A client is its authenticated identity (Kerberos), or its
// source address when it has none: a set_ugi name is only a claim.
type rateLimitConfig struct {
	Read  limitConfig `yaml:"read" old:"ratelimit-read=rate" doc:"read methods"`
	Write limitConfig `yaml:"write" old:"ratelimit-write=rate" doc:"writes and unknown methods"`
	Other limitConfig `yaml:"other" old:"ratelimit-other=rate" doc:"everything else but set_ugi and setMetaConf"`
	// Users override the classes they name for one authenticated
	// identity (a Kerberos principal's name after kerberos.auth_to_local);
	// the others keep the defaults above. Needs kerberos.enabled.
	Users map[string]userLimitConfig `yaml:"users" key:"identity" doc:"overrides of the classes they name for one authenticated identity (after kerberos.auth_to_local); needs kerberos.enabled" note:"classes it does not name keep the defaults, and rate off (or 0) lifts one; without kerberos.enabled no client has an identity, and the proxy refuses to start rather than key limits on set_ugi claims"`
	// Sources override the classes they name for clients without an
	// authenticated identity, by source address: "10.1.0.0/16" or one
	// address; the longest prefix holding a client's address applies, and
	// each address keeps its own buckets. Useless with kerberos.enabled.
	Sources map[string]userLimitConfig `yaml:"sources" key:"address" doc:"overrides for clients without an authenticated identity, by source address (10.1.0.0/16 or one address; the longest prefix applies)" note:"each address still has buckets of its own; refused with kerberos.enabled, where every client is an identity"`
	// Redis shares each client's buckets across nodes through Redis
	// (calls are allowed while Redis is down).
	Redis bool `yaml:"redis" old:"ratelimit-redis" doc:"share each client's buckets across nodes through Redis; calls are allowed while Redis is down"`
}

type limitConfig struct {
	Rate  float64 `yaml:"rate" off:"no limit" doc:"calls per second per client"`
	Burst int     `yaml:"burst" defdoc:"the rate rounded up" doc:"calls at once"`
}

type userLimitConfig struct {
	Read  *limitConfig `yaml:"read" doc:"read methods"`
	Write *limitConfig `yaml:"write" doc:"writes and unknown methods"`
	Other *limitConfig `yaml:"other" doc:"everything else"`
}

// limit is l for the limiter: off (a negative rate) is its 0, no limit.
func (l limitConfig) limit() ratelimit.Limit {
	return ratelimit.Limit{Rate: max(l.Rate, 0), Burst: l.Burst}
}

// over is def with the classes uc names replaced.
func (uc userLimitConfig) over(def ratelimit.Limits) ratelimit.Limits {
	ls := def
	for c, p := range []*limitConfig{uc.Read, uc.Write, uc.Other} {
		if p != nil {
			ls[c] = p.limit()
		}
	}
	return ls
}

// newLimiter returns nil when no limit is set. authenticated says whether
// clients authenticate (kerberos.enabled): then every client is an
// identity and ratelimit.sources names nobody; else every client is an
// address and ratelimit.users names nobody, and either is refused rather
// than silently not applied.
func newLimiter(cfg rateLimitConfig, authenticated bool, rdb redis.UniversalClient, log *slog.Logger) (*ratelimit.Limiter, error) {
	if len(cfg.Users) > 0 && !authenticated {
		return nil, errors.New("ratelimit.users applies to authenticated identities, and without kerberos.enabled clients have none " +
			"(a set_ugi name is a claim any client can make): limit them by address with ratelimit.sources")
	}
	if len(cfg.Sources) > 0 && authenticated {
		return nil, errors.New("ratelimit.sources applies to clients without an authenticated identity, and with kerberos.enabled every client has one: use ratelimit.users")
	}
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
		users[u] = uc.over(def)
		on = on || limits(users[u])
	}
	var sources []ratelimit.SourceLimits
	for s, uc := range cfg.Sources {
		p, err := parseSource(s)
		if err != nil {
			return nil, err
		}
		sources = append(sources, ratelimit.SourceLimits{Prefix: p, Limits: uc.over(def)})
		on = on || limits(uc.over(def))
	}
	if !on {
		return nil, nil
	}
	rc := ratelimit.Config{Default: def, Users: users, Sources: sources, Logger: log}
	if cfg.Redis {
		if rdb == nil {
			return nil, errors.New("ratelimit.redis needs redis.url")
		}
		rc.Redis = rdb
	}
	return ratelimit.New(rc)
}

// parseSource reads "10.1.0.0/16" or "10.1.2.3" (a prefix of its own).
func parseSource(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("ratelimit.sources: %q is not an address or a prefix (10.1.0.0/16)", s)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("ratelimit.sources: %q is not an address or a prefix (10.1.0.0/16)", s)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("ratelimit.sources: write %q as an IPv4 prefix", s)
	}
	return p.Masked(), nil
}
