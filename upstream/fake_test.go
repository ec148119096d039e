package upstream

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// fakeHMS is a metastore on loopback whose answers a test scripts. By
// default every call gets a REPLY with the call's name and seqid and a
// body naming the method, so a reply can be told apart from another's.
type fakeHMS struct {
	t    testing.TB
	ln   net.Listener
	addr string
	tr   wire.Transport
	// answer, if set, returns the messages to send for m (none: no reply)
	// or errCloseConn to drop the connection.
	answer func(fc *fakeConn, m wire.Message) ([][]byte, error)

	mu      sync.Mutex // guards calls, conns, used, status, arrived
	calls   []fakeCall
	conns   []net.Conn
	used    map[int]bool  // connections that carried a call other than getStatus
	status  int           // getStatus calls (health checks), answered apart
	arrived chan struct{} // closed and replaced on every call

	wg sync.WaitGroup
}

type fakeCall struct {
	method string
	typ    byte
	seq    int32
	conn   int // index of the connection it came on
}

type fakeConn struct {
	id int
	nc net.Conn
}

var errCloseConn = errors.New("fake: close connection")

func startFake(t testing.TB, answer func(fc *fakeConn, m wire.Message) ([][]byte, error)) *fakeHMS {
	t.Helper()
	return startFakeT(t, wire.Buffered, answer)
}

func startFakeT(t testing.TB, tr wire.Transport, answer func(fc *fakeConn, m wire.Message) ([][]byte, error)) *fakeHMS {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeHMS{t: t, ln: ln, addr: ln.Addr().String(), tr: tr, answer: answer, arrived: make(chan struct{}), used: map[int]bool{}}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *fakeHMS) close() {
	f.ln.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fakeHMS) accept() {
	defer f.wg.Done()
	for {
		nc, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		fc := &fakeConn{id: len(f.conns), nc: nc}
		f.conns = append(f.conns, nc)
		f.mu.Unlock()
		f.wg.Add(1)
		go f.serve(fc)
	}
}

func (f *fakeHMS) serve(fc *fakeConn) {
	defer f.wg.Done()
	defer fc.nc.Close()
	r := wire.NewReader(fc.nc, f.tr, wire.Limits{MaxMessage: 1 << 30})
	w := wire.NewWriter(fc.nc, f.tr)
	for {
		m, err := r.Read()
		if err != nil {
			return
		}
		f.mu.Lock()
		if string(m.Name()) == "getStatus" {
			// Health checks run on connections of their own; they are
			// kept out of what tests count.
			f.status++
			close(f.arrived)
			f.arrived = make(chan struct{})
			f.mu.Unlock()
			if err := w.Write(replyTo(m, "ALIVE")); err != nil {
				return
			}
			continue
		}
		f.used[fc.id] = true
		f.calls = append(f.calls, fakeCall{method: string(m.Name()), typ: m.Type, seq: m.SeqID, conn: fc.id})
		close(f.arrived)
		f.arrived = make(chan struct{})
		f.mu.Unlock()
		var out [][]byte
		if f.answer != nil {
			out, err = f.answer(fc, m)
			if err != nil {
				return
			}
		} else {
			out = [][]byte{replyTo(m, string(m.Name()))}
		}
		for _, b := range out {
			if err := w.Write(b); err != nil {
				return
			}
		}
	}
}

// waitCalls waits until at least n calls have arrived.
func (f *fakeHMS) waitCalls(n int) {
	f.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		f.mu.Lock()
		got, ch := len(f.calls), f.arrived
		f.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			f.t.Fatalf("fake metastore: %d calls arrived; want %d", got, n)
		}
	}
}

func (f *fakeHMS) callList() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeCall(nil), f.calls...)
}

func (f *fakeHMS) count(method string) int {
	n := 0
	for _, c := range f.callList() {
		if c.method == method {
			n++
		}
	}
	return n
}

// numConns counts the connections that carried calls (not health checks).
func (f *fakeHMS) numConns() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.used)
}

func (f *fakeHMS) statusCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

// replyTo is a successful reply to m whose result (field 0) is the string
// s.
func replyTo(m wire.Message, s string) []byte {
	return replyAs(m.Name(), m.SeqID, wire.Reply, s)
}

func replyAs(name []byte, seq int32, typ byte, s string) []byte {
	e := wire.Encoder{B: wire.AppendHeader(nil, typ, name, seq)}
	e.StringField(0, s)
	e.Stop()
	return e.B
}

// msg builds a request message.
func msg(t testing.TB, typ byte, name string, seq int32) wire.Message {
	t.Helper()
	b := wire.AppendHeader(nil, typ, []byte(name), seq)
	b = append(b, wire.TStop)
	m, err := wire.Parse(b, wire.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// resultString decodes the field-0 string of a reply body.
func resultString(t testing.TB, m wire.Message) string {
	t.Helper()
	d := wire.NewDecoder(m.Body())
	typ, id := d.FieldBegin()
	if typ != wire.TString || id != 0 {
		t.Fatalf("reply field %d type %d; want a string result", id, typ)
	}
	return d.String()
}

// keepSink keeps each reply's bytes, as the cache-fill path does.
type keepSink struct {
	msgs []wire.Message
}

func (s *keepSink) Reply(m wire.Message) error {
	s.msgs = append(s.msgs, m)
	return nil
}

// copySink copies each reply and borrows the buffer.
type copySink struct {
	got   []byte
	typ   byte
	seq   int32
	name  string
	body  string
	hook  func(m wire.Message) // runs inside Reply
	calls int
}

func (s *copySink) Reply(m wire.Message) error {
	s.calls++
	s.got = append(s.got[:0], m.Buf...)
	s.typ, s.seq, s.name = m.Type, m.SeqID, string(m.Name())
	if s.hook != nil {
		s.hook(m)
	}
	return nil
}

func (s *copySink) BorrowsReply() {}

func newGroup(t testing.TB, cfg Config, addrs ...string) *Metastores {
	t.Helper()
	for _, a := range addrs {
		cfg.URIs = append(cfg.URIs, "thrift://"+a)
	}
	if cfg.HealthInterval == 0 {
		cfg.HealthInterval = time.Hour
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
