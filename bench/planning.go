package bench

import (
	"context"
	"fmt"

	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Planning is a repeated-query planning workload as Trino makes it: for
// each query, the table, its partition names, a window of partitions by
// name, and the statistics of a few columns of the table and of those
// partitions. The same queries run Rounds times, as a dashboard's do.
type Planning struct {
	DB     string
	Tables []string
	// Queries per round; query q reads Tables[q%len] and a window of
	// Window partitions starting at partition 7q.
	Queries, Rounds, Window int
	// NoStats leaves the statistics reads out (the demo metastore has
	// none).
	NoStats bool
}

// Run makes the workload's calls on cl and returns how many it made.
// Every call must succeed: a workload that fails measures nothing.
func (p Planning) Run(ctx context.Context, cl *hmsclient.Client) (int, error) {
	n := 0
	call := func(method string, args []byte) (wire.Message, error) {
		n++
		m, err := cl.Call(ctx, method, args)
		if err != nil {
			return m, err
		}
		if m.Type != wire.Reply {
			return m, fmt.Errorf("bench: planning: %s answered with message type %d", method, m.Type)
		}
		if f, err := wire.ResultField(m.Body()); err != nil || f > 0 {
			return m, fmt.Errorf("bench: planning: %s answered with result field %d (%v): %s", method, f, err, exceptionMessage(m.Body()))
		}
		return m, nil
	}
	for range p.Rounds {
		for q := range p.Queries {
			tbl := p.Tables[q%len(p.Tables)]
			m, err := call("get_table", hmsreq.Args(hmsreq.Str(1, p.DB), hmsreq.Str(2, tbl)))
			if err != nil {
				return n, err
			}
			cols, err := tableColumns(m, false)
			if err != nil {
				return n, err
			}
			cols = cols[:min(3, len(cols))]
			if m, err = call("get_partition_names", partNamesArgs(p.DB, tbl, -1)); err != nil {
				return n, err
			}
			names := stringList(m.Body())
			var window []string
			for i := range min(p.Window, len(names)) {
				window = append(window, names[(7*q+i)%len(names)])
			}
			for _, c := range []struct {
				method string
				args   []byte
			}{
				{"get_partitions_by_names", byNamesArgs(p.DB, tbl, window)},
				{"get_table_statistics_req", tableStatsReqArgs(p.DB, tbl, cols)},
				{"get_partitions_statistics_req", hmsreq.Req(hmsreq.Str(1, p.DB), hmsreq.Str(2, tbl),
					hmsreq.Strings(3, cols...), hmsreq.Strings(4, window...))},
			} {
				if p.NoStats && c.method != "get_partitions_by_names" {
					continue
				}
				if _, err := call(c.method, c.args); err != nil {
					return n, err
				}
			}
		}
	}
	return n, nil
}
