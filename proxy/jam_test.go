package proxy

import (
	"encoding/binary"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/limits/inflight"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// TestBudgetJam (issue 22, item 3): connections that announce a large
// request and then send nothing (or little) more hold no in-flight
// budget beyond what they sent, so another client's 1 MiB request never
// waits for budget behind them. The budget's wait counter is the seam:
// the honest request would count there had it waited.
func TestBudgetJam(t *testing.T) {
	const (
		budget   = 16 << 20
		maxMsg   = 7 << 20
		jammers  = 8
		announce = maxMsg - 1024 // a string just under the message limit
	)
	for _, tc := range []struct {
		name string
		sent int // bytes of the announced string each jammer sends
	}{
		{"header only", 0},
		{"some bytes", 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := echoServer(t, []byte{wire.TStop})
			b := inflight.New(budget)
			var started atomic.Int32
			_, paddr := serve(t, Config{Budget: b, ReadTimeout: time.Minute, Limits: wire.Limits{MaxMessage: maxMsg}},
				proxytest.Group(t, upstream.Config{}, up), func(s *Server) { s.startHook = func() { started.Add(1) } })

			// Each jammer: a get_table call whose first field announces a
			// string of nearly maxMsg bytes, then tc.sent bytes of it.
			jam := wire.AppendHeader(nil, wire.Call, []byte("get_table"), 1)
			jam = append(jam, wire.TString, 0, 1)
			jam = binary.BigEndian.AppendUint32(jam, announce)
			jam = append(jam, make([]byte, tc.sent)...)
			for range jammers {
				nc, err := net.Dial("tcp", paddr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { nc.Close() })
				if _, err := nc.Write(jam); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "every jammer's request begun", func() bool {
				return started.Load() == jammers && b.InUse() >= int64(jammers*(tc.sent-wire.FreeBuf))
			})
			// Claims follow the bytes that arrived: at most twice them.
			if held, most := b.InUse(), int64(jammers*2*len(jam)); held > most {
				t.Errorf("%d jammers that sent %d bytes each hold %d bytes of budget; want at most %d (twice what they sent)",
					jammers, len(jam), held, most)
			}

			waits := b.Waits()
			var e wire.Encoder
			e.StringField(1, string(make([]byte, 1<<20)))
			e.Stop()
			honest := append(wire.AppendHeader(nil, wire.Call, []byte("get_table"), 2), e.B...)
			nc, err := net.Dial("tcp", paddr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			start := time.Now()
			replied := make(chan error, 1)
			go func() {
				if _, err := nc.Write(honest); err != nil {
					replied <- err
					return
				}
				nc.SetReadDeadline(time.Now().Add(30 * time.Second))
				_, err := wire.NewReader(nc, wire.Buffered, wire.Limits{}).Read()
				replied <- err
			}()
			for {
				// Polled until the reply: the request must never wait.
				wait.Until(time.Second, func() bool { return len(replied) > 0 || b.Waits() != waits })
				select {
				case err := <-replied:
					if err != nil {
						t.Fatalf("honest 1 MiB request: %v", err)
					}
					t.Logf("honest 1 MiB request answered in %v beside %d jammers", time.Since(start), jammers)
					if got := b.Waits() - waits; got != 0 {
						t.Fatalf("%d waits for budget while the honest request was read; want none", got)
					}
					return
				default:
				}
				if got := b.Waits() - waits; got != 0 {
					t.Fatalf("the honest 1 MiB request waited for in-flight budget held by %d jammers (%d bytes in use); want no wait",
						jammers, b.InUse())
				}
			}
		})
	}
}
