package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// pool is the connections to one metastore. Each connection holds a slot in
// sem for its whole life, idle or not, so MaxConns bounds open sockets.
type pool struct {
	g    *Metastores
	addr string
	sem  chan struct{}
	// writers bounds the write calls in progress, so that
	// ReservedReadConns of sem stay for reads.
	writers chan struct{}
	queued  atomic.Int32 // calls waiting in queue: a seam for tests
	healthy atomic.Bool

	mu      sync.Mutex         // guards idle, nidle, wake, waiters
	idle    map[string][]*conn // by Session.Key; most recently used last
	nidle   int
	wake    chan struct{} // closed when a connection goes idle and someone waits
	waiters int
}

type conn struct {
	p        *pool
	nc       net.Conn
	r        *wire.Reader
	w        *wire.Writer
	sessKey  string
	lastUsed time.Time
	seq      int32  // seqid for the proxy's own calls
	scratch  []byte // buffer for the proxy's own calls
}

// aLongTimeAgo is a deadline that makes blocked I/O return at once.
var aLongTimeAgo = time.Unix(1, 0)

func (p *pool) do(ctx context.Context, c Call, sink ReplySink) error {
	w := waiter{p: p, ctx: ctx, c: &c, limit: p.g.acquireWait(c.Class)}
	defer w.stop()
	free := func() {}
	if c.Class == Write || c.Session != nil && c.Session.background {
		// Writes share what the reserved read connections leave; so do
		// background reads (the warm-up), which must never take the
		// connections client reads count on. The slot goes with the
		// connection: it is freed before the reply is written to the
		// client.
		if err := p.queue(&w, p.writers); err != nil {
			return err
		}
		var once sync.Once
		free = func() { once.Do(func() { <-p.writers }) }
		defer free()
	}
	for attempt := 0; ; attempt++ {
		cn, reused, err := p.checkout(&w, c.Class != Read)
		if err != nil {
			return err
		}
		// A call that did not wait was read from its client moments ago:
		// only one that waited may have lost it.
		if w.waited && c.ClientGone != nil && c.ClientGone() {
			p.put(cn, cn.sessKey)
			return w.goneErr()
		}
		err = p.exchange(ctx, cn, c, sink, free)
		var fe *failedBeforeReplyError
		var me *mismatchError
		if reused && attempt == 0 && c.Class == Read && (errors.As(err, &fe) || errors.As(err, &me)) {
			// An idle connection the metastore had already dropped, or
			// one holding a reply that was no call's: one more try on a
			// fresh one before blaming the metastore.
			continue
		}
		return err
	}
}

// waiter is one call's wait for a write slot or a connection: bounded by
// the call's wait limit (from its first wait on), and abandoned when its
// client goes. Timers start only if the call has to wait.
type waiter struct {
	p      *pool
	ctx    context.Context
	c      *Call
	limit  time.Duration // 0: none
	waited bool
	timer  *time.Timer
	ticker *time.Ticker
}

// block returns the channels a blocked wait selects on, starting the
// timers on the first wait.
func (w *waiter) block() (timeout, poll <-chan time.Time) {
	if !w.waited {
		w.waited = true
		if w.limit > 0 {
			w.timer = time.NewTimer(w.limit)
		}
		if w.c.ClientGone != nil {
			w.ticker = time.NewTicker(w.p.g.cfg.ClientGonePoll)
		}
	}
	if w.timer != nil {
		timeout = w.timer.C
	}
	if w.ticker != nil {
		poll = w.ticker.C
	}
	return timeout, poll
}

func (w *waiter) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.ticker != nil {
		w.ticker.Stop()
	}
}

func (w *waiter) goneErr() error {
	w.p.g.n.clientGone.Add(1)
	return &notSentError{fmt.Errorf("%s to %s: %w", w.c.Msg.Name(), w.p.addr, ErrClientGone)}
}

func (w *waiter) timeoutErr() error {
	w.p.g.n.acquireTimeouts.Add(1)
	return &notSentError{fmt.Errorf("%w to %s after %v", ErrAcquireTimeout, w.p.addr, w.limit)}
}

func (w *waiter) cancelErr() error {
	return &notSentError{fmt.Errorf("waiting for a connection to %s: %w", w.p.addr, w.ctx.Err())}
}

// queue waits for a slot in sem.
func (p *pool) queue(w *waiter, sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
		return nil
	default:
	}
	p.queued.Add(1)
	defer p.queued.Add(-1)
	for {
		timeout, poll := w.block()
		select {
		case sem <- struct{}{}:
			return nil
		case <-poll:
			if w.c.ClientGone() {
				return w.goneErr()
			}
		case <-timeout:
			return w.timeoutErr()
		case <-w.ctx.Done():
			return w.cancelErr()
		}
	}
}

// exchange sends the call on cn and hands the reply to sink. released is
// called once the connection is no longer the call's, before the sink
// runs.

func (p *pool) exchange(ctx context.Context, cn *conn, c Call, sink ReplySink, released func()) error {
	if t := p.g.timeout(c.Class); t > 0 {
		cn.nc.SetDeadline(time.Now().Add(t))
	} else {
		cn.nc.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { cn.nc.SetDeadline(aLongTimeAgo) })
	defer stop()

	// The call goes out under a seqid of the connection's own, never the
	// client's: clients' seqids coincide (each counts from its own start),
	// so a reply left on a connection by an earlier call (a metastore
	// answering twice, a bug of ours reusing a connection too early) would
	// otherwise pass for the answer to a later call of the same method.
	// The client's seqid is put back into the reply before the sink sees it.
	cn.seq++
	seq := cn.seq
	cn.scratch = wire.AppendHeader(cn.scratch[:0], c.Msg.Type, c.Msg.Name(), seq)
	if err := cn.w.Write(cn.scratch, c.Msg.Body()); err != nil {
		cn.close()
		return &failedBeforeReplyError{fmt.Errorf("send %s to %s: %w", c.Msg.Name(), p.addr, err)}
	}
	if c.Oneway || c.Msg.Type == wire.Oneway {
		// No reply is read, but the metastore may still send one: libthrift
		// answers a method it lacks (reinitialize without fb303) even when
		// the call was oneway. Whatever comes belongs to no later call, so
		// the connection is never pooled. Oneway calls are rare (fb303
		// administration): a new dial costs less than draining with a
		// deadline would.
		stop()
		cn.close()
		p.g.n.onewayClosed.Add(1)
		return nil
	}
	var m wire.Message
	var err error
	ss, streams := sink.(StreamingSink)
	if streams && c.Becomes == nil && p.g.cfg.HoldMax > 0 {
		m, err = cn.r.ReadUpTo(p.g.cfg.HoldMax)
		if errors.Is(err, wire.ErrTooLarge) {
			done, serr := p.stream(cn, c, seq, ss)
			if done {
				stop()
				return serr
			}
			m, err = cn.r.Read() // the sink cannot stream: read it whole
		}
	} else {
		m, err = cn.r.Read()
	}
	if hook := p.g.afterReplyRead.Load(); hook != nil {
		(*hook)(ctx)
	}
	// The reply is in: a late cancel must not hit the next user. When
	// stop comes too late, the deadline function is running on its own
	// goroutine and may yet hit the connection after it went back to the
	// pool and out to another call: such a connection is not reused.
	stopped := stop()
	if err != nil {
		cn.close()
		err = fmt.Errorf("read reply to %s from %s: %w", c.Msg.Name(), p.addr, err)
		if isConnFailure(err) {
			return &failedBeforeReplyError{err}
		}
		return fmt.Errorf("%w: %w", ErrBroken, err)
	}
	if !answers(m, c.Msg, seq) {
		cn.close()
		p.g.n.mismatched.Add(1)
		return &mismatchError{fmt.Errorf("%w: %w: %s sent %q seqid %d type %d in answer to %q seqid %d",
			ErrBroken, ErrMismatchedReply, p.addr, m.Name(), m.SeqID, m.Type, c.Msg.Name(), seq)}
	}
	m.SetSeqID(c.Msg.SeqID)
	next := c.Session.key
	// Bytes past the reply were sent unasked: the connection is not
	// reused (put would refuse it too).
	reuse := cn.r.Buffered() == 0 && stopped
	if c.Becomes != nil {
		if Succeeded(m) {
			next = c.Becomes.key
		} else if c.Becomes.HasUGI() != c.Session.HasUGI() {
			// A refused set_ugi leaves the server's view of this
			// connection unclear; don't reuse it.
			reuse = false
		}
	}
	_, borrows := sink.(BorrowingSink)
	n := int64(len(m.Buf))
	if !p.g.cfg.Budget.TryAcquire(n) {
		// No room to hold the reply apart from its connection: the
		// connection is held while the sink writes it out.
		p.g.n.held.Add(1)
		err = sink.Reply(m)
		p.release(cn, reuse, next)
		return err
	}
	rb, _ := bufPool.Get().(*replyBuf)
	if rb == nil {
		rb = new(replyBuf)
	}
	rb.b = cn.r.Detach(rb.b)
	p.release(cn, reuse, next)
	released()
	err = sink.Reply(m)
	p.g.cfg.Budget.Release(n)
	if !borrows || cap(rb.b) > maxPooledBuf {
		rb.b = nil // the sink keeps the bytes, or they are too many to pin
	}
	bufPool.Put(rb)
	return err
}

// bufPool holds reply buffers given back by borrowing sinks, handed to
// readers in exchange for the buffer of the reply they detach.
var bufPool sync.Pool

// replyBuf holds a pooled buffer; the holder itself is reused so that
// pooling allocates nothing.
type replyBuf struct{ b []byte }

// maxPooledBuf is the largest buffer kept for reuse: a rare huge reply
// is left to the garbage collector rather than pinned.
const maxPooledBuf = 1 << 20

// release returns a connection after a call: to the idle set, now
// carrying the session with key next, or closed.
func (p *pool) release(cn *conn, reuse bool, next string) {
	if reuse {
		p.put(cn, next)
	} else {
		cn.close()
	}
}

// answers reports whether reply m answers the call req sent under seqid
// seq: same method name, that seqid, and a REPLY or EXCEPTION.
func answers(m, req wire.Message, seq int32) bool {
	return (m.Type == wire.Reply || m.Type == wire.Exception) && m.SeqID == seq &&
		sameName(m.Name(), req.Name())
}

// mismatchError: a whole reply came that does not answer the call (it
// was closed with its connection, and nothing reached the sink).
type mismatchError struct{ err error }

func (e *mismatchError) Error() string { return e.err.Error() }
func (e *mismatchError) Unwrap() error { return e.err }

// sameName reports whether a reply's method name is the call's. The
// metastore decodes the call's name as UTF-8 (a malformed byte becomes
// U+FFFD) and answers with that string: a name that is not valid UTF-8
// comes back with replacement characters, and is still the call's. Runs
// of them are compared as one, since decoders differ in how many they
// write for one malformed sequence.
func sameName(reply, call []byte) bool {
	if bytes.Equal(reply, call) {
		return true
	}
	if utf8.Valid(call) {
		return false
	}
	return bytes.Equal(collapseReplacements(reply), collapseReplacements(bytes.ToValidUTF8(call, replacement)))
}

var replacement = []byte(string(utf8.RuneError))

// collapseReplacements writes every run of U+FFFD in b as one.
func collapseReplacements(b []byte) []byte {
	twice := append(append([]byte(nil), replacement...), replacement...)
	for bytes.Contains(b, twice) {
		b = bytes.ReplaceAll(b, twice, replacement)
	}
	return b
}

// Succeeded reports whether a reply is a normal return (not an
// application or declared exception).
func Succeeded(m wire.Message) bool {
	if m.Type != wire.Reply {
		return false
	}
	f, err := wire.ResultField(m.Body())
	return err == nil && f <= 0
}

// isConnFailure reports whether a read error means the connection broke
// with no reply, as opposed to a timeout or a malformed reply.
func isConnFailure(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	var re *wire.ReadError
	if errors.As(err, &re) {
		return false
	}
	if errors.Is(err, io.EOF) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF)
}

// checkout returns a connection carrying the call's session. probe asks
// that a reused connection be checked for a close by the metastore first,
// for calls that may not be retried. A wait for a free slot is bounded by
// w; dialling and session replay by their own timeouts.
func (p *pool) checkout(w *waiter, probe bool) (cn *conn, reused bool, err error) {
	s := w.c.Session
	for {
		p.mu.Lock()
		if list := p.idle[s.key]; len(list) > 0 {
			cn = list[len(list)-1]
			list[len(list)-1] = nil
			p.idle[s.key] = list[:len(list)-1]
			p.nidle--
			p.mu.Unlock()
			if time.Since(cn.lastUsed) > p.g.cfg.IdleTimeout || (probe && !cn.alive()) {
				cn.close()
				continue
			}
			return cn, true, nil
		}
		p.mu.Unlock()

		select {
		case p.sem <- struct{}{}:
			return p.dialSlot(w.ctx, s)
		default:
		}
		// Full: close an idle connection in another state to make room.
		if victim := p.popAnyIdle(); victim != nil {
			victim.close()
			continue
		}
		timeout, poll := w.block()
		p.mu.Lock()
		wake := p.wake
		p.waiters++
		p.mu.Unlock()
		select {
		case p.sem <- struct{}{}:
			p.unwait()
			return p.dialSlot(w.ctx, s)
		case <-wake:
			p.unwait()
		case <-poll:
			p.unwait()
			if w.c.ClientGone() {
				return nil, false, w.goneErr()
			}
		case <-timeout:
			p.unwait()
			return nil, false, w.timeoutErr()
		case <-w.ctx.Done():
			p.unwait()
			return nil, false, w.cancelErr()
		}
	}
}

func (p *pool) dialSlot(ctx context.Context, s *Session) (*conn, bool, error) {
	cn, err := p.dial(ctx, s)
	if err != nil {
		return nil, false, &notSentError{err}
	}
	return cn, false, nil
}

func (p *pool) unwait() {
	p.mu.Lock()
	p.waiters--
	p.mu.Unlock()
}

func (p *pool) popAnyIdle() *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, list := range p.idle {
		if len(list) > 0 {
			cn := list[0]
			p.idle[k] = list[1:]
			p.nidle--
			return cn
		}
	}
	return nil
}

// put returns a healthy connection, now carrying the session with key, to
// the idle set.
func (p *pool) put(cn *conn, key string) {
	cn.sessKey = key
	cn.lastUsed = time.Now()
	cn.r.Release()
	p.mu.Lock()
	if p.g.closed.Load() || p.nidle >= p.g.cfg.MaxIdle || cn.r.Buffered() > 0 {
		p.mu.Unlock()
		cn.close()
		return
	}
	p.idle[key] = append(p.idle[key], cn)
	p.nidle++
	if p.waiters > 0 {
		close(p.wake)
		p.wake = make(chan struct{})
	}
	p.mu.Unlock()
}

func (p *pool) closeIdle() {
	p.mu.Lock()
	var all []*conn
	for k, list := range p.idle {
		all = append(all, list...)
		delete(p.idle, k)
	}
	p.nidle = 0
	p.mu.Unlock()
	for _, cn := range all {
		cn.close()
	}
}

// reapIdle closes connections idle longer than IdleTimeout.
func (p *pool) reapIdle() {
	cutoff := time.Now().Add(-p.g.cfg.IdleTimeout)
	var old []*conn
	p.mu.Lock()
	for k, list := range p.idle {
		keep := list[:0]
		for _, cn := range list {
			if cn.lastUsed.Before(cutoff) {
				old = append(old, cn)
			} else {
				keep = append(keep, cn)
			}
		}
		p.nidle -= len(list) - len(keep)
		if len(keep) == 0 {
			delete(p.idle, k)
		} else {
			p.idle[k] = keep
		}
	}
	p.mu.Unlock()
	for _, cn := range old {
		cn.close()
	}
}

// dial opens a connection and replays session s on it. The caller holds a
// slot, which is released on failure.
func (p *pool) dial(ctx context.Context, s *Session) (*conn, error) {
	d := net.Dialer{Timeout: p.g.cfg.DialTimeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err == nil {
		nc, err = p.secure(ctx, nc)
	}
	if err == nil {
		nc, err = p.authenticate(ctx, nc, s.Authenticated())
	}
	if err != nil {
		<-p.sem
		p.setHealthy(false, err)
		return nil, fmt.Errorf("upstream: dial %s: %w", p.addr, err)
	}
	cn := &conn{p: p, nc: nc, r: wire.NewReader(nc, p.g.cfg.Transport, p.g.cfg.ReplyLimits),
		w: wire.NewWriter(nc, p.g.cfg.Transport)}
	for _, rc := range s.replay() {
		if err := cn.roundTrip(ctx, rc.method, rc.args, p.g.cfg.SessionTimeout); err != nil {
			cn.close()
			return nil, fmt.Errorf("upstream: replay %s on %s: %w", rc.method, p.addr, err)
		}
	}
	cn.sessKey = s.key
	return cn, nil
}

// roundTrip makes one call of the proxy's own and checks it succeeded.
func (cn *conn) roundTrip(ctx context.Context, method string, args []byte, timeout time.Duration) error {
	cn.nc.SetDeadline(time.Now().Add(timeout))
	stop := context.AfterFunc(ctx, func() { cn.nc.SetDeadline(aLongTimeAgo) })
	defer stop()
	cn.seq++
	cn.scratch = wire.AppendHeader(cn.scratch[:0], wire.Call, []byte(method), cn.seq)
	cn.scratch = append(cn.scratch, args...)
	if err := cn.w.Write(cn.scratch); err != nil {
		return err
	}
	m, err := cn.r.Read()
	if err != nil {
		return err
	}
	if m.SeqID != cn.seq || string(m.Name()) != method || (m.Type != wire.Reply && m.Type != wire.Exception) {
		return fmt.Errorf("%w: %q seqid %d type %d in answer to %s seqid %d",
			ErrMismatchedReply, m.Name(), m.SeqID, m.Type, method, cn.seq)
	}
	if m.Type == wire.Exception {
		if ex, err := wire.DecodeApplicationException(m.Body()); err == nil {
			return ex
		}
	}
	if !Succeeded(m) {
		return fmt.Errorf("%s refused by metastore", method)
	}
	return nil
}

// alive checks without blocking that the metastore has not closed an idle
// connection: a peek that finds EOF or an error means it is gone.
func (cn *conn) alive() bool {
	if cn.r.Buffered() > 0 {
		return false
	}
	// Bytes nobody asked for make it as unusable as a close would.
	switch wire.Peek(rawConn(cn.nc)) {
	case wire.PeekEmpty, wire.PeekUnsupported:
		return true
	}
	return false
}

func (cn *conn) close() {
	cn.nc.Close()
	<-cn.p.sem
}

// check dials the metastore and asks fb303 getStatus, off the request path.
func (p *pool) check(ctx context.Context) {
	p.reapIdle()
	ctx, cancel := context.WithTimeout(ctx, p.g.cfg.DialTimeout+p.g.cfg.SessionTimeout)
	defer cancel()
	d := net.Dialer{Timeout: p.g.cfg.DialTimeout}
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err == nil {
		nc, err = p.secure(ctx, nc)
	}
	if err == nil {
		nc, err = p.authenticate(ctx, nc, "")
	}
	if err != nil {
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			p.setHealthy(false, err)
		}
		return
	}
	defer nc.Close()
	cn := &conn{p: p, nc: nc, r: wire.NewReader(nc, p.g.cfg.Transport, p.g.cfg.ReplyLimits),
		w: wire.NewWriter(nc, p.g.cfg.Transport)}
	err = cn.roundTrip(ctx, "getStatus", []byte{wire.TStop}, p.g.cfg.SessionTimeout)
	if err != nil && p.g.ctx.Err() != nil {
		return // shutting down, not a verdict on the metastore
	}
	p.setHealthy(err == nil, err)
}

func (p *pool) setHealthy(ok bool, err error) {
	if p.healthy.Swap(ok) != ok {
		if ok {
			p.g.cfg.Logger.Info("metastore healthy", "addr", p.addr)
		} else {
			p.g.cfg.Logger.Warn("metastore unhealthy", "addr", p.addr, "err", err)
		}
	}
}
