package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/limits/inflight"
	"github.com/hmsproxy/hmsproxy/limits/peers"
	"github.com/hmsproxy/hmsproxy/limits/ratelimit"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

var errTooManyFiles = syscall.EMFILE

// clientConn is one client connection and the session state HMS would
// keep for it. It is used by its own goroutine only.
type clientConn struct {
	s    *Server
	nc   net.Conn
	r    *wire.Reader
	w    *wire.Writer
	sess *upstream.Session
	// caller is who the connection's calls are charged to (rate
	// limits): its authenticated identity, else its source address;
	// never a set_ugi claim
	caller  ratelimit.Caller
	scratch []byte
	rt      *route // the group of the call in progress
	// rename, set when the router renamed the call in progress, shows a
	// REPLY body under the client's names; every answer to the client
	// passes through it, cached or not (route.go). rbuf and flat are its
	// buffers.
	rename func(dst []byte, typ byte, body []byte) ([]byte, error)
	rbuf   []byte
	flat   []byte

	// Buffers reused across calls, so the hit path does not allocate.
	res  hms.Resolved // the request's args, resolved in one walk
	pres hms.Resolved // a read a prune makes up (table, names, partitions)
	// psynth are the made-up reads of prunes on this connection, by
	// method, identity and args (pruneSynthOf).
	psynth  map[string]*pruneSynth
	pmemo   []byte      // the key of psynth being looked up
	plast   prunedLast  // the made-up reads of the table pruned last
	pargs   []byte      // the args of a made-up read being built
	ptk     *tableKeys  // the partition keys of the table pruned last
	psel    []int32     // the positions a prune selected
	pselj   []int32     // and where they are in its candidates
	pparts  []prunePart // their entries
	ppieces [][]byte    // and the pieces of the reply
	key     []byte
	ekey    []byte // a batch's entry key prefix
	// lastKey is the key of this connection's last single-entry hit, and
	// lastRef the entry found once it was hit twice in a row: a client
	// reading one table again and again (planners do) is served through
	// Again, without ristretto's hashing and locking, and a client
	// reading a different key each time makes no Ref.
	lastKey []byte
	lastRef *cache.Ref
	// The request of that hit, its route and scope: a request that
	// repeats it is answered through lastRef without being decoded.
	lastMeth  *hms.Method
	lastRoute *route
	lastScope cache.Scope
	lastBody  []byte
	// lastBatch is the by-names request last answered from a memo's
	// flat copy: one that repeats it is answered without being decoded
	// (repeatedBatch).
	lastBatch repeatBatch
	hdr       []byte
	deps      []cache.Dep
	ents      []cache.Entity

	iov   [][]byte    // reply pieces of a batch answered from the cache
	frame []byte      // their wrapper bytes
	objs  [][]byte    // the objects of that reply
	parts []namedPart // a by-names read's partitions being assembled
	want  [][]byte    // and its names, sorted, when a memo answers it
	group []byte      // and its table's segment group

	// locks are the write locks the client took through this connection
	// (locks.go): their grants invalidated what they cover, and reads of
	// it go to the metastore until they are released.
	locks []heldLock

	outcome Outcome // how the call in progress was answered
	rec     callRec // the call in progress as the recorder sees it (record.go)
	// writing is the group of a call in progress that may change its
	// metastore (forward), for a Shutdown that cuts it.
	writing atomic.Pointer[route]

	// budgetID names the connection's flush budget (flushID); "" until
	// first needed.
	budgetID string

	// sessClaim is the bytes of session state (sess) claimed from the
	// in-flight budget; returned when the connection closes.
	sessClaim int64

	// claim is the connection's standing with the in-flight budget: its
	// request reader claims bytes as they arrive, and may be the one
	// reader finishing its request on the budget's reserve.
	claim inflight.Claimant

	// Read deadlines: the idle deadline is moved only when it has less
	// than 7/8 of the idle timeout left, or a request deadline replaced
	// it, so most calls re-arm no timer.
	idleUntil time.Time
	reqStart  time.Time   // when the request being read began to arrive
	reqArmed  bool        // the read deadline is a request deadline
	goneFn    func() bool // c.gone, bound once

	// phaseMu guards phase and, while it is held, the read deadline set
	// by Drain, Shutdown or an eviction against the request deadline set
	// when a request starts: a connection is cut only while nothing of
	// its next request has been read.
	phaseMu sync.Mutex
	phase   connPhase
	// idleSince is when the connection began to wait for its next request
	// (Unix nanoseconds), 0 while it is not idle; written with phase,
	// read without a lock by evictIdle's scan, which cutIfIdle confirms.
	idleSince atomic.Int64

	src        peers.Key // the client's address, as the per-address limit counts it
	background bool      // DialBackground's: never evicted, not counted per address
	// evicted: closed to admit another client (evictIdle, under s.mu); it
	// no longer counts against the limits, and leaves at its next wait.
	evicted atomic.Bool
}

// connPhase is where a connection stands between and in calls.
type connPhase uint8

const (
	phaseIdle connPhase = iota // waiting for the next request, none of it read
	phaseBusy                  // reading a request or in a call
	phaseCut                   // woken by Drain or Shutdown while idle: closes
)

// setPhase moves the connection to p; now is when it became idle, for
// phaseIdle.
func (c *clientConn) setPhase(p connPhase, now time.Time) {
	c.phaseMu.Lock()
	c.phase = p
	if p == phaseIdle {
		c.idleSince.Store(now.UnixNano())
	} else {
		c.idleSince.Store(0)
	}
	c.phaseMu.Unlock()
}

// cutIfIdle makes a connection waiting for its next request return from
// its read, so that it closes; it reports whether it did.
func (c *clientConn) cutIfIdle() bool {
	c.phaseMu.Lock()
	defer c.phaseMu.Unlock()
	if c.phase != phaseIdle {
		return false
	}
	c.phase = phaseCut
	c.idleSince.Store(0)
	c.nc.SetReadDeadline(aLongTimeAgo)
	return true
}

// AuthenticatedConn is a client connection whose listener authenticated
// the peer (Kerberos, auth/sasl). Its user is the connection's identity
// for cache scope, rate limits and upstream pooling from the first call
// on, and set_ugi does not change it, as on a metastore with SASL.
// NetConn is the connection to do I/O on: a wrapper would hide
// *net.TCPConn's writev from the reply path.
type AuthenticatedConn interface {
	net.Conn
	AuthenticatedUser() string
	NetConn() net.Conn
}

func newClientConn(s *Server, nc net.Conn) *clientConn {
	sess := upstream.NoSession
	if ac, ok := nc.(AuthenticatedConn); ok {
		sess = upstream.AuthenticatedSession(ac.AuthenticatedUser())
		nc = ac.NetConn()
	}
	c := &clientConn{s: s, nc: nc,
		r:      wire.NewReader(nc, s.cfg.Transport, s.cfg.Limits),
		w:      wire.NewWriter(nc, s.cfg.Transport),
		sess:   sess,
		caller: callerOf(sess, nc.RemoteAddr())}
	c.r.SetGate((*requestGate)(c))
	c.w.SetTimeout(nc, s.cfg.WriteTimeout)
	return c
}

// callerOf is who a connection's calls are charged to: the identity its
// listener authenticated, else the address it comes from.
func callerOf(sess *upstream.Session, remote net.Addr) ratelimit.Caller {
	if u := sess.Authenticated(); u != "" {
		return ratelimit.Caller{User: u}
	}
	var addr netip.Addr
	if ta, ok := remote.(*net.TCPAddr); ok {
		addr = ta.AddrPort().Addr()
	}
	return ratelimit.CallerAt(addr)
}

// armIdle sets the deadline of the wait for the next request.
func (c *clientConn) armIdle(now time.Time) {
	idle := c.s.cfg.IdleTimeout
	if !c.reqArmed && (idle == 0 || c.idleUntil.Sub(now) >= idle-idle/8) {
		return
	}
	c.reqArmed = false
	c.idleUntil = time.Time{}
	if idle > 0 {
		c.idleUntil = now.Add(idle)
	}
	c.nc.SetReadDeadline(c.idleUntil)
}

// requestGate is a clientConn seen by its request reader: it starts the
// request deadline once a request has begun to arrive, and claims the
// request's bytes from the in-flight budget as the reader's buffer grows.
type requestGate clientConn

func (g *requestGate) Started() {
	c := (*clientConn)(g)
	if c.s.startHook != nil {
		c.s.startHook()
	}
	c.reqStart = time.Now()
	c.phaseMu.Lock()
	defer c.phaseMu.Unlock()
	cut := c.phase == phaseCut
	c.phase = phaseBusy
	c.idleSince.Store(0)
	if t := c.s.cfg.ReadTimeout; t > 0 {
		c.nc.SetReadDeadline(c.reqStart.Add(t))
		c.reqArmed = true
	} else if cut {
		// A drain woke the reader just as this request began: the
		// request is served, so its wake-up deadline goes.
		c.nc.SetReadDeadline(time.Time{})
		c.reqArmed = true
	}
}

func (g *requestGate) Grow(n int) error {
	c := (*clientConn)(g)
	b := c.s.cfg.Budget
	if b.TryGrow(&c.claim, int64(n)) {
		return nil
	}
	// Back-pressure: the client's bytes wait in its socket meanwhile. The
	// wait counts against the request deadline; the budget's reserve lets
	// the oldest waiting request finish, so partial requests never wait
	// on each other for good.
	ctx := c.s.stopping
	if t := c.s.cfg.ReadTimeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, c.reqStart.Add(t))
		defer cancel()
	}
	if err := b.Grow(ctx, &c.claim, int64(n)); err != nil {
		return fmt.Errorf("proxy: claim %d request bytes: %w", n, err)
	}
	return nil
}

func (g *requestGate) Shrink(n int) { g.s.cfg.Budget.Release(int64(n)) }

// Reply writes an upstream reply to the client. The upstream echoed the
// client's own seqid and name, which the forwarder has checked.
func (c *clientConn) Reply(m wire.Message) error {
	if c.rename != nil {
		return c.replyWith(m, m.Type, m.Body())
	}
	if err := c.w.Write(m.Buf); err != nil {
		return fmt.Errorf("proxy: write reply to client: %w", err)
	}
	return nil
}

// BorrowsReply: Reply keeps nothing of the reply.
func (c *clientConn) BorrowsReply() {}

// StreamTo takes a reply too large to hold as it arrives: straight to the
// socket on buffered transport; on framed only when its size is known.
func (c *clientConn) StreamTo(size int64) (io.Writer, func(error)) {
	if c.rename != nil {
		return nil, nil // the reply is rewritten whole
	}
	done := func(error) {
		// The stream set deadlines of its own: clear them, and make the
		// writer arm its reply deadline afresh on the next write.
		c.nc.SetWriteDeadline(time.Time{})
		c.w.SetTimeout(c.nc, c.s.cfg.WriteTimeout)
	}
	if c.s.cfg.Transport != wire.Framed {
		return c.recordingStream(c.nc), done
	}
	if size < 0 || size > math.MaxInt32 {
		return nil, nil
	}
	f := &framedStream{Conn: c.nc}
	binary.BigEndian.PutUint32(f.hdr[:], uint32(size))
	return c.recordingStream(f), done
}

// recordingStream is w, noting what passes for the recorder while the
// call is recorded.
func (c *clientConn) recordingStream(w io.Writer) io.Writer {
	if !c.rec.on {
		return w
	}
	return recordingWriter{Writer: w, tap: &c.rec.tap}
}

// framedStream writes a frame header before the first bytes of a
// streamed reply.
type framedStream struct {
	net.Conn
	hdr  [4]byte
	sent bool
}

func (f *framedStream) Write(b []byte) (int, error) {
	if !f.sent {
		if _, err := f.Conn.Write(f.hdr[:]); err != nil {
			return 0, err
		}
		f.sent = true
	}
	return f.Conn.Write(b)
}

// gone reports, without blocking, whether the client has closed its
// connection: a peek that finds EOF or an error. Bytes waiting (a
// pipelined next request) mean it is still there. Upstream asks this
// before sending a call, so a call queued behind busy connections does
// not run after its client gave up.
func (c *clientConn) gone() bool {
	if c.r.Buffered() > 0 {
		return false
	}
	return wire.Peek(c.nc) == wire.PeekClosed
}

// sessionSink forwards a session call's reply and notes whether it
// succeeded.
type sessionSink struct {
	c  *clientConn
	ok bool
}

func (k *sessionSink) Reply(m wire.Message) error {
	k.ok = upstream.Succeeded(m)
	return k.c.Reply(m)
}

func (k *sessionSink) BorrowsReply() {}

func (c *clientConn) serve() {
	defer c.s.untrack(c)
	defer c.nc.Close()
	defer c.r.Discard() // returns the claim of a request cut off
	defer c.s.cfg.Budget.Finished(&c.claim)
	defer func() { c.s.cfg.Budget.Release(c.sessClaim) }()
	log := c.s.log.With("remote", c.nc.RemoteAddr().String())
	now := time.Now()
	for {
		// Armed and idle before the check: a wake-up deadline that Drain
		// or Shutdown sets after the check is not overwritten, and one
		// that came before is seen by the check. now is when the last
		// call ended.
		c.armIdle(now)
		c.setPhase(phaseIdle, now)
		if c.s.isClosing() || c.s.draining.Load() || c.evicted.Load() {
			return
		}
		m, err := c.r.Read()
		c.s.cfg.Budget.Finished(&c.claim) // read whole or given up: the reserve passes on
		if err != nil {
			c.readFailed(err, log)
			return
		}
		// A request read whole in one go never called Started.
		c.setPhase(phaseBusy, time.Time{})
		start := time.Now()
		meth := hms.Lookup(m.Name())
		c.outcome, c.rt = OutcomePassthrough, nil
		rec := c.s.cfg.Recorder
		recording := rec != nil && !c.background && rec.Recording()
		if recording {
			c.beginRecord()
		}
		err = c.handle(meth, m)
		if err != nil {
			c.outcome = OutcomeError
		}
		now = time.Now()
		if recording {
			c.endRecord(rec, meth, m, start, now, err)
		}
		c.s.stats.observe(meth, c.outcome, now.Sub(start))
		if c.rt != nil && c.s.router != nil {
			c.rt.calls[c.outcome].Add(1)
		}
		// After the counts: a client that has its reply finds them
		// (nearly always) up to date.
		c.dropLargeBuffers()
		if c.s.callHook != nil {
			c.s.callHook(c)
		}
		if err != nil {
			if c.writeTimedOut(err) {
				c.s.stats.clientTimeouts[TimeoutWrite].Add(1)
				log.Info("client cut off: reply not taken within the write timeout", "method", string(m.Name()),
					"user", c.sess.User(), "timeout", c.s.cfg.WriteTimeout)
				return
			}
			log.Warn("closing client connection", "method", string(m.Name()), "user", c.sess.User(), "err", err)
			return
		}
	}
}

// writeTimedOut tells whether err is this client's write deadline, not
// an upstream connection's.
func (c *clientConn) writeTimedOut(err error) bool {
	var oe *net.OpError
	// A reply of several pieces (header and cached body) goes out in one
	// writev, which names its op so.
	return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &oe) && (oe.Op == "write" || oe.Op == "writev") &&
		oe.Addr != nil && oe.Addr.String() == c.nc.RemoteAddr().String()
}

var (
	nameSetUGI     = []byte("set_ugi")
	nameSetMetaCon = []byte("setMetaConf")
	nameShutdown   = []byte("shutdown")
)

// maxKeptRenameBuf bounds the rewrite buffers a connection keeps between
// calls, and maxKeptBuf each of the others (in bytes: a prune's
// selection, entries and reply pieces, a batch reply's pieces), so that
// an idle connection holds at most about 2 MiB of them (promise 9): one
// large reply (a prune of every partition of a 100k-partition table)
// must not stay with the connection.
const (
	maxKeptRenameBuf = 1 << 20
	maxKeptBuf       = 128 << 10
)

// dropLargeBuffers lets go of the reuse buffers a call grew past their
// bound. Called once a call is answered: they hold no entries by then
// (each is cleared after its reply is written).
func (c *clientConn) dropLargeBuffers() {
	if cap(c.rbuf)+cap(c.flat) > maxKeptRenameBuf {
		c.rbuf, c.flat = nil, nil
	}
	c.psel = keptBuf(c.psel)
	c.pselj = keptBuf(c.pselj)
	c.pparts = keptBuf(c.pparts)
	c.ppieces = keptBuf(c.ppieces)
	c.iov = keptBuf(c.iov)
	c.frame = keptBuf(c.frame)
	c.objs = keptBuf(c.objs)
	c.parts = keptBuf(c.parts)
	c.want = keptBuf(c.want)
}

// keptBuf is b, or nil when it takes more than maxKeptBuf bytes.
func keptBuf[T any](b []T) []T {
	var t T
	if uintptr(cap(b))*unsafe.Sizeof(t) > maxKeptBuf {
		return nil
	}
	return b
}

// errClose asks the loop to drop the connection, as HMS would.
var errClose = errors.New("proxy: connection closed as the metastore would")

func (c *clientConn) handle(meth *hms.Method, m wire.Message) error {
	if m.Type != wire.Call && m.Type != wire.Oneway {
		c.appError(string(m.Name()), m.SeqID, wire.ExInvalidMsgType,
			fmt.Sprintf("proxy: message type %d is not a call", m.Type))
		return errClose
	}
	if m.Type == wire.Oneway && meth != nil && !meth.Oneway {
		// HMS would answer this two-way method anyway, and a reply with no
		// caller waiting for it could reach another client on a shared
		// connection. The client does not expect an answer, so after this
		// one its stream is out of step: close it, as for any other
		// refused message type, and its next call reconnects.
		c.appError(string(m.Name()), m.SeqID, wire.ExInvalidMsgType,
			fmt.Sprintf("proxy: %s is not a oneway method", m.Name()))
		return errClose
	}
	c.rt, c.rename = &c.s.routes[0], nil
	name := m.Name()
	// Only the method table makes a call oneway. An unknown method typed
	// ONEWAY is forwarded on a connection that is then closed (upstream
	// does that for any ONEWAY message not marked Oneway).
	oneway := meth != nil && meth.Oneway
	switch {
	case bytes.Equal(name, nameSetUGI):
		return c.setUGI(meth, m)
	case bytes.Equal(name, nameSetMetaCon):
		return c.setMetaConf(meth, m)
	case oneway && bytes.Equal(name, nameShutdown):
		// fb303 shutdown resets the server-side state of the connection it
		// arrives on; upstream connections are shared, so it stops here.
		// The client closes its socket next.
		return nil
	}
	// The proxy's own background loads (the warm-up) are bounded by
	// their concurrency and the pool share they may take, not by the
	// per-user limits of the identity they load as.
	if l := c.s.cfg.Limiter; l != nil && !oneway && !c.sess.Background() {
		if err := l.AllowCall(c.s.ctx, c.caller, meth); err != nil {
			c.outcome = OutcomeError
			return c.refuse(meth, m, err.Error())
		}
	}
	if rt := c.s.router; rt != nil {
		var handled bool
		var err error
		if m, handled, err = c.route(rt, meth, m); handled {
			return err
		}
	}
	if k := c.rt.cache; k != nil && meth == nil && !k.unknown.isKnownRead(name) {
		// A method the table does not know may be a newer metastore's
		// write: once it is answered, invalidate everything of the
		// upstream group, as a write would (issue 10).
		c.outcome = OutcomeWrite
		return c.write(k.unknown.writeFor(name), m)
	}
	if k := c.rt.cache; k != nil && meth != nil && !oneway {
		switch {
		case meth.Class == hms.Read && meth.Cacheable:
			return c.cachedRead(meth, m)
		case meth.Name == "lock" || meth.Name == "check_lock" || meth.Name == "unlock":
			return c.lockCall(meth, m)
		case meth.Class == hms.Write:
			c.outcome = OutcomeWrite
			return c.write(meth, m)
		case meth.Name == "allocate_table_write_ids":
			k.txns.Observe(meth.Name, m.Body(), k.DefaultCatalog)
		}
	}
	if meth != nil && meth.Class == hms.Write {
		c.outcome = OutcomeWrite
	}
	call := upstream.Call{Session: c.sess, Class: classOf(meth), Msg: m, Oneway: oneway}
	return c.forward(call, c)
}

// classOf maps the method table onto upstream call classes. Methods the
// table does not know may change state, so they get write rules.
func classOf(meth *hms.Method) upstream.Class {
	if meth != nil && meth.Idempotent() {
		return upstream.Read
	}
	return upstream.Write
}

func (c *clientConn) forward(call upstream.Call, sink upstream.ReplySink) error {
	if c.goneFn == nil {
		c.goneFn = c.gone
	}
	call.ClientGone = c.goneFn
	if call.Class == upstream.Write { // reads pay nothing for it
		c.writing.Store(c.rt)
		defer c.writing.Store(nil)
	}
	if err := c.rt.up.Do(c.s.ctx, call, sink); err != nil {
		// The client must see a transport failure, never a made-up
		// answer: its retry logic reconnects on exactly that.
		return err
	}
	return nil
}

func (c *clientConn) setUGI(meth *hms.Method, m wire.Message) error {
	if c.sess.HasUGI() {
		// HMS refuses a second set_ugi by dropping the connection.
		return fmt.Errorf("%w: second set_ugi", errClose)
	}
	if msg := c.ugiRefusal(m.Body()); msg != "" {
		return c.refuse(meth, m, msg)
	}
	return c.sessionCall(meth, m, c.sess.WithUGI(m.Body()))
}

func (c *clientConn) setMetaConf(meth *hms.Method, m wire.Message) error {
	if n := len(m.Body()); int64(n) > c.s.cfg.MaxSessionBytes {
		return c.refuse(meth, m, fmt.Sprintf("proxy: setMetaConf of %d bytes is more session state than a connection may keep (limits.max_session_bytes, %d)",
			n, c.s.cfg.MaxSessionBytes))
	}
	key, value, err := upstream.ConfArgs(m.Body())
	if err != nil {
		c.appError(string(m.Name()), m.SeqID, wire.ExProtocolError, "proxy: bad setMetaConf args: "+err.Error())
		return errClose
	}
	return c.sessionCall(meth, m, c.sess.WithConf(key, value))
}

// ugiRefusal says why set_ugi args are refused, "" when they are not.
// HMS takes any names, but stores a user or group name in no column
// wider than hms.MaxPrincipalName characters: a longer one can own, be
// granted or be checked against nothing, and only costs memory. Such a
// set_ugi is answered with a MetaException, which Java clients log and
// go on without an identity (HiveMetaStoreClient.open), as from a
// metastore that refused it. Malformed args go to the metastore, which
// answers them; the session bound holds them anyway.
func (c *clientConn) ugiRefusal(args []byte) string {
	if n := len(args); int64(n) > c.s.cfg.MaxSessionBytes {
		return fmt.Sprintf("proxy: set_ugi of %d bytes is more session state than a connection may keep (limits.max_session_bytes, %d)",
			n, c.s.cfg.MaxSessionBytes)
	}
	tooLong := func(b []byte) bool {
		return len(b) > hms.MaxPrincipalName && (len(b) > 4*hms.MaxPrincipalName || utf8.RuneCount(b) > hms.MaxPrincipalName)
	}
	d := wire.NewDecoder(args)
	for {
		typ, id := d.FieldBegin()
		if typ == wire.TStop || d.Err() != nil {
			return ""
		}
		switch {
		case id == 1 && typ == wire.TString:
			if b := d.Bytes(); tooLong(b) {
				return fmt.Sprintf("proxy: set_ugi user name of %d bytes is longer than the metastore stores a user name (%d characters)",
					len(b), hms.MaxPrincipalName)
			}
		case id == 2 && typ == wire.TList:
			elem, n := d.ListBegin()
			if elem != wire.TString {
				for i := 0; i < n && d.Err() == nil; i++ { // not names: the metastore's to answer
					d.Skip(elem)
				}
				continue
			}
			for i := 0; i < n && d.Err() == nil; i++ {
				if b := d.Bytes(); tooLong(b) {
					return fmt.Sprintf("proxy: set_ugi group name of %d bytes is longer than the metastore stores a group name (%d characters)",
						len(b), hms.MaxPrincipalName)
				}
			}
		default:
			d.Skip(typ)
		}
	}
}

// sessionCall forwards a session call that puts the connection into
// state next once the metastore accepts it. next's bytes are claimed
// from the in-flight budget first (and the surplus of the state it
// replaces returned after), so that session state, which lives as long
// as the connection, is budgeted like the bytes of calls in flight.
func (c *clientConn) sessionCall(meth *hms.Method, m wire.Message, next *upstream.Session) error {
	size := next.Size()
	if next == c.sess {
		size = c.sessClaim // set_ugi under SASL: nothing changes
	}
	if size > c.s.cfg.MaxSessionBytes {
		return c.refuse(meth, m, fmt.Sprintf("proxy: %s would make the session state %d bytes, more than a connection may keep (limits.max_session_bytes, %d)",
			m.Name(), size, c.s.cfg.MaxSessionBytes))
	}
	grow := size - c.sessClaim
	if grow > 0 {
		if err := c.claimSession(grow); err != nil {
			return c.refuse(meth, m, "proxy: "+err.Error())
		}
	}
	sink := sessionSink{c: c}
	err := c.forward(upstream.Call{Session: c.sess, Becomes: next, Class: upstream.SessionCall, Msg: m}, &sink)
	if sink.ok {
		c.sess = next
		c.s.cfg.Budget.Release(-grow) // a no-op unless the state shrank
		c.sessClaim = size
	} else {
		c.s.cfg.Budget.Release(grow)
	}
	return err
}

// claimSession claims n bytes of session state, waiting for room no
// longer than a request may take to arrive.
func (c *clientConn) claimSession(n int64) error {
	b := c.s.cfg.Budget
	if b.TryAcquire(n) {
		return nil
	}
	ctx := c.s.stopping
	if t := c.s.cfg.ReadTimeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	return b.Acquire(ctx, n)
}

// readFailed answers a refused message where the protocol allows a reply.
func (c *clientConn) readFailed(err error, log *slog.Logger) {
	var re *wire.ReadError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return
	case c.evicted.Load() && errors.Is(err, os.ErrDeadlineExceeded):
		return // evictIdle logged it
	case errors.Is(err, os.ErrDeadlineExceeded) && (c.s.isClosing() || c.s.draining.Load()),
		errors.Is(err, context.Canceled) && c.s.isClosing():
		return
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		if c.reqArmed || errors.Is(err, context.DeadlineExceeded) {
			c.s.stats.clientTimeouts[TimeoutRead].Add(1)
			log.Info("client cut off: request not complete within the read timeout", "timeout", c.s.cfg.ReadTimeout)
		} else {
			c.s.stats.clientTimeouts[TimeoutIdle].Add(1)
			log.Debug("closing idle client connection", "timeout", c.s.cfg.IdleTimeout)
		}
	case errors.Is(err, inflight.ErrTooLarge):
		log.Warn("client cut off: request larger than the whole in-flight budget", "err", err)
	case errors.As(err, &re):
		code := wire.ExProtocolError
		if errors.Is(err, wire.ErrNotStrict) || errors.Is(err, wire.ErrCompact) || errors.Is(err, wire.ErrBadVersion) {
			code = wire.ExInvalidProtocol
		}
		msg := "proxy: refused message: " + re.Error()
		if errors.Is(err, wire.ErrNotStrict) {
			msg += " (the proxy, like HMS, takes the strict binary protocol; check framed vs buffered transport)"
		}
		c.appError(re.Name, re.SeqID, code, msg)
		log.Warn("refused client message", "err", err, "method", re.Name)
	default:
		log.Debug("client read failed", "err", err)
	}
}

// refuse answers a call the proxy will not make as the metastore answers
// one it refuses: a MetaException where the method declares one.
func (c *clientConn) refuse(meth *hms.Method, m wire.Message, msg string) error {
	if meth != nil {
		if f := hms.MetaExceptionField(meth.Name); f > 0 {
			c.scratch = hms.AppendMetaException(c.scratch[:0], f, msg)
			return c.replyWith(m, wire.Reply, c.scratch)
		}
	}
	c.appError(string(m.Name()), m.SeqID, wire.ExInternalError, msg)
	return nil
}

func (c *clientConn) appError(name string, seq int32, code int32, msg string) {
	c.scratch = wire.AppendApplicationException(c.scratch[:0], name, seq, code, msg)
	c.w.Write(c.scratch)
}
