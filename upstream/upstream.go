// Package upstream manages the proxy's connections to the metastores behind
// it: bounded pools per metastore, per-client session state, failover,
// timeouts per call class and background health checks.
package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/limits/inflight"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Sentinel errors callers branch on.
var (
	// ErrUnavailable: no upstream could take the call before anything was
	// sent; the client should see a transport failure.
	ErrUnavailable = errors.New("upstream: no metastore reachable")
	// ErrBroken: the connection failed after the request was sent (or the
	// reply was malformed); the call's outcome is unknown.
	ErrBroken = errors.New("upstream: connection failed during call")
	// ErrClosed: the group was closed.
	ErrClosed = errors.New("upstream: closed")
	// ErrMismatchedReply: the metastore sent a message that does not answer
	// the call in flight (another method name, seqid or message type). The
	// connection is closed; errors carrying it also match ErrBroken.
	ErrMismatchedReply = errors.New("upstream: reply does not match the call")
	// ErrClientGone: the call was dropped before it was sent because its
	// client had closed its connection (Call.ClientGone).
	ErrClientGone = errors.New("upstream: client gone before the call was sent")
	// ErrAcquireTimeout: no connection became free within the call's wait
	// bound (its class timeout, or AcquireTimeout). Nothing was sent.
	ErrAcquireTimeout = errors.New("upstream: timed out waiting for a connection")
)

// Class selects the timeout and retry rules of a call.
type Class uint8

const (
	// Read calls are idempotent: bounded by ReadTimeout, and retried on the
	// next metastore when the connection failed before a reply arrived.
	Read Class = iota
	// Write calls may run for tens of minutes: bounded by WriteTimeout
	// (none by default) and never retried once sent.
	Write
	// SessionCall is set_ugi or setMetaConf: bounded by SessionTimeout,
	// never retried once sent.
	SessionCall
)

// Config configures a Group. The zero value of each field selects the
// default in its comment; URIs is required.
type Config struct {
	// URIs are the metastores, "thrift://host:port", tried in this order:
	// the first healthy one takes the calls, the rest are failover.
	URIs []string
	// Transport is the upstream framing. Default buffered.
	Transport wire.Transport
	// MaxConns bounds open connections per metastore. Default 64.
	MaxConns int
	// MaxIdle bounds idle connections kept per metastore. Default MaxConns.
	MaxIdle int
	// IdleTimeout closes connections idle longer. Default 5m.
	IdleTimeout time.Duration
	// DialTimeout bounds connecting. Default 5s.
	DialTimeout time.Duration
	// ReadTimeout bounds a read call. Default 10m, like
	// hive.metastore.client.socket.timeout. Negative: none.
	ReadTimeout time.Duration
	// WriteTimeout bounds a write call. Default none (0): a rename of a
	// table with thousands of partitions can take half an hour.
	WriteTimeout time.Duration
	// AcquireTimeout bounds the wait for a pooled connection of a call
	// whose class has no timeout (writes by default); other calls wait at
	// most their own class timeout. Default 1m: a write that has not even
	// started after a minute is better failed (nothing was sent, the
	// client's retry is safe) than left queued behind long writes.
	// Negative: no bound.
	AcquireTimeout time.Duration
	// ReservedReadConns is the share of MaxConns per metastore that only
	// read (and session) calls may use, so writes, which may run for
	// half an hour, can never take every connection. Default MaxConns/4
	// (16 of 64); always less than MaxConns. Negative: none.
	ReservedReadConns int
	// Budget, if set, is the in-flight byte budget shared with the client
	// side: a reply is detached from its connection (which goes back to
	// the pool before the client is written to) only if its bytes fit.
	// One that does not fit is written to the client while its connection
	// is still held, so memory held for slow clients stays bounded by the
	// budget plus MaxConns replies. Nil: unlimited.
	Budget *inflight.Budget
	// HoldMax is the largest reply held whole in memory. A larger one, for
	// a sink that can stream (a client on buffered transport, or on framed
	// when the metastore is framed too), is passed on as it arrives
	// through a StreamWindow-sized buffer while its connection is held;
	// for other sinks (the cache fill) it is read whole. Default 8 MiB:
	// above the common large replies (a 500-partition batch of a wide
	// table is 2-3 MiB) so they free their connection at once, while one
	// rare huge listing cannot take 100s of MiB per call. Negative: never
	// stream.
	HoldMax int
	// StreamWriteTimeout bounds each write of a streamed reply to its
	// client, so a client that stops reading frees the metastore
	// connection. Default 30s.
	StreamWriteTimeout time.Duration
	// ClientGonePoll is how often a call queued for a connection checks
	// Call.ClientGone. Default 100ms.
	ClientGonePoll time.Duration
	// SessionTimeout bounds set_ugi/setMetaConf. Default 30s.
	SessionTimeout time.Duration
	// HealthInterval is the period of background health checks. Default 5s.
	HealthInterval time.Duration
	// ReplyLimits bound reply messages. Default MaxMessage 2 GiB - 1, as
	// Hive 4 clients allow.
	ReplyLimits wire.Limits
	// TLS, if set, makes every metastore connection TLS: it is called for
	// each new connection, so that rotated certificates and CA bundles
	// apply to the next one. An empty ServerName in what it returns means
	// the host of the URI. Default nil: plain TCP.
	TLS func() *tls.Config
	// Handshake, if set, authenticates each new metastore connection
	// after TLS and before any call (Kerberos: auth/sasl). user is the
	// session's Authenticated user the connection acts for, "" for the
	// proxy's own connections (health checks, set_ugi sessions). It
	// returns the connection to use from then on, and must honour ctx
	// (bounded by DialTimeout). Connections are pooled per session, so a
	// connection authenticated for one user never carries another's calls.
	// Default nil: none.
	Handshake func(ctx context.Context, c net.Conn, user string) (net.Conn, error)
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxConns <= 0 {
		c.MaxConns = 64
	}
	if c.MaxIdle <= 0 || c.MaxIdle > c.MaxConns {
		c.MaxIdle = c.MaxConns
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 5 * time.Minute
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = 10 * time.Minute
	}
	if c.AcquireTimeout == 0 {
		c.AcquireTimeout = time.Minute
	}
	switch {
	case c.ReservedReadConns == 0:
		c.ReservedReadConns = c.MaxConns / 4
	case c.ReservedReadConns < 0:
		c.ReservedReadConns = 0
	}
	c.ReservedReadConns = min(c.ReservedReadConns, c.MaxConns-1)
	if c.HoldMax == 0 {
		c.HoldMax = 8 << 20
	}
	if c.StreamWriteTimeout <= 0 {
		c.StreamWriteTimeout = 30 * time.Second
	}
	if c.ClientGonePoll <= 0 {
		c.ClientGonePoll = 100 * time.Millisecond
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 30 * time.Second
	}
	if c.HealthInterval <= 0 {
		c.HealthInterval = 5 * time.Second
	}
	if c.ReplyLimits.MaxMessage <= 0 {
		c.ReplyLimits.MaxMessage = 1<<31 - 1
	}
	c.ReplyLimits = c.ReplyLimits.WithDefaults()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// ParseURI returns host:port from "thrift://host:port" (or plain host:port).
func ParseURI(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") {
		s = "thrift://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("upstream: parse %q: %w", s, err)
	}
	if u.Scheme != "thrift" || u.Host == "" || u.Port() == "" {
		return "", fmt.Errorf("upstream: %q is not thrift://host:port", s)
	}
	return u.Host, nil
}

// Call is one client request to forward.
type Call struct {
	// Session is the state the upstream connection must carry.
	Session *Session
	// Becomes, if set, is the state the connection has after this call
	// succeeds (set_ugi, setMetaConf).
	Becomes *Session
	Class   Class
	// Msg is the client's message; it is forwarded as is, seqid included,
	// so the reply bytes are exactly what the client expects. A reply is
	// accepted only if it carries Msg's method name and seqid and is a
	// REPLY or EXCEPTION; anything else closes the connection and fails the
	// call with ErrMismatchedReply.
	Msg wire.Message
	// Oneway is set for methods the method table declares oneway (fb303
	// shutdown, reinitialize): no reply is read. A message typed ONEWAY
	// without Oneway set (a method the proxy does not know) is sent the
	// same way. Either way the connection is closed afterwards, never
	// pooled: a reply the metastore might still send (libthrift answers a
	// method it lacks, oneway or not) could not be paired with any later
	// call.
	Oneway bool
	// ClientGone, if set, reports whether the client that made the call
	// has gone. It is asked after a connection is checked out and every
	// ClientGonePoll while the call waits for one; a call whose client has
	// gone is dropped (ErrClientGone), never sent. It must not block.
	ClientGone func() bool
}

// ReplySink receives the reply to a call. Reply runs after the upstream
// connection has been released, with the reply in a buffer that no longer
// belongs to it, so a slow client never holds a metastore connection. The
// exception is a reply that does not fit Config.Budget: it is handed over
// while the connection is still held, so a sink writing to a client must
// bound that write (the client's reply-write deadline).
//
// m may be kept after Reply returns unless the sink implements
// BorrowingSink.
type ReplySink interface {
	Reply(m wire.Message) error
}

// BorrowingSink is a ReplySink that keeps no byte of m after Reply returns
// (it writes the reply out and forgets it). The buffer is then reused for
// later replies, so the forwarding path allocates nothing per call.
type BorrowingSink interface {
	ReplySink
	// BorrowsReply marks the promise; it is never called.
	BorrowsReply()
}

// Stats are counters of a Group, for metrics and tests.
type Stats struct {
	// Mismatched counts replies that did not answer their call (and the
	// connections closed for it).
	Mismatched uint64
	// OnewayClosed counts connections closed after a oneway call.
	OnewayClosed uint64
	// ClientGone counts calls dropped, unsent, because their client had
	// gone.
	ClientGone uint64
	// AcquireTimeouts counts calls that gave up waiting for a connection.
	AcquireTimeouts uint64
	// Held counts replies written to their client while the connection
	// was held, because they did not fit the in-flight budget.
	Held uint64
	// Streamed counts replies larger than HoldMax passed on as they
	// arrived.
	Streamed uint64
	// StreamedUnclaimed counts the streamed replies whose window did not
	// fit the in-flight budget and went through a small one outside it.
	StreamedUnclaimed uint64
}

type counters struct {
	mismatched, onewayClosed, clientGone, acquireTimeouts, held, streamed, streamedUnclaimed atomic.Uint64
}

// Stats returns the group's counters.
func (g *Metastores) Stats() Stats {
	return Stats{Mismatched: g.n.mismatched.Load(), OnewayClosed: g.n.onewayClosed.Load(),
		ClientGone: g.n.clientGone.Load(), AcquireTimeouts: g.n.acquireTimeouts.Load(), Held: g.n.held.Load(),
		Streamed: g.n.streamed.Load(), StreamedUnclaimed: g.n.streamedUnclaimed.Load()}
}

// Metastores is the set of metastores behind one proxy listener.
type Metastores struct {
	cfg    Config
	pools  []*pool
	ctx    context.Context // cancelled by Close; owns the health loop
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
	n      counters
	// afterReplyRead, set by tests only, runs between reading a reply
	// and stopping the call's cancel function: the window a late cancel
	// races. Atomic: the health loop's calls read it too.
	afterReplyRead atomic.Pointer[func(ctx context.Context)]
}

// New validates cfg and starts the health checker.
func New(cfg Config) (*Metastores, error) {
	cfg = cfg.withDefaults()
	if len(cfg.URIs) == 0 {
		return nil, errors.New("upstream: no metastore URI configured")
	}
	g := &Metastores{cfg: cfg}
	for _, u := range cfg.URIs {
		addr, err := ParseURI(u)
		if err != nil {
			return nil, err
		}
		p := &pool{g: g, addr: addr, sem: make(chan struct{}, cfg.MaxConns),
			writers: make(chan struct{}, cfg.MaxConns-cfg.ReservedReadConns),
			wake:    make(chan struct{}), idle: map[string][]*conn{}}
		p.healthy.Store(true) // optimistic until the first check says otherwise
		g.pools = append(g.pools, p)
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.wg.Add(1)
	go g.healthLoop()
	return g, nil
}

// Queued is the calls waiting for a write slot (writes, and reads of
// background sessions), over all metastores.
func (g *Metastores) Queued() int {
	n := 0
	for _, p := range g.pools {
		n += int(p.queued.Load())
	}
	return n
}

// Addrs lists the metastores in failover order.
func (g *Metastores) Addrs() []string {
	out := make([]string, len(g.pools))
	for i, p := range g.pools {
		out[i] = p.addr
	}
	return out
}

// Healthy reports the last known health of each metastore.
func (g *Metastores) Healthy() []bool {
	out := make([]bool, len(g.pools))
	for i, p := range g.pools {
		out[i] = p.healthy.Load()
	}
	return out
}

// Close stops health checks and closes idle connections; connections in
// use are closed when returned. Safe to call twice.
func (g *Metastores) Close() error {
	if g.closed.Swap(true) {
		return nil
	}
	g.cancel()
	g.wg.Wait()
	for _, p := range g.pools {
		p.closeIdle()
	}
	return nil
}

// order returns the pools to try: healthy ones first, in configured order,
// then the unhealthy ones (health may be stale).
func (g *Metastores) order(buf []*pool) []*pool {
	buf = buf[:0]
	for _, p := range g.pools {
		if p.healthy.Load() {
			buf = append(buf, p)
		}
	}
	for _, p := range g.pools {
		if !p.healthy.Load() {
			buf = append(buf, p)
		}
	}
	return buf
}

// Do forwards c to a metastore and hands the reply to sink. A read whose
// connection fails before any reply byte arrives moves on to the next
// metastore; any other call is never sent twice.
func (g *Metastores) Do(ctx context.Context, c Call, sink ReplySink) error {
	if g.closed.Load() {
		return ErrClosed
	}
	var arr [4]*pool
	var lastErr error
	for _, p := range g.order(arr[:0]) {
		err := p.do(ctx, c, sink)
		if err == nil {
			return nil
		}
		lastErr = err
		if errors.Is(err, ErrClientGone) {
			return err // nobody to answer, on any metastore
		}
		var ne *notSentError
		if errors.As(err, &ne) {
			continue // nothing reached the metastore: safe for any class
		}
		var fe *failedBeforeReplyError
		if c.Class == Read && errors.As(err, &fe) {
			g.cfg.Logger.Warn("read failed before reply; trying next metastore", "addr", p.addr, "err", err)
			continue
		}
		return err
	}
	if lastErr == nil {
		lastErr = ErrUnavailable
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, lastErr)
}

// notSentError: the call never left the proxy (dial or session replay
// failed).
type notSentError struct{ err error }

func (e *notSentError) Error() string { return "upstream: not sent: " + e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// failedBeforeReplyError: the request may have been sent but the
// connection failed before any reply byte arrived. It matches ErrBroken
// and its cause (an io.EOF, a net.Error) alike.
type failedBeforeReplyError struct{ err error }

func (e *failedBeforeReplyError) Error() string {
	return "upstream: failed before reply: " + e.err.Error()
}
func (e *failedBeforeReplyError) Unwrap() []error { return []error{ErrBroken, e.err} }

func (g *Metastores) timeout(c Class) time.Duration {
	switch c {
	case Read:
		return g.cfg.ReadTimeout
	case SessionCall:
		return g.cfg.SessionTimeout
	}
	return g.cfg.WriteTimeout
}

// acquireWait bounds the wait for a connection: the call's own timeout, or
// AcquireTimeout for calls without one. 0: no bound.
func (g *Metastores) acquireWait(c Class) time.Duration {
	if t := g.timeout(c); t > 0 {
		return t
	}
	return max(g.cfg.AcquireTimeout, 0)
}

func (g *Metastores) healthLoop() {
	defer g.wg.Done()
	t := time.NewTicker(g.cfg.HealthInterval)
	defer t.Stop()
	for {
		for _, p := range g.pools {
			p.check(g.ctx)
		}
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
	}
}
