package twin

import "sync"

// order makes a read's two calls see one state of what it touches: a
// write waits for the reads and writes that touch what it touches, a
// read for the writes. Calls on other objects run side by side, so that
// the twin's rate is the metastore's, not one write at a time (a single
// lock over everything held it near 100 operations/s on HMS 3.1).
//
// Grants go in arrival order among calls that overlap: a write that
// waits holds back the reads behind it, so a stream of reads never
// starves a "*" write (create_database, commit_txn).
type order struct {
	mu sync.Mutex // guards held, queue and watchers
	// held are the granted claims; queue the waiting ones, oldest first.
	held, queue []*claim
	// watchers are racy reads in flight: a write granted while one runs
	// over what it touches marks it raced.
	watchers map[*watch]struct{}
	cond     *sync.Cond
}

type claim struct {
	touches []string
	write   bool
}

// watch is a racy read: it takes no claim, and learns whether a write
// over what it touches ran at any moment during it.
type watch struct {
	touches []string
	raced   bool // guarded by order.mu
}

func newOrder() *order {
	o := &order{watchers: map[*watch]struct{}{}}
	o.cond = sync.NewCond(&o.mu)
	return o
}

func (c *claim) conflicts(d *claim) bool {
	return (c.write || d.write) && overlapsAny(c.touches, d.touches)
}

// acquire waits until the claim can be granted and returns its release.
// A claim that touches nothing (a session call, a lock request) is
// granted at once.
func (o *order) acquire(touches []string, write bool) (release func()) {
	if len(touches) == 0 {
		return func() {}
	}
	c := &claim{touches: touches, write: write}
	o.mu.Lock()
	o.queue = append(o.queue, c)
	for !o.grantable(c) {
		o.cond.Wait()
	}
	for i, q := range o.queue {
		if q == c {
			o.queue = append(o.queue[:i], o.queue[i+1:]...)
			break
		}
	}
	o.held = append(o.held, c)
	if write {
		for w := range o.watchers {
			if overlapsAny(w.touches, touches) {
				w.raced = true
			}
		}
	}
	o.mu.Unlock()
	return func() {
		o.mu.Lock()
		for i, h := range o.held {
			if h == c {
				o.held = append(o.held[:i], o.held[i+1:]...)
				break
			}
		}
		o.cond.Broadcast()
		o.mu.Unlock()
	}
}

// grantable: no granted claim and no older waiting one conflicts. o.mu
// is held.
func (o *order) grantable(c *claim) bool {
	for _, h := range o.held {
		if h.conflicts(c) {
			return false
		}
	}
	for _, q := range o.queue {
		if q == c {
			return true
		}
		if q.conflicts(c) {
			return false
		}
	}
	return true
}

// watchRacy begins a racy read over touches; done reports whether a
// write over them was granted or held at any moment until then.
func (o *order) watchRacy(touches []string) (done func() (raced bool)) {
	w := &watch{touches: touches}
	o.mu.Lock()
	w.raced = o.writeHeld(touches)
	o.watchers[w] = struct{}{}
	o.mu.Unlock()
	return func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		delete(o.watchers, w)
		return w.raced || o.writeHeld(touches)
	}
}

// writeHeld reports whether a granted write overlaps touches. o.mu is
// held.
func (o *order) writeHeld(touches []string) bool {
	for _, h := range o.held {
		if h.write && overlapsAny(h.touches, touches) {
			return true
		}
	}
	return false
}

// writeTouches is what a write is ordered by: a write that names nothing
// it touches (open_txns) is ordered against everything.
func writeTouches(touches []string) []string {
	if len(touches) == 0 {
		return []string{"*"}
	}
	return touches
}
