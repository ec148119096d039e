package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/trace"
)

// AuditTrace is a metastore audit log made into calls.
type AuditTrace struct {
	Calls []trace.Call
	// Approximated counts, by method, the calls whose args were filled
	// in from the metastore (the log did not hold them).
	Approximated map[string]int
	// Unsupported counts, by audit command, the lines that became no
	// call: writes (never replayed from an audit log: their objects are
	// not in it), and commands this reader does not know.
	Unsupported map[string]int
}

// tableFacts are what the metastore says of a table, fetched once: its
// columns and its partition names.
type tableFacts struct {
	cols, parts []string
	err         error
}

// auditFiller turns audit lines into calls, asking the metastore for
// what a line leaves out.
type auditFiller struct {
	cl     *hmsclient.Redialer
	tables map[string]*tableFacts
	out    *AuditTrace
}

// FromAudit makes calls of audit lines. Each handler thread's lines up to
// its "Cleaning up" line are one connection. Args an audit line does not
// hold (partition names, columns) are filled in from the metastore at
// addr, and counted in Approximated.
func FromAudit(ctx context.Context, lines []trace.AuditLine, addr string, tr wire.Transport) (*AuditTrace, error) {
	f := &auditFiller{cl: &hmsclient.Redialer{Addr: addr, Transport: tr}, tables: map[string]*tableFacts{},
		out: &AuditTrace{Approximated: map[string]int{}, Unsupported: map[string]int{}}}
	defer f.cl.Close()
	conn := map[string]uint64{} // thread → its current connection
	var next uint64
	for i, l := range lines {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if l.Close {
			delete(conn, l.Thread)
			continue
		}
		id, ok := conn[l.Thread]
		if !ok {
			next++
			id = next
			conn[l.Thread] = id
		}
		c, ok := f.call(ctx, &l)
		if !ok {
			f.out.Unsupported[l.Cmd]++
			continue
		}
		c.Conn, c.User, c.Time = id, l.User, l.Time
		if c.Time.IsZero() { // no time on the line: a millisecond apart
			c.Time = time.Unix(0, 0).Add(time.Duration(i) * time.Millisecond)
		}
		if c.User != "" {
			c.UserKind = trace.Claimed
		}
		f.out.Calls = append(f.out.Calls, c)
	}
	return f.out, nil
}

// call is the call of one audit line; false when it makes none.
func (f *auditFiller) call(ctx context.Context, l *trace.AuditLine) (trace.Call, bool) {
	c := trace.Call{Method: l.Cmd}
	db, tbl := l.DB, l.Table
	switch l.Cmd {
	case "get_databases", "get_all_databases", "get_database":
	case "get_all_tables", "get_tables":
		if db == "" {
			return c, false
		}
	default:
		if db == "" || tbl == "" {
			return c, false // a table's call whose table the line does not name
		}
	}
	approx := false
	switch l.Cmd {
	case "get_databases", "get_all_databases":
		// 3.1 and 4.0 log get_all_databases as get_databases of "@cat#".
		pat := l.Pattern
		if i := strings.IndexByte(pat, '#'); strings.HasPrefix(pat, "@") && i > 0 {
			pat = pat[i+1:]
		}
		if pat == "" || l.Cmd == "get_all_databases" {
			c.Method, c.Args = "get_all_databases", hmsreq.Args()
		} else {
			c.Args = hmsreq.Args(hmsreq.Str(1, pat))
		}
	case "get_database":
		name := l.Pattern
		if i := strings.IndexByte(name, '#'); i >= 0 {
			name = name[i+1:]
		}
		c.Args = hmsreq.Args(hmsreq.Str(1, name))
	case "get_all_tables":
		c.Args = hmsreq.Args(hmsreq.Str(1, db))
	case "get_tables":
		c.Args = hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, l.Pattern))
	case "get_table":
		// get_table and get_table_req both log as get_table; 4.0.1 has
		// no get_table, and every version since 2.3 has get_table_req.
		c.Method, c.Args = "get_table_req", getTableReqArgs(db, tbl)
	case "get_partition_names":
		c.Args = partNamesArgs(db, tbl, -1)
	case "fetch_partition_names_req":
		// 4.0's get_partition_names_req; its request is not logged.
		c.Method, c.Args, approx = "get_partition_names", partNamesArgs(db, tbl, -1), true
	case "get_partitions_names_ps":
		c.Method, c.Args = "get_partition_names_ps", partNamesPsArgs(db, tbl, l.Values)
	case "get_partition":
		c.Args = hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, l.Values...))
	case "get_partitions":
		c.Args = hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.I16(3, -1))
	case "get_partitions_by_filter":
		// The filter is not logged: every partition stands for it.
		c.Method, c.Args, approx = "get_partitions", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.I16(3, -1)), true
	case "get_partitions_by_names", "get_table_statistics_req", "get_partitions_statistics_req":
		facts := f.facts(ctx, db, tbl)
		if facts.err != nil {
			return c, false
		}
		approx = true
		switch l.Cmd {
		case "get_partitions_by_names":
			c.Args = byNamesArgs(db, tbl, facts.parts)
		case "get_table_statistics_req":
			c.Args = tableStatsReqArgs(db, tbl, facts.cols)
		default:
			c.Args = hmsreq.Req(hmsreq.Str(1, db), hmsreq.Str(2, tbl), hmsreq.Strings(3, facts.cols...), hmsreq.Strings(4, facts.parts...))
		}
	default:
		return c, false
	}
	if approx {
		c.Approximated = true
		f.out.Approximated[c.Method]++
	}
	c.ArgsSize = len(c.Args)
	return c, true
}

// facts fetches a table's columns and partition names once.
func (f *auditFiller) facts(ctx context.Context, db, tbl string) *tableFacts {
	key := db + "." + tbl
	if t, ok := f.tables[key]; ok {
		return t
	}
	t := &tableFacts{}
	f.tables[key] = t
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	m, err := f.cl.Call(ctx, "get_table_req", getTableReqArgs(db, tbl))
	if err != nil {
		t.err = err
		return t
	}
	if t.cols, t.err = tableColumns(m, true); t.err != nil {
		return t
	}
	m, err = f.cl.Call(ctx, "get_partition_names", partNamesArgs(db, tbl, -1))
	if err != nil {
		t.err = err
		return t
	}
	if m.Type == wire.Reply {
		t.parts = stringList(m.Body())
	}
	return t
}

// tableColumns reads the column names of a get_table reply: success
// (0) Table, its sd (7), the sd's cols (1), each FieldSchema's name (1);
// of a get_table_req reply (req), the Table is field 1 of the success.
func tableColumns(m wire.Message, req bool) ([]string, error) {
	if m.Type != wire.Reply {
		return nil, fmt.Errorf("bench: get_table answered with message type %d", m.Type)
	}
	d := wire.NewDecoder(m.Body())
	if typ, id := d.FieldBegin(); typ != wire.TStruct || id != 0 {
		return nil, fmt.Errorf("bench: get_table answered with result field %d: no such table", id)
	}
	if req {
		if typ, id := d.FieldBegin(); typ != wire.TStruct || id != 1 {
			return nil, fmt.Errorf("bench: get_table_req answered without a table (field %d)", id)
		}
	}
	var cols []string
	d.Fields(func(id int16, typ byte) bool {
		if id != 7 || typ != wire.TStruct {
			return false
		}
		d.Fields(func(id int16, typ byte) bool {
			if id != 1 || typ != wire.TList {
				return false
			}
			_, n := d.ListBegin()
			for i := 0; i < n && d.Err() == nil; i++ {
				d.Fields(func(id int16, typ byte) bool {
					if id != 1 || typ != wire.TString {
						return false
					}
					cols = append(cols, d.String())
					return true
				})
			}
			return true
		})
		return true
	})
	return cols, d.Err()
}
