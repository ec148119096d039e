package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Echo is a target that answers each call with the reply its source gave
// to the same call (method and args), asked once and then remembered:
// the floor a proxy's hit is compared with, the same bytes moved with
// nothing in between but a map lookup. Compare them with --transport
// framed, where the bench reads every reply raw (hmsclient.Raw) and so
// pays the same for both: on buffered transport finding a reply's end is
// decoding it, which for a large reply costs more than the proxy.
type Echo struct {
	Target
	ln  net.Listener
	src Target
	tr  wire.Transport

	mu      sync.Mutex // guards replies, bytes and conns
	replies map[string]echoReply
	bytes   int
	conns   map[net.Conn]bool
	wg      sync.WaitGroup
	once    sync.Once
}

type echoReply struct {
	typ  byte
	body []byte
}

// maxEchoBytes bounds what an Echo remembers; a call past it is asked of
// the source each time (and counts against the echo).
const maxEchoBytes = 512 << 20

// StartEcho serves an echo of src on loopback, named "echo".
func StartEcho(src Target, tr wire.Transport) (*Echo, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: echo listen: %w", err)
	}
	e := &Echo{Target: Target{Name: "echo", Addr: ln.Addr().String()}, ln: ln, src: src, tr: tr,
		replies: map[string]echoReply{}, conns: map[net.Conn]bool{}}
	e.wg.Add(1)
	go e.accept()
	return e, nil
}

func (e *Echo) accept() {
	defer e.wg.Done()
	for {
		nc, err := e.ln.Accept()
		if err != nil {
			return
		}
		e.mu.Lock()
		e.conns[nc] = true
		e.mu.Unlock()
		e.wg.Add(1)
		go e.serve(nc)
	}
}

// serve answers the calls of one connection until it closes.
func (e *Echo) serve(nc net.Conn) {
	defer e.wg.Done()
	defer func() {
		e.mu.Lock()
		delete(e.conns, nc)
		e.mu.Unlock()
		nc.Close()
	}()
	src := &hmsclient.Redialer{Addr: e.src.Addr, Transport: e.tr}
	defer src.Close()
	r, w := wire.NewReader(nc, e.tr, wire.Limits{}), wire.NewWriter(nc, e.tr)
	var key, hdr []byte
	for {
		m, err := r.Read()
		if err != nil {
			return
		}
		key = append(append(append(key[:0], m.Name()...), 0), m.Body()...)
		e.mu.Lock()
		rep, ok := e.replies[string(key)]
		e.mu.Unlock()
		if !ok {
			if rep, err = e.ask(src, m, key); err != nil {
				return
			}
		}
		hdr = wire.AppendHeader(hdr[:0], rep.typ, m.Name(), m.SeqID)
		if err := w.Write(hdr, rep.body); err != nil {
			return
		}
	}
}

// ask makes m's call on the source and remembers its reply under key.
func (e *Echo) ask(src *hmsclient.Redialer, m wire.Message, key []byte) (echoReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := src.Call(ctx, string(m.Name()), m.Body())
	if err != nil {
		return echoReply{}, fmt.Errorf("bench: echo: ask the source: %w", err)
	}
	rep := echoReply{typ: got.Type, body: append([]byte(nil), got.Body()...)}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.bytes+len(key)+len(rep.body) <= maxEchoBytes {
		e.replies[string(key)] = rep
		e.bytes += len(key) + len(rep.body)
	}
	return rep, nil
}

// Close stops the echo and waits for its connections. Safe to call twice.
func (e *Echo) Close() error {
	var err error
	e.once.Do(func() {
		err = e.ln.Close()
		e.mu.Lock()
		for nc := range e.conns {
			nc.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
	})
	return err
}
