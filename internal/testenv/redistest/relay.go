package redistest

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Relay is a loopback TCP relay in front of a server: a test cuts one
// client's way to Redis while others keep theirs.
type Relay struct {
	Addr   string
	target string
	ln     net.Listener
	t      testing.TB

	mu    sync.Mutex // guards conns, cut
	conns map[net.Conn]struct{}
	cut   bool
	wg    sync.WaitGroup // the accept loop and the copiers
}

// NewRelay listens on loopback and forwards to target until the test ends.
func NewRelay(t testing.TB, target string) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{Addr: ln.Addr().String(), target: target, ln: ln, t: t, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(func() { ln.Close(); r.Cut(); r.wg.Wait() })
	return r
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		if r.cut {
			r.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", r.target, time.Second)
		if err != nil {
			r.mu.Unlock()
			c.Close()
			continue
		}
		r.conns[c], r.conns[up] = struct{}{}, struct{}{}
		r.wg.Add(2)
		r.mu.Unlock()
		go r.pipe(c, up)
		go r.pipe(up, c)
	}
}

func (r *Relay) pipe(dst, src net.Conn) {
	defer r.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	r.mu.Lock()
	delete(r.conns, dst)
	delete(r.conns, src)
	r.mu.Unlock()
}

// Cut closes every relayed connection and refuses new ones until Restore.
func (r *Relay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = true
	for c := range r.conns {
		c.Close()
	}
}

// Restore relays new connections again.
func (r *Relay) Restore() {
	r.mu.Lock()
	r.cut = false
	r.mu.Unlock()
}

// Client returns a client that reaches the server through the relay,
// closed with the test.
func (r *Relay) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.Addr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
	r.t.Cleanup(func() { c.Close() })
	return c
}
