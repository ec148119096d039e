package flushgate

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/clocktest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
)

// counter is a flush function that counts its flushes and records, for
// each, how many calls had arrived when it began.
type counter struct {
	arrived atomic.Int64
	mu      sync.Mutex // guards began
	began   []int64
}

func (c *counter) flush(context.Context) {
	c.mu.Lock()
	c.began = append(c.began, c.arrived.Load())
	c.mu.Unlock()
}

func (c *counter) flushes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.began)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	wait.Eventually(t, 10*time.Second, cond, what)
}

// TestBudget: an identity flushes at once up to its burst, then its
// calls are coalesced; others keep their own budget; time refills it.
func TestBudget(t *testing.T) {
	clk := clocktest.At(time.Unix(1000, 0))
	var c counter
	g := New(Config{Burst: 3, Rate: 1, Interval: time.Nanosecond, MaxIdentities: 2, Now: clk.Now}, c.flush)
	ctx := context.Background()
	for i := range 3 {
		if co, err := g.Flush(ctx, "a"); co || err != nil {
			t.Fatalf("flush %d of a: coalesced %v, %v; want at once", i, co, err)
		}
	}
	if co, _ := g.Flush(ctx, "a"); !co {
		t.Fatal("a's fourth flush was made at once; want it coalesced past the burst of 3")
	}
	if co, _ := g.Flush(ctx, "b"); co {
		t.Fatal("b's first flush was coalesced; want b's own budget")
	}
	// Two identities are tracked and a owes: c has no budget.
	if co, _ := g.Flush(ctx, "c"); !co {
		t.Fatal("a third identity got a budget past MaxIdentities")
	}
	clk.Advance(time.Second)
	if co, _ := g.Flush(ctx, "a"); co {
		t.Fatal("a's flush a second later was coalesced; want the refilled token")
	}
	if st := g.Stats(); st.Immediate != 5 || st.Coalesced != 2 || st.Rounds != 2 || c.flushes() != 7 {
		t.Fatalf("stats %+v, %d flushes; want 5 immediate, 2 coalesced in 2 rounds, 7 flushes", st, c.flushes())
	}
}

// TestRound: calls past their budget share one flush, which begins after
// every one of them arrived, and none returns before it is made. The
// round's first caller makes it (here when its context ends, before the
// round is due), so no goroutine is left behind.
func TestRound(t *testing.T) {
	clk := clocktest.At(time.Unix(1000, 0))
	var c counter
	g := New(Config{Burst: 1, Interval: time.Hour, Now: clk.Now}, c.flush)
	ctx := context.Background()
	g.Flush(ctx, "a") // the burst
	g.Flush(ctx, "a") // a round due at once: the next is an hour away
	base := c.flushes()

	const callers = 8
	lctx, cancel := context.WithCancel(ctx)
	var returned atomic.Int64
	var wg sync.WaitGroup
	for i := range callers {
		c.arrived.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx := ctx
			if i == 0 {
				cctx = lctx
			}
			g.Flush(cctx, "a")
			returned.Add(1)
		}()
		waitFor(t, "the caller to join the round", func() bool { return g.Stats().Coalesced == uint64(2+i) })
	}
	if n := returned.Load(); n != 0 || c.flushes() != base {
		t.Fatalf("%d callers returned, %d flushes, before the round was made; want none", n, c.flushes()-base)
	}
	cancel()
	wg.Wait()
	if got := c.flushes() - base; got != 1 {
		t.Fatalf("%d flushes for %d coalesced calls; want 1", got, callers)
	}
	if b := c.began[len(c.began)-1]; b != callers {
		t.Fatalf("the round's flush began with %d of %d calls arrived; want all", b, callers)
	}
}
