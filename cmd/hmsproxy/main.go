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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/admin"
	"github.com/hmsproxy/hmsproxy/auth/sasl"
	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/federation"
	"github.com/hmsproxy/hmsproxy/filter"
	"github.com/hmsproxy/hmsproxy/limits/inflight"
	"github.com/hmsproxy/hmsproxy/limits/ratelimit"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
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

func run(ctx context.Context, cfg fileConfig) error {
	log, err := newLogger(cfg)
	if err != nil {
		return err
	}
	for _, w := range cfg.warnings {
		log.Warn("deprecated: " + w)
	}
	if cfg.strippedUserinfo {
		log.Warn("credentials in an upstream URI were dropped: metastore URIs carry none", "upstreams", cfg.Upstream.URIs)
	}
	clientTransport, err := wire.ParseTransport(cfg.Transport)
	if err != nil {
		return err
	}
	upTransport, err := wire.ParseTransport(cfg.Upstream.Transport)
	if err != nil {
		return err
	}

	if err := cfg.Kerberos.validate(clientTransport, upTransport); err != nil {
		return err
	}
	if cfg.Kerberos.UpstreamPrincipal != "" && !cfg.Kerberos.Enabled {
		log.Warn("kerberos.upstream_principal without kerberos.enabled: clients are not authenticated, " +
			"so every client acts as the proxy's principal at the metastore")
	}
	if cfg.Kerberos.Enabled && len(cfg.Housekeeping.WarmUp) > 0 {
		// the warm-up loads through the proxy's own listener as a set_ugi user
		return errors.New("kerberos: housekeeping.warm_up does not work with kerberos.enabled yet")
	}

	tlsEP := newTLSEndpoints(log.With("component", "tls"))
	defer tlsEP.Close()
	upTLS, err := tlsEP.upstream(cfg.Upstream.TLS)
	if err != nil {
		return err
	}
	upAuth, krbClient, err := cfg.Kerberos.upstreamHandshake(upTLS, cfg.Upstream.DialTimeout, log.With("component", "kerberos"))
	if err != nil {
		return err
	}
	if krbClient != nil {
		defer krbClient.Close()
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

	// One budget for request bytes being read (proxy) and reply bytes
	// being held (upstream), so together they stay within the limit. Its
	// reserve lets one request of the largest legal size finish at a
	// time, so requests whose bytes are claimed as they arrive never
	// wait on each other for good.
	budget := inflight.NewReserving(cfg.Limits.InflightBytes, int64(cfg.Limits.MaxMessageBytes)+4)
	ucfg := upstream.Config{
		URIs:               cfg.Upstream.URIs,
		Transport:          upTransport,
		MaxConns:           cfg.Upstream.MaxConns,
		DialTimeout:        cfg.Upstream.DialTimeout,
		ReadTimeout:        cfg.Upstream.ReadTimeout,
		WriteTimeout:       max(cfg.Upstream.WriteTimeout, 0), // off: none, the library's 0
		IdleTimeout:        cfg.Upstream.IdleTimeout,
		HealthInterval:     cfg.Upstream.HealthInterval,
		AcquireTimeout:     cfg.Upstream.AcquireTimeout,
		ReservedReadConns:  cfg.Upstream.ReservedReadConns,
		HoldMax:            cfg.Upstream.HoldMaxBytes,
		StreamWriteTimeout: cfg.Upstream.StreamWriteTimeout,
		TLS:                upTLS,
		Handshake:          upAuth,
		Budget:             budget,
		Logger:             log.With("component", "upstream"),
	}
	group, err := upstream.New(ucfg)
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
		if cfg.Cache.PerUser {
			log.Warn("cache.per_user (--cache-per-user) is deprecated: it means cache.scope user")
		}
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
	limiter, err := newLimiter(cfg.RateLimit, cfg.Kerberos.Enabled, rdb, log.With("component", "ratelimit"))
	if err != nil {
		return err
	}
	changeStream, err := newChanges(rdb, cfg.groupName(), log)
	if err != nil {
		return err
	}
	// Runs after the proxy's shutdown below: its last writes still land.
	defer closeChanges(changeStream)
	// The proxy's collaborators are given before New, which copies them.
	if caching != nil && bus != nil {
		caching.Coherence = bus
	}
	writes := &writeObservers{changes: changeStream}
	if caching != nil {
		caching.Writes = writes
	}
	var fedGroups []*fedGroup
	var router *federation.Router
	if cfg.Federation.enabled() {
		fedGroups, err = newFederatedGroups(cfg, ucfg, caching, rdb, log)
		defer func() {
			for _, g := range fedGroups {
				g.up.Close()
			}
		}()
		if err != nil {
			return err
		}
		if router, err = newRouter(cfg, group, fedGroups, log); err != nil {
			return err
		}
	}
	pcfg := proxy.Config{
		Transport:  clientTransport,
		Limits:     cfg.requestLimits(),
		MaxClients: cfg.Limits.MaxClients,
		// 0 and negative mean the same here as in the file.
		MaxClientsPerAddress: cfg.Limits.MaxClientsPerAddress,
		Logger:               log.With("component", "proxy"),
		Cache:                caching,

		ReadTimeout:  cfg.Limits.ClientReadTimeout,
		IdleTimeout:  cfg.Limits.ClientIdleTimeout,
		WriteTimeout: cfg.Limits.ClientWriteTimeout,
		Budget:       budget,

		MaxSessionBytes: cfg.Limits.MaxSessionBytes,
	}
	if limiter != nil { // a nil *Limiter in the interface would be called
		pcfg.Limiter = limiter
	}
	if router != nil {
		pcfg.Router = router
		for _, g := range fedGroups {
			pcfg.Federated = append(pcfg.Federated, proxy.Backend{Name: g.cfg.Name, Up: g.up, Cache: g.caching})
		}
	}
	srv, err := proxy.New(pcfg, group)
	if err != nil {
		return err
	}
	plain, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ln := plain
	if ln, err = tlsEP.listener("tls", cfg.TLS, ln); err != nil {
		return errors.Join(err, plain.Close())
	}
	if ln, err = cfg.Kerberos.listener(ln, log.With("component", "kerberos")); err != nil {
		return errors.Join(err, plain.Close())
	}
	uri := "thrift://" + clientAddr(ln.Addr())
	log.Info("hmsproxy listening", "addr", ln.Addr().String(), "transport", clientTransport.String(),
		"upstreams", group.Addrs(), "tls", cfg.TLS.Cert != "", "upstream_tls", upTLS != nil,
		"kerberos", cfg.Kerberos.Enabled, "upstream_kerberos", cfg.Kerberos.UpstreamPrincipal)

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
		log.Info("invalidation bus on", "redis", redisName(cfg), "node", bus.NodeID(), "group", bus.Group())
	}
	// Every group's event-log health check caps the one store's TTLs.
	caps := newTTLCaps(nil)
	if caching != nil {
		caps = newTTLCaps(caching.Store)
	}
	if router != nil {
		stopGroups, err := groupCoherence(cfg, srv, fedGroups, rdb, upTransport, upAuth, caps, log)
		if err != nil {
			srv.Shutdown(context.Background())
			<-errc
			stopGroups()
			return err
		}
		defer stopGroups()
		log.Info("federation on", "primary", cfg.groupName(), "groups", router.GroupNames())
	}
	nodeID := cfg.Redis.NodeID
	if bus != nil {
		nodeID = bus.NodeID()
	}
	var coh proxy.Coherence
	if bus != nil {
		coh = bus
	}
	wk, err := startWorkers(cfg, log, srv, caching, rdb, coh, writes, caps, nodeID, clientAddr(ln.Addr()), upTransport, clientTransport, upAuth)
	if err != nil {
		srv.Shutdown(context.Background())
		<-errc
		return err
	}
	defer wk.Close()

	drain := newDrainer(srv, cfg.drainDelay(), log.With("component", "drain"))
	defer drain.close()
	// The admin port starts after the proxy: a scrape or a flush always
	// finds a proxy to report on.
	krb, _ := ln.(*sasl.Listener) // nil without kerberos.enabled
	adm, aln, err := newAdmin(cfg, log, srv, group, caching, bus, wk, tlsEP, limiter, krb, budget, drain, router, fedGroups)
	if err != nil {
		srv.Shutdown(context.Background())
		<-errc
		return err
	}
	admc := make(chan error, 1)
	adminMsg := ""
	if adm != nil {
		base := "http://" + clientAddr(aln.Addr())
		if cfg.Admin.TLS.Cert != "" {
			base = "https://" + clientAddr(aln.Addr())
		}
		log.Info("admin listening", "addr", aln.Addr().String(), "token", cfg.Admin.Token != "", "tls", cfg.Admin.TLS.Cert != "")
		auth := ""
		if cfg.Admin.Token != "" {
			auth = `-H "Authorization: Bearer $HMSPROXY_ADMIN_TOKEN" `
		}
		adminMsg = fmt.Sprintf("Admin API:\n  %s/metrics  %s/healthz  %s/readyz\n  curl -X POST %s%s/cache/flush/demo_db0/t0\n\n", base, base, base, auth, base)
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
		// Readiness fails first; the listener stays open until the load
		// balancer has had the drain delay to notice, so that no client
		// it still sends here is refused.
		if wait := drain.forShutdown(); wait > 0 {
			log.Info("shutting down: readiness false; the listener closes after the drain delay", "drain_delay", wait)
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case serveErr = <-errc:
				errc <- serveErr
			}
			t.Stop()
		}
	}
	log.Info("shutting down: draining in-flight calls", "timeout", cfg.shutdownTimeout())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout())
	defer cancel()
	// Background work serves no client: it stops first, at once, so that
	// none of it is still waiting on a metastore when the drain ends.
	wk.Close()
	if adm != nil {
		if err := adm.Shutdown(sctx); err != nil {
			log.Warn("admin shutdown", "err", err)
		}
	}
	cut := false
	// A cut write abandons its group's bus (stopped by the deferred
	// calls), so that the peers are not told a clean goodbye.
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown cut off calls in flight", "err", err)
		cut = true
	}
	if err := <-errc; serveErr == nil && !errors.Is(err, proxy.ErrServerClosed) {
		serveErr = err
	}
	if serveErr != nil {
		return serveErr
	}
	if cut {
		return errCallsCut
	}
	log.Info("stopped")
	return nil
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

// newAdmin builds the admin server and binds its port; nil when
// cfg.Admin.Listen is empty.
func newAdmin(cfg fileConfig, log *slog.Logger, srv *proxy.Server, group *upstream.Metastores, caching *proxy.Caching,
	bus *coherence.Bus, wk *workers, tlsEP *tlsEndpoints, limiter *ratelimit.Limiter, krb *sasl.Listener,
	budget *inflight.Budget, drain *drainer, router *federation.Router, fedGroups []*fedGroup) (*admin.Server, net.Listener, error) {
	if cfg.Admin.Listen == "" {
		return nil, nil, nil
	}
	reg := prometheus.NewRegistry()
	if err := registerBuildInfo(reg, readBuildInfo()); err != nil {
		return nil, nil, err
	}
	acfg := admin.Config{
		Logger:         log.With("component", "admin"),
		Registerer:     reg,
		Token:          cfg.Admin.Token,
		DefaultCatalog: cfg.Cache.DefaultCatalog,
		Flusher:        srv,
		Calls:          srv.Stats(),
		Upstreams:      group,
		Clients:        srv,
		Certs:          tlsEP,
		InFlight:       budget,
		Timeouts:       srv.Stats(),
		Drain:          drain,
	}
	if caching != nil {
		acfg.Store = caching.Store
		acfg.Scope = srv
	}
	if bus != nil { // a nil *coherence.Bus in the interface would be called
		acfg.Bus = bus
	}
	if limiter != nil {
		acfg.RateLimit = limiter
	}
	if krb != nil { // a nil *sasl.Listener in the interface would be called
		acfg.Kerberos = krb
	}
	if router != nil {
		acfg.Federation = federationMetrics{router}
		acfg.Groups = adminGroups(cfg, srv, group, bus, wk, fedGroups)
	}
	if wk != nil && wk.runner != nil {
		acfg.Workers = workerStatuses{wk.runner}
	}
	if wk != nil && wk.poller != nil {
		acfg.EventLog = wk.poller
	}
	if wk != nil && wk.warmUp != nil { // a nil pointer in the interface would be called
		acfg.WarmUp = wk.warmUp
	}
	if sh := srv.ShadowStats(); sh != nil { // a nil pointer in the interface would be called
		acfg.Shadow = sh
	}
	adm, err := admin.New(acfg)
	if err != nil {
		return nil, nil, err
	}
	aln, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("admin listen: %w", err)
	}
	tln, err := tlsEP.listener("admin.tls", cfg.Admin.TLS, aln)
	if err != nil {
		return nil, nil, errors.Join(err, aln.Close())
	}
	aln = tln
	if cfg.Admin.Token == "" && !isLoopback(aln.Addr()) {
		log.Warn("admin writes (drain, flush, warm-up) are refused with 403: the admin port listens beyond loopback "+
			"without a token; set admin.token or HMSPROXY_ADMIN_TOKEN to enable them", "addr", aln.Addr().String())
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

// newBus connects the invalidation bus when Redis is configured. Given
// to the proxy as its Coherence, writes publish what they changed before
// replying, and the cache is not served while the node may have missed
// another node's invalidation.
func newBus(cfg fileConfig, rdb redis.UniversalClient, caching *proxy.Caching, log *slog.Logger) (*coherence.Bus, error) {
	if rdb == nil || caching == nil {
		return nil, nil
	}
	bus, err := coherence.New(coherence.Config{Client: rdb, Group: cfg.groupName(), Layout: coherence.Layout(cfg.Upstream.URIs),
		NodeID: cfg.Redis.NodeID, Heartbeat: cfg.Redis.Heartbeat, HeartbeatTimeout: cfg.Redis.HeartbeatTimeout,
		PeerGone: cfg.Redis.PeerGone, Logger: log.With("component", "bus")})
	if err != nil {
		return nil, err
	}
	return bus, nil
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
