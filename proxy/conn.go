package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/hms"
	"github.com/hmsproxy/hmsproxy/internal/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

var errTooManyFiles = syscall.EMFILE

// clientConn is one client connection and the session state HMS would
// keep for it. It is used by its own goroutine only.
type clientConn struct {
	s       *Server
	nc      net.Conn
	r       *wire.Reader
	w       *wire.Writer
	sess    *upstream.Session
	scratch []byte

	// Buffers reused across calls, so the hit path does not allocate.
	key  []byte
	hdr  []byte
	deps []cache.Dep
	ents []cache.Entity

	iov   [][]byte // reply pieces of a batch answered from the cache
	frame []byte   // their wrapper bytes

	outcome Outcome // how the call in progress was answered

	goneFn func() bool // c.gone, bound once
}

func newClientConn(s *Server, nc net.Conn) *clientConn {
	return &clientConn{s: s, nc: nc,
		r:    wire.NewReader(nc, s.cfg.Transport, s.cfg.Limits),
		w:    wire.NewWriter(nc, s.cfg.Transport),
		sess: upstream.NoSession}
}

// Reply writes an upstream reply to the client. The upstream echoed the
// client's own seqid and name, which the forwarder has checked.
func (c *clientConn) Reply(m wire.Message) error {
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
	done := func(error) { c.nc.SetWriteDeadline(time.Time{}) }
	if c.s.cfg.Transport != wire.Framed {
		return c.nc, done
	}
	if size < 0 || size > math.MaxInt32 {
		return nil, nil
	}
	f := &framedStream{Conn: c.nc}
	binary.BigEndian.PutUint32(f.hdr[:], uint32(size))
	return f, done
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
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	// Control, not Read: a read deadline that has passed (the request
	// was read long ago) must not count as the client being gone.
	gone := false
	var one [1]byte
	err = rc.Control(func(fd uintptr) {
		n, _, rerr := syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		gone = n == 0 && rerr == nil || rerr != nil && rerr != syscall.EAGAIN && rerr != syscall.EWOULDBLOCK && rerr != syscall.EINTR
	})
	return err == nil && gone
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
	log := c.s.log.With("remote", c.nc.RemoteAddr().String())
	for !c.s.isClosing() {
		m, err := c.r.Read()
		if err != nil {
			c.readFailed(err, log)
			return
		}
		start := time.Now()
		meth := hms.Lookup(m.Name())
		c.outcome = OutcomePassthrough
		err = c.handle(meth, m)
		if err != nil {
			c.outcome = OutcomeError
		}
		c.s.stats.observe(meth, c.outcome, time.Since(start))
		if err != nil {
			log.Warn("closing client connection", "method", string(m.Name()), "user", c.sess.User(), "err", err)
			return
		}
	}
}

var (
	nameSetUGI     = []byte("set_ugi")
	nameSetMetaCon = []byte("setMetaConf")
	nameShutdown   = []byte("shutdown")
)

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
	name := m.Name()
	// Only the method table makes a call oneway. An unknown method typed
	// ONEWAY is forwarded on a connection that is then closed (upstream
	// does that for any ONEWAY message not marked Oneway).
	oneway := meth != nil && meth.Oneway
	switch {
	case bytes.Equal(name, nameSetUGI):
		return c.setUGI(m)
	case bytes.Equal(name, nameSetMetaCon):
		return c.setMetaConf(m)
	case oneway && bytes.Equal(name, nameShutdown):
		// fb303 shutdown resets the server-side state of the connection it
		// arrives on; upstream connections are shared, so it stops here.
		// The client closes its socket next.
		return nil
	}
	if k := c.s.cache; k != nil && meth != nil && !oneway {
		switch {
		case meth.Class == hms.Read && meth.Cacheable:
			return c.cachedRead(meth, m)
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
	if err := c.s.up.Do(c.s.ctx, call, sink); err != nil {
		// The client must see a transport failure, never a made-up
		// answer: its retry logic reconnects on exactly that.
		return err
	}
	return nil
}

func (c *clientConn) setUGI(m wire.Message) error {
	if c.sess.HasUGI() {
		// HMS refuses a second set_ugi by dropping the connection.
		return fmt.Errorf("%w: second set_ugi", errClose)
	}
	sink := sessionSink{c: c}
	next := c.sess.WithUGI(m.Body())
	if err := c.forward(upstream.Call{Session: c.sess, Becomes: next, Class: upstream.SessionCall, Msg: m}, &sink); err != nil {
		return err
	}
	if sink.ok {
		c.sess = next
	}
	return nil
}

func (c *clientConn) setMetaConf(m wire.Message) error {
	key, value, err := upstream.ConfArgs(m.Body())
	if err != nil {
		c.appError(string(m.Name()), m.SeqID, wire.ExProtocolError, "proxy: bad setMetaConf args: "+err.Error())
		return errClose
	}
	sink := sessionSink{c: c}
	next := c.sess.WithConf(key, value)
	if err := c.forward(upstream.Call{Session: c.sess, Becomes: next, Class: upstream.SessionCall, Msg: m}, &sink); err != nil {
		return err
	}
	if sink.ok {
		c.sess = next
	}
	return nil
}

// readFailed answers a refused message where the protocol allows a reply.
func (c *clientConn) readFailed(err error, log interface {
	Warn(string, ...any)
	Debug(string, ...any)
}) {
	var re *wire.ReadError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return
	case errors.Is(err, os.ErrDeadlineExceeded) && c.s.isClosing():
		return
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

func (c *clientConn) appError(name string, seq int32, code int32, msg string) {
	c.scratch = wire.AppendApplicationException(c.scratch[:0], name, seq, code, msg)
	c.w.Write(c.scratch)
}
