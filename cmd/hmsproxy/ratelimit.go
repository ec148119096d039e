package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/limits/ratelimit"
)

// limitOf is l for the limiter: off (a negative rate) is its 0, no limit.
func limitOf(l settings.Limit) ratelimit.Limit {
	return ratelimit.Limit{Rate: max(l.Rate, 0), Burst: l.Burst}
}

// over is def with the classes uc names replaced.
func over(uc settings.UserLimit, def ratelimit.Limits) ratelimit.Limits {
	ls := def
	for c, p := range []*settings.Limit{uc.Read, uc.Write, uc.Other} {
		if p != nil {
			ls[c] = limitOf(*p)
		}
	}
	return ls
}

// newLimiter returns nil when no limit is set. authenticated says whether
// clients authenticate (kerberos.enabled): then every client is an
// identity and ratelimit.sources names nobody; else every client is an
// address and ratelimit.users names nobody, and either is refused rather
// than silently not applied.
func newLimiter(cfg settings.RateLimit, authenticated bool, rdb redis.UniversalClient, log *slog.Logger) (*ratelimit.Limiter, error) {
	if len(cfg.Users) > 0 && !authenticated {
		return nil, errors.New("ratelimit.users applies to authenticated identities, and without kerberos.enabled clients have none " +
			"(a set_ugi name is a claim any client can make): limit them by address with ratelimit.sources")
	}
	if len(cfg.Sources) > 0 && authenticated {
		return nil, errors.New("ratelimit.sources applies to clients without an authenticated identity, and with kerberos.enabled every client has one: use ratelimit.users")
	}
	var def ratelimit.Limits
	def[ratelimit.ClassRead], def[ratelimit.ClassWrite], def[ratelimit.ClassOther] =
		limitOf(cfg.Read), limitOf(cfg.Write), limitOf(cfg.Other)
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
		users[u] = over(uc, def)
		on = on || limits(users[u])
	}
	var sources []ratelimit.SourceLimits
	for s, uc := range cfg.Sources {
		p, err := parseSource(s)
		if err != nil {
			return nil, err
		}
		sources = append(sources, ratelimit.SourceLimits{Prefix: p, Limits: over(uc, def)})
		on = on || limits(over(uc, def))
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
