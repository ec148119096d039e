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
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/filter"
	"github.com/hmsproxy/hmsproxy/internal/admin"
	"github.com/hmsproxy/hmsproxy/internal/demohms"
	"github.com/hmsproxy/hmsproxy/internal/wire"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/upstream"
)

func main() {
	cfg, err := load(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hmsproxy:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "hmsproxy:", err)
		os.Exit(1)
	}
}

func newLogger(cfg fileConfig) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Log.Level)); err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch cfg.Log.Format {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text", "":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("log format must be text or json, got %q", cfg.Log.Format)
}

func run(ctx context.Context, cfg fileConfig) error {
	log, err := newLogger(cfg)
	if err != nil {
		return err
	}
	clientTransport, err := wire.ParseTransport(cfg.Transport)
	if err != nil {
		return err
	}
	upTransport, err := wire.ParseTransport(cfg.Upstream.Transport)
	if err != nil {
		return err
	}

	if cfg.Demo {
		demo := demohms.New(demohms.Config{Transport: upTransport, Logger: log.With("component", "demo-metastore")})
		demo.Seed(3, 4, 240)
		dl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("demo metastore listen: %w", err)
		}
		go demo.Serve(dl)
		defer demo.Close()
		cfg.Upstream.URIs = []string{"thrift://" + dl.Addr().String()}
		log.Info("demo metastore started (a test double, not the product)", "addr", dl.Addr().String())
	}

	group, err := upstream.New(upstream.Config{
		URIs:           cfg.Upstream.URIs,
		Transport:      upTransport,
		MaxConns:       cfg.Upstream.MaxConns,
		DialTimeout:    cfg.Upstream.DialTimeout,
		ReadTimeout:    cfg.Upstream.ReadTimeout,
		WriteTimeout:   cfg.Upstream.WriteTimeout,
		IdleTimeout:    cfg.Upstream.IdleTimeout,
		HealthInterval: cfg.Upstream.HealthInterval,
		Logger:         log.With("component", "upstream"),
	})
	if err != nil {
		return err
	}
	defer group.Close()

	caching, err := newCaching(cfg)
	if err != nil {
		return err
	}
	if caching != nil {
		defer caching.Store.Close()
	}
	rdb, err := newRedis(cfg)
	if err != nil {
		return err
	}
	if rdb != nil {
		defer rdb.Close()
	}
	bus, err := newBus(cfg, rdb, caching, log)
	if err != nil {
		return err
	}
	srv, err := proxy.New(proxy.Config{
		Transport:  clientTransport,
		Limits:     wire.Limits{MaxMessage: cfg.Limits.MaxMessageBytes, MaxDepth: cfg.Limits.MaxDepth},
		MaxClients: cfg.Limits.MaxClients,
		Logger:     log.With("component", "proxy"),
		Cache:      caching,
	}, group)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	uri := "thrift://" + clientAddr(ln.Addr())
	log.Info("hmsproxy listening", "addr", ln.Addr().String(), "transport", clientTransport.String(),
		"upstreams", group.Addrs())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if bus != nil {
		busCtx, stopBus := context.WithCancel(context.Background())
		busDone := make(chan struct{})
		go func() {
			defer close(busDone)
			if err := bus.Run(busCtx, srv); !errors.Is(err, context.Canceled) {
				log.Error("invalidation bus stopped", "err", err)
			}
		}()
		defer func() { stopBus(); <-busDone }()
		log.Info("invalidation bus on", "redis", cfg.Redis.URL, "node", bus.NodeID(), "group", bus.Group())
	}
	nodeID := cfg.Redis.NodeID
	if bus != nil {
		nodeID = bus.NodeID()
	}
	wk, err := startWorkers(cfg, log, srv, caching, rdb, nodeID, clientAddr(ln.Addr()), upTransport, clientTransport)
	if err != nil {
		srv.Shutdown(context.Background())
		<-errc
		return err
	}
	defer wk.Close()

	// The admin port starts after the proxy: a scrape or a flush always
	// finds a proxy to report on.
	adm, aln, err := newAdmin(cfg, log, srv, group, caching, bus, wk)
	if err != nil {
		srv.Shutdown(context.Background())
		<-errc
		return err
	}
	admc := make(chan error, 1)
	adminMsg := ""
	if adm != nil {
		base := "http://" + clientAddr(aln.Addr())
		log.Info("admin listening", "addr", aln.Addr().String(), "token", cfg.Admin.Token != "")
		auth := ""
		if cfg.Admin.Token != "" {
			auth = `-H "Authorization: Bearer $HMSPROXY_ADMIN_TOKEN" `
		}
		adminMsg = fmt.Sprintf("Admin API:\n  %s/metrics  %s/healthz\n  curl -X POST %s%s/cache/flush/demo_db0/t0\n\n", base, base, auth, base)
		go func() { admc <- adm.Serve(aln) }()
	}
	fmt.Fprintf(os.Stderr, "\nhmsproxy is ready. Point clients at it:\n  hive.metastore.uris=%s\n  e.g. go run ./cmd/hmscli -uri %s databases\n\n%s", uri, uri, adminMsg)

	var serveErr error
	select {
	case serveErr = <-errc:
		errc <- serveErr // for the drain below
	case err := <-admc:
		log.Error("admin server stopped; shutting down", "err", err)
		serveErr = fmt.Errorf("admin: %w", err)
		adm = nil
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight calls", "timeout", cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if adm != nil {
		if err := adm.Shutdown(sctx); err != nil {
			log.Warn("admin shutdown", "err", err)
		}
	}
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown", "err", err)
	}
	if err := <-errc; serveErr == nil && !errors.Is(err, proxy.ErrServerClosed) {
		serveErr = err
	}
	if serveErr != nil {
		return serveErr
	}
	log.Info("stopped")
	return nil
}

// newAdmin builds the admin server and binds its port; nil when
// cfg.Admin.Listen is empty.
func newAdmin(cfg fileConfig, log *slog.Logger, srv *proxy.Server, group *upstream.Group, caching *proxy.Caching,
	bus *coherence.Bus, wk *workers) (*admin.Server, net.Listener, error) {
	if cfg.Admin.Listen == "" {
		return nil, nil, nil
	}
	acfg := admin.Config{
		Logger:         log.With("component", "admin"),
		Registerer:     prometheus.NewRegistry(),
		Token:          cfg.Admin.Token,
		DefaultCatalog: cfg.Cache.DefaultCatalog,
		Flusher:        srv,
		Calls:          srv.Stats(),
		Upstreams:      group,
		Clients:        srv,
	}
	if caching != nil {
		acfg.Store = caching.Store
	}
	if bus != nil { // a nil *coherence.Bus in the interface would be called
		acfg.Bus = bus
	}
	if wk != nil && wk.runner != nil {
		acfg.Workers = workerStatuses{wk.runner}
	}
	if wk != nil && wk.poller != nil {
		acfg.EventLog = wk.poller
	}
	adm, err := admin.New(acfg)
	if err != nil {
		return nil, nil, err
	}
	aln, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("admin listen: %w", err)
	}
	if cfg.Admin.Token == "" && !isLoopback(aln.Addr()) {
		log.Warn("the admin flush API is open to the network: set admin.token or HMSPROXY_ADMIN_TOKEN", "addr", aln.Addr().String())
	}
	return adm, aln, nil
}

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
	return &proxy.Caching{
		Store:          store,
		Upstream:       cfg.groupName(),
		PerUser:        cfg.Cache.PerUser,
		DefaultCatalog: cfg.Cache.DefaultCatalog,
		Policy:         policy,
		RefreshWorkers: cfg.Cache.RefreshWorkers,
	}, nil
}

// newBus connects the invalidation bus when Redis is configured: writes
// publish what they changed and wait for the peers before replying, and
// the cache is not served while the node may have missed another node's
// invalidation.
func newBus(cfg fileConfig, rdb *redis.Client, caching *proxy.Caching, log *slog.Logger) (*coherence.Bus, error) {
	if rdb == nil || caching == nil {
		return nil, nil
	}
	bus, err := coherence.New(coherence.Config{Client: rdb, Group: cfg.groupName(), Layout: coherence.Layout(cfg.Upstream.URIs),
		NodeID: cfg.Redis.NodeID, Heartbeat: cfg.Redis.Heartbeat, HeartbeatTimeout: cfg.Redis.HeartbeatTimeout,
		PeerGone: cfg.Redis.PeerGone, Logger: log.With("component", "bus")})
	if err != nil {
		return nil, err
	}
	caching.Synced = bus.Synced
	caching.Invalidated = func(ctx context.Context, ents []cache.Entity) {
		if err := bus.Publish(ctx, ents); err != nil {
			// Bounded by the heartbeat timeout; the peers that did not
			// apply it stopped serving their caches by now.
			log.Warn("invalidation not confirmed by every peer", "err", err)
		}
	}
	return bus, nil
}

// newRedis connects to Redis when one is configured.
func newRedis(cfg fileConfig) (*redis.Client, error) {
	if cfg.Redis.URL == "" {
		return nil, nil
	}
	opts, err := coherence.ParseRedisURL(cfg.Redis.URL)
	if err != nil {
		return nil, err
	}
	if pw := os.Getenv("HMSPROXY_REDIS_PASSWORD"); pw != "" {
		opts.Password = pw
	}
	opts.MaxRetries = -1 // a lost connection must surface, not be papered over
	return redis.NewClient(opts), nil
}
