package chaos

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Source addresses (every 127.0.0.0/8 address is this host on Linux,
// each a client of its own to the proxy's per-address bounds).
const (
	// flusherAddr is where every behaviour that causes cache-wide
	// flushes (unknown methods, flushCache) comes from: their budget is
	// per client identity, so each further address would flush about
	// once more a second by design.
	flusherAddr = "127.0.0.2"
	// generalFirst..generalLast are the other behaviours' addresses.
	generalFirst, generalLast = 3, 9
)

// Floods that a per-address bound would stop before they reached what
// they attack come from addresses of their own: idle sockets up to
// max_clients from 127.0.1.x, silent TLS sockets past the handshake
// stage's total bound (128) from 127.0.2.x.
func idleAddr(i int) string   { return fmt.Sprintf("127.0.1.%d", 1+i) }
func silentAddr(i int) string { return fmt.Sprintf("127.0.2.%d", 1+i) }

// ugi-cycling comes from cyclerAddrs addresses of cyclerPrefix, each
// allowed cyclerRate reads a second (burst as many): a new set_ugi name
// must buy no more.
const (
	cyclerPrefix = "127.0.3.0/24"
	cyclerAddrs  = 4
	cyclerRate   = 5
)

func cyclerAddr(i int) string { return fmt.Sprintf("127.0.3.%d", 1+i) }

// plan is what the hostile process is told to do.
type plan struct {
	Addr, Admin, CA string
	Seed            uint64
	Seconds         float64
	Behaviours      []string
	Concurrency     int
	MaxClients      int
	PerAddress      int
}

// hostileSummary is what the hostile clients did.
type hostileSummary struct {
	Behaviours   map[string]*tally `json:"behaviours"`
	Scrapes      int64             `json:"scrapes"`
	ScrapeErrors int64             `json:"scrape_errors"`
	ScrapeErr    string            `json:"scrape_err,omitempty"`
}

// tally counts one behaviour's work: instances run, operations made (in
// its unit), and notes on how the proxy answered.
type tally struct {
	Runs  int64            `json:"runs"`
	Ops   int64            `json:"ops"`
	Unit  string           `json:"unit"`
	Notes map[string]int64 `json:"notes,omitempty"`
}

type hostile struct {
	plan plan
	tls  *tls.Config
	out  *emitter
	http *http.Client

	mu      sync.Mutex // guards tallies
	tallies map[string]*tally

	scrapes, scrapeErrs atomic.Int64
	scrapeErr           atomic.Value // string
}

// runHostile is the hostile process: for plan.Seconds it keeps
// plan.Concurrency behaviour instances running, each for 3 to 8
// seconds: first every behaviour once in a shuffled order, then picks
// at random among those not running. The seed decides the sequence
// (as far as which are running when a slot frees allows), the lengths
// and the payloads.
func runHostile() int {
	out := newEmitter()
	var p plan
	if err := json.Unmarshal([]byte(os.Getenv("CHAOS_PLAN")), &p); err != nil {
		out.emit(event{Ev: "error", Err: "CHAOS_PLAN: " + err.Error()})
		return 1
	}
	ca, err := os.ReadFile(p.CA)
	if err != nil {
		out.emit(event{Ev: "error", Err: err.Error()})
		return 1
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	h := &hostile{plan: p, out: out, tallies: map[string]*tally{}, http: &http.Client{Timeout: 5 * time.Second},
		tls: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", ClientSessionCache: tls.NewLRUClientSessionCache(4096)}}
	var bs []*behaviour
	for _, name := range p.Behaviours {
		b := behaviourNamed(name)
		bs = append(bs, b)
		h.tallies[name] = &tally{Unit: b.unit, Notes: map[string]int64{}}
	}
	h.run(bs)
	s := &hostileSummary{Behaviours: h.tallies, Scrapes: h.scrapes.Load(), ScrapeErrors: h.scrapeErrs.Load()}
	if e, ok := h.scrapeErr.Load().(string); ok {
		s.ScrapeErr = e
	}
	out.emit(event{Ev: "summary", Hostile: s})
	return 0
}

func (h *hostile) run(bs []*behaviour) {
	if len(bs) == 0 {
		return
	}
	end := time.Now().Add(time.Duration(h.plan.Seconds * float64(time.Second)))
	rng := rand.New(rand.NewPCG(h.plan.Seed, 0x5eed))
	first := rng.Perm(len(bs))
	conc := min(max(h.plan.Concurrency, 1), len(bs))
	// A behaviour runs one instance at a time: its own intensity is
	// what it is, whatever the mix.
	running := map[*behaviour]bool{}
	freed := make(chan *behaviour, len(bs))
	for i := 0; ; i++ {
		for len(running) >= conc {
			delete(running, <-freed)
		}
		var b *behaviour
		if i < len(first) {
			b = bs[first[i]]
		} else {
			// A random pick; taken, the next one free after it.
			k := rng.IntN(len(bs))
			for running[bs[k]] {
				k = (k + 1) % len(bs)
			}
			b = bs[k]
		}
		d := time.Duration(3000+rng.IntN(5000)) * time.Millisecond
		seed := rng.Uint64()
		left := time.Until(end)
		if left < time.Second {
			break
		}
		running[b] = true
		go func() {
			h.instance(b, i, min(d, left), seed)
			freed <- b
		}()
	}
	for range running {
		<-freed
	}
}

func (h *hostile) instance(b *behaviour, i int, d time.Duration, seed uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	x := &inst{h: h, b: b, seed: seed, t: h.tallies[b.name]}
	h.mu.Lock()
	x.t.Runs++
	h.mu.Unlock()
	h.out.emit(event{Ev: "start", B: b.name, I: i})
	b.run(ctx, x)
	x.wg.Wait()
	h.out.emit(event{Ev: "end", B: b.name, I: i})
}

// scrape GETs /metrics as a Prometheus server would; failures are
// counted (a crash at a scrape is what a non-UTF-8 method name once
// caused).
func (h *hostile) scrape() {
	h.scrapes.Add(1)
	if _, err := scrape(h.http, h.plan.Admin); err != nil {
		h.scrapeErrs.Add(1)
		h.scrapeErr.Store(err.Error())
	}
}

// inst is one running instance of a behaviour.
type inst struct {
	h    *hostile
	b    *behaviour
	t    *tally
	seed uint64
	wg   sync.WaitGroup
}

// goN runs fn in n goroutines, each with a random source of its own, and
// waits for them.
func (x *inst) goN(ctx context.Context, n int, fn func(ctx context.Context, i int, r *rand.Rand)) {
	for i := range n {
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			fn(ctx, i, rand.New(rand.NewPCG(x.seed, uint64(i))))
		}()
	}
	x.wg.Wait()
}

func (x *inst) op(n int64) {
	x.h.mu.Lock()
	x.t.Ops += n
	x.h.mu.Unlock()
}

func (x *inst) note(what string) {
	x.h.mu.Lock()
	x.t.Notes[what]++
	x.h.mu.Unlock()
}

// general is one of the general hostile addresses.
func general(r *rand.Rand) string {
	return fmt.Sprintf("127.0.0.%d", generalFirst+r.IntN(generalLast-generalFirst+1))
}

// dialTCP connects to the proxy from src.
func (x *inst) dialTCP(ctx context.Context, src string) (*net.TCPConn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", x.h.plan.Addr)
	if err != nil {
		return nil, err
	}
	return nc.(*net.TCPConn), nil
}

// dialTLS connects from src and completes the TLS handshake; tune, if
// set, is applied to the TCP connection first.
func (x *inst) dialTLS(ctx context.Context, src string, tune func(*net.TCPConn)) (*tls.Conn, error) {
	nc, err := x.dialTCP(ctx, src)
	if err != nil {
		return nil, err
	}
	if tune != nil {
		tune(nc)
	}
	tc := tls.Client(nc, x.h.tls)
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		nc.Close()
		return nil, err
	}
	return tc, nil
}

// client dials a Thrift client over TLS from src, closed when ctx ends.
func (x *inst) client(ctx context.Context, src string) (*hmsclient.Client, func(), error) {
	tc, err := x.dialTLS(ctx, src, nil)
	if err != nil {
		x.note("dial failed")
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { tc.Close() })
	return hmsclient.New(tc, wire.Buffered), func() { stop(); tc.Close() }, nil
}

// holdUntilClosed reads and drops what arrives on c until the proxy
// closes it, ctx ends or a read deadline passes, then closes it; it
// reports whether the proxy closed it.
func holdUntilClosed(ctx context.Context, c net.Conn) bool {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	_, err := io.Copy(io.Discard, c)
	c.Close()
	var ne net.Error
	return ctx.Err() == nil && !(errors.As(err, &ne) && ne.Timeout())
}

// sleep waits d, or less when ctx ends; it reports whether ctx is still
// live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// jitter is d give or take half.
func jitter(r *rand.Rand, d time.Duration) time.Duration {
	return d/2 + time.Duration(r.Int64N(int64(d)))
}

// callCtx bounds one hostile call.
func callCtx(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// answer notes how the proxy answered a call: served, refused by it
// (a declared exception or a TApplicationException), or not at all.
func (x *inst) answer(m wire.Message, err error) {
	switch {
	case err != nil:
		x.note("no answer")
	case m.Type == wire.Exception:
		x.note("TApplicationException")
	default:
		if f, _ := wire.ResultField(m.Body()); f > 0 {
			x.note("declared exception")
		} else {
			x.note("served")
		}
	}
}
