// Package demohms is an in-memory Hive Metastore speaking the HMS Thrift API,
// a demo and test double for the proxy; it is not the product.
//
// It answers like a Hive 3.1 metastore in unsecured binary mode with
// hive.metastore.execute.setugi=true: strict TBinaryProtocol over a buffered
// (default) or framed transport, one goroutine per connection, set_ugi and
// setMetaConf state per connection, a notification log fed by every write,
// and replies that are a pure function of the catalog state and the request.
package demohms

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Config configures a Server.
type Config struct {
	Transport wire.Transport // Buffered (default) or Framed
	Logger    *slog.Logger   // nil: discard
	// Conf answers get_config_value. Keys it lacks get HMS 3.1's defaults
	// where the demo knows them (the filter hook, pre-event listeners),
	// else the default the caller sent. Nil: defaults only.
	Conf map[string]string
	// Hidden, if set, hides a table from a user as a metastore filter hook
	// or authorizer does: get_table answers not-found, and name lists and
	// batches leave it out. Called with the connection's set_ugi user
	// ("" without one) and lower-case names. Nil: every user sees all.
	Hidden func(user, db, table string) bool
	// NoEventLog keeps the notification log empty, as a metastore
	// without DbNotificationListener: the current event id stays 0.
	NoEventLog bool
	// Limits bound the requests it reads. Zero: wire's defaults.
	Limits wire.Limits
	// Now is the clock of the times it stamps (create and DDL times,
	// events, transactions). Nil: time.Now. Two demos given one fixed
	// clock answer the same calls with the same bytes, which a test
	// comparing them byte for byte needs when a second ticks between
	// their two creates.
	Now func() time.Time
}

func (c Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (s *Server) nowSec() int32    { return int32(s.cfg.now().Unix()) }
func (s *Server) nowMillis() int64 { return s.cfg.now().UnixMilli() }

// Call is one request the server received.
type Call struct {
	Method string
	User   string // from set_ugi on that connection, "" if none
	Conn   uint64 // connection id
}

// Server is the in-memory metastore.
type Server struct {
	cfg     Config
	log     *slog.Logger
	started int64 // aliveSince, epoch seconds

	// mu guards the catalog: dbs (and every database, table and partition
	// reachable from it), the notification log and nextEvent.
	mu        sync.RWMutex
	dbs       map[string]*dbEntry // key: lower-case database name (catalog "hive")
	events    []notificationEvent
	nextEvent int64 // id of the next event; the current id is nextEvent-1

	// callMu guards calls, delays and delaying.
	callMu sync.Mutex
	calls  []Call
	delays map[string]time.Duration
	// delaying, if set, is called as a delayed call starts its delay: a
	// seam for tests, which can then look at the state the call has not
	// yet changed.
	delaying func(method string)

	// connMu guards closed, listeners and conns.
	connMu    sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	done      chan struct{} // closed by Close
	wg        sync.WaitGroup
	connIDs   atomic.Uint64
}

// New returns a Server holding only the "default" database, as a fresh HMS.
func New(cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:       cfg,
		log:       log,
		started:   cfg.now().Unix(),
		dbs:       map[string]*dbEntry{},
		nextEvent: 1,
		delays:    map[string]time.Duration{},
		listeners: map[net.Listener]struct{}{},
		conns:     map[*conn]struct{}{},
		done:      make(chan struct{}),
	}
	s.dbs["default"] = &dbEntry{
		db: &database{
			Name: "default", Description: "Default Hive database",
			LocationURI: warehouse, Parameters: map[string]string{},
			OwnerName: "public", OwnerType: 2, CatalogName: defaultCatalog,
		},
		tables: map[string]*tableEntry{},
	}
	return s
}

// Serve accepts connections on ln until Close, serving each on its own
// goroutine. It returns nil after Close, or the listener's error.
func (s *Server) Serve(ln net.Listener) error {
	s.connMu.Lock()
	if s.closed {
		s.connMu.Unlock()
		ln.Close()
		return net.ErrClosed
	}
	s.listeners[ln] = struct{}{}
	s.connMu.Unlock()
	defer func() {
		s.connMu.Lock()
		delete(s.listeners, ln)
		s.connMu.Unlock()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return nil
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c := &conn{s: s, nc: nc, id: s.connIDs.Add(1), conf: map[string]string{}}
		s.connMu.Lock()
		if s.closed {
			s.connMu.Unlock()
			nc.Close()
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.connMu.Unlock()
		go c.serve()
	}
}

// Close stops the listeners, closes every connection and waits for their
// goroutines. It is idempotent.
func (s *Server) Close() error {
	s.connMu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
		for ln := range s.listeners {
			ln.Close()
		}
		for c := range s.conns {
			c.nc.Close()
		}
	}
	s.connMu.Unlock()
	s.wg.Wait()
	return nil
}

// SetDelay makes every later call of method sleep d before it is executed
// (a write then takes effect at the end, as a long HMS write commits last).
// d <= 0 removes the delay. Close interrupts the sleep.
func (s *Server) SetDelay(method string, d time.Duration) {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	if d <= 0 {
		delete(s.delays, method)
		return
	}
	s.delays[method] = d
}

// Calls returns the calls received so far, in order of arrival.
func (s *Server) Calls() []Call {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	return append([]Call(nil), s.calls...)
}

// ResetCalls forgets the calls received so far.
func (s *Server) ResetCalls() {
	s.callMu.Lock()
	s.calls = nil
	s.callMu.Unlock()
}

// CallCount is the number of calls of method received so far.
func (s *Server) CallCount(method string) int {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c.Method == method {
			n++
		}
	}
	return n
}

// record notes a call and returns the delay configured for it, with the
// delaying hook.
func (s *Server) record(c Call) (time.Duration, func(string)) {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	s.calls = append(s.calls, c)
	return s.delays[c.Method], s.delaying
}

// conn is one client connection. Only its own goroutine touches user,
// ugiSet and conf.
type conn struct {
	s      *Server
	nc     net.Conn
	id     uint64
	user   string
	ugiSet bool
	conf   map[string]string // setMetaConf overrides
}

// errClose asks the connection loop to close without replying.
var errClose = errors.New("demohms: close connection")

func (c *conn) serve() {
	s := c.s
	defer func() {
		c.nc.Close()
		s.connMu.Lock()
		delete(s.conns, c)
		s.connMu.Unlock()
		s.wg.Done()
	}()
	r := wire.NewReader(c.nc, s.cfg.Transport, s.cfg.Limits)
	w := wire.NewWriter(c.nc, s.cfg.Transport)
	log := s.log.With("conn", c.id, "remote", c.nc.RemoteAddr().String())
	for {
		m, err := r.Read()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Debug("demohms: read", "err", err)
			}
			return
		}
		name := string(m.Name())
		// The body aliases the reader's buffer; copy before the next Read.
		body := append([]byte(nil), m.Body()...)
		if d, hook := s.record(Call{Method: name, User: c.callUser(name, body), Conn: c.id}); d > 0 {
			if hook != nil {
				hook(name)
			}
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-s.done:
				t.Stop()
				return
			}
		}
		reply, err := c.dispatch(name, m.SeqID, body)
		if err != nil {
			log.Debug("demohms: closing connection", "method", name, "err", err)
			return
		}
		if reply == nil { // oneway
			continue
		}
		if err := w.Write(reply); err != nil {
			log.Debug("demohms: write", "err", err)
			return
		}
	}
}

// callUser is the user recorded for a call: the connection's user, or for
// the first set_ugi the user it sets.
func (c *conn) callUser(name string, body []byte) string {
	if name == "set_ugi" && !c.ugiSet {
		if a, err := decodeStruct(body); err == nil {
			return a.str(1)
		}
	}
	return c.user
}
