package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

// Flusher invalidates cached entities as a write would; *proxy.Server
// implements it.
type Flusher interface {
	Flush(ctx context.Context, ents []cache.Entity) error
}

// Store is the cache store: its counters, and Clear, which flush-all
// calls to release memory. *cache.Store implements it.
type Store interface {
	Stats(k hms.Kind) *cache.KindStats
	Clear()
}

// CallStats is the proxy's call counters; *proxy.Stats implements it.
type CallStats interface {
	EachMethod(fn func(name string, o proxy.Outcome, n uint64))
	Kind(k hms.Kind, o proxy.Outcome) uint64
}

// Upstreams is the metastore group's health; *upstream.Metastores implements it.
type Upstreams interface {
	Addrs() []string
	Healthy() []bool
}

// ClientCounter counts open client connections; *proxy.Server implements it.
type ClientCounter interface {
	Clients() int
}

// Drainer takes this node out of its load balancer and back;
// cmd/hmsproxy's drain controller implements it.
type Drainer interface {
	// Draining reports whether a drain is in effect: /readyz fails.
	Draining() bool
	// Drain fails /readyz at once and, after the drain delay, closes
	// client connections between calls; the process keeps running.
	Drain()
	// Resume ends a drain.
	Resume()
}

// InFlight is the in-flight byte budget; *inflight.Budget implements it.
type InFlight interface {
	InUse() int64
	Max() int64
	Waits() uint64
}

// TimeoutStats counts client connections cut off by a deadline;
// *proxy.Stats implements it.
type TimeoutStats interface {
	ClientTimeouts(t proxy.ClientTimeout) uint64
}

// ShedStats counts client connections shed at the connection limits;
// *proxy.Stats implements it. Config.Timeouts feeds
// hmsproxy_client_connections_shed_total when it is one.
type ShedStats interface {
	ClientsShed(r proxy.ShedReason) uint64
}

// Config configures a Server. The zero value of each field selects the
// default in its comment. Pass an interface field only with a non-nil
// value behind it (a nil *cache.Store in Store is not "no store").
type Config struct {
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
	// Registerer receives the admin collectors, the Go and the process
	// collectors. Default: a new registry of the server's own, never the
	// global one.
	Registerer prometheus.Registerer
	// Gatherer is what /metrics exposes. Default: Registerer when it is a
	// Gatherer too (a *prometheus.Registry); required otherwise.
	Gatherer prometheus.Gatherer
	// Token, if set, is required as "Authorization: Bearer <token>" on
	// every /cache/ and /drain request. Default "": those requests are
	// served on a loopback listener only; where Serve listens beyond
	// loopback, the writes among them (drain, flush, warm-up) are refused
	// with 403 and the read endpoints keep serving.
	Token string
	// DefaultCatalog is the catalog of flushes that name none. Default
	// "hive", as metastore.catalog.default.
	DefaultCatalog string

	// Flusher serves the flush endpoints. Nil: they answer 501.
	Flusher Flusher
	// Store feeds the hmsproxy_cache_* gauges and counters and is
	// cleared on flush-all. Nil: those families are left out.
	Store Store
	// Calls feeds hmsproxy_requests_total and
	// hmsproxy_cache_requests_total, and, when it is a LatencyStats too
	// (*proxy.Stats is), hmsproxy_request_duration_seconds. Nil: left out.
	Calls CallStats
	// Upstreams feeds hmsproxy_upstream_up, /healthz and /readyz. Nil:
	// left out, and neither endpoint asks about metastores.
	Upstreams Upstreams
	// Drain serves POST and DELETE /drain (behind Token, as the flush
	// API) and fails /readyz while draining. Nil: /drain answers 501.
	Drain Drainer
	// Clients feeds hmsproxy_client_connections. Nil: left out.
	Clients ClientCounter
	// Bus feeds the hmsproxy_bus_* families and
	// hmsproxy_invalidation_losses_total, the bus losses on the status
	// page, and /readyz (not ready while not Connected). Nil: left out.
	Bus Bus
	// Workers feeds the hmsproxy_worker_* families and the workers on the
	// status page. Nil: left out.
	Workers Workers
	// EventLog, if set, exports the notification-log poller's lag.
	EventLog EventLog
	// Certs feeds the hmsproxy_tls_* families. Nil: left out.
	Certs CertSource
	// Scope feeds hmsproxy_cache_scope_* and the cache scope on the
	// status page. Nil: left out.
	Scope ScopeSource
	// RateLimit feeds hmsproxy_ratelimit_*. Nil: left out.
	RateLimit RateLimits
	// Kerberos feeds hmsproxy_kerberos_handshakes_total. Nil: left out.
	Kerberos KerberosSource
	// ChangeFeed feeds hmsproxy_changefeed_* and the change feed on the
	// status page. Nil: left out.
	ChangeFeed ChangeFeed
	// Federation feeds hmsproxy_federation_*{group}. Nil: left out.
	Federation Federation
	// Groups are every upstream group of a federated proxy, the primary
	// first (its parts are the same as the fields above). They feed
	// hmsproxy_group_*{group}, the "groups" of /status.json and the
	// status page, and ?group= on the flush endpoints. Nil: one group;
	// ?group= names none.
	Groups []GroupSurface
	// InFlight feeds hmsproxy_inflight_bytes,
	// hmsproxy_inflight_limit_bytes and hmsproxy_inflight_waits_total.
	// Nil: left out.
	InFlight InFlight
	// Timeouts feeds hmsproxy_client_timeouts_total. Nil: left out.
	Timeouts TimeoutStats
	// Shadow feeds hmsproxy_shadow_checks_total,
	// hmsproxy_shadow_mismatches_total and hmsproxy_shadow_skipped_total,
	// and the shadow validation part of the status page. Nil: left out.
	Shadow Shadow
	// Prune feeds hmsproxy_prune_total and the pruning row of the status
	// page. Nil: left out.
	Prune Prune

	// Recording serves POST, DELETE and GET /record (behind Token, as
	// the flush API) and feeds hmsproxy_record_*. Nil: /record answers
	// 501 and the families are left out.
	Recording Recording

	// WarmUp serves POST and GET /cache/warm and feeds hmsproxy_warmup_*
	// and the warm-up on the status page. Nil: left out, and
	// /cache/warm answers 501.
	WarmUp WarmUp

	// ReadHeaderTimeout bounds reading a request's header. Default 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request. Default 30s.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response (a scrape). Default 1m.
	WriteTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections. Default 2m.
	IdleTimeout time.Duration
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("admin: server closed")

// Server is the admin HTTP server.
type Server struct {
	cfg     Config
	log     *slog.Logger
	http    *http.Server
	reg     prometheus.Registerer
	owned   []prometheus.Collector // registered by New, unregistered by Shutdown
	flushes *prometheus.CounterVec
	token   [sha256.Size]byte // hash of Config.Token, compared in constant time
	events  events            // recent flushes and bus losses, for the status page
	losses  lossWatch         // turns bus loss counters into events

	once     sync.Once      // guards unregistering at Shutdown
	stop     chan struct{}  // closed by Shutdown: watchLosses returns
	watching sync.WaitGroup // watchLosses, started by Serve, waited for by Shutdown

	mu      sync.Mutex // guards closed and watchOn
	closed  bool       // Shutdown was called
	watchOn bool       // watchLosses was started

	// exposed: Serve was given a listener beyond loopback. Without a
	// Token, writes are then refused. Never unset: one such listener is
	// enough.
	exposed atomic.Bool
}

// New validates cfg and registers the collectors.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registerer == nil && cfg.Gatherer == nil {
		r := prometheus.NewRegistry()
		cfg.Registerer, cfg.Gatherer = r, r
	}
	if cfg.Registerer == nil {
		return nil, errors.New("admin: Gatherer without Registerer")
	}
	if cfg.Gatherer == nil {
		g, ok := cfg.Registerer.(prometheus.Gatherer)
		if !ok {
			return nil, errors.New("admin: Registerer is not a Gatherer; set Config.Gatherer")
		}
		cfg.Gatherer = g
	}
	if cfg.DefaultCatalog == "" {
		cfg.DefaultCatalog = "hive"
	}
	cfg.DefaultCatalog = hms.NormalizeString(cfg.DefaultCatalog)
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = 10 * time.Second
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = time.Minute
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 2 * time.Minute
	}

	s := &Server{cfg: cfg, log: cfg.Logger, reg: cfg.Registerer, token: sha256.Sum256([]byte(cfg.Token)),
		stop: make(chan struct{})}
	s.flushes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hmsproxy_cache_flushes_total",
		Help: "Cache flushes served by the admin API, by level (all, database, table, partitions).",
	}, []string{"level"})
	for _, l := range []cache.Level{cache.LevelAll, cache.LevelDatabase, cache.LevelTable, cache.LevelPartitions} {
		s.flushes.WithLabelValues(l.String())
	}
	if err := s.register(s.flushes, newCollector(&s.cfg, s.noticeLosses)); err != nil {
		s.unregister()
		return nil, err
	}
	// Sources the operator did not wire are left out of the scrape.
	var optional []prometheus.Collector
	if cfg.Certs != nil {
		optional = append(optional, newCertCollector(cfg.Certs))
	}
	if cfg.WarmUp != nil {
		optional = append(optional, newWarmUpCollector(cfg.WarmUp))
	}
	if cfg.Recording != nil {
		optional = append(optional, newRecordCollector(cfg.Recording))
	}
	if cfg.Scope != nil {
		optional = append(optional, newScopeCollector(cfg.Scope))
	}
	if cfg.RateLimit != nil {
		optional = append(optional, newRateLimitCollector(cfg.RateLimit))
	}
	if cfg.Kerberos != nil {
		optional = append(optional, newKerberosCollector(cfg.Kerberos))
	}
	if cfg.ChangeFeed != nil {
		optional = append(optional, newChangeFeedCollector(cfg.ChangeFeed))
	}
	if cfg.Federation != nil {
		optional = append(optional, newFederationCollector(cfg.Federation))
	}
	if len(cfg.Groups) > 0 {
		optional = append(optional, newGroupCollector(cfg.Groups))
	}
	if err := s.register(optional...); err != nil {
		s.unregister()
		return nil, err
	}
	// The Go and process collectors may already be registered by the
	// caller; that is not an error.
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := s.register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			s.unregister()
			return nil, err
		}
	}

	s.http = &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	return s, nil
}

func (s *Server) register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := s.reg.Register(c); err != nil {
			return fmt.Errorf("admin: register metrics: %w", err)
		}
		s.owned = append(s.owned, c)
	}
	return nil
}

func (s *Server) unregister() {
	for _, c := range s.owned {
		s.reg.Unregister(c)
	}
	s.owned = nil
}

// Handler is the admin routes, for tests and for callers that run their
// own http.Server.
func (s *Server) Handler() http.Handler { return s.http.Handler }

func (s *Server) handler() http.Handler {
	flush := http.NewServeMux()
	flush.HandleFunc("POST /cache/flush", s.flushAll)
	flush.HandleFunc("POST /cache/flush/{db}", s.flushEntity(cache.LevelDatabase))
	flush.HandleFunc("POST /cache/flush/{db}/{table}", s.flushEntity(cache.LevelTable))
	flush.HandleFunc("POST /cache/flush/{db}/{table}/partitions", s.flushEntity(cache.LevelPartitions))
	flush.HandleFunc("POST /cache/warm", s.startWarmUp)
	flush.HandleFunc("GET /cache/warm", s.warmUpProgress)

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	drain := http.NewServeMux()
	drain.HandleFunc("POST /drain", s.drain)
	drain.HandleFunc("DELETE /drain", s.resume)
	mux.Handle("/drain", s.authorised(drain))
	rec := http.NewServeMux()
	rec.HandleFunc("POST /record", s.startRecording)
	rec.HandleFunc("DELETE /record", s.stopRecording)
	rec.HandleFunc("GET /record", s.recordingProgress)
	mux.Handle("/record", s.authorised(rec))
	mux.HandleFunc("GET /{$}", s.statusPage)
	mux.HandleFunc("GET /status.json", s.statusJSON)
	// Authorisation comes before routing, so without the token nothing
	// under /cache/ is revealed, not even which methods a path allows.
	mux.Handle("/cache/", s.authorised(flush))
	return mux
}

// Serve answers admin requests on ln until Shutdown, then returns
// ErrServerClosed.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.cfg.Bus != nil && !s.closed && !s.watchOn {
		s.watchOn = true
		s.watching.Add(1)
		go s.watchLosses()
	}
	s.mu.Unlock()
	if !loopbackOnly(ln.Addr()) {
		s.exposed.Store(true)
	}
	err := s.http.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return ErrServerClosed
	}
	return err
}

// Shutdown stops accepting, waits for requests in flight (until ctx ends),
// and unregisters the collectors New registered. Safe to call twice.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.once.Do(func() {
		s.unregister()
		close(s.stop)
	})
	s.watching.Wait()
	return err
}

// lossPoll is how often the bus's loss counters are read for the status
// page's recent events.
const lossPoll = time.Second

// watchLosses records bus losses as events until Shutdown, so that their
// time is right within lossPoll even when nobody scrapes.
func (s *Server) watchLosses() {
	defer s.watching.Done()
	t := time.NewTicker(lossPoll)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.losses.poll(s.cfg.Bus, &s.events, now)
		}
	}
}

// noticeLosses records the bus losses counted by the time snap was taken,
// so that a scrape or the status page never shows a loss count without
// its event.
func (s *Server) noticeLosses(snap *snapshot) {
	if s.cfg.Bus != nil {
		s.losses.poll(s.cfg.Bus, &s.events, snap.at)
	}
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if s.cfg.Upstreams != nil {
		healthy := false
		for _, ok := range s.cfg.Upstreams.Healthy() {
			healthy = healthy || ok
		}
		if !healthy {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "no healthy metastore")
			return
		}
	}
	fmt.Fprintln(w, "ok")
}

// readyz answers whether a load balancer should send this node new
// clients: 503 while it drains, while its invalidation bus is not
// connected and caught up (its cache is not served, and its writes wait
// out the heartbeat timeout), or while no metastore is healthy, with
// each reason on a line of its own.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	var reasons []string
	if s.cfg.Drain != nil && s.cfg.Drain.Draining() {
		reasons = append(reasons, "draining")
	}
	if s.cfg.Bus != nil && !s.cfg.Bus.Connected() {
		reasons = append(reasons, "invalidation bus not synced: not connected to Redis, or not caught up")
	}
	if s.cfg.Upstreams != nil {
		healthy := false
		for _, ok := range s.cfg.Upstreams.Healthy() {
			healthy = healthy || ok
		}
		if !healthy {
			reasons = append(reasons, "no healthy metastore: "+strings.Join(s.cfg.Upstreams.Addrs(), ", "))
		}
	}
	if len(reasons) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready:")
		for _, why := range reasons {
			fmt.Fprintln(w, why)
		}
		return
	}
	fmt.Fprintln(w, "ready")
}

// drain starts a maintenance drain: readiness false, then client
// connections closed between calls; the process keeps running.
func (s *Server) drain(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Drain == nil {
		writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "no drain control"})
		return
	}
	s.cfg.Drain.Drain()
	s.log.Info("drain started", caller(r, s.authName())...)
	writeJSON(w, http.StatusOK, map[string]bool{"draining": true})
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Drain == nil {
		writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "no drain control"})
		return
	}
	s.cfg.Drain.Resume()
	s.log.Info("drain ended", caller(r, s.authName())...)
	writeJSON(w, http.StatusOK, map[string]bool{"draining": false})
}

// loopbackOnly reports whether only this host can reach a listener at
// a: a loopback TCP address or a Unix socket. A wildcard address (":9084",
// "0.0.0.0") reaches beyond it.
func loopbackOnly(a net.Addr) bool {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}

// isWrite: the request may change something (drain, flush, warm-up);
// GET and HEAD only read.
func isWrite(r *http.Request) bool { return r.Method != http.MethodGet && r.Method != http.MethodHead }

func (s *Server) authorised(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		// Decided per request: Serve may be called after the handler is
		// built.
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isWrite(r) && s.exposed.Load() {
				s.log.Warn("admin write refused: the admin port listens beyond loopback and no admin.token is set",
					append([]any{"method", r.Method, "path", r.URL.Path}, caller(r, "refused")...)...)
				writeJSON(w, http.StatusForbidden, map[string]string{"error": "admin writes need admin.token " +
					"(or HMSPROXY_ADMIN_TOKEN) when the admin port listens beyond loopback"})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		// Hashing first makes the comparison constant-time in the length
		// of the token as well.
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !ok || subtle.ConstantTimeCompare(sum[:], s.token[:]) != 1 {
			s.log.Warn("admin request refused: no valid bearer token", append([]any{"method", r.Method, "path", r.URL.Path}, caller(r, "refused")...)...)
			w.Header().Set("WWW-Authenticate", `Bearer realm="hmsproxy admin"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "a valid bearer token is required"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) flushAll(w http.ResponseWriter, r *http.Request) {
	s.flush(w, r, cache.Entity{Level: cache.LevelAll}, "all", func() {
		if s.cfg.Store != nil {
			// Invalidated already; this releases the memory. The store is
			// every group's: a flush of one federated group leaves the
			// others' entries, and its own go as they are met or evicted.
			s.cfg.Store.Clear()
		}
	})
}

// flusherFor is the Flusher of the group a flush request names with
// ?group= (the primary's when it names none, or the first group), false
// when it names no group there is (answered here).
func (s *Server) flusherFor(w http.ResponseWriter, r *http.Request) (Flusher, string, bool) {
	name := r.URL.Query().Get("group")
	if name == "" || (len(s.cfg.Groups) > 0 && name == s.cfg.Groups[0].Name) {
		return s.cfg.Flusher, "", true
	}
	g := s.group(name)
	if g == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no upstream group %q", name)})
		return nil, "", false
	}
	return g.Flusher, name, true
}

func (s *Server) flushEntity(level cache.Level) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cat := s.cfg.DefaultCatalog
		if c := r.URL.Query().Get("catalog"); c != "" {
			cat = hms.NormalizeString(c)
		}
		e := cache.Entity{Level: level, Cat: cat, DB: hms.NormalizeString(r.PathValue("db"))}
		name := cat + "." + e.DB
		if level != cache.LevelDatabase {
			e.Table = hms.NormalizeString(r.PathValue("table"))
			name += "." + e.Table
		}
		if e.DB == "" || (level != cache.LevelDatabase && e.Table == "") {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "empty database or table name"})
			return
		}
		s.flush(w, r, e, name, nil)
	}
}

// flush invalidates e, runs then (if set) once that succeeded, and answers.
func (s *Server) flush(w http.ResponseWriter, r *http.Request, e cache.Entity, name string, then func()) {
	fl, group, ok := s.flusherFor(w, r)
	if !ok {
		return
	}
	if group != "" {
		// Another group's store is this one: clearing it would drop
		// every group's entries.
		then = nil
		name = group + ":" + name
	}
	if fl == nil {
		writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "no cache to flush"})
		return
	}
	if err := fl.Flush(r.Context(), []cache.Entity{e}); err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, proxy.ErrNoCache) {
			code = http.StatusConflict
		}
		s.log.Warn("cache flush failed", append([]any{"level", e.Level.String(), "name", name, "err", err}, caller(r, s.authName())...)...)
		writeJSON(w, code, map[string]string{"error": err.Error()})
		return
	}
	if then != nil {
		then()
	}
	s.flushes.WithLabelValues(e.Level.String()).Inc()
	s.events.add(event{Time: time.Now(), Type: "flush", Level: e.Level.String(), Detail: name})
	s.log.Info("cache flushed", append([]any{"level", e.Level.String(), "name", name}, caller(r, s.authName())...)...)
	writeJSON(w, http.StatusOK, map[string]string{"flushed": name, "level": e.Level.String()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
