package main

import (
	"log/slog"
	"sync"
	"time"

	"github.com/hmsproxy/hmsproxy/proxy"
)

// drainer takes the node out of its load balancer (issue 15): /readyz
// fails at once, and client connections are closed between calls only
// once the load balancer's health check has had shutdown.drain_delay to
// notice, so that reconnecting clients go to other nodes. It serves the
// admin's POST and DELETE /drain; SIGTERM uses it before the listener
// closes.
type drainer struct {
	srv   *proxy.Server
	delay time.Duration
	log   *slog.Logger

	mu    sync.Mutex // guards on, since, gen, timer
	on    bool
	since time.Time   // when the drain began
	gen   int         // counts drains, so a late timer of an ended one does nothing
	timer *time.Timer // closes connections after the delay; stopped by Resume and close
}

func newDrainer(srv *proxy.Server, delay time.Duration, log *slog.Logger) *drainer {
	return &drainer{srv: srv, delay: delay, log: log}
}

// Draining reports whether a drain is in effect.
func (d *drainer) Draining() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.on
}

// Drain fails readiness now and closes client connections between calls
// after the delay. A drain in effect is left as it is.
func (d *drainer) Drain() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.on {
		return
	}
	d.begin()
	gen := d.gen
	d.log.Info("drain: readiness false; client connections close between calls after the drain delay", "drain_delay", d.delay)
	d.timer = time.AfterFunc(d.delay, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.on && d.gen == gen {
			d.srv.Drain()
		}
	})
}

// begin marks the drain; d.mu is held.
func (d *drainer) begin() {
	d.on, d.since = true, time.Now()
	d.gen++
}

// Resume ends a drain: readiness true again, connections served as usual.
func (d *drainer) Resume() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.on {
		return
	}
	d.on = false
	if d.timer != nil {
		d.timer.Stop()
	}
	d.srv.Resume()
	d.log.Info("drain ended: ready again")
}

// forShutdown fails readiness for a shutdown and returns how much longer
// the listener must stay open for the load balancer to notice: the
// delay, less however long a drain has already been in effect. Only the
// shutdown closes connections from then on.
func (d *drainer) forShutdown() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
	}
	if !d.on {
		d.begin()
	}
	return max(0, d.delay-time.Since(d.since))
}

// close stops a pending timer; safe to call twice.
func (d *drainer) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
	}
}
