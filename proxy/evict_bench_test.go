package proxy

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkEvictScan is the cost, under the server's lock, of looking for
// the longest-idle connection at a limit, by connections open: paid only
// by a newcomer at MaxClients (and, past cheapScan with none idle, at
// most once per noIdleBackoff).
func BenchmarkEvictScan(b *testing.B) {
	for _, n := range []int{1024, 10_000} {
		for _, idle := range []bool{false, true} {
			b.Run(strconv.Itoa(n)+"/raced="+strconv.FormatBool(idle), func(b *testing.B) {
				s := &Server{conns: map[*clientConn]struct{}{}}
				now := time.Now().UnixNano()
				for i := range n {
					c := &clientConn{phase: phaseBusy}
					if idle {
						// Idle to the scan, busy to cutIfIdle: the worst
						// case, every try lost to a request beginning.
						c.idleSince.Store(now - int64(i))
					}
					s.conns[c] = struct{}{}
				}
				for b.Loop() {
					s.evictIdle(s.conns, false)
				}
			})
		}
	}
}
