package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/hmsproxy/hmsproxy/bench"
	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/demohms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/trace"
)

type replayOptions struct {
	trace, audit, upstream, config, transport string
	svgFile, jsonFile                         string
	demo, writes                              bool
	speed                                     float64
	maxConns                                  int
	timeout                                   time.Duration
}

func parseReplay(args []string, stderr io.Writer) (*replayOptions, error) {
	o := &replayOptions{}
	fs := flag.NewFlagSet("hmsbench replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: hmsbench replay --trace PATH (--demo | --upstream thrift://hms:9083) [--config hmsproxy.yaml] [--speed N]\n"+
			"       hmsbench replay --audit hms.log --upstream thrift://hms:9083 [...]\n\n"+
			"Replays a trace recorded by hmsproxy --record (or a metastore audit log) twice: straight to the\n"+
			"metastore and through an in-process proxy with the cache section of --config; reports calls,\n"+
			"hits, metastore calls saved, p50/p99 each way and bytes per method. Writes are not replayed\n"+
			"unless --writes (use it against a scratch metastore only). docs/record-replay.md.\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.trace, "trace", "", "trace file written by hmsproxy --record (its rotated files are read too)")
	fs.StringVar(&o.audit, "audit", "", "a metastore log with HiveMetaStore.audit lines (Hive 2.3, 3.1, 4.0), instead of --trace")
	fs.BoolVar(&o.demo, "demo", false, "replay against an in-process demo metastore (as hmsproxy --demo)")
	fs.StringVar(&o.upstream, "upstream", "", "the metastore: thrift://host:port, comma-separated for several")
	fs.StringVar(&o.config, "config", "", "hmsproxy config file whose cache section the proxy pass uses (default: hmsproxy's defaults)")
	fs.Float64Var(&o.speed, "speed", 1, "replay the recorded timing N times faster; 0: each connection as fast as it can")
	fs.BoolVar(&o.writes, "writes", false, "replay writes and state changes too: only against a scratch metastore")
	fs.StringVar(&o.transport, "transport", "buffered", "framing toward metastore and proxy: buffered or framed")
	fs.IntVar(&o.maxConns, "max-conns", 256, "connections open at once on each side")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "timeout of each call")
	fs.StringVar(&o.svgFile, "svg", "", "write the p50/p99 chart as SVG to this file")
	fs.StringVar(&o.jsonFile, "json", "", "write the report as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	case (o.trace == "") == (o.audit == ""):
		return nil, errors.New("replay: give one of --trace and --audit")
	case o.demo == (o.upstream != ""):
		return nil, errors.New("replay: give one of --demo and --upstream")
	case o.speed < 0:
		return nil, errors.New("replay: --speed must be 0 or more")
	}
	return o, nil
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseReplay(args, stderr)
	if err != nil {
		return err
	}
	cfg := bench.ReplayConfig{Speed: o.speed, Writes: o.writes, MaxConns: o.maxConns, Timeout: o.timeout}
	if cfg.Transport, err = wire.ParseTransport(o.transport); err != nil {
		return err
	}
	if cfg.Caching, err = readReplayConfig(o.config, stderr); err != nil {
		return err
	}
	if o.demo {
		addr, stop, err := startDemoMetastore(cfg.Transport)
		if err != nil {
			return err
		}
		defer stop()
		cfg.Upstream = []string{addr}
	} else {
		for _, u := range settings.SplitList(o.upstream) {
			addr, ok := strings.CutPrefix(u, "thrift://")
			if !ok || addr == "" {
				return fmt.Errorf("--upstream %q: want thrift://host:port", u)
			}
			cfg.Upstream = append(cfg.Upstream, addr)
		}
	}
	var audit *bench.AuditTrace
	if cfg.Calls, audit, err = loadCalls(ctx, o, cfg, stderr); err != nil {
		return err
	}
	rep, err := bench.Replay(ctx, cfg)
	if rep == nil {
		return err
	}
	if audit != nil {
		rep.NoteAudit(audit)
	}
	if werr := writeReplay(rep, o, stdout); werr != nil {
		return werr
	}
	return err
}

// loadCalls reads the trace, or makes one of the audit log.
func loadCalls(ctx context.Context, o *replayOptions, cfg bench.ReplayConfig, stderr io.Writer) ([]trace.Call, *bench.AuditTrace, error) {
	if o.trace != "" {
		l, err := trace.Load(o.trace, 0)
		if err != nil {
			return nil, nil, err
		}
		for _, d := range l.Damaged {
			fmt.Fprintf(stderr, "replay: %s (the calls before it are replayed)\n", d)
		}
		if l.Flags&trace.FlagRedactNames != 0 {
			fmt.Fprintln(stderr, "replay: the trace was recorded with names redacted: the metastore will not know them")
		}
		fmt.Fprintf(stderr, "replay: %d calls from %d file(s) of %s\n", len(l.Calls), l.Files, o.trace)
		return l.Calls, nil, nil
	}
	f, err := os.Open(o.audit)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	lines, skipped, err := trace.ParseAudit(f)
	if err != nil {
		return nil, nil, err
	}
	a, err := bench.FromAudit(ctx, lines, cfg.Upstream[0], cfg.Transport)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(stderr, "replay: %d audit lines of %s (%d unreadable) make %d calls\n", len(lines), o.audit, skipped, len(a.Calls))
	return a.Calls, a, nil
}

func writeReplay(rep *bench.ReplayReport, o *replayOptions, stdout io.Writer) error {
	for _, out := range []struct {
		file  string
		write func(io.Writer) error
	}{{o.jsonFile, rep.WriteJSON}, {o.svgFile, rep.WriteSVG}} {
		if out.file == "" {
			continue
		}
		if err := writeFile(out.file, out.write); err != nil {
			return err
		}
	}
	return rep.WriteTable(stdout)
}

// startDemoMetastore runs the demo metastore, seeded as hmsproxy --demo.
func startDemoMetastore(tr wire.Transport) (string, func(), error) {
	demo := demohms.New(demohms.Config{Transport: tr})
	demo.Seed(3, 4, 240)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("demo metastore listen: %w", err)
	}
	go demo.Serve(ln)
	return ln.Addr().String(), func() { demo.Close() }, nil
}
