package coherence

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/cache"
)

// Cache is the local cache the bus keeps coherent. *proxy.Server
// implements it.
type Cache interface {
	// ApplyRemote applies another node's invalidations.
	ApplyRemote(ents []cache.Entity)
	// DropAll drops everything cached: invalidations may have been missed.
	DropAll(reason string)
}

// Config configures a Bus. The zero value of each field selects the
// default in its comment; Client and Group are required.
type Config struct {
	// Client is a single server's, a Sentinel-managed primary's
	// (redis.NewFailoverClient) or a Redis Cluster's client. On a Cluster
	// the group's keys are hash-tagged (Key).
	Client redis.UniversalClient
	// Group names the upstream group (upstream.name): one stream, one
	// acknowledgement stream and one peer registry per group.
	Group string
	// Layout is this node's digest of the group's metastores (Layout).
	// Nodes announce it; a peer on the same group with another layout
	// raises an alarm. Empty: announced as empty, and not checked.
	Layout string
	// NodeID names this proxy process. Default: random per process, so
	// a restarted node never continues an old numbering.
	NodeID string
	// MaxLen trims each stream to about this many entries. Default 100,000.
	MaxLen int64
	// Heartbeat is how often the node announces itself, so that peers
	// can tell it is alive and a lost tail of its messages shows as a gap.
	// Default 1s.
	Heartbeat time.Duration
	// HeartbeatTimeout is how long a peer may stay silent before this
	// node stops serving its cache, and the longest a write waits for its
	// peers' acknowledgements. Default 3 × Heartbeat: two heartbeats may
	// be late (a GC pause, a busy Redis) before a node is taken for lost,
	// while a partitioned node's writes wait at most a few seconds.
	HeartbeatTimeout time.Duration
	// PeerGone is how long a silent peer is waited for before it is
	// forgotten (and the cache dropped once more, then served again).
	// Default 1m: a crashed node stops the others' caches for that long,
	// a node cut from Redis longer has its writes seen through the
	// notification log only.
	PeerGone time.Duration
	// Prefix of the Redis keys. Default "hmsproxy".
	Prefix string
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
	// Format is the message format version this node writes. Default
	// FormatVersion; FormatVersion-1 writes what the previous release
	// wrote, byte for byte, so that a test can run an old node beside
	// new ones.
	Format int
}

// ErrConfig reports an unusable Config.
var ErrConfig = errors.New("coherence: bad config")

// ErrRunning is returned by a second Run of one Bus.
var ErrRunning = errors.New("coherence: bus already running")

// ErrStopped is returned, wrapped with ErrNotPublished, by a Publish
// that came after the bus began to stop: nothing carried it.
var ErrStopped = errors.New("coherence: bus stopped")

// ErrNotPublished is returned (wrapped) by a Publish that did not reach
// Redis within HeartbeatTimeout. The caller may answer its client: the
// other nodes stopped serving their caches when they stopped hearing this
// one.
var ErrNotPublished = errors.New("coherence: invalidation not published")

// ErrNotAcknowledged is returned by a Publish whose entry some live peer
// did not acknowledge within HeartbeatTimeout. The caller may answer its
// client: a peer that has not applied the entry by then has stopped
// serving its cache.
var ErrNotAcknowledged = errors.New("coherence: invalidation not acknowledged by every peer")

// Bus is one node's end of the invalidation stream.
type Bus struct {
	cfg     Config
	key     string // the invalidation stream
	ackKey  string // the acknowledgement stream
	peerKey string // the peer registry (hash node -> last heartbeat)
	log     *slog.Logger
	timeout time.Duration
	stats   Stats

	running atomic.Bool
	// abandoned: writes through this node may have reached a metastore
	// without being published (Abandon, a publish after the last drain);
	// the node leaves without a goodbye, so its peers treat it as silent.
	abandoned atomic.Bool
	// closing is set when the sender begins to stop; publishing counts
	// the publishes deciding whether to queue (see finish).
	closing    atomic.Bool
	publishing atomic.Int64
	// onClosing, if set, runs in the stopping sender after its last
	// drain, before it decides on the goodbye: a test seam.
	onClosing func()
	reqs      chan *pubReq  // publishes for the sender
	stopped   chan struct{} // closed when Run has returned
	seq       uint64        // the sender's numbering; only the sender touches it

	// Synced is computed from these without a lock: reading it is on
	// every cached read.
	synced    atomic.Bool  // connected, and this node's hello read back
	caughtUp  atomic.Int64 // unix ns of the last read that reached the stream's end
	published atomic.Int64 // unix ns of the start of the last prompt successful append
	peersMin  atomic.Int64 // unix ns: the earliest "last heard" of a known peer
	refused   atomic.Int64 // unix ns of the last entry this node could not read
	// rejoin, when set, is an entry of this node's that came so long
	// after its previous one that a writer may have taken it for silent
	// and answered without its acknowledgement (see append): the node
	// serves no cache until its reader has applied the stream up to
	// there. span is how far the reader has.
	rejoin atomic.Pointer[streamID]
	span   atomic.Pointer[readSpan]
	// readWaits counts the waiters held only until the reader reads their
	// entry (ackWaiter.readWait), so that it settles them then.
	readWaits atomic.Int32
	// lastAppend is when the last successful append began; only the
	// sender touches it.
	lastAppend time.Time

	mu       sync.Mutex // guards the fields below
	peers    map[string]*peer
	gone     map[string]time.Time    // forgotten peers, so their return is noticed
	acks     map[string]streamID     // how far each node acknowledged, known peer or not
	waiters  map[*ackWaiter]struct{} // publishes waiting for acknowledgements
	mismatch map[string]bool         // peers whose layout differs, logged once each

	acked   atomic.Value  // streamID: how far this node applied, for the ack sender
	ackWake chan struct{} // one pending wake-up of the ack sender

	ownPrefix string // how this node's entries begin on the stream
	format    int    // the message format version it writes (Config.Format)

	hold   time.Duration // the longest a write is held for a batch (maxHold)
	onHold func(n int)   // a test seam: the sender holds n requests back
}

// readSpan is what the reader applied on its current connection: the
// entries after from up to to. Those up to from it did not read: it
// dropped the cache instead.
type readSpan struct{ from, to streamID }

type peer struct {
	heard  time.Time
	layout string
	silent bool // noticed silent (and the cache dropped for it)
}

// New validates cfg.
func New(cfg Config) (*Bus, error) {
	if cfg.Client == nil || cfg.Group == "" {
		return nil, fmt.Errorf("%w: client and group are required", ErrConfig)
	}
	tagged := Tagged(cfg.Client)
	if tagged && (strings.ContainsAny(cfg.Group, "{}")) {
		// A brace would cut the hash tag short, or empty it.
		return nil, fmt.Errorf("%w: group %q: a group on a Redis Cluster must not contain braces", ErrConfig, cfg.Group)
	}
	if cfg.NodeID == "" {
		var b [8]byte
		rand.Read(b[:])
		cfg.NodeID = hex.EncodeToString(b[:])
	}
	if cfg.MaxLen <= 0 {
		cfg.MaxLen = 100_000
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = time.Second
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = 3 * cfg.Heartbeat
	}
	if cfg.HeartbeatTimeout <= cfg.Heartbeat {
		return nil, fmt.Errorf("%w: heartbeat timeout %v must exceed the heartbeat %v", ErrConfig, cfg.HeartbeatTimeout, cfg.Heartbeat)
	}
	if cfg.PeerGone <= 0 {
		cfg.PeerGone = time.Minute
	}
	if cfg.PeerGone < cfg.HeartbeatTimeout {
		return nil, fmt.Errorf("%w: peer-gone timeout %v is below the heartbeat timeout %v", ErrConfig, cfg.PeerGone, cfg.HeartbeatTimeout)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "hmsproxy"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Format == 0 {
		cfg.Format = FormatVersion
	}
	if cfg.Format < FormatVersion-1 || cfg.Format > FormatVersion {
		return nil, fmt.Errorf("%w: message format %d: this release writes %d or %d", ErrConfig, cfg.Format, FormatVersion-1, FormatVersion)
	}
	b := &Bus{
		cfg: cfg, log: cfg.Logger, timeout: cfg.HeartbeatTimeout,
		key:      Key(cfg.Prefix, cfg.Group, "inval", tagged),
		ackKey:   Key(cfg.Prefix, cfg.Group, "acks", tagged),
		peerKey:  Key(cfg.Prefix, cfg.Group, "peers", tagged),
		reqs:     make(chan *pubReq, 4096),
		stopped:  make(chan struct{}),
		peers:    map[string]*peer{},
		gone:     map[string]time.Time{},
		acks:     map[string]streamID{},
		waiters:  map[*ackWaiter]struct{}{},
		mismatch: map[string]bool{},
		ackWake:  make(chan struct{}, 1),
		hold:     maxHold,
	}
	b.peersMin.Store(math.MaxInt64)
	b.ownPrefix = ownPrefix(cfg.NodeID)
	b.format = cfg.Format
	return b, nil
}

// NodeID is this node's name on the bus.
func (b *Bus) NodeID() string { return b.cfg.NodeID }

// Group is the upstream group's name.
func (b *Bus) Group() string { return b.cfg.Group }

// Stats are the bus counters.
func (b *Bus) Stats() *Stats { return &b.stats }

// Synced reports whether this node may serve its cache: it is connected,
// it has read the stream to its end and published within the heartbeat
// timeout, it has heard every known peer within that timeout, and, when
// its own publishes came so far apart that a writer may have taken it
// for silent, it has read the stream up to its return.
func (b *Bus) Synced() bool {
	if !b.synced.Load() {
		return false
	}
	if time.Now().UnixNano()-b.refused.Load() < int64(b.timeout) {
		return false // an entry in an unreadable format came lately
	}
	if r := b.rejoin.Load(); r != nil {
		if rd := b.span.Load(); rd == nil || rd.to.less(*r) {
			return false // back from a possible silence, not yet caught up
		}
	}
	at := min(b.caughtUp.Load(), b.published.Load(), b.peersMin.Load())
	return time.Now().UnixNano()-at < int64(b.timeout)
}

// Publish sends invalidations to the other nodes and returns once every
// live peer has applied them, or after HeartbeatTimeout. Either way the
// caller may then answer the writing client; the error says which
// (ErrNotPublished, with ErrStopped once the bus is stopping;
// ErrNotAcknowledged; or ctx's).
func (b *Bus) Publish(ctx context.Context, ents []cache.Entity) error {
	start := time.Now()
	defer func() { b.stats.waits.add(time.Since(start)) }()
	// Counted while it decides, so that the stopping sender drains every
	// publish that saw it still open (finish).
	b.publishing.Add(1)
	if b.closing.Load() {
		b.publishing.Add(-1)
		return b.late(ctx)
	}
	req := newPubReq(ents)
	deadline := req.timer
	deadline.Reset(b.timeout)
	select {
	case b.reqs <- req:
		b.publishing.Add(-1)
	case <-ctx.Done():
		b.publishing.Add(-1)
		req.free()
		return fmt.Errorf("coherence: publish: %w", ctx.Err())
	}
	expired := deadline.C
	for {
		select {
		case res := <-req.done:
			if res.hold && expired != nil {
				// Hold the reply until the peers have stopped hearing this
				// node: every append they did hear began before the request
				// was queued.
				select {
				case <-expired:
				case <-ctx.Done():
				}
			}
			req.free() // its one outcome came: the sender is done with it
			return res.err
		case <-expired:
			if !req.appended.Load() {
				// No append since the request was queued has been heard by
				// the peers without it: they stop serving by now.
				b.stats.PublishErrors.Add(1)
				return fmt.Errorf("%w within %v", ErrNotPublished, b.timeout)
			}
			// Appended in time: the acknowledgements are awaited until the
			// heartbeat timeout after Redis answered, which ends the wait.
			expired = nil
		case <-ctx.Done():
			deadline.Stop()
			return fmt.Errorf("coherence: publish: %w", ctx.Err())
		}
	}
}

// late answers a publish that came after the stopping sender's last
// drain: nothing will carry it. The node then leaves without a goodbye,
// unless it already said one (Run's caller must stop writes before it
// stops the bus), and the writer waits until the peers have stopped
// hearing it, as for an append that failed.
func (b *Bus) late(ctx context.Context) error {
	b.stats.PublishErrors.Add(1)
	b.abandoned.Store(true)
	b.log.Warn("a write came while the bus was stopping; unpublished, it keeps the node from a clean goodbye if not yet said")
	t := time.NewTimer(b.timeout)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return fmt.Errorf("coherence: publish: %w", ctx.Err())
	}
	return fmt.Errorf("%w: %w", ErrNotPublished, ErrStopped)
}

// ackWaiter is a batch of writes whose entry, id, awaits the live peers'
// acknowledgements. The peers are those this node knows and those the
// registry held when the entry was appended: a node registers atomically
// with its hello, and is in sync only once it has read that hello back,
// so a node missing from both has begun reading the stream after this
// entry, and caches nothing older.
//
// No goroutine waits: the reader settles a waiter when an
// acknowledgement or a departing peer completes it, and a timer when a
// pending peer falls silent or the deadline passes. Each writer is woken
// once, with the outcome.
type ackWaiter struct {
	id       streamID
	registry map[string]string
	deadline time.Time
	reqs     []*pubReq
	timer    *time.Timer   // rechecks at the next silence or the deadline
	readWait bool          // a silent peer is skipped once the reader reads id
	settled  chan struct{} // closed once the outcome is delivered
}

// awaitAcks settles reqs once every live peer has acknowledged id, or at
// deadline.
func (b *Bus) awaitAcks(id streamID, appended time.Time, registry map[string]string, reqs []*pubReq, settled chan struct{}) {
	w := &ackWaiter{id: id, registry: registry, deadline: appended.Add(b.timeout), reqs: reqs, settled: settled}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.settle(w, time.Now()) {
		return
	}
	b.waiters[w] = struct{}{}
}

// settle checks w at now: it delivers the outcome and reports true once
// every live peer acknowledged w.id or the deadline passed; otherwise it
// (re)arms w's timer for when a pending peer falls silent. b.mu must be
// held.
func (b *Bus) settle(w *ackWaiter, now time.Time) bool {
	wake := w.deadline
	done, readWait := true, false
	caughtUp := time.Unix(0, b.caughtUp.Load())
	// Read, not skipped by a reconnect: the entries before it were read.
	rd := b.span.Load()
	readPast := rd != nil && !rd.to.less(w.id) && rd.from.less(w.id)
	// pending notes a node that has not acknowledged id, and is not
	// silent yet.
	pending := func(node string, heard time.Time) {
		if !b.acks[node].less(w.id) {
			return
		}
		silentAt := heard.Add(b.timeout)
		switch {
		case now.Before(silentAt):
			wake = minTime(wake, silentAt)
		case caughtUp.Before(silentAt):
			// It only looks silent: this node has not read the stream up
			// to then, and a lagging reader misses the peer's heartbeats
			// as it misses its acknowledgement. Taken for silent, a live
			// peer that had not applied the entry yet was left serving
			// the old value after the writer's answer. Ask again soon;
			// the deadline bounds the wait.
			wake = minTime(wake, now.Add(b.block()/8))
		case !readPast:
			// The reader must have read this entry too: a peer heard
			// again before it is then heard here, and one heard only
			// after it serves again only once it has read that far
			// (Bus.rejoin). Skipped on a read that ended between the
			// two, the peer came back before the entry and served
			// without it. The reader settles w when it reads the entry;
			// the timer is for a wake-up missed meanwhile.
			readWait = true
			wake = minTime(wake, now.Add(b.block()/8))
		default:
			return // silent, and read so: it stopped serving its cache
		}
		done = false
	}
	for node, p := range b.peers {
		pending(node, p.heard)
	}
	for node, v := range w.registry {
		if _, known := b.peers[node]; known || node == b.cfg.NodeID {
			continue
		}
		// A peer declared gone is no exception: in the registry with a
		// recent heartbeat it came back, with a hello this node has not
		// read yet, and may serve already; one that did not come back
		// is silent there too.
		if heard, _, ok := parseRegistry(v); ok {
			pending(node, heard)
		}
	}
	var err error
	switch {
	case done:
	case !now.Before(w.deadline):
		b.stats.AckTimeouts.Add(uint64(len(w.reqs)))
		err = fmt.Errorf("%w within %v", ErrNotAcknowledged, b.timeout)
	default:
		if w.timer == nil {
			w.timer = time.AfterFunc(wake.Sub(now), func() { b.recheck(w) })
		} else {
			w.timer.Reset(wake.Sub(now))
		}
		b.setReadWait(w, readWait)
		return false
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	b.setReadWait(w, false)
	delete(b.waiters, w)
	for _, r := range w.reqs {
		r.done <- pubDone{err: err} // buffered, and sent once
	}
	close(w.settled)
	return true
}

// setReadWait records whether w waits for the reader to read its entry;
// b.mu must be held.
func (b *Bus) setReadWait(w *ackWaiter, on bool) {
	if w.readWait == on {
		return
	}
	w.readWait = on
	if on {
		b.readWaits.Add(1)
	} else {
		b.readWaits.Add(-1)
	}
}

// recheck is w's timer: a pending peer may have fallen silent, or the
// deadline passed.
func (b *Bus) recheck(w *ackWaiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, waiting := b.waiters[w]; waiting {
		b.settle(w, time.Now())
	}
}

// wakeWaiters settles the waiters an acknowledgement may have completed:
// those for no later entry than every known peer acknowledged. One held
// back by a known peer that fell silent is settled by its timer; one that
// also waits for a peer only in the registry is checked at each
// acknowledgement. Checking every waiter on every acknowledgement would
// cost each batch a check per acknowledgement of an earlier entry. b.mu
// must be held.
func (b *Bus) wakeWaiters() {
	if len(b.waiters) == 0 {
		return
	}
	floor := streamID{math.MaxUint64, math.MaxUint64}
	for node := range b.peers {
		if a := b.acks[node]; a.less(floor) {
			floor = a
		}
	}
	now := time.Now()
	for w := range b.waiters {
		if !floor.less(w.id) {
			b.settle(w, now)
		}
	}
}

// peersChanged rechecks every waiter: a peer that left may have been the
// last one pending. b.mu must be held.
func (b *Bus) peersChanged() {
	now := time.Now()
	for w := range b.waiters {
		b.settle(w, now)
	}
}

// parseRegistry reads a peer registry value: the node's clock at its
// latest heartbeat, in unix ns, and its layout.
func parseRegistry(v string) (time.Time, string, bool) {
	ns, layout, _ := strings.Cut(v, " ")
	t, err := strconv.ParseInt(ns, 10, 64)
	return time.Unix(0, t), layout, err == nil
}

// Abandon tells the bus that writes through this node may have reached
// a metastore unpublished (a shutdown that cut writes in flight, which
// can still land): when Run stops it leaves without a goodbye, so the
// peers take the node for silent, flush and serve from the metastore
// until they declare it gone (and flush again), as after a crash. A
// clean goodbye would have them forget it with those invalidations
// missing. Called once Run has said goodbye, it changes nothing.
func (b *Bus) Abandon() { b.abandoned.Store(true) }

// Run keeps the node on the bus until ctx ends: it publishes, reads the
// stream, applying other nodes' invalidations to c and dropping c when
// some may have been missed, acknowledges what it applied and sends
// heartbeats. It owns its goroutines and returns when they have stopped,
// with ctx's cause (or ErrRunning when the bus already runs).
func (b *Bus) Run(ctx context.Context, c Cache) error {
	if c == nil {
		return fmt.Errorf("%w: no cache", ErrConfig)
	}
	if !b.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer close(b.stopped)
	inner, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { b.sender(inner) })
	wg.Go(func() { b.heartbeats(inner) })
	wg.Go(func() { b.acker(inner) })
	b.read(inner, c)
	b.synced.Store(false)
	cancel()
	wg.Wait()
	return fmt.Errorf("coherence: bus stopped: %w", context.Cause(ctx))
}

// read is the reading loop: (re)connect, then read both streams.
func (b *Bus) read(ctx context.Context, c Cache) {
	var (
		cursor, ackCursor string
		st                streamCount
		runID             string
		idAt              time.Time // when runID was last confirmed
		first             = true    // nothing can be cached before the first sync
		lastSeq           = map[string]uint64{}
		hello             string // the nonce of this connection's hello
		helloAt           time.Time
		backoff           = 50 * time.Millisecond
	)
	for ctx.Err() == nil {
		if cursor == "" {
			// (Re)connect: start after the newest entry. Whatever was
			// cached may be stale, so flush first, then serve again once
			// this node's hello comes back.
			posAt := time.Now()
			pos, err := b.position(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if !first {
					b.markLost(c, "reconnect", err)
				}
				sleepCtx(ctx, backoff)
				backoff = min(2*backoff, 2*time.Second)
				continue
			}
			if runID != "" && pos.runID != runID {
				b.stats.loss("redis-restart")
			}
			runID, idAt = pos.runID, posAt
			clear(lastSeq)
			cursor, ackCursor = pos.last, pos.lastAck
			st = streamCount{read: pos.added, checked: time.Now()}
			b.learnPeers(pos.registry, time.Now())
			if !first {
				b.flush(c, "reconnect")
			}
			// A reconnect is a rejoin of its own: what came before the
			// position is dropped with the cache, what comes after it
			// before the hello is read before this node serves again, and
			// a writer that skips it with an entry after the hello has
			// read the hello, so it saw a silence after it, which sets a
			// rejoin of its own.
			// An older rejoin could only outlast it on a server whose
			// ids went back (a failover to a replica with a slow clock).
			b.rejoin.Store(nil)
			from := mustID(cursor)
			b.span.Store(&readSpan{from: from, to: from})
			b.readUpTo(from)
			b.setAcked(mustID(cursor))
			first = false
			hello, helloAt = b.sayHello(), time.Now()
			backoff = 50 * time.Millisecond
		}
		if !b.synced.Load() && time.Since(helloAt) > b.timeout {
			hello, helloAt = b.sayHello(), time.Now() // the first one was lost
		}
		asked := time.Now()
		res, err := b.cfg.Client.XRead(ctx, &redis.XReadArgs{
			Streams: []string{b.key, b.ackKey, cursor, ackCursor}, Count: readCount, Block: b.block(),
		}).Result()
		if errors.Is(err, redis.Nil) {
			if b.checkStream(ctx, c, &st, cursor) || b.sameServer(ctx, c, &runID, &idAt) {
				cursor = ""
				continue
			}
			b.reachedEnd(minTime(asked, idAt))
			b.checkPeers(c, minTime(asked, idAt))
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			b.markLost(c, "reconnect", err)
			cursor = ""
			continue
		}
		n, full := 0, false
		applied := false
		for _, sr := range res {
			full = full || len(sr.Messages) == readCount
			if sr.Stream == b.ackKey {
				for _, m := range sr.Messages {
					ackCursor = m.ID
					b.receiveAck(m)
				}
				continue
			}
			for _, m := range sr.Messages {
				cursor = m.ID
				a, h := b.receive(c, m, lastSeq, hello)
				applied = applied || a
				if h {
					b.synced.Store(true)
					b.log.Info("invalidation bus in sync", "node", b.cfg.NodeID, "group", b.cfg.Group)
				}
				n++
			}
		}
		if applied {
			b.ack(ctx, mustID(cursor))
		}
		if n > 0 {
			b.readUpTo(mustID(cursor))
		}
		st.read += int64(n)
		st.unchecked = st.unchecked || n > 0
		if b.checkStream(ctx, c, &st, cursor) || b.sameServer(ctx, c, &runID, &idAt) {
			cursor = ""
			continue
		}
		if !full {
			b.reachedEnd(minTime(asked, idAt))
			b.checkPeers(c, minTime(asked, idAt))
		}
	}
}

// streamCount is what the reader consumed, to compare with the stream's
// own count of entries.
type streamCount struct {
	read      int64     // the stream's entries up to and including the cursor
	checked   time.Time // when read was last compared with the stream
	unchecked bool      // entries were read since
}

// checkStream compares the stream's own count of entries with what this
// node consumed: entries trimmed before this node read them leave no gap
// in the numbers if their sender never publishes again, and a Redis that
// lost its data may not have dropped the connection. It runs at most once
// per read interval, not on every read: it would be a round trip on the
// acknowledgement path. It reports a reset, after which the node
// reconnects.
func (b *Bus) checkStream(ctx context.Context, c Cache, st *streamCount, cursor string) bool {
	if !st.unchecked || time.Since(st.checked) < b.block() {
		return false
	}
	st.checked, st.unchecked = time.Now(), false
	info, err := xinfoStream(ctx, b.cfg.Client, b.key).Result()
	if err != nil {
		return false // the next read fails too, and reconnects
	}
	atEnd := info.LastGeneratedID == cursor
	switch {
	case info.EntriesAdded < st.read:
		b.markLost(c, "redis-reset", fmt.Errorf("coherence: stream has %d entries ever, this node read %d", info.EntriesAdded, st.read))
		return true
	case atEnd && info.EntriesAdded > st.read, !atEnd && info.EntriesAdded-info.Length > st.read:
		// Some were appended and trimmed before this node reached them.
		b.log.Warn("invalidations trimmed before this node read them; flushing", "read", st.read,
			"added", info.EntriesAdded, "deleted", info.EntriesAdded-info.Length)
		b.flush(c, "trimmed")
		// Count what is gone as read, so that it is flushed for once.
		st.read = info.EntriesAdded - info.Length
		if atEnd {
			st.read = info.EntriesAdded
		}
	}
	return false
}

// xinfoStream is XINFO STREAM routed by its key: go-redis takes the word
// "stream" for the key, which on a Cluster fails a transaction
// (CROSSSLOT) or sends the command to a shard that redirects it.
func xinfoStream(ctx context.Context, c interface {
	Process(context.Context, redis.Cmder) error
}, key string) *redis.XInfoStreamCmd {
	cmd := redis.NewXInfoStreamCmd(ctx, key)
	cmd.SetFirstKeyPos(2)
	_ = c.Process(ctx, cmd) // the error is the command's
	return cmd
}

// block is how long one read waits: at most a heartbeat (the node's own
// heartbeats wake it sooner anyway) and at most a second, so that Run
// returns soon after its context ends.
func (b *Bus) block() time.Duration { return min(b.cfg.Heartbeat, time.Second) }

// readCount bounds the entries of one read per stream; a read that
// returns fewer reached the stream's end.
const readCount = 512

// readUpTo records that the reader applied the stream up to id, which
// ends a rejoin that far.
func (b *Bus) readUpTo(id streamID) {
	// Only the reader stores read: the load and the store do not race.
	b.span.Store(&readSpan{from: b.span.Load().from, to: id})
	if r := b.rejoin.Load(); r != nil && !id.less(*r) {
		b.rejoin.CompareAndSwap(r, nil) // a later one the sender set stays
	}
	if b.readWaits.Load() == 0 {
		return
	}
	// Writers that skip a silent peer once their entry is read.
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	for w := range b.waiters {
		if w.readWait && !id.less(w.id) {
			b.settle(w, now)
		}
	}
}

// reachedEnd records that everything appended before asked is applied.
func (b *Bus) reachedEnd(asked time.Time) {
	if b.synced.Load() {
		b.caughtUp.Store(asked.UnixNano())
	}
}

// serverID is the run id of the Redis server holding the stream: the
// stream's identity, which a restart or a failover changes. On a Cluster
// it is that of the shard holding the group's slot, not of whichever node
// a keyless command reaches.
func (b *Bus) serverID(ctx context.Context) (string, error) {
	var infoClient redis.UniversalClient = b.cfg.Client
	if cc, ok := b.cfg.Client.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, b.key)
		if err != nil {
			return "", fmt.Errorf("coherence: find the group's cluster shard: %w", err)
		}
		infoClient = m
	}
	info, err := infoClient.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("coherence: redis info: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("coherence: redis info: no run_id")
}

// sameServer checks, at most once per read interval, that the stream is
// still on the server the reader connected to. A client that follows a
// Sentinel failover moves to the new primary without an error, and a
// replica that lagged lacks the tail of the stream: entries of a writer
// this node has not heard since it connected leave no gap it could see.
// It reports a change (after flushing), after which the node reconnects;
// idAt is when the server was last confirmed, which bounds how far the
// node counts itself caught up.
func (b *Bus) sameServer(ctx context.Context, c Cache, runID *string, idAt *time.Time) bool {
	if time.Since(*idAt) < b.block() {
		return false
	}
	at := time.Now()
	id, err := b.serverID(ctx)
	switch {
	case err != nil:
		return false // the next read fails too, and reconnects
	case id != *runID:
		b.markLost(c, "redis-restart", fmt.Errorf("coherence: the stream's Redis server changed (run id %s, was %s): a failover or a restart", id, *runID))
		*runID = "" // counted: the reconnect need not count it again
		return true
	}
	*idAt = at
	return false
}

type position struct {
	last, lastAck string
	added         int64
	runID         string
	registry      map[string]string
}

// position reads where both streams end, how many entries the stream has
// ever had, the Redis run id and the peer registry, in one transaction.
func (b *Bus) position(ctx context.Context) (position, error) {
	var p position
	var err error
	if p.runID, err = b.serverID(ctx); err != nil {
		return p, err
	}
	pipe := b.cfg.Client.TxPipeline()
	exists := pipe.Exists(ctx, b.key)
	// XINFO STREAM fails on a missing key; EXISTS in the same
	// transaction tells that case apart from a real failure.
	st := xinfoStream(ctx, pipe, b.key)
	lastAck := pipe.XRevRangeN(ctx, b.ackKey, "+", "-", 1)
	reg := pipe.HGetAll(ctx, b.peerKey)
	pipe.Exec(ctx) // errors are read per command below
	if err := exists.Err(); err != nil {
		return p, fmt.Errorf("coherence: read stream position: %w", err)
	}
	p.last, p.lastAck = "0-0", "0-0"
	if exists.Val() == 1 {
		if err := st.Err(); err != nil {
			return p, fmt.Errorf("coherence: read stream position: %w", err)
		}
		p.last, p.added = st.Val().LastGeneratedID, st.Val().EntriesAdded
	}
	if err := lastAck.Err(); err != nil {
		return p, fmt.Errorf("coherence: read acknowledgement position: %w", err)
	}
	if v := lastAck.Val(); len(v) > 0 {
		p.lastAck = v[0].ID
	}
	if err := reg.Err(); err != nil {
		return p, fmt.Errorf("coherence: read peer registry: %w", err)
	}
	p.registry = reg.Val()
	return p, nil
}

// learnPeers takes the peers of the registry that announced themselves
// within PeerGone: a node that just started must wait for their
// acknowledgements too, before it has heard any of their heartbeats.
func (b *Bus) learnPeers(registry map[string]string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var stale []string
	for node, v := range registry {
		if node == b.cfg.NodeID {
			continue
		}
		heard, layout, ok := parseRegistry(v)
		if !ok {
			continue
		}
		if now.Sub(heard) > b.cfg.PeerGone {
			stale = append(stale, node)
			continue
		}
		p := b.peers[node]
		if p == nil {
			p = &peer{heard: heard, layout: layout}
			b.peers[node] = p
		} else if heard.After(p.heard) {
			p.heard = heard
		}
		b.checkLayout(node, layout)
	}
	b.updateMin()
	b.peersChanged()
	if len(stale) > 0 {
		// Best effort: a later node removes them otherwise.
		b.cfg.Client.HDel(context.Background(), b.peerKey, stale...)
	}
}

// receive handles one invalidation-stream entry. It reports whether
// invalidations were applied, and whether it is this node's hello.
func (b *Bus) receive(c Cache, m redis.XMessage, lastSeq map[string]uint64, hello string) (applied, isHello bool) {
	raw, _ := m.Values["m"].(string)
	if strings.HasPrefix(raw, b.ownPrefix) {
		// This node's own entry: only its hello matters, and decoding
		// every entry twice would cost each write CPU.
		b.stats.Received.Add(1)
		return false, hello != "" && strings.Contains(raw, `"h":"`+hello+`"`)
	}
	msg, err := decode(raw)
	if err != nil {
		b.refuse(c, m.ID, err)
		return false, false
	}
	b.stats.Received.Add(1)
	if msg.Node == b.cfg.NodeID {
		return false, hello != "" && msg.Hello == hello
	}
	if prev, ok := lastSeq[msg.Node]; ok && msg.Seq != prev+1 {
		b.log.Warn("gap in invalidations from a node; flushing", "node", msg.Node, "after", prev, "got", msg.Seq)
		b.flush(c, "gap")
	}
	lastSeq[msg.Node] = msg.Seq
	// Applied before its sender counts as heard: hearing a sender that
	// was silent may let this node serve again, and a silent writer's
	// entry may carry writes already answered (Publish's ErrNotPublished).
	if len(msg.Ents) > 0 {
		c.ApplyRemote(msg.Ents)
		b.stats.Applied.Add(1)
		b.stats.lags.add(time.Since(time.Unix(0, msg.Time)))
		applied = true
	}
	b.heard(c, msg, time.Now())
	if msg.Bye {
		delete(lastSeq, msg.Node)
	}
	return applied, false
}

// heard updates the sender's liveness from one of its entries.
func (b *Bus) heard(c Cache, msg message, now time.Time) {
	at := minTime(now, time.Unix(0, msg.Time))
	// Whether it returns is decided first, and the flush done, before it
	// counts as heard: that may let this node serve again. Only the
	// reader changes the peers, so the decision holds meanwhile.
	b.mu.Lock()
	p := b.peers[msg.Node]
	returned := ""
	switch {
	case msg.Bye:
	case p == nil:
		if _, ok := b.gone[msg.Node]; ok {
			returned = "a peer declared gone"
		}
	case p.silent || at.Sub(p.heard) >= b.timeout:
		// Judged by the peer's own times, not by when this node read
		// them: a reader that fell behind did not serve meanwhile, and
		// its peers were not silent.
		returned = "a silent peer"
	}
	b.mu.Unlock()
	if returned != "" {
		// What it sent while silent may be lost.
		b.log.Warn("heard "+returned+" again; flushing", "node", msg.Node)
		b.flush(c, "peer-returned")
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	changed := false
	switch {
	case msg.Bye:
		// A clean stop: it published everything it wrote.
		delete(b.peers, msg.Node)
		delete(b.acks, msg.Node)
		delete(b.mismatch, msg.Node)
		b.log.Info("peer left the bus", "node", msg.Node)
	case p == nil:
		delete(b.gone, msg.Node)
		p = &peer{heard: at, layout: msg.Layout}
		b.peers[msg.Node] = p
		changed = true
	default:
		p.silent = false
		p.heard = maxTime(p.heard, at)
		p.layout = msg.Layout
	}
	if !msg.Bye {
		b.checkLayout(msg.Node, msg.Layout)
	}
	b.updateMin()
	if changed || msg.Bye {
		// Only a peer that comes or goes changes what writers wait for; a
		// later "last heard" only moves their timers, which recheck.
		b.peersChanged()
	}
}

// checkLayout raises the alarm for a peer announcing another layout; b.mu
// must be held.
func (b *Bus) checkLayout(node, layout string) {
	bad := b.cfg.Layout != "" && layout != "" && layout != b.cfg.Layout
	if bad == b.mismatch[node] {
		return
	}
	if bad {
		b.mismatch[node] = true
		b.stats.LayoutAlarms.Add(1)
		b.log.Error("a peer on this group's stream serves other metastores: the group name is shared by different upstream layouts, so invalidations may go astray; give each group its own upstream.name",
			"node", node, "group", b.cfg.Group, "layout", b.cfg.Layout, "peer_layout", layout)
		return
	}
	delete(b.mismatch, node)
}

func (b *Bus) receiveAck(m redis.XMessage) {
	node, _ := m.Values["n"].(string)
	raw, _ := m.Values["a"].(string)
	id, ok := parseID(raw)
	if !ok || node == b.cfg.NodeID {
		return
	}
	b.mu.Lock()
	if b.acks[node].less(id) {
		b.acks[node] = id
		b.wakeWaiters()
	}
	b.mu.Unlock()
}

// checkPeers notices peers that went silent or are gone. It runs only
// when the node has read everything appended before now: a peer only
// looks silent to a reader that fell behind, which does not serve its
// cache meanwhile anyway.
func (b *Bus) checkPeers(c Cache, now time.Time) {
	var silent, gone []string
	b.mu.Lock()
	for node, p := range b.peers {
		age := now.Sub(p.heard)
		switch {
		case age > b.cfg.PeerGone:
			gone = append(gone, node)
		case age >= b.timeout && !p.silent:
			p.silent = true
			silent = append(silent, node)
		}
	}
	for node, at := range b.gone { // remembered for as long as a peer may be
		if now.Sub(at) > 10*b.cfg.PeerGone {
			delete(b.gone, node)
		}
	}
	b.mu.Unlock()
	for _, node := range silent {
		b.log.Warn("peer silent: it may be writing without publishing; serving from the metastore until it is heard again or gone",
			"node", node, "timeout", b.timeout)
		b.flush(c, "peer-silent")
	}
	if len(gone) == 0 {
		return
	}
	// Dropped before the peers are forgotten, which lets this node serve
	// again: what it loaded while they were silent may miss their writes.
	// Only the reader changes the peers, so they are still there.
	for _, node := range gone {
		b.log.Warn("silent peer declared gone; flushing and serving the cache again", "node", node, "after", b.cfg.PeerGone)
		b.flush(c, "peer-gone")
	}
	b.mu.Lock()
	for _, node := range gone {
		delete(b.peers, node)
		delete(b.mismatch, node)
		delete(b.acks, node)
		b.gone[node] = now
	}
	b.updateMin()
	b.peersChanged()
	b.mu.Unlock()
	// Writers would wait for it no more, but new nodes learn it from
	// the registry; best effort, any node that sees it gone removes it.
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	b.cfg.Client.HDel(ctx, b.peerKey, gone...)
	cancel()
}

// updateMin recomputes peersMin; b.mu must be held.
func (b *Bus) updateMin() {
	m := int64(math.MaxInt64)
	for _, p := range b.peers {
		m = min(m, p.heard.UnixNano())
	}
	b.peersMin.Store(m)
}

// refuse handles an entry this node cannot read: some node may be
// writing in a format it does not know, so the cache is dropped and not
// served until no such entry came for HeartbeatTimeout (such a node
// heartbeats, so that is once it left).
func (b *Bus) refuse(c Cache, id string, err error) {
	now := time.Now().UnixNano()
	if now-b.refused.Swap(now) >= int64(b.timeout) {
		b.log.Error("a bus entry this node cannot read: some node speaks another message format; serving from the metastore while such entries come",
			"id", id, "err", err, "group", b.cfg.Group)
	}
	reason := "undecodable"
	if errors.Is(err, ErrFormat) {
		reason = "unreadable"
	}
	b.flush(c, reason)
}

func (b *Bus) markLost(c Cache, reason string, err error) {
	if b.synced.Swap(false) {
		b.log.Warn("invalidation bus lost; serving from the metastore until it is back", "err", err)
	}
	b.flush(c, reason)
}

func (b *Bus) flush(c Cache, reason string) {
	b.stats.loss(reason)
	c.DropAll(reason)
}

// Peer is another node as this one sees it.
type Peer struct {
	Node           string
	Heard          time.Time // when last heard, by the earlier of both clocks
	Silent         bool      // not heard for HeartbeatTimeout: the cache is not served
	Layout         string    // its announced layout
	LayoutMismatch bool      // it announces another layout than this node
}

// Peers returns the known peers, in no particular order.
func (b *Bus) Peers() []Peer {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Peer, 0, len(b.peers))
	for node, p := range b.peers {
		out = append(out, Peer{Node: node, Heard: p.heard, Silent: now.Sub(p.heard) >= b.timeout,
			Layout: p.layout, LayoutMismatch: b.mismatch[node]})
	}
	return out
}

// Layout is this node's announced layout.
func (b *Bus) Layout() string { return b.cfg.Layout }

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ParseRedisURL accepts "host:port" or a redis:// URL.
func ParseRedisURL(s string) (*redis.Options, error) {
	if strings.Contains(s, "://") {
		o, err := redis.ParseURL(s)
		if err != nil {
			return nil, fmt.Errorf("%w: redis url: %w", ErrConfig, err)
		}
		return o, nil
	}
	if _, err := strconv.Atoi(s[strings.LastIndexByte(s, ':')+1:]); err != nil {
		return nil, fmt.Errorf("%w: redis address %q", ErrConfig, s)
	}
	return &redis.Options{Addr: s}, nil
}
