package worker

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
)

// fakeLeader is a settable Leadership. It counts the times it said "not
// leader": the seam that shows the runner looked and could have run.
type fakeLeader struct {
	token atomic.Int64 // 0: not leader
	noes  atomic.Int64 // answers "not leader" given
}

func (f *fakeLeader) IsLeader() (bool, int64) {
	t := f.token.Load()
	if t == 0 {
		f.noes.Add(1)
	}
	return t != 0, t
}

func start(t *testing.T, cfg Config, tasks ...Task) *Runner {
	t.Helper()
	r, err := New(cfg, tasks...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func stats(r *Runner, name string) TaskStats {
	for _, s := range r.Snapshot() {
		if s.Name == name {
			return s
		}
	}
	return TaskStats{}
}

func TestPeriodicAndOnce(t *testing.T) {
	var periodic, once atomic.Int64
	r := start(t, Config{},
		Task{Name: "tick", Every: 10 * time.Millisecond, Jitter: 0.2, Run: func(context.Context) error { periodic.Add(1); return nil }},
		Task{Name: "once", Run: func(context.Context) error { once.Add(1); return nil }},
	)
	// Five periodic runs are the proof that the runner was live long
	// enough to have run a broken once-task again: with Every 0 it would
	// have looped without pause.
	wait.Eventually(t, 2*time.Second, func() bool { return periodic.Load() >= 5 && once.Load() >= 1 }, "5 periodic runs and 1 once")
	if n := once.Load(); n != 1 {
		t.Fatalf("once-task ran %d times; want 1", n)
	}
	s := stats(r, "tick")
	if s.Runs < 5 || s.Failures != 0 || s.LastSuccess.IsZero() || s.Scope != EveryNode {
		t.Fatalf("tick stats: got %+v; want >= 5 runs, no failures, a last success", s)
	}
}

func TestFailuresTimeoutsPanics(t *testing.T) {
	r := start(t, Config{},
		Task{Name: "fails", Run: func(context.Context) error { return errors.New("boom") }},
		Task{Name: "slow", Timeout: 20 * time.Millisecond, Run: func(ctx context.Context) error { <-ctx.Done(); return nil }},
		Task{Name: "panics", Run: func(context.Context) error { panic("oops") }},
	)
	for _, tc := range []struct{ name, want string }{
		{"fails", "boom"},
		{"slow", "deadline exceeded"},
		{"panics", "panic: oops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wait.Eventually(t, 2*time.Second, func() bool { return stats(r, tc.name).Runs == 1 }, tc.name+" ran")
			s := stats(r, tc.name)
			if s.Failures != 1 || !strings.Contains(s.LastError, tc.want) || !s.LastSuccess.IsZero() {
				t.Fatalf("got %+v; want 1 failure with %q", s, tc.want)
			}
		})
	}
}

func TestLeaderOnly(t *testing.T) {
	var fl fakeLeader
	var runs atomic.Int64
	var tokens atomic.Int64
	r := start(t, Config{Leadership: &fl, LeaderCheck: 5 * time.Millisecond},
		Task{Name: "poll", Every: 5 * time.Millisecond, Scope: LeaderOnly, Run: func(ctx context.Context) error {
			tok, _ := LeaderToken(ctx)
			tokens.Store(tok)
			runs.Add(1)
			return nil
		}},
	)
	// Three "not leader" answers: the runner asked three times whether it
	// may run, so a runner that ran anyway would have run by now.
	wait.Eventually(t, 2*time.Second, func() bool { return fl.noes.Load() >= 3 }, "3 leadership checks as a follower")
	if n := runs.Load(); n != 0 {
		t.Fatalf("leader-only task ran %d times on a follower; want 0", n)
	}
	fl.token.Store(7)
	wait.Eventually(t, 2*time.Second, func() bool { return runs.Load() >= 3 }, "runs as leader")
	if tok := tokens.Load(); tok != 7 {
		t.Fatalf("LeaderToken: got %d; want 7", tok)
	}
	fl.token.Store(0)
	// A run in flight sees at most one "no", from its watcher; the second
	// comes from the loop, after that run finished.
	base := fl.noes.Load()
	wait.Eventually(t, 2*time.Second, func() bool { return fl.noes.Load() >= base+2 }, "the run in flight finishes")
	n := runs.Load()
	base = fl.noes.Load()
	wait.Eventually(t, 2*time.Second, func() bool { return fl.noes.Load() >= base+3 }, "3 leadership checks after losing it")
	if m := runs.Load(); m != n {
		t.Fatalf("ran %d times after losing leadership; want 0", m-n)
	}
	if s := stats(r, "poll"); s.Scope != LeaderOnly || s.Failures != 0 {
		t.Fatalf("stats: got %+v", s)
	}
}

func TestLeadershipLostCancelsRun(t *testing.T) {
	var fl fakeLeader
	fl.token.Store(3)
	cause := make(chan error, 1)
	started := make(chan struct{})
	r := start(t, Config{Leadership: &fl, LeaderCheck: 5 * time.Millisecond},
		Task{Name: "long", Scope: LeaderOnly, Run: func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return ctx.Err()
		}},
	)
	wait.Recv(t, started, 2*time.Second, "run started under token 3")
	fl.token.Store(4) // a new term, even on this node, is another lease
	if err := wait.Recv(t, cause, 2*time.Second, "run cancelled after leadership changed"); !errors.Is(err, errLeadershipLost) {
		t.Fatalf("cause: got %v; want leadership lost", err)
	}
	wait.Eventually(t, time.Second, func() bool { return stats(r, "long").Failures == 1 }, "failure counted")
}

func TestCloseWaitsAndIsIdempotent(t *testing.T) {
	var inRun atomic.Int64
	cancelled := make(chan struct{})
	release := make(chan struct{})
	r, err := New(Config{}, Task{Name: "block", Every: time.Hour, Run: func(ctx context.Context) error {
		inRun.Add(1)
		defer inRun.Add(-1)
		<-ctx.Done()
		close(cancelled)
		<-release // the run outlives its cancel until the test lets it go
		return ctx.Err()
	}})
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	r.Start()
	wait.Eventually(t, time.Second, func() bool { return inRun.Load() == 1 }, "run started")
	closed := make(chan struct{})
	go func() { r.Close(); close(closed) }()
	wait.Recv(t, cancelled, 2*time.Second, "Close cancels the run")
	select {
	case <-closed:
		t.Fatal("Close returned while a run was still going")
	default:
	}
	close(release)
	wait.Recv(t, closed, 2*time.Second, "Close returns once the run ends")
	if n := inRun.Load(); n != 0 {
		t.Fatal("Close returned while a run was still going")
	}
	r.Close()
	if err := r.Start(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: got %v; want ErrClosed", err)
	}
	if s := stats(r, "block"); s.Failures != 0 || s.Runs != 1 {
		t.Fatalf("a run cut short by Close: got %+v; want 1 run, 0 failures", s)
	}
}

func TestJittered(t *testing.T) {
	for _, tc := range []struct {
		name string
		j, u float64
		want time.Duration
	}{
		{"none", 0, 0.9, 100 * time.Millisecond},
		{"low end", 0.5, 0, 50 * time.Millisecond},
		{"middle", 0.5, 0.5, 100 * time.Millisecond},
		{"high end", 0.1, 1, 110 * time.Millisecond},
	} {
		if got := jittered(100*time.Millisecond, tc.j, tc.u); got != tc.want {
			t.Errorf("%s: got %v; want %v", tc.name, got, tc.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	ok := func(context.Context) error { return nil }
	for _, tc := range []struct {
		name  string
		tasks []Task
	}{
		{"no name", []Task{{Run: ok}}},
		{"duplicate", []Task{{Name: "a", Run: ok}, {Name: "a", Run: ok}}},
		{"no run", []Task{{Name: "a"}}},
		{"negative every", []Task{{Name: "a", Run: ok, Every: -1}}},
		{"jitter above 1", []Task{{Name: "a", Run: ok, Jitter: 1.5}}},
		{"bad scope", []Task{{Name: "a", Run: ok, Scope: 9}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(Config{}, tc.tasks...); !errors.Is(err, ErrConfig) {
				t.Fatalf("got %v; want ErrConfig", err)
			}
		})
	}
}
