package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// DemoConfig configures StartDemo. The zero value works.
type DemoConfig struct {
	// Delay is added to every call the demo metastore serves, standing in
	// for an RDBMS-backed metastore. Default 0: an in-memory metastore,
	// the proxy's least favourable case.
	Delay time.Duration
	// CacheBytes is the proxy's cache budget. Default 256 MiB.
	CacheBytes int64
	// Logger receives the components' logs. Default: discard.
	Logger *slog.Logger
	// Transport is how the metastore and the proxy frame messages.
	// Default Buffered, as HMS.
	Transport wire.Transport
}

// Demo is an in-process demo metastore with an hmsproxy in front of it,
// wired as cmd/hmsproxy --demo does, plus a minimal admin port of its own
// with the two endpoints the bench uses: GET /metrics
// (hmsproxy_requests_total only, from the proxy's own counters) and POST
// /cache/flush (flush everything, as the product's admin API does).
type Demo struct {
	// Direct is the metastore, Proxy the proxy in front of it (with its
	// admin /metrics as MetricsURL).
	Direct, Proxy Target
	// FlushURL flushes the proxy's whole cache.
	FlushURL string

	metastore *demohms.Server
	group     *upstream.Metastores
	store     *cache.Store
	srv       *proxy.Server
	adm       *http.Server
	wg        sync.WaitGroup
	once      sync.Once
}

// StartDemo starts the demo metastore (seeded like hmsproxy --demo), the
// proxy and its admin port on loopback.
func StartDemo(cfg DemoConfig) (_ *Demo, err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = 256 << 20
	}
	d := &Demo{}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	d.metastore = demohms.New(demohms.Config{Logger: log.With("component", "demo-metastore"), Transport: cfg.Transport})
	d.metastore.Seed(3, 4, 240)
	if cfg.Delay > 0 {
		for _, m := range demohms.MethodNames() {
			d.metastore.SetDelay(m, cfg.Delay)
		}
	}
	dl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: demo metastore listen: %w", err)
	}
	d.serve(func() error { return d.metastore.Serve(dl) })
	uri := "thrift://" + dl.Addr().String()
	d.Direct = Target{Name: "direct", Addr: dl.Addr().String()}

	d.group, err = upstream.New(upstream.Config{URIs: []string{uri}, Transport: cfg.Transport, Logger: log.With("component", "upstream")})
	if err != nil {
		return nil, err
	}
	d.store, err = cache.New(cache.Config{MaxBytes: cfg.CacheBytes, Kinds: cache.DefaultKinds()})
	if err != nil {
		return nil, err
	}
	d.srv, err = proxy.New(proxy.Config{Logger: log.With("component", "proxy"), Transport: cfg.Transport,
		Cache: &proxy.Caching{Store: d.store, Upstream: uri}}, d.group)
	if err != nil {
		return nil, err
	}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: demo proxy listen: %w", err)
	}
	d.serve(func() error { return d.srv.Serve(pl) })

	al, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: demo admin listen: %w", err)
	}
	d.adm = &http.Server{Handler: d.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
	d.serve(func() error { return d.adm.Serve(al) })
	base := "http://" + al.Addr().String()
	d.Proxy = Target{Name: "proxy", Addr: pl.Addr().String(), MetricsURL: base + "/metrics"}
	d.FlushURL = base + "/cache/flush"
	return d, nil
}

func (d *Demo) serve(f func() error) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		f() // returns after Close; an earlier failure shows as call errors
	}()
}

// Close stops the admin port, the proxy and the metastore and waits for
// their goroutines. Safe to call twice.
func (d *Demo) Close() {
	d.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if d.adm != nil {
			d.adm.Shutdown(ctx)
		}
		if d.srv != nil {
			d.srv.Shutdown(ctx)
		}
		if d.group != nil {
			d.group.Close()
		}
		if d.store != nil {
			d.store.Close()
		}
		if d.metastore != nil {
			d.metastore.Close()
		}
		d.wg.Wait()
	})
}

// adminHandler serves /metrics and /cache/flush like the product's admin
// port, for the two things the bench reads and does.
func (d *Demo) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		var lines []string
		d.srv.Stats().EachMethod(func(name string, o proxy.Outcome, n uint64) {
			lines = append(lines, fmt.Sprintf("hmsproxy_requests_total{method=%q,outcome=%q} %d", name, o.String(), n))
		})
		slices.Sort(lines)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintln(w, "# TYPE hmsproxy_requests_total counter")
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
	})
	mux.HandleFunc("POST /cache/flush", func(w http.ResponseWriter, r *http.Request) {
		if err := d.srv.Flush(r.Context(), []cache.Entity{{Level: cache.LevelAll}}); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		d.store.Clear()
		fmt.Fprintln(w, `{"flushed":"all","level":"all"}`)
	})
	return mux
}
