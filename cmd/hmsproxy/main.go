// Command hmsproxy is a caching proxy for the Hive Metastore Thrift API:
// clients point hive.metastore.uris at it instead of at their metastores.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/filter"
	"github.com/hmsproxy/hmsproxy/proxy"
)

func main() {
	cl, err := parseArgs(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err == nil && cl.printOnly() {
		err = cl.print(os.Stdout)
		if err == nil {
			return
		}
	}
	var cfg fileConfig
	if err == nil {
		cfg, err = cl.config()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hmsproxy:", redact(err.Error()))
		os.Exit(exitConfig)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// Everything in run honours cancellation, so the process stops within
	// the timeout whatever the metastores do; this is the guarantee should
	// some part ever not. It is armed here, by the signal, and not in run:
	// tests call run in-process, and a timer left behind would end them.
	context.AfterFunc(ctx, func() {
		time.AfterFunc(cfg.drainDelay()+cfg.shutdownTimeout()+shutdownGrace, func() {
			fmt.Fprintf(os.Stderr, "hmsproxy: shutdown overran its timeout (%v); exiting now\n", cfg.shutdownTimeout())
			os.Exit(exitCallsCut)
		})
	})
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "hmsproxy:", redact(err.Error()))
		if errors.Is(err, errCallsCut) {
			os.Exit(exitCallsCut)
		}
		os.Exit(exitError)
	}
}

func newLogger(cfg fileConfig) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Log.Level)); err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	// Every record passes the redactor: a secret in a URL (a Redis
	// password) never reaches the log, whatever part logs it.
	switch cfg.Log.Format {
	case "json":
		return slog.New(redactingHandler{slog.NewJSONHandler(os.Stderr, opts)}), nil
	case "text", "":
		return slog.New(redactingHandler{slog.NewTextHandler(os.Stderr, opts)}), nil
	}
	return nil, fmt.Errorf("log format must be text or json, got %q", cfg.Log.Format)
}

// Exit statuses: 0 after a clean stop, 1 on an error, 2 for bad flags or
// config, 3 when shutdown_timeout cut off calls in flight.
const (
	exitError    = 1
	exitConfig   = 2
	exitCallsCut = 3
)

// shutdownGrace is how long past shutdown_timeout the process may take
// to close what remains before it exits regardless.
const shutdownGrace = 900 * time.Millisecond

// errCallsCut reports a shutdown that cut off calls in flight.
var errCallsCut = errors.New("stopped, but shutdown_timeout cut off calls in flight")

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// clientAddr turns a wildcard listen address into one a local client can
// dial.
func clientAddr(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok || !ta.IP.IsUnspecified() {
		return a.String()
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(ta.Port))
}

func newCaching(cfg fileConfig) (*proxy.Caching, error) {
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
		Upstream:       cfg.groupName(),
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

// newRedis connects to Redis when one is configured: one server, a
// Sentinel-managed primary or a Cluster.
func newRedis(cfg fileConfig) (redis.UniversalClient, error) {
	r := cfg.Redis
	// A lost connection must surface, not be papered over: the bus
	// flushes on it.
	const maxRetries = -1
	switch {
	case len(r.Cluster.Addrs) > 0:
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: r.Cluster.Addrs, Password: r.Password,
			MaxRetries: maxRetries}), nil
	case r.Sentinel.Master != "":
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: r.Sentinel.Master,
			SentinelAddrs: r.Sentinel.Addrs, SentinelPassword: r.Sentinel.Password, Password: r.Password,
			MaxRetries: maxRetries}), nil
	case r.URL != "":
		opts, err := coherence.ParseRedisURL(r.URL)
		if err != nil {
			return nil, err
		}
		if r.Password != "" {
			opts.Password = r.Password
		}
		opts.MaxRetries = maxRetries
		return redis.NewClient(opts), nil
	}
	return nil, nil
}

// redisName says which Redis a node uses, for its logs.
func redisName(cfg fileConfig) string {
	r := cfg.Redis
	switch {
	case len(r.Cluster.Addrs) > 0:
		return "cluster " + strings.Join(r.Cluster.Addrs, ",")
	case r.Sentinel.Master != "":
		return "sentinel " + r.Sentinel.Master + "@" + strings.Join(r.Sentinel.Addrs, ",")
	}
	return redact(r.URL)
}
