package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/wire"
)

// pool is the connections to one metastore. Each connection holds a slot in
// sem for its whole life, idle or not, so MaxConns bounds open sockets.
type pool struct {
	g       *Group
	addr    string
	sem     chan struct{}
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
	for attempt := 0; ; attempt++ {
		cn, reused, err := p.checkout(ctx, c.Session, c.Class != Read)
		if err != nil {
			return &notSentError{err}
		}
		err = p.exchange(ctx, cn, c, sink)
		var fe *failedBeforeReplyError
		if reused && attempt == 0 && c.Class == Read && errors.As(err, &fe) {
			// An idle connection the metastore had already dropped: one
			// more try on a fresh one before blaming the metastore.
			continue
		}
		return err
	}
}

func (p *pool) exchange(ctx context.Context, cn *conn, c Call, sink ReplySink) error {
	if t := p.g.timeout(c.Class); t > 0 {
		cn.nc.SetDeadline(time.Now().Add(t))
	} else {
		cn.nc.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { cn.nc.SetDeadline(aLongTimeAgo) })
	defer stop()

	if err := cn.w.Write(c.Msg.Buf); err != nil {
		cn.close()
		return &failedBeforeReplyError{fmt.Errorf("send %s to %s: %w", c.Msg.Name(), p.addr, err)}
	}
	if c.Oneway {
		stop() // before the connection can be checked out by another call
		p.put(cn, c.Session.key)
		return nil
	}
	m, err := cn.r.Read()
	stop() // the reply is in: a late cancel must not hit the next user
	if err != nil {
		cn.close()
		err = fmt.Errorf("read reply to %s from %s: %w", c.Msg.Name(), p.addr, err)
		if isConnFailure(err) {
			return &failedBeforeReplyError{err}
		}
		return fmt.Errorf("%w: %w", ErrBroken, err)
	}
	if m.SeqID != c.Msg.SeqID || (m.Type != wire.Reply && m.Type != wire.Exception) {
		cn.close()
		return fmt.Errorf("%w: reply to %s from %s has seqid %d type %d, want seqid %d",
			ErrBroken, c.Msg.Name(), p.addr, m.SeqID, m.Type, c.Msg.SeqID)
	}
	next := c.Session.key
	if c.Becomes != nil {
		if Succeeded(m) {
			next = c.Becomes.key
		} else if c.Becomes.HasUGI() != c.Session.HasUGI() {
			// A refused set_ugi leaves the server's view of this
			// connection unclear; don't reuse it.
			err := sink.Reply(m)
			cn.close()
			return err
		}
	}
	err = sink.Reply(m)
	p.put(cn, next)
	return err
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

// checkout returns a connection carrying session s. probe asks that a
// reused connection be checked for a close by the metastore first, for
// calls that may not be retried.
func (p *pool) checkout(ctx context.Context, s *Session, probe bool) (cn *conn, reused bool, err error) {
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
			cn, err = p.dial(ctx, s)
			return cn, false, err
		default:
		}
		// Full: close an idle connection in another state to make room.
		if victim := p.popAnyIdle(); victim != nil {
			victim.close()
			continue
		}
		p.mu.Lock()
		wake := p.wake
		p.waiters++
		p.mu.Unlock()
		select {
		case p.sem <- struct{}{}:
			p.unwait()
			cn, err = p.dial(ctx, s)
			return cn, false, err
		case <-wake:
			p.unwait()
		case <-ctx.Done():
			p.unwait()
			return nil, false, fmt.Errorf("upstream: waiting for a connection to %s: %w", p.addr, ctx.Err())
		}
	}
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
	if m.SeqID != cn.seq {
		return fmt.Errorf("reply seqid %d, want %d", m.SeqID, cn.seq)
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
	sc, ok := rawConn(cn.nc).(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var one [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && alive
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
