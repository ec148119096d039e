package chaos

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// behaviour is one kind of hostile client. run runs an instance of it
// until ctx ends and returns once its connections are closed.
type behaviour struct {
	name  string
	unit  string // what its ops count
	needs string // a feature (procs_test.go) without which it cannot hurt
	what  string // what it does and the regression it would show
	run   func(ctx context.Context, x *inst)
}

// behaviours: issue 22's (the first nine) and issue 9's.
var behaviours = []*behaviour{
	{name: "utf8-unknown", unit: "calls", run: utf8Unknown,
		what: "unknown methods named in invalid UTF-8, each followed by a metrics scrape: a name reaching a label crashed the process at the scrape"},
	{name: "budget-jam", unit: "conns", run: budgetJam,
		what: "8 connections each sending only a header announcing a string just under max_message_bytes: claims of announced sizes held the in-flight budget and stalled every request over 4 KiB for 60 s"},
	{name: "silent-tls", unit: "conns", run: silentTLS,
		what: "256 TCP connections to the TLS listener from 16 addresses that never send a byte: handshakes held client slots and kept new clients out"},
	{name: "idle-at-max", unit: "conns", run: idleAtMax,
		what: "max_clients TLS connections that never send a request: new clients were refused until client_idle_timeout"},
	{name: "ugi-huge", unit: "calls", run: ugiHuge,
		what: "2 connections each sending set_ugi with a 40 MiB user name, or 100,000 groups, then keeping the session a few seconds: kept per connection and replayed upstream, six took RSS to 900 MiB"},
	{name: "ugi-cycling", unit: "conns", run: ugiCycling,
		what: "a new connection with a new set_ugi name every 20 calls of uncached get_partitions, from addresses allowed 5 reads a second: a name keyed a fresh rate-limit bucket"},
	{name: "flush-loop", unit: "calls", run: flushLoop,
		what: "4 connections looping an unknown method and flushCache: each emptied the cache, a bystander's cached reads became misses"},
	{name: "oneway", unit: "calls", run: oneway,
		what: "reinitialize, an unknown method and get_table sent as ONEWAY: an answer to a oneway call met the next call on its pooled connection"},
	{name: "deep-drop", unit: "calls", needs: "federation", run: deepDrop,
		what: "drop_table of the read-only group's demo_db2.t0 carrying a 70-deep extra field: the router gave up decoding and sent it to the primary unchecked"},
	{name: "slowloris", unit: "bytes", run: slowloris,
		what: "36 connections from each general address sending a get_table one byte a second: more than max_clients, with no read deadline or per-address cap they keep everyone out"},
	{name: "non-readers", unit: "conns", run: nonReaders,
		what: "16 connections sending 64 uncached get_partitions each and never reading: with hung-writes, they held all 64 metastore connections"},
	{name: "hung-writes", unit: "calls", run: hungWrites,
		what: "48 create_database calls the metastore takes 10 s over: as many as the connections reads do not reserve"},
	{name: "garbage", unit: "conns", run: garbage,
		what: "connections sending malformed frames: random bytes (in and outside TLS), bad headers, huge lengths, bad versions"},
	{name: "drop-mid-request", unit: "conns", run: dropMid,
		what: "connections reset half way through a 1 MiB request or a header, or closed before their reply"},
}

func behaviourNamed(name string) *behaviour {
	for _, b := range behaviours {
		if b.name == name {
			return b
		}
	}
	return nil
}

func behaviourNames() []string {
	var out []string
	for _, b := range behaviours {
		out = append(out, b.name)
	}
	return out
}

// retryPause is how long a behaviour waits, give or take half, before
// it connects again after the proxy closed or refused its connection:
// a client that reconnects in a tight loop measures the CPU of TLS
// handshakes on a shared machine more than the proxy.
const retryPause = 200 * time.Millisecond

// message is a whole call message.
func message(typ byte, method string, seq int32, args []byte) []byte {
	return append(wire.AppendHeader(nil, typ, []byte(method), seq), args...)
}

// sessions connects from src until ctx ends and runs session on each
// connection, then closes it. After a failed dial it waits failPause,
// after a session about pause.
func (x *inst) sessions(ctx context.Context, r *rand.Rand, src func() string, failPause, pause time.Duration, session func(c *hmsclient.Client)) {
	for ctx.Err() == nil {
		c, closeC, err := x.client(ctx, src())
		if err != nil {
			sleep(ctx, failPause)
			continue
		}
		session(c)
		closeC()
		sleep(ctx, jitter(r, pause))
	}
}

// fixed is a source that is always addr.
func fixed(addr string) func() string { return func() string { return addr } }

func utf8Unknown(ctx context.Context, x *inst) {
	x.goN(ctx, 2, func(ctx context.Context, i int, r *rand.Rand) {
		var c *hmsclient.Client
		var closeC func()
		defer func() {
			if closeC != nil {
				closeC()
			}
		}()
		for n := 0; ctx.Err() == nil; n++ {
			if c == nil {
				var err error
				if c, closeC, err = x.client(ctx, flusherAddr); err != nil {
					sleep(ctx, 200*time.Millisecond)
					continue
				}
			}
			name := "get_" + string([]byte{0xff, 0xfe, byte(0x80 + r.IntN(64)), byte(0xc0 + r.IntN(32))}) + "table"
			cctx, cancel := callCtx(ctx, 10*time.Second)
			m, err := c.Call(cctx, name, hmsclient.Args("demo_db0", "t0"))
			cancel()
			x.answer(m, err)
			if err != nil {
				closeC()
				c, closeC = nil, nil
				sleep(ctx, jitter(r, retryPause))
				continue
			}
			x.op(1)
			if i == 0 {
				x.h.scrape()
			}
			sleep(ctx, 5*time.Millisecond)
		}
	})
}

func budgetJam(ctx context.Context, x *inst) {
	// A get_table whose first field announces a string just under the
	// message limit, and nothing more.
	jam := wire.AppendHeader(nil, wire.Call, []byte("get_table"), 1)
	jam = append(jam, wire.TString, 0, 1)
	jam = binary.BigEndian.AppendUint32(jam, wire.DefaultMaxMessage-1024)
	x.goN(ctx, 8, func(ctx context.Context, i int, r *rand.Rand) {
		for ctx.Err() == nil {
			tc, err := x.dialTLS(ctx, general(r), nil)
			if err != nil {
				x.note("dial failed")
				sleep(ctx, 500*time.Millisecond)
				continue
			}
			if _, err := tc.Write(jam); err == nil {
				x.op(1)
			}
			if holdUntilClosed(ctx, tc) {
				x.note("closed by the proxy")
			}
			sleep(ctx, jitter(r, 500*time.Millisecond))
		}
	})
}

func silentTLS(ctx context.Context, x *inst) {
	const addrs, perAddr = 16, 16
	x.goN(ctx, addrs*perAddr, func(ctx context.Context, i int, r *rand.Rand) {
		if !sleep(ctx, time.Duration(i)*4*time.Millisecond) {
			return
		}
		for ctx.Err() == nil {
			nc, err := x.dialTCP(ctx, silentAddr(i%addrs))
			if err != nil {
				x.note("dial failed")
				sleep(ctx, time.Second)
				continue
			}
			x.op(1)
			start := time.Now()
			if holdUntilClosed(ctx, nc) {
				if time.Since(start) < time.Second {
					x.note("closed within 1s")
				} else {
					x.note("closed later")
				}
			}
			sleep(ctx, jitter(r, time.Second))
		}
	})
}

func idleAtMax(ctx context.Context, x *inst) {
	n := x.h.plan.MaxClients
	per := max(x.h.plan.PerAddress, 1)
	addrs := (n+per-1)/per + 1
	x.goN(ctx, n, func(ctx context.Context, i int, r *rand.Rand) {
		if !sleep(ctx, time.Duration(i)*5*time.Millisecond) {
			return
		}
		for ctx.Err() == nil {
			tc, err := x.dialTLS(ctx, idleAddr(i%addrs), nil)
			if err != nil {
				x.note("dial failed")
				sleep(ctx, jitter(r, 5*time.Second))
				continue
			}
			x.op(1)
			if holdUntilClosed(ctx, tc) {
				x.note("closed by the proxy")
			}
			sleep(ctx, jitter(r, 5*time.Second))
		}
	})
}

// The set_ugi payloads, built once: a 40 MiB user name, and 100,000
// groups of 60 characters.
var (
	ugiOnce              sync.Once
	ugiHugeMsg, ugiGroup []byte
)

func ugiMessages() ([]byte, []byte) {
	ugiOnce.Do(func() {
		ugiHugeMsg = message(wire.Call, "set_ugi", 0, hmsreq.Args(hmsreq.Str(1, strings.Repeat("u", 40<<20)), hmsreq.Strings(2, "g")))
		groups := make([]string, 100_000)
		for i := range groups {
			groups[i] = fmt.Sprintf("group_%054d", i)
		}
		ugiGroup = message(wire.Call, "set_ugi", 0, hmsreq.Args(hmsreq.Str(1, "chaos"), hmsreq.Strings(2, groups...)))
	})
	return ugiHugeMsg, ugiGroup
}

func ugiHuge(ctx context.Context, x *inst) {
	huge, groups := ugiMessages()
	x.goN(ctx, 2, func(ctx context.Context, i int, r *rand.Rand) {
		if !sleep(ctx, time.Duration(i)*time.Second) {
			return
		}
		for k := 0; ctx.Err() == nil; k++ {
			c, closeC, err := x.client(ctx, general(r))
			if err != nil {
				sleep(ctx, time.Second)
				continue
			}
			msg := huge
			if (i+k)%2 == 1 {
				msg = groups
			}
			cctx, cancel := callCtx(ctx, 30*time.Second)
			var m wire.Message
			if err = c.SendRaw(msg); err == nil {
				m, err = c.Recv(cctx)
			}
			cancel()
			x.answer(m, err)
			if err == nil {
				x.op(1)
				// The session goes on: a read, then an idle while
				// (where an accepted name would be held).
				cctx, cancel := callCtx(ctx, 10*time.Second)
				c.Call(cctx, "get_table", hmsclient.Args("demo_db0", "t0"))
				cancel()
				sleep(ctx, jitter(r, 4*time.Second))
			} else {
				sleep(ctx, jitter(r, time.Second))
			}
			closeC()
		}
	})
}

func ugiCycling(ctx context.Context, x *inst) {
	parts := hmsreq.Args(hmsreq.Str(1, "demo_db1"), hmsreq.Str(2, "t0"), hmsreq.I16(3, -1))
	x.goN(ctx, cyclerAddrs, func(ctx context.Context, i int, r *rand.Rand) {
		for ctx.Err() == nil {
			c, closeC, err := x.client(ctx, cyclerAddr(r.IntN(cyclerAddrs)))
			if err != nil {
				sleep(ctx, 200*time.Millisecond)
				continue
			}
			x.op(1)
			cctx, cancel := callCtx(ctx, 10*time.Second)
			_, err = c.Call(cctx, "set_ugi", hmsreq.Args(hmsreq.Str(1, fmt.Sprintf("cycler_%016x", r.Uint64())), hmsreq.Strings(2, "users")))
			cancel()
			for k := 0; k < 20 && err == nil; k++ {
				cctx, cancel := callCtx(ctx, 10*time.Second)
				var m wire.Message
				m, err = c.Call(cctx, "get_partitions", parts)
				cancel()
				x.answer(m, err)
				sleep(ctx, 10*time.Millisecond)
			}
			closeC()
			if err != nil {
				sleep(ctx, jitter(r, retryPause))
			}
		}
	})
}

func flushLoop(ctx context.Context, x *inst) {
	x.goN(ctx, 4, func(ctx context.Context, i int, r *rand.Rand) {
		x.sessions(ctx, r, fixed(flusherAddr), 200*time.Millisecond, retryPause, func(c *hmsclient.Client) {
			for k := 0; ctx.Err() == nil; k++ {
				method := "made_up_write"
				if k%2 == 1 {
					method = "flushCache"
				}
				cctx, cancel := callCtx(ctx, 10*time.Second)
				m, err := c.Call(cctx, method, hmsreq.Args())
				cancel()
				x.answer(m, err)
				if err != nil {
					break
				}
				x.op(1)
			}
		})
	})
}

func oneway(ctx context.Context, x *inst) {
	// Connection 0 streams reinitialize and unknown methods, connection
	// 1 get_table, all ONEWAY: the proxy refuses a ONEWAY get_table (and
	// may close its connection), which would cut the stream short.
	x.goN(ctx, 2, func(ctx context.Context, i int, r *rand.Rand) {
		x.sessions(ctx, r, fixed(flusherAddr), 200*time.Millisecond, retryPause, func(c *hmsclient.Client) {
			// Whatever the proxy answers is read and dropped.
			go holdUntilClosed(ctx, c.Conn())
			for ctx.Err() == nil {
				var err error
				pause := 20 * time.Millisecond
				switch {
				case i == 1:
					err = c.Send(ctx, wire.Oneway, "get_table", hmsclient.Args("demo_db0", "t0"))
				case r.IntN(2) == 0:
					err = c.Send(ctx, wire.Oneway, "reinitialize", hmsreq.Args())
					pause = 5 * time.Millisecond
				default:
					err = c.Send(ctx, wire.Oneway, "made_up_oneway_"+string([]byte{0xff, byte(0x80 + r.IntN(64))}), hmsreq.Args())
					pause = 5 * time.Millisecond
				}
				if err != nil {
					x.note("connection closed")
					break
				}
				x.op(1)
				sleep(ctx, jitter(r, pause))
			}
		})
	})
}

// deepArgs are drop_table(demo_db2, t0, deleteData false) args carrying
// an extra field nested depth structs deep, which a metastore skips.
func deepArgs(depth int) []byte {
	return hmsreq.Args(hmsreq.Str(1, "demo_db2"), hmsreq.Str(2, "t0"), hmsreq.Bool(3, false), hmsreq.Nested(9, depth))
}

func deepDrop(ctx context.Context, x *inst) {
	args := deepArgs(70)
	x.goN(ctx, 1, func(ctx context.Context, i int, r *rand.Rand) {
		x.sessions(ctx, r, func() string { return general(r) }, 200*time.Millisecond, retryPause, func(c *hmsclient.Client) {
			for ctx.Err() == nil {
				cctx, cancel := callCtx(ctx, 10*time.Second)
				m, err := c.Call(cctx, "drop_table", args)
				cancel()
				if err != nil {
					x.note("no answer")
					break
				}
				x.op(1)
				if f, _ := wire.ResultField(m.Body()); m.Type == wire.Reply && f <= 0 {
					x.note("DROPPED the read-only group's table")
				} else {
					x.note("refused")
				}
				sleep(ctx, jitter(r, 100*time.Millisecond))
			}
		})
	})
}

func slowloris(ctx context.Context, x *inst) {
	const perAddr = 36
	req := message(wire.Call, "get_table", 0, hmsclient.Args("demo_db0", "t0"))
	addrs := generalLast - generalFirst + 1
	x.goN(ctx, addrs*perAddr, func(ctx context.Context, i int, r *rand.Rand) {
		if !sleep(ctx, time.Duration(i)*5*time.Millisecond) {
			return
		}
		src := fmt.Sprintf("127.0.0.%d", generalFirst+i%addrs)
		x.sessions(ctx, r, fixed(src), time.Second, 5*time.Second, func(c *hmsclient.Client) {
			var err error
			for ctx.Err() == nil && err == nil {
				for j := 0; j < len(req) && err == nil; j++ {
					if err = c.SendRaw(req[j : j+1]); err == nil {
						x.op(1)
						sleep(ctx, time.Second)
					}
				}
				if err == nil {
					cctx, cancel := callCtx(ctx, 10*time.Second)
					_, err = c.Recv(cctx)
					cancel()
				}
			}
			if ctx.Err() == nil {
				x.note("cut off")
			}
		})
	})
}

func nonReaders(ctx context.Context, x *inst) {
	parts := hmsreq.Args(hmsreq.Str(1, "demo_db1"), hmsreq.Str(2, "t0"), hmsreq.I16(3, -1))
	var pipeline []byte
	for i := int32(1); i <= 64; i++ {
		pipeline = append(pipeline, message(wire.Call, "get_partitions", i, parts)...)
	}
	small := func(nc *net.TCPConn) { nc.SetReadBuffer(4096) }
	x.goN(ctx, 16, func(ctx context.Context, i int, r *rand.Rand) {
		for ctx.Err() == nil {
			tc, err := x.dialTLS(ctx, general(r), small)
			if err != nil {
				x.note("dial failed")
				sleep(ctx, time.Second)
				continue
			}
			stop := context.AfterFunc(ctx, func() { tc.Close() })
			if _, err := tc.Write(pipeline); err == nil {
				x.op(1)
			}
			<-ctx.Done() // never read
			stop()
			tc.Close()
		}
	})
}

func hungWrites(ctx context.Context, x *inst) {
	x.goN(ctx, 48, func(ctx context.Context, i int, r *rand.Rand) {
		c, closeC, err := x.client(ctx, general(r))
		if err != nil {
			return
		}
		defer closeC()
		name := fmt.Sprintf("chaos_hung_%016x", r.Uint64())
		db := hmsreq.Database{Name: name, Location: "file:///tmp/chaos/" + name}
		if err := c.Send(ctx, wire.Call, "create_database", hmsreq.Args(db.Field(1))); err != nil {
			return
		}
		x.op(1)
		m, err := c.Recv(ctx) // the instance usually ends first
		if err == nil {
			x.answer(m, err)
		}
	})
}

// malformed are requests the proxy must refuse (TestBadInput's).
func malformed() [][]byte {
	be32 := func(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	hdr := func(name string) []byte { return wire.AppendHeader(nil, wire.Call, []byte(name), 1) }
	return [][]byte{
		cat(hdr("get_table"), []byte{wire.TString, 0, 1}, be32(-5)),
		cat(hdr("get_table"), []byte{wire.TString, 0, 1}, be32(0x7fffff00)),
		cat(hdr("get_partitions_by_names"), []byte{wire.TList, 0, 3, wire.TString}, be32(0x7fffffff)),
		cat(hdr("get_table"), []byte{wire.TMap, 0, 3, wire.TString, wire.TString}, be32(-1)),
		cat(hdr("get_table"), []byte{99, 0, 1, 0}),
		cat([]byte{0x80, 1, 0, 1}, be32(0x7ffffff0)),
		cat(be32(9), []byte("get_table"), []byte{1}, be32(1), []byte{0}),
		[]byte{0x82, 0x21, 0x01, 0x09, 'g', 'e', 't', '_', 't', 'a', 'b', 'l', 'e', 0},
		cat(be32(30), hdr("getName"), []byte{0}),
		cat(wire.AppendHeader(nil, wire.Reply, []byte("getName"), 1), []byte{0}),
		[]byte{0x80, 0x02, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	}
}

func garbage(ctx context.Context, x *inst) {
	bad := malformed()
	random := func(r *rand.Rand) []byte {
		b := make([]byte, 1+r.IntN(2048))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	x.goN(ctx, 1, func(ctx context.Context, i int, r *rand.Rand) {
		for ctx.Err() == nil {
			var in []byte
			v := r.IntN(4)
			switch v {
			case 0, 1:
				in = random(r)
			case 2:
				in = append(wire.AppendHeader(nil, wire.Call, []byte("get_table"), 1), random(r)...)
			default:
				in = bad[r.IntN(len(bad))]
			}
			var conn net.Conn
			if v == 0 { // not even TLS
				nc, err := x.dialTCP(ctx, general(r))
				if err != nil {
					x.note("dial failed")
					sleep(ctx, 200*time.Millisecond)
					continue
				}
				nc.Write(in)
				nc.CloseWrite()
				conn = nc
			} else {
				tc, err := x.dialTLS(ctx, general(r), nil)
				if err != nil {
					x.note("dial failed")
					sleep(ctx, 200*time.Millisecond)
					continue
				}
				tc.Write(in)
				tc.CloseWrite()
				conn = tc
			}
			x.op(1)
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if holdUntilClosed(ctx, conn) {
				x.note("answered and closed")
			}
			sleep(ctx, jitter(r, 50*time.Millisecond))
		}
	})
}

func dropMid(ctx context.Context, x *inst) {
	batch := message(wire.Call, "get_partitions_by_names", 1, batchArgs("demo_db1", "t0", batchBytes))
	parts := message(wire.Call, "get_partitions", 1, hmsreq.Args(hmsreq.Str(1, "demo_db1"), hmsreq.Str(2, "t0"), hmsreq.I16(3, -1)))
	x.goN(ctx, 1, func(ctx context.Context, i int, r *rand.Rand) {
		for ctx.Err() == nil {
			var tcp *net.TCPConn
			tc, err := x.dialTLS(ctx, general(r), func(nc *net.TCPConn) { tcp = nc })
			if err != nil {
				x.note("dial failed")
				sleep(ctx, 200*time.Millisecond)
				continue
			}
			switch r.IntN(3) {
			case 0: // half a 1 MiB request, then a reset
				tc.Write(batch[:len(batch)/2])
				tcp.SetLinger(0)
			case 1: // half a header, then a reset
				tc.Write(batch[:5])
				tcp.SetLinger(0)
			default: // a call, and gone before its reply
				tc.Write(parts)
			}
			tc.Close()
			x.op(1)
			sleep(ctx, jitter(r, 100*time.Millisecond))
		}
	})
}
