// Command hmsbench measures Hive Metastore latency per operation, side by
// side against several targets (a metastore directly and through
// hmsproxy), and reports percentiles, ratios and upstream calls saved.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hmsproxy/hmsproxy/bench"
	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

type options struct {
	targets, metrics                listFlag
	baseline, setupTarget           string
	setup, demo, quiet, pruneMix    bool
	echo                            bool
	demoDelay                       time.Duration
	spec                            bench.Spec
	ops, concurrency, rates, phases string
	openWorkers, names, writeBatch  int
	duration, warmup, timeout       time.Duration
	keys                            string
	zipfS                           float64
	flushURL, transport             string
	seed                            uint64
	jsonFile, csvFile, svgFile      string
}

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hmsbench:", err)
		os.Exit(1)
	}
}

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("hmsbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: hmsbench --target direct=thrift://hms:9083 --target proxy=thrift://hmsproxy:9083 [flags]\n       hmsbench --demo\n       hmsbench replay --trace PATH (--demo | --upstream thrift://hms:9083) [--config hmsproxy.yaml] [--speed N]\n\nOperations: %s\n\n", strings.Join(bench.OpNames(), ", "))
		fs.PrintDefaults()
	}
	fs.Var(&o.targets, "target", "a target, name=thrift://host:port (repeat for several)")
	fs.Var(&o.metrics, "metrics-url", "a target's hmsproxy metrics, name=http://host:9084/metrics (repeat)")
	fs.StringVar(&o.baseline, "baseline", "", "target the ratios are computed against (default: the first)")
	fs.BoolVar(&o.setup, "setup", false, "create the bench catalog (skipping what exists) before the run")
	fs.StringVar(&o.setupTarget, "setup-target", "", "target that --setup writes to, the metastore itself (default: the baseline)")
	fs.IntVar(&o.spec.Databases, "dbs", 2, "databases in the bench catalog")
	fs.IntVar(&o.spec.Tables, "tables", 20, "tables per database")
	fs.IntVar(&o.spec.Partitions, "partitions", 240, "partitions per table (ds, hr)")
	fs.IntVar(&o.spec.Columns, "columns", 20, "columns per table")
	fs.IntVar(&o.spec.Params, "params", 5, "parameters per database, table and partition (-1: none)")
	fs.StringVar(&o.ops, "ops", strings.Join(bench.DefaultOps, ","), "operations and mixes, comma-separated, or \"all\"")
	fs.StringVar(&o.concurrency, "concurrency", "8", "closed-loop sweep: workers per level, comma-separated")
	fs.StringVar(&o.rates, "rate", "", "open loop instead: operations/s per target, comma-separated (e.g. 200,1000)")
	fs.IntVar(&o.openWorkers, "open-workers", 64, "open loop: most calls in flight")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of each warm measurement")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unrecorded warm-up before each warm measurement")
	fs.StringVar(&o.phases, "phases", "warm", "cold (first pass over the keys after a flush) and/or warm")
	fs.StringVar(&o.keys, "keys", "uniform", "key distribution: uniform or zipf")
	fs.Float64Var(&o.zipfS, "zipf-s", 1.1, "zipf exponent (> 1)")
	fs.IntVar(&o.names, "names", 50, "partition names per getPartitionsByNames call")
	fs.IntVar(&o.writeBatch, "write-batch", 1, "partitions per addPartitions/dropPartitions call")
	fs.StringVar(&o.flushURL, "flush-url", "", "hmsproxy admin flush URL POSTed before each cold phase, e.g. http://127.0.0.1:9084/cache/flush (token: $HMSPROXY_ADMIN_TOKEN)")
	fs.StringVar(&o.transport, "transport", "buffered", "framing: buffered or framed")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "timeout of each call")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the key sequence")
	fs.StringVar(&o.jsonFile, "json", "", "write the report as JSON to this file")
	fs.StringVar(&o.csvFile, "csv", "", "write the report as CSV to this file")
	fs.StringVar(&o.svgFile, "svg", "", "write a p50/p99 chart as SVG to this file")
	fs.BoolVar(&o.demo, "demo", false, "start an in-process demo metastore and hmsproxy, and compare them (targets direct and proxy)")
	fs.DurationVar(&o.demoDelay, "demo-delay", 0, "demo: latency added to every metastore call (stands in for its database)")
	fs.BoolVar(&o.echo, "echo", false, "add a target \"echo\" answering each call with the bytes the first target gave to it (asked once), the floor to compare with, and make it the baseline; needs --transport framed, where replies are read raw on every target")
	fs.BoolVar(&o.quiet, "quiet", false, "no live progress on stderr")
	fs.BoolVar(&o.pruneMix, "prune-mix", false, "run the pruning mix (Trino-style planning, Zipf filter values, new days over time) against whole-reply caching and local pruning in one run, in process; --seed and --zipf-s apply")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, nil
}

func (o *options) config() (bench.Config, error) {
	cfg := bench.Config{
		Baseline: o.baseline, OpenWorkers: o.openWorkers, Duration: o.duration, Warmup: o.warmup,
		Phases: settings.SplitList(o.phases), KeyDist: o.keys, ZipfS: o.zipfS, Spec: o.spec,
		NamesBatch: o.names, WriteBatch: o.writeBatch, FlushURL: o.flushURL,
		FlushToken: os.Getenv("HMSPROXY_ADMIN_TOKEN"), Timeout: o.timeout, Seed: o.seed,
	}
	if o.warmup == 0 {
		cfg.Warmup = -1
	}
	var err error
	if cfg.Transport, err = wire.ParseTransport(o.transport); err != nil {
		return cfg, err
	}
	if o.ops == "all" {
		cfg.Ops = bench.OpNames()
	} else {
		cfg.Ops = settings.SplitList(o.ops)
	}
	for _, s := range settings.SplitList(o.concurrency) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return cfg, fmt.Errorf("--concurrency: %q is not a number", s)
		}
		cfg.Concurrency = append(cfg.Concurrency, n)
	}
	for _, s := range settings.SplitList(o.rates) {
		r, err := strconv.ParseFloat(strings.TrimSuffix(s, "/s"), 64)
		if err != nil {
			return cfg, fmt.Errorf("--rate: %q is not a number", s)
		}
		cfg.Rates = append(cfg.Rates, r)
	}
	for _, s := range o.targets {
		t, err := bench.ParseTarget(s)
		if err != nil {
			return cfg, err
		}
		cfg.Targets = append(cfg.Targets, t)
	}
	for _, s := range o.metrics {
		name, url, ok := strings.Cut(s, "=")
		found := false
		for i := range cfg.Targets {
			if ok && cfg.Targets[i].Name == name {
				cfg.Targets[i].MetricsURL, found = url, true
			}
		}
		if !found {
			return cfg, fmt.Errorf("--metrics-url %q: want name=http://…/metrics naming a --target", s)
		}
	}
	return cfg, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "replay" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return runReplay(ctx, args[1:], stdout, stderr)
	}
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	cfg, err := o.config()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if !o.quiet {
		cfg.Progress = stderr
	}
	if o.pruneMix {
		rep, err := bench.RunPruneMix(ctx, bench.PruneMixConfig{Seed: o.seed, ZipfS: o.zipfS})
		if err != nil {
			return err
		}
		rep.Write(stdout)
		return nil
	}
	if o.demo {
		if len(cfg.Targets) > 0 {
			return errors.New("--demo picks its own targets; drop --target")
		}
		d, err := bench.StartDemo(bench.DemoConfig{Delay: o.demoDelay, Transport: cfg.Transport})
		if err != nil {
			return err
		}
		defer d.Close()
		cfg.Targets = []bench.Target{d.Direct, d.Proxy}
		cfg.Baseline, cfg.FlushURL, o.setup, o.setupTarget = "direct", d.FlushURL, true, "direct"
		fmt.Fprintf(stderr, "demo: metastore %s, proxy %s (metrics %s)\n", d.Direct.Addr, d.Proxy.Addr, d.Proxy.MetricsURL)
	}
	if len(cfg.Targets) == 0 {
		return errors.New("no targets: give --target name=thrift://host:port (or --demo)")
	}
	if o.echo {
		e, err := startEcho(&cfg)
		if err != nil {
			return err
		}
		defer e.Close()
	}
	if o.setup {
		name := o.setupTarget
		if name == "" {
			name = cfg.Baseline
		}
		if name == "" {
			name = cfg.Targets[0].Name
		}
		var st bench.SetupStats
		found := false
		for _, t := range cfg.Targets {
			if t.Name == name {
				found = true
				if st, err = bench.Setup(ctx, t, cfg.Transport, cfg.Spec, cfg.Progress); err != nil {
					return err
				}
			}
		}
		if !found {
			return fmt.Errorf("--setup-target %q is not a target", name)
		}
		fmt.Fprintf(stderr, "setup on %s: created %d databases, %d tables, %d partitions; %d, %d, %d existed\n", name,
			st.Databases, st.Tables, st.Partitions, st.SkippedDatabases, st.SkippedTables, st.SkippedPartitions)
	}
	rep, runErr := bench.Run(ctx, cfg)
	if rep == nil {
		return runErr
	}
	fmt.Fprintln(stdout)
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	for _, out := range []struct {
		file  string
		write func(io.Writer) error
	}{{o.jsonFile, rep.WriteJSON}, {o.csvFile, rep.WriteCSV}, {o.svgFile, rep.WriteSVG}} {
		if out.file == "" {
			continue
		}
		if err := writeFile(out.file, out.write); err != nil {
			return err
		}
	}
	return runErr
}

// startEcho adds an echo of the first target to cfg's targets, as the
// baseline.
func startEcho(cfg *bench.Config) (*bench.Echo, error) {
	if cfg.Transport != wire.Framed {
		return nil, errors.New("--echo compares replies read raw: add --transport framed (and serve it)")
	}
	e, err := bench.StartEcho(cfg.Targets[0], cfg.Transport)
	if err != nil {
		return nil, err
	}
	cfg.Targets = append(cfg.Targets, e.Target)
	cfg.Baseline = e.Name
	return e, nil
}

func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	return f.Close()
}
