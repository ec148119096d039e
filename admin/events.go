package admin

import (
	"sync"
	"time"
)

// maxEvents is how many recent flushes and bus losses the status page
// keeps.
const maxEvents = 20

// event is a cache flush through the admin API or a bus loss (the bus
// dropped the cache because invalidations may have been missed).
type event struct {
	Time   time.Time `json:"time"`
	Type   string    `json:"type"`            // "flush", "bus-loss" or "warm-up"
	Level  string    `json:"level,omitempty"` // flush level: all, database, table, partitions
	Detail string    `json:"detail"`          // flush: what was flushed; bus-loss: the reason; warm-up: the targets
	Count  uint64    `json:"count,omitempty"` // bus-loss: losses noticed at once
}

// events is a ring of the latest maxEvents events.
type events struct {
	mu   sync.Mutex // guards ring, next, full
	ring [maxEvents]event
	next int
	full bool
}

func (e *events) add(ev event) {
	e.mu.Lock()
	e.ring[e.next] = ev
	e.next = (e.next + 1) % maxEvents
	e.full = e.full || e.next == 0
	e.mu.Unlock()
}

// recent returns the events, newest first.
func (e *events) recent() []event {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.next
	if e.full {
		n = maxEvents
	}
	out := make([]event, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, e.ring[(e.next-i+maxEvents)%maxEvents])
	}
	return out
}
