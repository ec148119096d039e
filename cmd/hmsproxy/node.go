package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/admin"
	"github.com/hmsproxy/hmsproxy/auth/sasl"
	"github.com/hmsproxy/hmsproxy/changes"
	"github.com/hmsproxy/hmsproxy/changes/kafka"
	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/federation"
	"github.com/hmsproxy/hmsproxy/limits/inflight"
	"github.com/hmsproxy/hmsproxy/limits/ratelimit"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/trace"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// node is one proxy process's parts, in the order run builds them.
type node struct {
	cfg             settings.File
	log             *slog.Logger
	clientTransport wire.Transport
	upTransport     wire.Transport
	tlsEP           *tlsEndpoints
	upTLS           func() *tls.Config
	upAuth          func(context.Context, net.Conn, string) (net.Conn, error)
	budget          *inflight.Budget
	rdb             redis.UniversalClient // nil without Redis
	changes         *changes.Stream       // nil without Redis
	feed            *kafka.Feed           // nil without change_feed.kafka.brokers
	limiter         *ratelimit.Limiter    // nil without a limit
	groups          []*metastoreGroup     // [0] is the primary
	router          *federation.Router    // nil without federated groups
	srv             *proxy.Server
	ln              net.Listener
	caps            *ttlCaps
	wk              *workers
	drain           *drainer
	recorder        *trace.Recorder // nil without record

	closers []func() // run in reverse by close
}

// onClose has close run f, before what was registered earlier.
func (n *node) onClose(f func()) { n.closers = append(n.closers, f) }

// close stops what the node started, last first.
func (n *node) close() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		n.closers[i]()
	}
}

// coherence is the primary's bus as the proxy takes it; nil without one.
func (n *node) coherence() proxy.Coherence {
	if b := n.groups[0].bus; b != nil {
		return b
	}
	return nil
}

func run(ctx context.Context, cfg settings.File) error {
	n := &node{cfg: cfg}
	defer n.close()
	if err := n.setUp(); err != nil {
		return err
	}
	if err := n.build(); err != nil {
		return err
	}
	if err := n.listen(); err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- n.srv.Serve(n.ln) }()
	adm, aln, err := n.start()
	if err != nil {
		n.srv.Shutdown(context.Background())
		<-errc
		return err
	}
	return n.serve(ctx, errc, adm, aln)
}

// setUp checks the settings that need each other, and starts the
// logger, TLS, Kerberos toward the metastores and the demo metastore.
func (n *node) setUp() error {
	cfg := &n.cfg
	log, err := newLogger(*cfg)
	if err != nil {
		return err
	}
	n.log = log
	for _, w := range cfg.Warnings {
		log.Warn("deprecated: " + w)
	}
	if cfg.StrippedUserinfo {
		log.Warn("credentials in an upstream URI were dropped: metastore URIs carry none", "upstreams", cfg.Upstream.URIs)
	}
	if n.clientTransport, err = wire.ParseTransport(cfg.Transport); err != nil {
		return err
	}
	if n.upTransport, err = wire.ParseTransport(cfg.Upstream.Transport); err != nil {
		return err
	}
	if err := n.checkKerberos(); err != nil {
		return err
	}
	n.tlsEP = newTLSEndpoints(log.With("component", "tls"))
	n.onClose(n.tlsEP.Close)
	if n.upTLS, err = n.tlsEP.upstream(cfg.Upstream.TLS); err != nil {
		return err
	}
	upAuth, krbClient, err := kerberosConfig(cfg.Kerberos).upstreamHandshake(n.upTLS, cfg.Upstream.DialTimeout, log.With("component", "kerberos"))
	if err != nil {
		return err
	}
	n.upAuth = upAuth
	if krbClient != nil {
		n.onClose(func() { krbClient.Close() })
	}
	if cfg.Demo {
		return n.startDemo()
	}
	return nil
}

func (n *node) checkKerberos() error {
	k := kerberosConfig(n.cfg.Kerberos)
	if err := k.validate(n.clientTransport, n.upTransport); err != nil {
		return err
	}
	if k.UpstreamPrincipal != "" && !k.Enabled {
		n.log.Warn("kerberos.upstream_principal without kerberos.enabled: clients are not authenticated, " +
			"so every client acts as the proxy's principal at the metastore")
	}
	if k.Enabled && len(n.cfg.Housekeeping.WarmUp) > 0 {
		// the warm-up loads through the proxy's own listener as a set_ugi user
		return errors.New("kerberos: housekeeping.warm_up does not work with kerberos.enabled yet")
	}
	return nil
}

// startDemo starts the demo metastore and makes it the upstream.
func (n *node) startDemo() error {
	demo := demohms.New(demohms.Config{Transport: n.upTransport, Logger: n.log.With("component", "demo-metastore")})
	demo.Seed(3, 4, 240)
	dl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("demo metastore listen: %w", err)
	}
	go demo.Serve(dl)
	n.onClose(func() { demo.Close() })
	n.cfg.Upstream.URIs = []string{"thrift://" + dl.Addr().String()}
	n.log.Info("demo metastore started (a test double, not the product)", "addr", dl.Addr().String())
	return nil
}

// build connects what the proxy is given at construction, then the
// proxy: the cache, Redis and its users, the groups and their router.
func (n *node) build() error {
	cfg := n.cfg
	// One budget for request bytes being read (proxy) and reply bytes
	// being held (upstream), so together they stay within the limit. Its
	// reserve lets one request of the largest legal size finish at a
	// time, so requests whose bytes are claimed as they arrive never
	// wait on each other for good.
	n.budget = inflight.NewReserving(cfg.Limits.InflightBytes, int64(cfg.Limits.MaxMessageBytes)+4)
	caching, err := settings.NewCaching(cfg)
	if err != nil {
		return err
	}
	if caching != nil {
		n.onClose(func() { caching.Store.Close() })
		if cfg.Cache.PerUser {
			n.log.Warn("cache.per_user (--cache-per-user) is deprecated: it means cache.scope user")
		}
	}
	if n.rdb, err = newRedis(cfg); err != nil {
		return err
	}
	if n.rdb != nil {
		n.onClose(func() { n.rdb.Close() })
	}
	if n.limiter, err = newLimiter(cfg.RateLimit, cfg.Kerberos.Enabled, n.rdb, n.log.With("component", "ratelimit")); err != nil {
		return err
	}
	if n.changes, err = newChanges(n.rdb, cfg.GroupName(), n.log); err != nil {
		return err
	}
	// Runs after the proxy's shutdown: its last writes still land.
	n.onClose(func() { closeChanges(n.changes) })
	if err := n.newGroups(n.upstreamConfig(), caching); err != nil {
		return err
	}
	if err := n.newFeed(); err != nil {
		return err
	}
	if cfg.Federation.Enabled() {
		if n.router, err = n.newRouter(); err != nil {
			return err
		}
	}
	if err := n.newRecorder(); err != nil {
		return err
	}
	return n.newServer()
}

// upstreamConfig is every group's upstream settings but its URIs.
func (n *node) upstreamConfig() upstream.Config {
	u := n.cfg.Upstream
	return upstream.Config{
		Transport:          n.upTransport,
		MaxConns:           u.MaxConns,
		DialTimeout:        u.DialTimeout,
		ReadTimeout:        u.ReadTimeout,
		WriteTimeout:       max(u.WriteTimeout, 0), // off: none, the library's 0
		IdleTimeout:        u.IdleTimeout,
		HealthInterval:     u.HealthInterval,
		AcquireTimeout:     u.AcquireTimeout,
		ReservedReadConns:  u.ReservedReadConns,
		HoldMax:            u.HoldMaxBytes,
		StreamWriteTimeout: u.StreamWriteTimeout,
		TLS:                n.upTLS,
		Handshake:          n.upAuth,
		Budget:             n.budget,
	}
}

// newServer builds the proxy over the groups; it copies its
// collaborators, which are all given here.
func (n *node) newServer() error {
	cfg := n.cfg
	pcfg := proxy.Config{
		Transport:  n.clientTransport,
		Limits:     cfg.RequestLimits(),
		MaxClients: cfg.Limits.MaxClients,
		// 0 and negative mean the same here as in the file.
		MaxClientsPerAddress: cfg.Limits.MaxClientsPerAddress,
		Logger:               n.log.With("component", "proxy"),
		Cache:                n.groups[0].caching,

		ReadTimeout:  cfg.Limits.ClientReadTimeout,
		IdleTimeout:  cfg.Limits.ClientIdleTimeout,
		WriteTimeout: cfg.Limits.ClientWriteTimeout,
		Budget:       n.budget,

		MaxSessionBytes: cfg.Limits.MaxSessionBytes,
	}
	if n.limiter != nil { // a nil *Limiter in the interface would be called
		pcfg.Limiter = n.limiter
	}
	if n.recorder != nil {
		pcfg.Recorder = n.recorder
	}
	if n.router != nil {
		pcfg.Router = n.router
		for _, g := range n.groups[1:] {
			pcfg.Federated = append(pcfg.Federated, proxy.Backend{Name: g.name, Up: g.up, Cache: g.caching})
		}
	}
	var err error
	n.srv, err = proxy.New(pcfg, n.groups[0].up)
	return err
}

// listen binds the client listener, with TLS and Kerberos as set.
func (n *node) listen() error {
	cfg := n.cfg
	plain, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ln := plain
	if ln, err = n.tlsEP.listener("tls", cfg.TLS, ln); err != nil {
		return errors.Join(err, plain.Close())
	}
	if ln, err = kerberosConfig(cfg.Kerberos).listener(ln, n.log.With("component", "kerberos")); err != nil {
		return errors.Join(err, plain.Close())
	}
	n.ln = ln
	n.log.Info("hmsproxy listening", "addr", ln.Addr().String(), "transport", n.clientTransport.String(),
		"upstreams", n.groups[0].up.Addrs(), "tls", cfg.TLS.Cert != "", "upstream_tls", n.upTLS != nil,
		"kerberos", cfg.Kerberos.Enabled, "upstream_kerberos", cfg.Kerberos.UpstreamPrincipal)
	return nil
}

// start runs, once the proxy serves, what keeps its caches coherent, its
// background work, and the admin port (after the proxy: a scrape or a
// flush always finds a proxy to report on).
func (n *node) start() (*admin.Server, net.Listener, error) {
	n.runBuses()
	// Every group's event-log health check caps the one store's TTLs.
	n.caps = newTTLCaps(nil)
	if c := n.groups[0].caching; c != nil {
		n.caps = newTTLCaps(c.Store)
	}
	if n.router != nil {
		n.log.Info("federation on", "primary", n.cfg.GroupName(), "groups", n.router.GroupNames())
	}
	wk, err := n.startWorkers()
	if err != nil {
		return nil, nil, err
	}
	n.wk = wk
	n.onClose(wk.Close)
	n.drain = newDrainer(n.srv, n.cfg.DrainWait(), n.log.With("component", "drain"))
	n.onClose(n.drain.close)
	return n.newAdmin()
}

// serve waits for a signal, or the end of the proxy or the admin port,
// then shuts the node down: background work first, then the admin port,
// then the calls in flight, within shutdown.timeout.
func (n *node) serve(ctx context.Context, errc chan error, adm *admin.Server, aln net.Listener) error {
	admc := make(chan error, 1)
	if adm != nil {
		go func() { admc <- adm.Serve(aln) }()
	}
	n.printReady(aln)
	var serveErr error
	select {
	case serveErr = <-errc:
		errc <- serveErr // for the drain below
	case err := <-admc:
		n.log.Error("admin server stopped; shutting down", "err", err)
		serveErr = fmt.Errorf("admin: %w", err)
		adm = nil
	case <-ctx.Done():
		serveErr = n.drainListener(errc)
	}
	n.log.Info("shutting down: draining in-flight calls", "timeout", n.cfg.ShutdownWait())
	sctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownWait())
	defer cancel()
	// Background work serves no client: it stops first, at once, so that
	// none of it is still waiting on a metastore when the drain ends.
	n.wk.Close()
	if adm != nil {
		if err := adm.Shutdown(sctx); err != nil {
			n.log.Warn("admin shutdown", "err", err)
		}
	}
	cut := false
	// A cut write abandons its group's bus (stopped by close), so that
	// the peers are not told a clean goodbye.
	if err := n.srv.Shutdown(sctx); err != nil {
		n.log.Warn("shutdown cut off calls in flight", "err", err)
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
	n.log.Info("stopped")
	return nil
}

// drainListener fails readiness at once and keeps the listener open for
// the drain delay, so that the load balancer has had time to notice and
// no client it still sends here is refused. It returns the proxy's error
// should it stop meanwhile.
func (n *node) drainListener(errc chan error) error {
	wait := n.drain.forShutdown()
	if wait <= 0 {
		return nil
	}
	n.log.Info("shutting down: readiness false; the listener closes after the drain delay", "drain_delay", wait)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case err := <-errc:
		errc <- err
		return err
	}
}

// printReady tells whoever started the proxy where to point clients.
func (n *node) printReady(aln net.Listener) {
	uri := "thrift://" + clientAddr(n.ln.Addr())
	adminMsg := ""
	if aln != nil {
		base := "http://" + clientAddr(aln.Addr())
		if n.cfg.Admin.TLS.Cert != "" {
			base = "https://" + clientAddr(aln.Addr())
		}
		n.log.Info("admin listening", "addr", aln.Addr().String(), "token", n.cfg.Admin.Token != "", "tls", n.cfg.Admin.TLS.Cert != "")
		auth := ""
		if n.cfg.Admin.Token != "" {
			auth = `-H "Authorization: Bearer $HMSPROXY_ADMIN_TOKEN" `
		}
		adminMsg = fmt.Sprintf("Admin API:\n  %s/metrics  %s/healthz  %s/readyz\n  curl -X POST %s%s/cache/flush/demo_db0/t0\n\n", base, base, base, auth, base)
	}
	fmt.Fprintf(os.Stderr, "\nhmsproxy is ready. Point clients at it:\n  hive.metastore.uris=%s\n  e.g. go run ./cmd/hmscli -uri %s databases\n\n%s", uri, uri, adminMsg)
}

// newAdmin builds the admin server and binds its port; nil when
// admin.listen is off.
func (n *node) newAdmin() (*admin.Server, net.Listener, error) {
	cfg := n.cfg
	if cfg.Admin.Listen == "" {
		return nil, nil, nil
	}
	reg := prometheus.NewRegistry()
	if err := registerBuildInfo(reg, readBuildInfo()); err != nil {
		return nil, nil, err
	}
	adm, err := admin.New(n.adminConfig(reg))
	if err != nil {
		return nil, nil, err
	}
	aln, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("admin listen: %w", err)
	}
	tln, err := n.tlsEP.listener("admin.tls", cfg.Admin.TLS, aln)
	if err != nil {
		return nil, nil, errors.Join(err, aln.Close())
	}
	aln = tln
	if cfg.Admin.Token == "" && !isLoopback(aln.Addr()) {
		n.log.Warn("admin writes (drain, flush, warm-up) are refused with 403: the admin port listens beyond loopback "+
			"without a token; set admin.token or HMSPROXY_ADMIN_TOKEN to enable them", "addr", aln.Addr().String())
	}
	return adm, aln, nil
}

// adminConfig is what the admin port shows and acts on.
func (n *node) adminConfig(reg *prometheus.Registry) admin.Config {
	srv, wk := n.srv, n.wk
	acfg := admin.Config{
		Logger:         n.log.With("component", "admin"),
		Registerer:     reg,
		Token:          n.cfg.Admin.Token,
		DefaultCatalog: n.cfg.Cache.DefaultCatalog,
		Flusher:        srv,
		Calls:          srv.Stats(),
		Upstreams:      n.groups[0].up,
		Clients:        srv,
		Certs:          n.tlsEP,
		InFlight:       n.budget,
		Timeouts:       srv.Stats(),
		Drain:          n.drain,
	}
	if c := n.groups[0].caching; c != nil {
		acfg.Store = c.Store
		acfg.Scope = srv
	}
	if b := n.groups[0].bus; b != nil { // a nil *coherence.Bus in the interface would be called
		acfg.Bus = b
	}
	if n.limiter != nil {
		acfg.RateLimit = n.limiter
	}
	if n.feed != nil {
		acfg.ChangeFeed = n.feed
	}
	if krb, _ := n.ln.(*sasl.Listener); krb != nil { // nil without kerberos.enabled
		acfg.Kerberos = krb
	}
	if n.router != nil {
		acfg.Federation = federationMetrics{n.router}
		acfg.Groups = n.adminGroups()
	}
	if wk.runner != nil {
		acfg.Workers = workerStatuses{wk.runner}
	}
	if wk.poller != nil {
		acfg.EventLog = wk.poller
	}
	if wk.warmUp != nil { // a nil pointer in the interface would be called
		acfg.WarmUp = wk.warmUp
	}
	if n.recorder != nil {
		acfg.Recording = n.recorder
	}
	if sh := srv.ShadowStats(); sh != nil { // a nil pointer in the interface would be called
		acfg.Shadow = sh
	}
	if p := srv.PruneStats(); p != nil { // nil without a cache
		acfg.Prune = p
	}
	return acfg
}
