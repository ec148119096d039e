// Package worker runs named periodic tasks with a scope, jitter, timeouts
// and clean shutdown.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// Scope says which nodes run a task.
type Scope int

const (
	// EveryNode tasks run on every proxy node.
	EveryNode Scope = iota
	// LeaderOnly tasks run only while this node leads its upstream.
	LeaderOnly
)

func (s Scope) String() string {
	if s == LeaderOnly {
		return "leader"
	}
	return "every-node"
}

// Task is one named piece of periodic work.
type Task struct {
	// Name identifies the task in logs and stats; unique per Runner.
	Name string
	// Every is the period between the starts of two runs. Zero: run once,
	// at start (LeaderOnly: once when this node first leads); a failed
	// once-task is counted and logged, not retried.
	Every time.Duration
	// Jitter spreads runs: each wait is Every scaled by a random factor
	// in [1-Jitter, 1+Jitter], and the first run waits a random fraction
	// Jitter of Every. Between 0 and 1; default 0.
	Jitter float64
	// Timeout bounds one run through its ctx. Zero: no bound. Run must
	// return when its ctx is done.
	Timeout time.Duration
	// Scope: EveryNode (default) or LeaderOnly.
	Scope Scope
	// Run does the work. For LeaderOnly tasks its ctx is also cancelled
	// when leadership is lost, and LeaderToken(ctx) is the fencing token.
	Run func(ctx context.Context) error
}

// Leadership tells whether this node leads, with its fencing token
// (leader.Elector and leader.Solo satisfy it).
type Leadership interface {
	IsLeader() (bool, int64)
}

// Config configures a Runner.
type Config struct {
	// Leadership gates LeaderOnly tasks. Nil: this node is the only one
	// and always leads, with token 1.
	Leadership Leadership
	// LeaderCheck is how often leadership is checked: by a LeaderOnly
	// task waiting to lead, and during its runs (which are cancelled
	// when it is lost). Default 500ms.
	LeaderCheck time.Duration
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
}

// TaskStats are one task's counters, for metrics.
type TaskStats struct {
	Name         string
	Scope        Scope
	Runs         uint64 // completed runs, failed or not
	Failures     uint64 // runs that returned an error, timed out, lost leadership or panicked (not those cut short by Close)
	Running      bool
	LastDuration time.Duration
	LastSuccess  time.Time // zero: never
	LastError    string    // of the last failed run; "" if none yet
}

// ErrConfig reports an unusable Config or Task.
var ErrConfig = errors.New("worker: bad config")

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("worker: runner is closed")

type taskState struct {
	t Task
	// mu guards st.
	mu sync.Mutex
	st TaskStats
}

// Runner owns the goroutines of its tasks.
type Runner struct {
	cfg   Config
	log   *slog.Logger
	tasks []*taskState

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards started and closed.
	mu      sync.Mutex
	started bool
	closed  bool
}

type solo struct{}

func (solo) IsLeader() (bool, int64) { return true, 1 }

// New validates cfg and tasks.
func New(cfg Config, tasks ...Task) (*Runner, error) {
	if cfg.Leadership == nil {
		cfg.Leadership = solo{}
	}
	if cfg.LeaderCheck <= 0 {
		cfg.LeaderCheck = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runner{cfg: cfg, log: cfg.Logger}
	seen := map[string]bool{}
	for _, t := range tasks {
		switch {
		case t.Name == "" || seen[t.Name]:
			return nil, fmt.Errorf("%w: task name %q empty or repeated", ErrConfig, t.Name)
		case t.Run == nil:
			return nil, fmt.Errorf("%w: task %s has no Run", ErrConfig, t.Name)
		case t.Every < 0 || t.Timeout < 0:
			return nil, fmt.Errorf("%w: task %s has a negative period or timeout", ErrConfig, t.Name)
		case t.Jitter < 0 || t.Jitter > 1:
			return nil, fmt.Errorf("%w: task %s jitter %v not in [0,1]", ErrConfig, t.Name, t.Jitter)
		case t.Scope != EveryNode && t.Scope != LeaderOnly:
			return nil, fmt.Errorf("%w: task %s has unknown scope %d", ErrConfig, t.Name, t.Scope)
		}
		seen[t.Name] = true
		r.tasks = append(r.tasks, &taskState{t: t, st: TaskStats{Name: t.Name, Scope: t.Scope}})
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// Start starts one goroutine per task. Calls after the first do nothing;
// after Close it returns ErrClosed.
func (r *Runner) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.started {
		return nil
	}
	r.started = true
	for _, ts := range r.tasks {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.loop(ts)
		}()
	}
	return nil
}

// Close cancels every run and waits for the task goroutines. Safe to call
// twice.
func (r *Runner) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

// Snapshot returns every task's stats, in the order the tasks were given.
func (r *Runner) Snapshot() []TaskStats {
	out := make([]TaskStats, 0, len(r.tasks))
	for _, ts := range r.tasks {
		ts.mu.Lock()
		out = append(out, ts.st)
		ts.mu.Unlock()
	}
	return out
}

// jittered scales d by a factor in [1-j, 1+j]; u is uniform in [0,1).
func jittered(d time.Duration, j, u float64) time.Duration {
	return time.Duration(float64(d) * (1 - j + 2*j*u))
}

// sleep waits d or until the runner closes; false when it closed.
func (r *Runner) sleep(d time.Duration) bool {
	if d <= 0 {
		return r.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (r *Runner) loop(ts *taskState) {
	t := ts.t
	if t.Every > 0 && t.Jitter > 0 {
		if !r.sleep(time.Duration(float64(t.Every) * t.Jitter * rand.Float64())) {
			return
		}
	}
	for {
		token, ok := r.waitTurn(t)
		if !ok {
			return
		}
		start := time.Now()
		r.runOnce(ts, token)
		if t.Every == 0 {
			return
		}
		next := jittered(t.Every, t.Jitter, rand.Float64()) - time.Since(start)
		if !r.sleep(next) {
			return
		}
	}
}

// waitTurn waits until the task may run: at once for EveryNode tasks,
// once this node leads for LeaderOnly ones. It returns the token (0 for
// EveryNode), and false when the runner closed.
func (r *Runner) waitTurn(t Task) (int64, bool) {
	for {
		if r.ctx.Err() != nil {
			return 0, false
		}
		if t.Scope == EveryNode {
			return 0, true
		}
		if ok, tok := r.cfg.Leadership.IsLeader(); ok {
			return tok, true
		}
		if !r.sleep(r.cfg.LeaderCheck) {
			return 0, false
		}
	}
}

type tokenKey struct{}

// LeaderToken returns the fencing token a LeaderOnly run was started
// under; false for EveryNode runs.
func LeaderToken(ctx context.Context) (int64, bool) {
	tok, ok := ctx.Value(tokenKey{}).(int64)
	return tok, ok
}

// errLeadershipLost is the cause of a run's ctx when leadership ended.
var errLeadershipLost = errors.New("worker: leadership lost")

func (r *Runner) runOnce(ts *taskState, token int64) {
	t := ts.t
	ctx, cancel := context.WithCancelCause(r.ctx)
	defer cancel(nil)
	if t.Timeout > 0 {
		var c context.CancelFunc
		ctx, c = context.WithTimeout(ctx, t.Timeout)
		defer c()
	}
	watchDone := make(chan struct{})
	var watchWG sync.WaitGroup
	if t.Scope == LeaderOnly {
		ctx = context.WithValue(ctx, tokenKey{}, token)
		watchWG.Add(1)
		go func() {
			defer watchWG.Done()
			tick := time.NewTicker(r.cfg.LeaderCheck)
			defer tick.Stop()
			for {
				select {
				case <-watchDone:
					return
				case <-tick.C:
					if ok, tok := r.cfg.Leadership.IsLeader(); !ok || tok != token {
						cancel(errLeadershipLost)
						return
					}
				}
			}
		}()
	}
	ts.mu.Lock()
	ts.st.Running = true
	ts.mu.Unlock()

	start := time.Now()
	err := call(ctx, t.Run)
	d := time.Since(start)
	close(watchDone)
	watchWG.Wait()
	if err == nil && ctx.Err() != nil && r.ctx.Err() == nil {
		// A run that outlived its timeout or its leadership failed, even
		// if it swallowed the ctx error.
		err = context.Cause(ctx)
	}

	ts.mu.Lock()
	ts.st.Running = false
	ts.st.Runs++
	ts.st.LastDuration = d
	switch {
	case err != nil && r.ctx.Err() != nil:
		// Cut short by Close: neither a failure nor a success.
	case err != nil:
		ts.st.Failures++
		ts.st.LastError = err.Error()
	default:
		ts.st.LastSuccess = time.Now()
	}
	ts.mu.Unlock()
	switch {
	case err != nil && r.ctx.Err() != nil:
		r.log.Debug("worker: run stopped by shutdown", "task", t.Name, "err", err)
	case err != nil:
		r.log.Warn("worker: run failed", "task", t.Name, "duration", d, "err", err)
	default:
		r.log.Debug("worker: run done", "task", t.Name, "duration", d)
	}
}

// call runs f, turning a panic into an error.
func call(ctx context.Context, f func(context.Context) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("worker: panic: %v", p)
		}
	}()
	return f(ctx)
}
