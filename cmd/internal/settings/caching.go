package settings

import (
	"fmt"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/filter"
	"github.com/hmsproxy/hmsproxy/proxy"
)

// NewCaching builds the proxy's cache from the cache section, with the
// event-log interval (a shadow mismatch waits a poll for its
// invalidation) and the flush budget of the limits section: hmsproxy's
// caching, and hmsbench replay's from the same file. Nil when the cache
// is off.
func NewCaching(cfg File) (*proxy.Caching, error) {
	if !cfg.Cache.Enabled {
		return nil, nil
	}
	kinds, err := cfg.Cache.kinds()
	if err != nil {
		return nil, err
	}
	store, err := cache.New(cache.Config{MaxBytes: cfg.Cache.MaximumBytes, Kinds: kinds})
	if err != nil {
		return nil, err
	}
	policy, err := filter.Compile(cfg.Cache.Allow, cfg.Cache.Deny)
	if err != nil {
		store.Close()
		return nil, err
	}
	scope, err := proxy.ParseScopeMode(cfg.Cache.Scope)
	if err != nil {
		store.Close()
		return nil, err
	}
	if r := cfg.Cache.Shadow.Rate; r > 1 {
		store.Close()
		return nil, fmt.Errorf("cache.shadow.rate must be within 0 and 1 (or off), got %v", r)
	}
	shadow := proxy.Shadow{Rate: cfg.Cache.Shadow.Rate, MaxPerSecond: cfg.Cache.Shadow.MaxPerSecond, Grace: -1}
	if shadow.Rate <= 0 {
		shadow.Rate = -1 // off, as the proxy spells it
	}
	if cfg.EventLog.Interval > 0 {
		// A direct write shows in the event log by the next poll; until
		// then a difference is not a mismatch.
		shadow.Grace = cfg.EventLog.Interval + time.Second
	}
	return &proxy.Caching{
		Store:          store,
		Upstream:       cfg.GroupName(),
		Scope:          scope,
		ScopeInterval:  cfg.Cache.ScopeInterval,
		PerUser:        cfg.Cache.PerUser,
		DefaultCatalog: cfg.Cache.DefaultCatalog,
		Policy:         policy,
		RefreshWorkers: cfg.Cache.RefreshWorkers,
		KnownReads:     cfg.Cache.KnownReads,
		PruneOff:       cfg.Cache.Prune != nil && !*cfg.Cache.Prune,
		Shadow:         shadow,
		TTLUnlogged:    cfg.Cache.TTLWithoutEventLog,
		UnloggedWrites: cfg.Cache.UnloggedWrites,
		UserScopeTTL:   cfg.Cache.UserScopeTTL,
		Flushes: proxy.FlushBudget{Burst: cfg.Limits.FlushBurst, Rate: cfg.Limits.FlushRate,
			Interval: cfg.Limits.FlushInterval},
	}, nil
}

// kinds resolves the per-kind cache policies: defaults, then the global
// settings, then the per-kind overrides.
func (c Cache) kinds() ([cache.NumKinds]cache.KindConfig, error) {
	o := cache.Overrides{TTL: c.TTL, RefreshAfter: c.RefreshInterval,
		NoNegative: c.CacheMissing != nil && !*c.CacheMissing, Kinds: map[string]cache.KindOverride{}}
	for name, k := range c.Kinds {
		// off (negative): not cached, no refresh-ahead
		o.Kinds[name] = cache.KindOverride{TTL: k.TTL, RefreshAfter: k.RefreshInterval, Negative: k.CacheMissing}
	}
	return o.Resolve()
}
