package bench

import (
	"errors"
	"sync"
	"time"
)

// clock is the time source of the open-loop scheduler; a seam so tests
// can drive time by hand.
type clock interface {
	Now() time.Time
	Sleep(d time.Duration)
}

type realClock struct{}

func (realClock) Now() time.Time        { return time.Now() }
func (realClock) Sleep(d time.Duration) { time.Sleep(d) }

// schedule hands out the slots of a fixed-rate open loop: slot i is
// intended to be sent at start + i*interval, whether or not earlier slots
// have been served.
type schedule struct {
	start    time.Time
	interval time.Duration

	mu   sync.Mutex // guards next
	next int64
}

func newSchedule(start time.Time, interval time.Duration) *schedule {
	return &schedule{start: start, interval: max(interval, 1)}
}

// take returns the next slot and its intended send time.
func (s *schedule) take() (int64, time.Time) {
	s.mu.Lock()
	i := s.next
	s.next++
	s.mu.Unlock()
	return i, s.start.Add(time.Duration(i) * s.interval)
}

// openCall runs the call of one slot on worker w and returns the series
// to record it in.
type openCall func(w int, slot int64) (*Hist, error)

// runOpen serves the schedule with workers goroutines until the first slot
// intended at or after until. Each call's latency is recorded from its
// intended send time, so time spent waiting for a free worker (the queue a
// slow target builds) is charged to the call: no coordinated omission.
func runOpen(clk clock, s *schedule, until time.Time, workers int, call openCall) {
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				slot, at := s.take()
				if !at.Before(until) {
					return
				}
				if d := at.Sub(clk.Now()); d > 0 {
					clk.Sleep(d)
				}
				h, err := call(w, slot)
				if h == nil {
					continue
				}
				switch {
				case err == nil:
					h.Record(clk.Now().Sub(at))
				case errors.Is(err, errUnsupported):
					h.Unsupported++
				default:
					h.Errors++
				}
			}
		}()
	}
	wg.Wait()
}
