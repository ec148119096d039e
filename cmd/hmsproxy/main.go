// Command hmsproxy is a caching proxy for the Hive Metastore Thrift API:
// clients point hive.metastore.uris at it instead of at their metastores.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/coherence"
)

//go:generate sh -c "go run . --print-config-doc > ../../docs/configuration.md"

func main() {
	cl, err := settings.ParseArgs(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err == nil && cl.PrintOnly() {
		err = printOnly(cl, os.Stdout)
		if err == nil {
			return
		}
	}
	var cfg settings.File
	if err == nil {
		cfg, err = cl.Config()
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
		time.AfterFunc(cfg.DrainWait()+cfg.ShutdownWait()+shutdownGrace, func() {
			fmt.Fprintf(os.Stderr, "hmsproxy: shutdown overran its timeout (%v); exiting now\n", cfg.ShutdownWait())
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

// load reads the config: defaults, then the file named by --config (or
// HMSPROXY_CONFIG), then the flags given on the command line.
func load(args []string) (settings.File, error) {
	cl, err := settings.ParseArgs(args, os.Stderr)
	if err != nil {
		return settings.File{}, err
	}
	return cl.Config()
}

// printOnly writes what the command line asked to print: the version,
// the configuration reference or the default config.
func printOnly(cl *settings.Cmdline, w io.Writer) error {
	if cl.Version {
		_, err := fmt.Fprintln(w, readBuildInfo())
		return err
	}
	return cl.Print(w)
}

func newLogger(cfg settings.File) (*slog.Logger, error) {
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

// newRedis connects to Redis when one is configured: one server, a
// Sentinel-managed primary or a Cluster.
func newRedis(cfg settings.File) (redis.UniversalClient, error) {
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
func redisName(cfg settings.File) string {
	r := cfg.Redis
	switch {
	case len(r.Cluster.Addrs) > 0:
		return "cluster " + strings.Join(r.Cluster.Addrs, ",")
	case r.Sentinel.Master != "":
		return "sentinel " + r.Sentinel.Master + "@" + strings.Join(r.Sentinel.Addrs, ",")
	}
	return redact(r.URL)
}
