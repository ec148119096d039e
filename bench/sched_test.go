package bench

import (
	"sync"
	"testing"
	"time"
)

// fakeClock advances only when someone sleeps on it.
type fakeClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// openLoop runs one worker open loop on a fake clock, with calls
// intended every 100ms for the horizon, each taking service. It returns
// their latencies and when each started, from the start.
func openLoop(horizon, service time.Duration) (*Hist, []time.Duration) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	start := clk.Now()
	s := newSchedule(start, 100*time.Millisecond)
	var h Hist
	var starts []time.Duration
	runOpen(clk, s, start.Add(horizon), 1, func(w int, slot int64) (*Hist, error) {
		starts = append(starts, clk.Now().Sub(start))
		clk.Sleep(service)
		return &h, nil
	})
	return &h, starts
}

// TestOpenLoopIntendedTime: a target slower than the schedule is charged
// for the queue it builds. At 10 calls/s (one every 100ms) with one worker
// and 250ms calls, call i is intended at 100i ms, starts at 250i ms and
// ends at 250(i+1) ms: latency 250 + 150i ms, where a closed-loop
// measurement would say 250ms every time.
func TestOpenLoopIntendedTime(t *testing.T) {
	h, starts := openLoop(500*time.Millisecond, 250*time.Millisecond)
	want := []time.Duration{250, 400, 550, 700, 850}
	if h.Count() != len(want) {
		t.Fatalf("got %d calls; want %d (slots intended before 500ms)", h.Count(), len(want))
	}
	for i, w := range want {
		if got := time.Duration(h.samples[i]); got != w*time.Millisecond {
			t.Errorf("call %d: latency %v; want %v", i, got, w*time.Millisecond)
		}
		if got := starts[i]; got != time.Duration(250*i)*time.Millisecond {
			t.Errorf("call %d: started at %v; want %v", i, got, time.Duration(250*i)*time.Millisecond)
		}
	}
}

// TestOpenLoopWaitsForIntendedTime: a fast target is not sent calls early,
// and its latency is only its service time.
func TestOpenLoopWaitsForIntendedTime(t *testing.T) {
	h, starts := openLoop(300*time.Millisecond, 10*time.Millisecond)
	for i, got := range starts {
		if want := time.Duration(100*i) * time.Millisecond; got != want {
			t.Errorf("call %d sent at %v; want %v", i, got, want)
		}
	}
	if h.Count() != 3 || h.Max() != 10*time.Millisecond || h.Percentile(50) != 10*time.Millisecond {
		t.Errorf("got %d calls, max %v; want 3 calls of 10ms", h.Count(), h.Max())
	}
}

func TestOpenLoopCountsFailures(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	s := newSchedule(clk.Now(), time.Millisecond)
	var h Hist
	runOpen(clk, s, clk.Now().Add(4*time.Millisecond), 1, func(w int, slot int64) (*Hist, error) {
		switch slot {
		case 1:
			return &h, errUnsupported
		case 2:
			return &h, errTestFailure
		}
		return &h, nil
	})
	if h.Count() != 2 || h.Errors != 1 || h.Unsupported != 1 {
		t.Errorf("got %d ok, %d errors, %d unsupported; want 2 1 1", h.Count(), h.Errors, h.Unsupported)
	}
}
