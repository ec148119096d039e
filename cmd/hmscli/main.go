// Command hmscli makes single HMS Thrift calls and prints the replies, to
// try a proxy or a metastore by hand.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

const usage = `hmscli: make one Hive Metastore call and print the reply.

Usage:
  hmscli [-uri thrift://host:port] [-framed] [-user NAME] COMMAND [ARGS]

Commands:
  databases                      get_all_databases
  tables DB                      get_all_tables
  table DB TABLE                 get_table
  partition-names DB TABLE [MAX] get_partition_names
  call METHOD [STRING ARGS...]   any method whose args are strings at ids 1..n

Replies are printed as Thrift structs: field id, then value.
`

func main() {
	uri := flag.String("uri", "thrift://127.0.0.1:9083", "metastore or proxy URI")
	framed := flag.Bool("framed", false, "use the framed transport")
	user := flag.String("user", "", "call set_ugi with this user first")
	timeout := flag.Duration("timeout", 30*time.Second, "call timeout")
	flag.Usage = func() { fmt.Fprint(os.Stderr, usage); flag.PrintDefaults() }
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*uri, *framed, *user, *timeout, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "hmscli:", err)
		os.Exit(1)
	}
}

func run(uri string, framed bool, user string, timeout time.Duration, args []string) error {
	method, callArgs, err := request(args)
	if err != nil {
		return err
	}
	addr, err := upstream.ParseURI(uri)
	if err != nil {
		return err
	}
	t := wire.Buffered
	if framed {
		t = wire.Framed
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := hmsclient.Dial(ctx, addr, t)
	if err != nil {
		return err
	}
	defer c.Close()
	if user != "" {
		if _, err := c.Call(ctx, "set_ugi", hmsreq.Args(hmsreq.Str(1, user), hmsreq.Strings(2))); err != nil {
			return err
		}
	}
	m, err := c.Call(ctx, method, callArgs)
	if err != nil {
		return err
	}
	if m.Type == wire.Exception {
		ex, err := wire.DecodeApplicationException(m.Body())
		if err != nil {
			return err
		}
		return ex
	}
	var b strings.Builder
	d := wire.NewDecoder(m.Body())
	dump(&b, d, wire.TStruct, 0)
	if d.Err() != nil {
		return d.Err()
	}
	fmt.Print(b.String())
	return nil
}

func request(args []string) (string, []byte, error) {
	need := func(n int) error {
		if len(args)-1 < n {
			return fmt.Errorf("%s needs %d arguments", args[0], n)
		}
		return nil
	}
	switch args[0] {
	case "databases":
		return "get_all_databases", hmsclient.Args(), nil
	case "tables":
		if err := need(1); err != nil {
			return "", nil, err
		}
		return "get_all_tables", hmsclient.Args(args[1]), nil
	case "table":
		if err := need(2); err != nil {
			return "", nil, err
		}
		return "get_table", hmsclient.Args(args[1], args[2]), nil
	case "partition-names":
		if err := need(2); err != nil {
			return "", nil, err
		}
		max := int16(-1)
		if len(args) > 3 {
			fmt.Sscan(args[3], &max)
		}
		return "get_partition_names", hmsreq.Args(hmsreq.Str(1, args[1]), hmsreq.Str(2, args[2]), hmsreq.I16(3, max)), nil
	case "call":
		if err := need(1); err != nil {
			return "", nil, err
		}
		return args[1], hmsclient.Args(args[2:]...), nil
	}
	return "", nil, fmt.Errorf("unknown command %q", args[0])
}

// dump prints one value of type typ without knowing its schema.
func dump(b *strings.Builder, d *wire.Decoder, typ byte, indent int) {
	pad := strings.Repeat("  ", indent)
	switch typ {
	case wire.TStruct:
		b.WriteString("{\n")
		for {
			ft, id := d.FieldBegin()
			if ft == wire.TStop || d.Err() != nil {
				break
			}
			fmt.Fprintf(b, "%s  %d: ", pad, id)
			dump(b, d, ft, indent+1)
		}
		b.WriteString(pad + "}\n")
	case wire.TList, wire.TSet:
		et, n := d.ListBegin()
		b.WriteString("[\n")
		for i := 0; i < n && d.Err() == nil; i++ {
			b.WriteString(pad + "  ")
			dump(b, d, et, indent+1)
		}
		b.WriteString(pad + "]\n")
	case wire.TMap:
		kt, vt, n := d.MapBegin()
		b.WriteString("{\n")
		for i := 0; i < n && d.Err() == nil; i++ {
			b.WriteString(pad + "  ")
			var k strings.Builder
			dump(&k, d, kt, indent+1)
			b.WriteString(strings.TrimSuffix(k.String(), "\n") + " => ")
			dump(b, d, vt, indent+1)
		}
		b.WriteString(pad + "}\n")
	case wire.TString:
		fmt.Fprintf(b, "%q\n", d.Bytes())
	case wire.TBool:
		fmt.Fprintln(b, d.Bool())
	case wire.TByte:
		fmt.Fprintln(b, d.Byte())
	case wire.TI16:
		fmt.Fprintln(b, d.I16())
	case wire.TI32:
		fmt.Fprintln(b, d.I32())
	case wire.TI64:
		fmt.Fprintln(b, d.I64())
	case wire.TDouble:
		fmt.Fprintln(b, d.Double())
	default:
		d.Skip(typ)
		b.WriteString("?\n")
	}
}
