package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// The pruning mix: Trino-style planning queries over tables partitioned
// by (ds, region), each asking for one day (Zipf over the most recent
// days: today is asked most) and a few regions (Zipf over regions), while
// a new day's partitions appear every so often. The same query stream
// goes to two proxies in front of one in-process metastore, one caching
// filter replies whole under their text and one pruning locally, and the
// report says how many of their reads reached the metastore at steady
// state (the second half of the run).

// PruneMixConfig configures RunPruneMix. The zero value of each field
// selects the default in its comment.
type PruneMixConfig struct {
	// Tables planned over. Default 8.
	Tables int
	// Regions per day. Default 16.
	Regions int
	// Days of partitions at the start. Default 30.
	Days int
	// Queries planned in all. Default 20,000.
	Queries int
	// NewDayEvery: a new day's partitions are added (and the proxies
	// invalidate what the event log's ADD_PARTITION events say) after
	// this many queries. Default 2,000.
	NewDayEvery int
	// ZipfS is the skew of the day and region choices. Default 1.2.
	ZipfS float64
	// Seed seeds the query stream. Default 1.
	Seed uint64
	// Logger receives the components' logs. Default: discard.
	Logger *slog.Logger
}

func (c PruneMixConfig) withDefaults() PruneMixConfig {
	orDefault(&c.Tables, 8)
	orDefault(&c.Regions, 16)
	orDefault(&c.Days, 30)
	orDefault(&c.Queries, 20000)
	orDefault(&c.NewDayEvery, 2000)
	if c.ZipfS <= 1 {
		c.ZipfS = 1.2
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// PruneMixMode is one proxy's outcome at steady state.
type PruneMixMode struct {
	Name string
	// Reads the clients made, and the calls that reached the metastore for
	// them (writes excluded).
	Reads, Upstream uint64
	// Local is the reads answered by local pruning.
	Local uint64
}

// Saved is the share of reads that cost no metastore call.
func (m PruneMixMode) Saved() float64 {
	if m.Reads == 0 {
		return 0
	}
	return 1 - float64(m.Upstream)/float64(m.Reads)
}

// PruneMixReport is the outcome of RunPruneMix.
type PruneMixReport struct {
	Config PruneMixConfig
	// Steady is the number of queries measured (the second half).
	Steady int
	Modes  []PruneMixMode // whole-reply caching, then local pruning
}

// Write renders the report as text.
func (r *PruneMixReport) Write(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "pruning mix: %d tables x %d regions, %d days + one every %d queries, Zipf s=%.2f, seed %d\n",
		c.Tables, c.Regions, c.Days, c.NewDayEvery, c.ZipfS, c.Seed)
	fmt.Fprintf(w, "steady state: last %d of %d queries (get_table + get_partitions_by_filter each)\n", r.Steady, c.Queries)
	fmt.Fprintf(w, "%-22s %10s %10s %10s %8s\n", "mode", "reads", "upstream", "local", "saved")
	for _, m := range r.Modes {
		fmt.Fprintf(w, "%-22s %10d %10d %10d %7.2f%%\n", m.Name, m.Reads, m.Upstream, m.Local, 100*m.Saved())
	}
}

// countingUp counts the calls a proxy sends to its metastore.
type countingUp struct {
	up proxy.Forwarder
	n  atomic.Uint64
}

func (c *countingUp) Do(ctx context.Context, call upstream.Call, sink upstream.ReplySink) error {
	c.n.Add(1)
	return c.up.Do(ctx, call, sink)
}

// mixProxy is one proxy of the mix.
type mixProxy struct {
	name   string
	srv    *proxy.Server
	store  *cache.Store
	up     *countingUp
	client *hmsclient.Client
}

// RunPruneMix runs the pruning mix and reports it.
func RunPruneMix(ctx context.Context, cfg PruneMixConfig) (_ *PruneMixReport, err error) {
	cfg = cfg.withDefaults()
	ms := demohms.New(demohms.Config{Logger: cfg.Logger})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: prune mix listen: %w", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ms.Close()
	wg.Go(func() { ms.Serve(ln) })
	addr := ln.Addr().String()
	group, err := upstream.New(upstream.Config{URIs: []string{"thrift://" + addr}, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	defer group.Close()
	direct, err := hmsclient.Dial(ctx, addr, wire.Buffered)
	if err != nil {
		return nil, err
	}
	defer direct.Close()
	data := &mixData{ctx: ctx, direct: direct, regions: make([]string, cfg.Regions)}
	for i := range data.regions {
		data.regions[i] = fmt.Sprintf("r%02d", i)
	}
	if err := data.create(cfg.Tables, cfg.Days); err != nil {
		return nil, err
	}

	modes := []*mixProxy{{name: "whole-reply caching"}, {name: "local pruning"}}
	for i, p := range modes {
		defer p.close()
		if err := p.start(ctx, cfg, group, i == 0, &wg); err != nil {
			return nil, err
		}
	}
	return runPruneMixQueries(ctx, cfg, data, modes)
}

// pruneMixDB is the database the mix plans over.
const pruneMixDB = "prune_mix"

// mixDay is the ds value of day d of the mix.
func mixDay(d int) string {
	return time.Date(2026, 1, 1+d, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
}

// mixData writes the mix's metadata straight to the metastore, behind the
// proxies' backs.
type mixData struct {
	ctx     context.Context
	direct  *hmsclient.Client
	regions []string // of every day
	tables  []string // set by create
}

// create creates the database, its tables and their first days.
func (d *mixData) create(tables, days int) error {
	const db = pruneMixDB
	if err := d.mustOK("create_database", hmsreq.Args(hmsreq.Database{Name: db, Location: warehouse + "/" + db + ".db", Owner: "hmsbench"}.Field(1))); err != nil {
		return err
	}
	d.tables = make([]string, tables)
	for i := range d.tables {
		d.tables[i] = fmt.Sprintf("events%d", i)
		t := hmsreq.Table{DB: db, Name: d.tables[i], Owner: "hmsbench", CreateTime: 1700000000,
			SD:       hmsreq.ORCSD(warehouse+"/"+db+".db/"+d.tables[i], Spec{Columns: 20}.columns()...),
			PartKeys: []hmsreq.Column{{Name: "ds", Type: "string"}, {Name: "region", Type: "string"}}}
		if err := d.mustOK("create_table", hmsreq.Args(t.Field(1))); err != nil {
			return err
		}
		for day := 0; day < days; day++ {
			if err := d.addDay(d.tables[i], day); err != nil {
				return err
			}
		}
	}
	return nil
}

// addDay adds day's partitions, one per region, to tbl.
func (d *mixData) addDay(tbl string, day int) error {
	const db = pruneMixDB
	ps := make([]hmsreq.Partition, len(d.regions))
	for i, r := range d.regions {
		ps[i] = hmsreq.Partition{DB: db, Table: tbl, Values: []string{mixDay(day), r}, CreateTime: 1700000000,
			SD: hmsreq.ORCSD(warehouse+"/"+db+".db/"+tbl+"/ds="+mixDay(day)+"/region="+r, Spec{Columns: 20}.columns()...)}
	}
	return d.mustOK("add_partitions", hmsreq.Args(hmsreq.Partitions(1, ps...)))
}

// mustOK calls method on the metastore and fails unless it succeeded.
func (d *mixData) mustOK(method string, args []byte) error {
	m, err := d.direct.Call(d.ctx, method, args)
	if err != nil {
		return err
	}
	if f, err := wire.ResultField(m.Body()); m.Type != wire.Reply || err != nil || f > 0 {
		return fmt.Errorf("bench: prune mix setup: %s failed", method)
	}
	return nil
}

// start starts p in front of group, pruning locally unless pruneOff.
// Whatever it started, p.close stops, even when it fails.
func (p *mixProxy) start(ctx context.Context, cfg PruneMixConfig, group proxy.Forwarder, pruneOff bool, wg *sync.WaitGroup) (err error) {
	p.store, err = cache.New(cache.Config{MaxBytes: 512 << 20, Kinds: cache.DefaultKinds()})
	if err != nil {
		return err
	}
	p.up = &countingUp{up: group}
	srv, err := proxy.New(proxy.Config{Logger: cfg.Logger, Cache: &proxy.Caching{Store: p.store, Upstream: "mix",
		Scope: proxy.ScopeShared, PruneOff: pruneOff, Shadow: proxy.Shadow{Rate: -1}}}, p.up)
	if err != nil {
		return err
	}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	p.srv = srv
	wg.Go(func() { p.srv.Serve(pl) })
	p.client, err = hmsclient.Dial(ctx, pl.Addr().String(), wire.Buffered)
	return err
}

// close stops what start started, last first.
func (p *mixProxy) close() {
	if p.client != nil {
		p.client.Close()
	}
	if p.srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.srv.Shutdown(sctx)
	}
	if p.store != nil {
		p.store.Close()
	}
}

// runPruneMixQueries plans cfg.Queries queries through every proxy of
// modes, adds a day every cfg.NewDayEvery, and reports the second half.
func runPruneMixQueries(ctx context.Context, cfg PruneMixConfig, data *mixData, modes []*mixProxy) (*PruneMixReport, error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	zipf := func(n int) *rand.Zipf { return rand.NewZipf(rng, cfg.ZipfS, 1, uint64(n-1)) }
	tables, regions := data.tables, data.regions
	tableZ, regionZ := zipf(len(tables)), zipf(len(regions))
	days := cfg.Days
	rep := &PruneMixReport{Config: cfg, Steady: cfg.Queries - cfg.Queries/2}
	type mark struct{ reads, up, local uint64 }
	marks := make([]mark, len(modes))
	reads := make([]uint64, len(modes))
	for q := 0; q < cfg.Queries; q++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if q > 0 && q%cfg.NewDayEvery == 0 {
			if err := addMixDay(ctx, data, modes, days); err != nil {
				return nil, err
			}
			days++
		}
		if q == cfg.Queries/2 {
			for i, p := range modes {
				marks[i] = mark{reads[i], p.up.n.Load(), p.srv.PruneStats().Local.Load()}
			}
		}
		tbl := tables[tableZ.Uint64()]
		// Recent days are planned most: today, yesterday, ...
		d := days - 1 - int(zipf(days).Uint64())
		k := 1 + rng.IntN(3)
		var rs []string
		for len(rs) < k {
			r := "'" + regions[regionZ.Uint64()] + "'"
			if !strings.Contains(strings.Join(rs, ","), r) {
				rs = append(rs, r)
			}
		}
		flt := "ds = '" + mixDay(d) + "' and (region) in (" + strings.Join(rs, ", ") + ")"
		if err := planMixQuery(ctx, modes, reads, tbl, flt); err != nil {
			return nil, err
		}
	}
	for i, p := range modes {
		rep.Modes = append(rep.Modes, PruneMixMode{Name: p.name, Reads: reads[i] - marks[i].reads,
			Upstream: p.up.n.Load() - marks[i].up, Local: p.srv.PruneStats().Local.Load() - marks[i].local})
	}
	return rep, nil
}

// addMixDay lands day in every table, written behind the proxies' backs;
// each proxy learns it as from the event log.
func addMixDay(ctx context.Context, data *mixData, modes []*mixProxy, day int) error {
	for _, t := range data.tables {
		if err := data.addDay(t, day); err != nil {
			return err
		}
		// What the event log applies for the ADD_PARTITION event.
		ents := eventlog.Entities(eventlog.Event{Type: "ADD_PARTITION", DB: pruneMixDB, Table: t}, "hive")
		for _, p := range modes {
			p.srv.Flush(ctx, ents)
		}
	}
	return nil
}

// planMixQuery plans one query over tbl with filter flt through every
// proxy of modes, as Trino does (get_table, then the filter), counting
// the reads in reads.
func planMixQuery(ctx context.Context, modes []*mixProxy, reads []uint64, tbl, flt string) error {
	const db = pruneMixDB
	steps := []struct {
		method string
		args   []byte
	}{
		{"get_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl))},
		{"get_partitions_by_filter", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Str(3, flt), hmsreq.I16(4, -1))},
	}
	var want []byte
	for i, p := range modes {
		for _, s := range steps {
			m, err := p.client.Call(ctx, s.method, s.args)
			if err != nil {
				return fmt.Errorf("bench: prune mix %s: %w", s.method, err)
			}
			reads[i]++
			if s.method != "get_partitions_by_filter" {
				continue
			}
			// Both proxies must give the same answer, or the count
			// compares nothing.
			if i == 0 {
				want = append(want[:0], m.Body()...)
			} else if string(m.Body()) != string(want) {
				return errPruneMixDiffer
			}
		}
		p.store.Wait()
	}
	return nil
}

// errPruneMixDiffer: the two proxies answered one filter differently.
var errPruneMixDiffer = errors.New("bench: prune mix: the proxies' replies differ")
