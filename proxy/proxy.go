// Package proxy accepts HMS client connections, reads each call as Thrift
// bytes and routes it by the method table: session calls update the
// client's state, everything else goes to the metastores.
//
// For cached reads it decides: hit or miss, who loads and who waits,
// what is admitted, refreshed or shadow-checked. The bytes are not its
// business: a read is resolved once by thrift/hms (names, key
// remainder, batch list), keyed by cache, and batch requests and replies
// are cut and assembled by hms.Batch.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/limits/inflight"
	"github.com/hmsproxy/hmsproxy/limits/peers"
	"github.com/hmsproxy/hmsproxy/limits/ratelimit"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// Forwarder sends a call to a metastore and hands the reply to sink.
// *upstream.Metastores implements it.
type Forwarder interface {
	Do(ctx context.Context, c upstream.Call, sink upstream.ReplySink) error
}

// Config configures a Server. The zero value of each field selects the
// default in its comment. New copies it, Cache included, and never reads
// the caller's values again: collaborators are given here, not assigned
// afterwards.
type Config struct {
	// Transport is the client-side framing. Default buffered, as HMS.
	Transport wire.Transport
	// Limits bound client requests. Default: 100 MiB messages, as HMS's
	// hive.metastore.server.max.message.size, nesting depth 64.
	Limits wire.Limits
	// MaxClients bounds concurrent client connections. At the bound, the
	// connection that has waited longest for its next request (none of
	// it read, no call in flight) is closed to admit a new one, so that
	// sockets that say nothing cannot lock everyone out; with none such,
	// the new one is closed on accept. Default 10,000.
	MaxClients int
	// MaxClientsPerAddress bounds the connections of one source address
	// (an IPv4 address, an IPv6 /64: limits/peers) within MaxClients:
	// at it, that address's own longest-idle connection makes room, or
	// its new one is closed on accept. Default
	// DefaultMaxClientsPerAddress, at most MaxClients; negative: none.
	MaxClientsPerAddress int
	// ReadTimeout bounds reading one request once its first bytes have
	// arrived, so a client trickling a request (slowloris) is cut off.
	// Waiting for in-flight budget counts against it. Default 60s;
	// negative: none.
	ReadTimeout time.Duration
	// IdleTimeout closes a connection that starts no request for this
	// long (enforced to within an eighth of it). Default 1h; negative:
	// none.
	IdleTimeout time.Duration
	// WriteTimeout bounds writing one reply, so a client that does not
	// read is cut off. Default 2m; negative: none.
	WriteTimeout time.Duration
	// Budget bounds the bytes of requests being read, across all
	// connections, beyond the first wire.FreeBuf of each: a reader waits
	// for room (back-pressure) rather than fail. Shared with the upstream
	// side for replies. Nil: unbounded.
	Budget *inflight.Budget
	// MaxSessionBytes bounds the session state one connection keeps
	// (its set_ugi args, its setMetaConf overrides); a session call that
	// would take it past is refused with a MetaException. The state is
	// claimed from Budget while the connection lives. Default 64 KiB:
	// a user in a thousand groups of 60-character names fits.
	MaxSessionBytes int64
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
	// Cache, if set, serves cacheable reads and invalidates on writes.
	Cache *Caching
	// Limiter, if set, is asked before every call but set_ugi,
	// setMetaConf, oneway calls and those of background connections
	// (DialBackground). A refused call is answered with a
	// MetaException carrying the error's message (a TApplicationException
	// where the method declares none); the connection stays open.
	Limiter CallLimiter
	// Federated are the upstream groups besides the primary (federation);
	// Router, required with them, says which group takes each call. None:
	// every call goes to the primary, as with a single group.
	Federated []Backend
	Router    Router
	// Recorder, if set, is given every client call while it is
	// Recording (background connections' aside): time, identity, method,
	// the args as sent, and the reply's size and outcome. Not recording,
	// it costs a call one atomic load.
	Recorder CallRecorder
}

// CallLimiter bounds the calls of each client (per-user rate limits);
// *ratelimit.Limiter implements it. A client is charged as its
// authenticated identity, or its source address when it has none: a
// set_ugi name is a claim, which keys no budget.
type CallLimiter interface {
	AllowCall(ctx context.Context, who ratelimit.Caller, meth *hms.Method) error
}

// Server is a proxy listener's connection handling.
type Server struct {
	cfg   Config
	up    Forwarder
	log   *slog.Logger
	cache *cacher // nil: no caching
	stats *Stats
	// routes are the upstream groups, the primary (up, cache) first;
	// router, nil for a single group, picks one per call.
	routes []route
	router Router

	ctx    context.Context // cancelled when shutdown gives up draining
	cancel context.CancelFunc
	// stopping is cancelled when Shutdown starts: waits that are not yet
	// a call (for request budget) end at once.
	stopping context.Context
	stop     context.CancelFunc

	mu        sync.Mutex // guards listeners, conns, closing, admitted, bySrc, noIdleUntil
	listeners map[net.Listener]struct{}
	conns     map[*clientConn]struct{}
	closing   bool
	// admitted counts conns against MaxClients, and bySrc holds each
	// client address's against MaxClientsPerAddress: those closed to make
	// room (evicted) no longer count, though they may finish a request
	// whose first bytes raced the eviction. Background connections are
	// in neither bySrc nor any scan.
	admitted int
	bySrc    map[peers.Key]map[*clientConn]struct{}
	// noIdleUntil: a scan of every connection found none idle; newcomers
	// at MaxClients are refused without another scan until then (when the
	// scan is not cheap), so that a flood of connections to a full server
	// costs a scan per noIdleBackoff, not one each.
	noIdleUntil time.Time

	// draining: client connections are closed between calls (Drain).
	// Set before the connections are swept, read by each connection
	// after it marks itself idle, so none is missed.
	draining atomic.Bool

	wg sync.WaitGroup // one per connection goroutine

	recConns atomic.Uint64 // numbers the connections a recorder has seen

	// callHook, if set, runs on a connection's goroutine once a call is
	// answered and its buffers trimmed. A seam for tests only: it sees
	// what the connection keeps between calls.
	callHook func(c *clientConn)
	// startHook, if set, runs when a request has begun to arrive and its
	// reader waits for the rest (requestGate.Started). A seam for tests
	// only: it shows a request was seen, whether or not it claimed budget.
	startHook func()
}

// Client timeouts and bounds by default; see Config.
const (
	DefaultReadTimeout     = time.Minute
	DefaultIdleTimeout     = time.Hour
	DefaultWriteTimeout    = 2 * time.Minute
	DefaultMaxSessionBytes = 64 << 10
)

// DefaultMaxClientsPerAddress is Config.MaxClientsPerAddress's default: a
// tenth of the default MaxClients, far above what one engine host keeps
// open (a HiveServer2 with hundreds of sessions), so that one host can
// hold no more than a tenth of the slots.
const DefaultMaxClientsPerAddress = 1000

// orDefault maps 0 to def and a negative duration to 0 (none).
func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("proxy: server closed")

// New returns a Server forwarding to up.
func New(cfg Config, up Forwarder) (*Server, error) {
	if up == nil {
		return nil, errors.New("proxy: no upstream")
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = 10_000
	}
	switch {
	case cfg.MaxClientsPerAddress == 0:
		cfg.MaxClientsPerAddress = min(DefaultMaxClientsPerAddress, cfg.MaxClients)
	case cfg.MaxClientsPerAddress < 0:
		cfg.MaxClientsPerAddress = 0 // none
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxSessionBytes <= 0 {
		cfg.MaxSessionBytes = DefaultMaxSessionBytes
	}
	cfg.ReadTimeout = orDefault(cfg.ReadTimeout, DefaultReadTimeout)
	cfg.IdleTimeout = orDefault(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.WriteTimeout = orDefault(cfg.WriteTimeout, DefaultWriteTimeout)
	s := &Server{cfg: cfg, up: up, log: cfg.Logger, stats: newStats(),
		listeners: map[net.Listener]struct{}{}, conns: map[*clientConn]struct{}{}, bySrc: map[peers.Key]map[*clientConn]struct{}{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.stopping, s.stop = context.WithCancel(s.ctx)
	if cfg.Cache != nil {
		if cfg.Cache.Store == nil {
			return nil, errors.New("proxy: caching without a store")
		}
		if cfg.Cache.Scope > ScopeUser {
			return nil, fmt.Errorf("%w: %v", ErrScopeMode, cfg.Cache.Scope)
		}
		s.cache = newCacher(*cfg.Cache, cfg.Logger)
		s.cache.start(up, s.ctx)
	}
	if err := s.buildRoutes(cfg, up); err != nil {
		s.cancel()
		if s.cache != nil {
			s.cache.close()
		}
		return nil, err
	}
	return s, nil
}

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, errTooManyFiles) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("proxy: accept: %w", err)
		}
		backoff = 0
		c := s.track(nc, false)
		if c == nil {
			continue
		}
		go c.serve()
	}
}

// track registers a new connection, or closes it when shutting down or
// over a limit no idle connection can make room under. A background
// connection (DialBackground) counts against MaxClients but neither
// against its address nor by closing anyone's.
func (s *Server) track(nc net.Conn, background bool) *clientConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		nc.Close()
		return nil
	}
	src := peers.KeyOf(nc.RemoteAddr())
	refused := func(reason ShedReason, msg string, attrs ...any) *clientConn {
		nc.Close()
		s.stats.clientsShed[reason].Add(1)
		s.log.Warn(msg, append([]any{"remote", nc.RemoteAddr().String()}, attrs...)...)
		return nil
	}
	if background {
		if s.admitted >= s.cfg.MaxClients {
			return refused(ShedMaxClients, "background connection refused: connection limit reached", "max", s.cfg.MaxClients)
		}
	} else {
		if per := s.cfg.MaxClientsPerAddress; per > 0 && len(s.bySrc[src]) >= per && !s.evictIdle(s.bySrc[src], true) {
			return refused(ShedPerAddress, "client refused: its address's connection limit reached, every one in a call",
				"source", src.String(), "max_per_address", per)
		}
		if s.admitted >= s.cfg.MaxClients && !s.evictAnyIdle() {
			return refused(ShedMaxClients, "client refused: connection limit reached, every connection in a call", "max", s.cfg.MaxClients)
		}
	}
	c := newClientConn(s, nc)
	c.src, c.background = src, background
	s.conns[c] = struct{}{}
	s.admitted++
	if !background {
		set := s.bySrc[src]
		if set == nil {
			set = map[*clientConn]struct{}{}
			s.bySrc[src] = set
		}
		set[c] = struct{}{}
	}
	s.wg.Add(1)
	return c
}

// forget stops counting c against the limits; s.mu is held.
func (s *Server) forget(c *clientConn) {
	s.admitted--
	if c.background {
		return
	}
	set := s.bySrc[c.src]
	delete(set, c)
	if len(set) == 0 {
		delete(s.bySrc, c.src)
	}
}

// A scan of more than cheapScan connections that found none idle holds
// for noIdleBackoff: at most a hundred such scans a second, whatever the
// rate of newcomers to a full server (one of 10,000 connections takes
// about 0.2 ms; BenchmarkEvictScan). A smaller one, about 10 µs, is
// always made.
const (
	noIdleBackoff = 10 * time.Millisecond
	cheapScan     = 1024
)

// evictAnyIdle is evictIdle over every client connection, at MaxClients.
func (s *Server) evictAnyIdle() bool {
	now := time.Now()
	if len(s.conns) > cheapScan && now.Before(s.noIdleUntil) {
		return false
	}
	if s.evictIdle(s.conns, false) {
		return true
	}
	s.noIdleUntil = now.Add(noIdleBackoff)
	return false
}

// maxEvictTries bounds the scans for an idle connection to close: each
// try loses only to a connection whose request began during the scan.
const maxEvictTries = 3

// evictIdle closes the connection of among that has waited longest for
// its next request, so that a newcomer can take its place; false when
// none is idle. s.mu is held. A scan, but only at a limit: the call path
// pays one atomic store per phase change for it.
func (s *Server) evictIdle(among map[*clientConn]struct{}, sameSrc bool) bool {
	for range maxEvictTries {
		var victim *clientConn
		var since int64
		for c := range among {
			if c.background || c.evicted.Load() {
				continue
			}
			if t := c.idleSince.Load(); t != 0 && (victim == nil || t < since) {
				victim, since = c, t
			}
		}
		if victim == nil {
			return false
		}
		if !victim.cutIfIdle() {
			continue // its request began meanwhile
		}
		victim.evicted.Store(true)
		s.forget(victim)
		s.stats.clientsShed[ShedEvicted].Add(1)
		s.log.Debug("closing the longest-idle client connection to admit a new one", "remote", victim.nc.RemoteAddr().String(),
			"idle", time.Since(time.Unix(0, since)).Round(time.Millisecond), "same_address", sameSrc)
		return true
	}
	return false
}

func (s *Server) untrack(c *clientConn) {
	s.mu.Lock()
	delete(s.conns, c)
	if !c.evicted.Load() {
		s.forget(c)
	}
	s.mu.Unlock()
	s.wg.Done()
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// Stats are the server's call counters.
func (s *Server) Stats() *Stats { return s.stats }

// Clients is the number of open client connections.
func (s *Server) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Drain closes client connections between calls, so their clients
// reconnect (through a load balancer, to another node): a connection
// waiting for its next request is closed now, one in a call once that
// call is answered, and one accepted meanwhile before its first call.
// A request whose first bytes have been read is always served. The
// listener stays open; Resume ends the drain. Callers first take the
// node out of the load balancer (readiness), so that reconnecting
// clients go elsewhere.
func (s *Server) Drain() {
	s.draining.Store(true)
	s.mu.Lock()
	n := s.sweepIdle()
	s.mu.Unlock()
	s.log.Info("draining: client connections close between calls", "closed_idle", n)
}

// Resume ends a Drain: connections are served again as usual.
func (s *Server) Resume() { s.draining.Store(false) }

// Draining reports whether Drain is in effect.
func (s *Server) Draining() bool { return s.draining.Load() }

// sweepIdle wakes every connection waiting for its next request so that
// it closes; s.mu is held. It returns how many it woke.
func (s *Server) sweepIdle() int {
	n := 0
	for c := range s.conns {
		if c.cutIfIdle() {
			n++
		}
	}
	return n
}

// Shutdown stops accepting, lets each connection finish the call it is in
// (a request being read included), then closes it. When ctx ends first,
// calls still running are cut off. Safe to call twice.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop()
	s.mu.Lock()
	s.closing = true
	for ln := range s.listeners {
		ln.Close()
	}
	// Wakes connections blocked waiting for their next call; one inside a
	// call sees closing when it finishes.
	s.sweepIdle()
	s.mu.Unlock()

	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	defer func() {
		for _, rt := range s.routes {
			if rt.cache != nil {
				rt.cache.close()
			}
		}
	}()
	select {
	case <-done:
		s.cancel()
		return nil
	case <-ctx.Done():
		s.cancel()
		s.mu.Lock()
		n, writes := len(s.conns), 0
		for c := range s.conns {
			if rt := c.writing.Load(); rt != nil {
				// The write can still land after every invalidation this
				// node publishes: its group's peers must not be told a
				// clean goodbye.
				writes++
				if rt.cache != nil && rt.cache.Coherence != nil {
					rt.cache.Coherence.Abandon()
				}
			}
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
		return fmt.Errorf("proxy: shutdown cut off %d connections, %d in a write: %w", n, writes, ctx.Err())
	}
}

var aLongTimeAgo = time.Unix(1, 0)

// DialBackground opens an in-process client connection for the proxy's
// own bulk loads (the warm-up). Its calls take the client path, so what
// they load is cached under the keys, with the bytes and generation
// checks of any client's call; but its upstream calls are background
// ones (upstream.Session.InBackground), which leave the connections
// reserved for client reads alone. It counts towards MaxClients and is
// closed by Shutdown like any client connection; being in-process, it
// is reachable by no one else (no port, no TLS or Kerberos to bypass).
func (s *Server) DialBackground() (net.Conn, error) {
	a, b := net.Pipe()
	c := s.track(b, true)
	if c == nil {
		a.Close()
		if s.isClosing() {
			return nil, ErrServerClosed
		}
		return nil, errors.New("proxy: background connection refused: client limit reached")
	}
	c.sess = c.sess.InBackground()
	go c.serve()
	return a, nil
}
