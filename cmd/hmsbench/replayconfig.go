package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/filter"
	"github.com/hmsproxy/hmsproxy/proxy"
)

// replayFile is what replay reads of an hmsproxy config file: the cache
// section, which decides what the proxy answers itself. Its keys and
// defaults are hmsproxy's (docs/configuration.md); the other sections
// (listeners, Redis, limits, TLS, ...) change nothing of what is cached
// in a single in-process replay, and are not read. TestReplayConfigKeys
// keeps the keys in step with hmsproxy's.
type replayFile struct {
	Cache struct {
		Enabled         *bool    `yaml:"enabled"`
		MaximumBytes    int64    `yaml:"maximum_bytes"`
		TTL             string   `yaml:"ttl"`
		RefreshInterval string   `yaml:"refresh_interval"`
		CacheMissing    *bool    `yaml:"cache_missing"`
		Scope           string   `yaml:"scope"`
		DefaultCatalog  string   `yaml:"default_catalog"`
		Allow           []string `yaml:"allow"`
		Deny            []string `yaml:"deny"`
		RefreshWorkers  int      `yaml:"refresh_workers"`
		Prune           *bool    `yaml:"prune"`
		KnownReads      []string `yaml:"known_reads"`
		UserScopeTTL    string   `yaml:"user_scope_ttl"`
		Shadow          struct {
			Rate         string `yaml:"rate"`
			MaxPerSecond int    `yaml:"max_per_second"`
		} `yaml:"shadow"`
		Kinds map[string]struct {
			TTL             string `yaml:"ttl"`
			RefreshInterval string `yaml:"refresh_interval"`
			CacheMissing    *bool  `yaml:"cache_missing"`
		} `yaml:"kinds"`
	} `yaml:"cache"`
}

// ignoredCacheKeys are the keys of hmsproxy's cache section that replay
// does not read, with the reason.
var ignoredCacheKeys = map[string]string{
	"cache.scope_interval":       "the scope is checked once per replay",
	"cache.per_user":             "deprecated: write cache.scope user",
	"cache.ttl_without_eventlog": "a replay runs no event-log poller",
	"cache.unlogged_writes":      "a replay runs no event-log poller",
}

// readReplayConfig reads path (empty: every default) as the proxy's cache.
func readReplayConfig(path string, warn io.Writer) (func() (*proxy.Caching, error), error) {
	var f replayFile
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("--config %s: %w", path, err)
		}
	}
	c := f.Cache
	if c.Enabled != nil && !*c.Enabled {
		fmt.Fprintln(warn, "replay: cache.enabled is false in --config: the proxy pass caches nothing")
		return nil, nil
	}
	kinds, err := replayKinds(&f)
	if err != nil {
		return nil, err
	}
	policy, err := filter.Compile(c.Allow, c.Deny)
	if err != nil {
		return nil, err
	}
	scope, err := proxy.ParseScopeMode(c.Scope)
	if err != nil {
		return nil, err
	}
	shadow := proxy.Shadow{Rate: 0.001, MaxPerSecond: 20, Grace: -1} // hmsproxy's defaults
	if c.Shadow.Rate != "" {
		if strings.EqualFold(c.Shadow.Rate, "off") {
			shadow.Rate = -1
		} else if _, err := fmt.Sscan(c.Shadow.Rate, &shadow.Rate); err != nil {
			return nil, fmt.Errorf("cache.shadow.rate: %q is not a number", c.Shadow.Rate)
		}
	}
	if c.Shadow.MaxPerSecond > 0 {
		shadow.MaxPerSecond = c.Shadow.MaxPerSecond
	}
	userTTL, err := offDuration("cache.user_scope_ttl", c.UserScopeTTL)
	if err != nil {
		return nil, err
	}
	if userTTL == 0 {
		userTTL = 30 * time.Second // hmsproxy's default
	}
	maxBytes := c.MaximumBytes
	if maxBytes <= 0 {
		maxBytes = 512 << 20
	}
	return func() (*proxy.Caching, error) {
		store, err := cache.New(cache.Config{MaxBytes: maxBytes, Kinds: kinds})
		if err != nil {
			return nil, err
		}
		return &proxy.Caching{Store: store, Upstream: "replay", Scope: scope, DefaultCatalog: c.DefaultCatalog,
			Policy: policy, RefreshWorkers: c.RefreshWorkers, KnownReads: c.KnownReads,
			PruneOff: c.Prune != nil && !*c.Prune, Shadow: shadow, UserScopeTTL: userTTL}, nil
	}, nil
}

// replayKinds resolves the per-kind policies as hmsproxy does: defaults,
// then the section-wide settings, then the per-kind ones.
func replayKinds(f *replayFile) ([cache.NumKinds]cache.KindConfig, error) {
	var none [cache.NumKinds]cache.KindConfig
	c := f.Cache
	o := cache.Overrides{NoNegative: c.CacheMissing != nil && !*c.CacheMissing, Kinds: map[string]cache.KindOverride{}}
	var err error
	if o.TTL, err = offDuration("cache.ttl", c.TTL); err != nil {
		return none, err
	}
	if o.RefreshAfter, err = offDuration("cache.refresh_interval", c.RefreshInterval); err != nil {
		return none, err
	}
	for name, k := range c.Kinds {
		ko := cache.KindOverride{Negative: k.CacheMissing}
		if ko.TTL, err = optDuration("cache.kinds."+name+".ttl", k.TTL); err != nil {
			return none, err
		}
		if ko.RefreshAfter, err = optDuration("cache.kinds."+name+".refresh_interval", k.RefreshInterval); err != nil {
			return none, err
		}
		o.Kinds[name] = ko
	}
	return o.Resolve()
}

// optDuration is offDuration of a setting that may be left out: nil.
func optDuration(key, s string) (*time.Duration, error) {
	if s == "" {
		return nil, nil
	}
	d, err := offDuration(key, s)
	return &d, err
}

// offDuration reads a duration or off (-1); "" is 0, the default.
func offDuration(key, s string) (time.Duration, error) {
	switch {
	case s == "":
		return 0, nil
	case strings.EqualFold(s, "off"), s == "0":
		return -1, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration", key, s)
	}
	return d, nil
}
