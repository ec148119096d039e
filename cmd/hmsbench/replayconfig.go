package main

import (
	"fmt"
	"io"

	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/proxy"
)

// replayUndoes are the settings of an hmsproxy config file that the
// cache of an in-process replay does not take from it, with the reason
// and what is set instead. The file is read by hmsproxy's own loader
// (its keys, defaults, the rule for 0 and off, unknown keys refused) and
// the cache built by hmsproxy's own code, so a changed default reaches
// the replay; the sections that build no part of the cache (listeners,
// Redis, TLS, Kerberos, housekeeping, ...) are read and checked, and
// change nothing.
var replayUndoes = []struct {
	key, why string
	undo     func(*proxy.Caching)
}{
	{"cache.ttl_without_eventlog", "a replay runs no event-log poller", func(c *proxy.Caching) { c.TTLUnlogged = 0 }},
	{"cache.unlogged_writes", "a replay runs no event-log poller", func(c *proxy.Caching) { c.UnloggedWrites = nil }},
	{"eventlog.interval", "a replay runs no event-log poller, so a shadow mismatch waits for no invalidation from it",
		func(c *proxy.Caching) { c.Shadow.Grace = -1 }},
}

// readReplayConfig reads path (empty: every default) as hmsproxy does,
// for the proxy's cache.
func readReplayConfig(path string, warn io.Writer) (func() (*proxy.Caching, error), error) {
	cfg, err := settings.Load(path, nil)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(warn, "replay: --config:", w)
	}
	if !cfg.Cache.Enabled {
		fmt.Fprintln(warn, "replay: cache.enabled is false in --config: the proxy pass caches nothing")
		return nil, nil
	}
	// Built once now, so that a setting the cache refuses (a bad allow
	// pattern, a shadow rate above 1) fails before the replay starts.
	c, err := replayCaching(cfg)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	c.Store.Close()
	return func() (*proxy.Caching, error) { return replayCaching(cfg) }, nil
}

// replayCaching is hmsproxy's cache of cfg, less what a replay undoes.
func replayCaching(cfg settings.File) (*proxy.Caching, error) {
	c, err := settings.NewCaching(cfg)
	if err != nil || c == nil {
		return c, err
	}
	c.Upstream = "replay"
	for _, u := range replayUndoes {
		u.undo(c)
	}
	return c, nil
}
