package coherence

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/cache"
)

// pubReq is one Publish, a heartbeat or a hello waiting for the sender.
type pubReq struct {
	ents     []cache.Entity
	hello    string       // non-empty: this node's hello, with its nonce
	beat     bool         // a heartbeat: also refresh the peer registry
	appended atomic.Bool  // on the stream: the writer waits for the acknowledgements
	done     chan pubDone // buffered: the one outcome
	timer    *time.Timer  // a writer's deadline (Publish)
}

// pubReqs keeps the requests of writers that got their outcome: a write
// then costs no channel, timer or request of its own.
var pubReqs = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &pubReq{done: make(chan pubDone, 1), timer: t}
}}

// newPubReq is a writer's request for a copy of ents: a writer that gives
// up (its deadline, its context) leaves the request with the sender, and
// its caller may reuse ents meanwhile (the proxy does, per connection).
func newPubReq(ents []cache.Entity) *pubReq {
	r := pubReqs.Get().(*pubReq)
	r.ents = append(r.ents[:0], ents...)
	return r
}

// free returns a writer's request once nothing refers to it: it was never
// queued, or its one outcome was received. A request given up on (the
// deadline or the context) stays with the sender, which sends its outcome
// later; it is left to the garbage collector.
func (r *pubReq) free() {
	r.timer.Stop() // Go 1.23 timers: no stale expiry after Stop
	clear(r.ents)
	r.ents = r.ents[:0]
	r.appended.Store(false)
	pubReqs.Put(r)
}

// pubDone is the outcome of a request: once its entry is on the stream
// and every live peer applied it, or why not. The writer is woken once,
// with the outcome, however many acknowledgements came before.
type pubDone struct {
	err  error
	hold bool // the append failed: hold the writer until its deadline
}

type pubResult struct {
	id       streamID
	at       time.Time         // when Redis answered
	registry map[string]string // the peer registry right after the entry
	err      error
}

// sender appends every queued request to the stream, one entry per batch
// (group commit). One sender keeps the numbers in stream order, which
// readers rely on to tell a gap from a reordering.
//
// A batch is what queued while the previous one was on its way: while
// its append was, and while its writes waited for the peers'
// acknowledgements. Writes that come while a batch is unacknowledged
// are held back until it is settled, for at most Bus.hold, and then
// share one entry. Every entry costs each peer a read, an
// acknowledgement and the read of that, and the writer the read of its
// own entry and of each acknowledgement: fewer, larger entries are what
// keeps a node with many writers, and Redis, from spending more on the
// bus than on the writes. A held write is answered later by at most
// what was left of the earlier batch's wait, and of Bus.hold; its own
// acknowledgement could not have come sooner than the earlier one's
// anyway, since a peer acknowledges in stream order. Nothing is held
// while no batch is unacknowledged (no peers: never), and a heartbeat
// or a hello is never held: it goes at once and takes the held writes
// along, so every append begun after a write was queued carries it.
func (b *Bus) sender(ctx context.Context) {
	var (
		batch   []*pubReq
		unacked <-chan struct{} // closed once the last batch's writes are settled; nil then
		hold    = time.NewTimer(time.Hour)
		holding <-chan time.Time // hold.C while batch is held back
		now     bool             // append batch at once
	)
	hold.Stop()
	for {
		select {
		case <-ctx.Done():
			b.finish(batch)
			return
		case r := <-b.reqs:
			batch = append(batch, r)
		case <-unacked:
			unacked = nil
		case <-holding:
			now = true
		}
		// Everything queued, uncapped: an append that begins after a
		// write was queued must carry it, or peers hear this node alive
		// while the write's invalidation waits behind. The queue's
		// capacity bounds the entry.
	drain:
		for {
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		if len(batch) == 0 {
			continue
		}
		for _, r := range batch {
			now = now || len(r.ents) == 0 // a heartbeat or a hello
		}
		if !now && unacked != nil && len(batch) < maxBatch {
			if holding == nil {
				hold.Reset(b.hold)
				holding = hold.C
			}
			if b.onHold != nil {
				b.onHold(len(batch))
			}
			continue
		}
		hold.Stop()
		holding, now = nil, false
		if settled := b.deliver(batch, b.append(ctx, batch)); settled != nil {
			unacked = settled
		}
		batch = nil // the writers' waiter keeps it
	}
}

// maxHold bounds how long a write is held back while an earlier batch
// waits for acknowledgements (Bus.hold): a few times what an
// acknowledgement takes on a healthy fleet, so that a slow peer, which
// will be waited for anyway, costs a later write no more than that.
const maxHold = 2 * time.Millisecond

// deliver hands a batch its outcome: at once when the append failed and
// to heartbeats and hellos, else once the live peers acknowledged it. A
// heartbeat that shared an entry with writes must not wait with them: its
// sender would fall silent while a peer is slow.
func (b *Bus) deliver(batch []*pubReq, res pubResult) <-chan struct{} {
	if res.err != nil {
		for _, r := range batch {
			r.done <- pubDone{err: fmt.Errorf("%w: %w", ErrNotPublished, res.err), hold: true}
		}
		return nil
	}
	writes := batch[:0] // in place: the sender gives batch up
	for _, r := range batch {
		if len(r.ents) == 0 {
			r.done <- pubDone{}
			continue
		}
		r.appended.Store(true)
		writes = append(writes, r)
	}
	if len(writes) == 0 {
		return nil
	}
	settled := make(chan struct{})
	b.awaitAcks(res.id, res.at, res.registry, writes, settled)
	return settled
}

// maxBatch is how many held requests make the sender append at once,
// without waiting for the earlier batch's acknowledgements.
const maxBatch = 1024

// append writes one entry for batch.
func (b *Bus) append(ctx context.Context, batch []*pubReq) pubResult {
	b.seq++
	start := time.Now()
	msg := message{Version: b.format, Node: b.cfg.NodeID, Seq: b.seq, Time: start.UnixNano(), Layout: b.cfg.Layout}
	beat := false
	for _, r := range batch {
		msg.Ents = append(msg.Ents, r.ents...)
		if r.hello != "" {
			msg.Hello = r.hello
		}
		beat = beat || r.beat || r.hello != ""
	}
	body, err := msg.encode()
	if err != nil {
		return pubResult{err: fmt.Errorf("coherence: encode invalidation: %w", err)}
	}
	args := &redis.XAddArgs{Stream: b.key, MaxLen: b.cfg.MaxLen, Approx: true, Values: []any{"m", body}}
	var pipe redis.Pipeliner
	if msg.Hello != "" {
		// Registered in the same transaction as the hello: whoever
		// appends after the hello finds this node in the registry.
		pipe = b.cfg.Client.TxPipeline()
	} else {
		pipe = b.cfg.Client.Pipeline()
	}
	add := pipe.XAdd(ctx, args)
	if beat {
		pipe.HSet(ctx, b.peerKey, b.cfg.NodeID, strconv.FormatInt(start.UnixNano(), 10)+" "+b.cfg.Layout)
	}
	var reg *redis.MapStringStringCmd
	if len(msg.Ents) > 0 {
		// Who registered before this entry: the peers to wait for.
		reg = pipe.HGetAll(ctx, b.peerKey)
	}
	_, err = pipe.Exec(ctx)
	at := time.Now()
	if err != nil {
		b.stats.PublishErrors.Add(1)
		return pubResult{err: fmt.Errorf("coherence: publish invalidation: %w", err)}
	}
	id, ok := parseID(add.Val())
	if !ok {
		return pubResult{err: fmt.Errorf("coherence: publish invalidation: odd stream id %q", add.Val())}
	}
	if !b.lastAppend.IsZero() && at.Sub(b.lastAppend) > b.timeout-b.cfg.Heartbeat {
		// The previous entry that reached the stream began that long
		// before this one landed: a writer whose reader read past the
		// previous one's start plus the heartbeat timeout, and its own
		// entry, but not this one, may have taken this node for
		// silent and answered without its acknowledgement, while this
		// node serves again from now on (published). Its entry comes
		// before this one: the cache is served only once the reader
		// applied the stream up to here. (The margin of a heartbeat is
		// for clocks that disagree a little. The first append, a hello,
		// needs none: nothing is served before it is read back.)
		b.rejoin.Store(&id)
		b.stats.Rejoins.Add(1)
	}
	b.lastAppend = start
	if at.Sub(start) <= b.timeout-b.cfg.Heartbeat {
		// Only a prompt append counts as this node being heard: peers
		// take the sender's start time as when they heard it, and this
		// bounds how much later than that they may have heard it.
		b.published.Store(start.UnixNano())
	}
	b.stats.Published.Add(1)
	if len(msg.Ents) > 0 {
		b.stats.Batches.Add(1)
	}
	res := pubResult{id: id, at: at}
	if reg != nil {
		res.registry = reg.Val()
	}
	return res
}

// finish publishes what is still queued, then says goodbye, unless
// writes may be unpublished: the final append failed, Abandon was
// called, or a publish came too late to be carried (Publish, late). An
// earlier append that failed needs nothing here: its sequence number is
// missing, so the goodbye shows the peers a gap and they flush. Every
// publish that saw the bus open is drained first: the loop drains while
// waiting for them, so that one blocked on a full queue gets in.
func (b *Bus) finish(batch []*pubReq) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	b.closing.Store(true)
	for {
		select {
		case r := <-b.reqs:
			batch = append(batch, r)
			continue
		default:
		}
		if b.publishing.Load() == 0 && len(b.reqs) == 0 {
			break
		}
		runtime.Gosched()
	}
	if b.onClosing != nil {
		b.onClosing()
	}
	if len(batch) > 0 {
		res := b.append(ctx, batch)
		b.deliver(batch, res)
		if res.err != nil {
			// The peers must not forget this node cleanly: they stop
			// serving when it falls silent, as for a crash.
			return
		}
	}
	if b.abandoned.Load() {
		b.log.Warn("leaving the bus without a goodbye: writes through this node may be unpublished; peers serve from the metastore until they declare it gone")
		return
	}
	b.sendBye(ctx)
}

// sendBye tells the peers this node leaves, so they neither wait for its
// acknowledgements nor stop their caches when it falls silent.
func (b *Bus) sendBye(ctx context.Context) {
	b.seq++
	msg := message{Version: b.format, Node: b.cfg.NodeID, Seq: b.seq, Time: time.Now().UnixNano(), Layout: b.cfg.Layout, Bye: true}
	body, _ := msg.encode()
	pipe := b.cfg.Client.Pipeline()
	pipe.XAdd(ctx, &redis.XAddArgs{Stream: b.key, MaxLen: b.cfg.MaxLen, Approx: true, Values: []any{"m", body}})
	pipe.HDel(ctx, b.peerKey, b.cfg.NodeID)
	if _, err := pipe.Exec(ctx); err != nil {
		b.log.Debug("goodbye not published", "err", err)
	}
}

// heartbeats announce the node now and then, so that peers know it is
// alive and a reader who lost its latest messages sees the gap.
func (b *Bus) heartbeats(ctx context.Context) {
	t := time.NewTicker(b.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r := &pubReq{beat: true, done: make(chan pubDone, 1)}
		select {
		case b.reqs <- r:
		case <-ctx.Done():
			return
		}
		select {
		case res := <-r.done:
			if res.err != nil && ctx.Err() == nil {
				b.log.Debug("heartbeat failed", "err", res.err)
			}
		case <-ctx.Done():
			return
		}
	}
}

// sayHello queues this node's hello and returns its nonce: the node is in
// sync once it reads the hello back, because every writer whose entry
// comes after it has then heard of this node and waits for its
// acknowledgement.
func (b *Bus) sayHello() string {
	var n [8]byte
	rand.Read(n[:])
	nonce := hex.EncodeToString(n[:])
	select {
	case b.reqs <- &pubReq{hello: nonce, done: make(chan pubDone, 1)}:
	default: // the queue is full; the reader asks again after the timeout
	}
	return nonce
}

// setAcked records how far this node applied the stream and wakes the
// acknowledgement sender.
func (b *Bus) setAcked(id streamID) {
	// Only the reader calls this: a load and a store do not race.
	if cur, _ := b.acked.Load().(streamID); cur.less(id) {
		b.acked.Store(id)
	}
	select {
	case b.ackWake <- struct{}{}:
	default:
	}
}

// ack records how far this node applied the stream and appends that to
// the acknowledgement stream at once, from the reader. Handed to the
// acker, every acknowledgement waited for that goroutine to be woken
// and scheduled, on the way from a peer's write to its answer: a
// publish with one peer held its writer 370µs at the median, 220µs with
// the reader appending (TestBusLagPercentiles). The reader's next read
// waits for this round trip; whatever came meanwhile it reads then. An
// append that fails is left to the acker, which retries it.
func (b *Bus) ack(ctx context.Context, id streamID) {
	// Only the reader calls this: a load and a store do not race.
	if cur, _ := b.acked.Load().(streamID); cur.less(id) {
		b.acked.Store(id)
	}
	err := b.cfg.Client.XAdd(ctx, &redis.XAddArgs{
		Stream: b.ackKey, MaxLen: b.cfg.MaxLen, Approx: true,
		Values: []any{"n", b.cfg.NodeID, "a", id.String()},
	}).Err()
	if err != nil {
		b.setAcked(id)
	}
}

// acker appends how far this node applied the stream to the
// acknowledgement stream, coalescing while an append is on its way.
func (b *Bus) acker(ctx context.Context) {
	var sent streamID
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.ackWake:
		}
		id, _ := b.acked.Load().(streamID)
		if !sent.less(id) {
			continue
		}
		err := b.cfg.Client.XAdd(ctx, &redis.XAddArgs{
			Stream: b.ackKey, MaxLen: b.cfg.MaxLen, Approx: true,
			Values: []any{"n", b.cfg.NodeID, "a", id.String()},
		}).Err()
		if err != nil {
			if ctx.Err() == nil {
				b.log.Debug("acknowledgement not published", "err", err)
			}
			continue // the next applied entry retries; writers wait at most the timeout
		}
		sent = id
	}
}

// FormatVersion is the bus message format this release writes (see the
// package doc). A node reads FormatVersion-1 to FormatVersion+1: the
// next version may only add what this one can ignore.
const FormatVersion = 2

// wireV1 is the format before versioning: no "v" field.
const wireV1 = 1

// ErrFormat reports a bus entry in a format version this node cannot
// read.
var ErrFormat = errors.New("coherence: unreadable bus message format")

// message is one entry of the invalidation stream.
type message struct {
	Version int // the format version it is (to be) written in; 0 is FormatVersion
	Node    string
	Seq     uint64
	Time    int64 // the sender's clock when it began the append, unix ns
	Layout  string
	Hello   string // this connection's hello nonce
	Bye     bool   // the sender stops cleanly
	Ents    []cache.Entity
}

type wireMessage struct {
	Node   string     `json:"n"`
	Seq    uint64     `json:"s"`
	Time   int64      `json:"t"`
	Layout string     `json:"l,omitempty"`
	Hello  string     `json:"h,omitempty"`
	Bye    bool       `json:"b,omitempty"`
	Ents   [][]string `json:"e,omitempty"` // level, catalog, database, table
	// Added lists the entities of Ents that only added partitions
	// (cache.Entity.Added), by index; written in version 2 only. A
	// node that does not read it takes them as whole "partitions".
	Added []int `json:"a,omitempty"`
	// Version is the format version, absent in version 1. Last, so that
	// version 1's entries and a node's own prefix are unchanged.
	Version int `json:"v,omitempty"`
}

func (m message) encode() (string, error) {
	w := wireMessage{Node: m.Node, Seq: m.Seq, Time: m.Time, Layout: m.Layout, Hello: m.Hello, Bye: m.Bye, Version: m.Version}
	switch w.Version {
	case 0:
		w.Version = FormatVersion
	case wireV1:
		w.Version = 0
	}
	if len(m.Ents) > 0 {
		w.Ents = make([][]string, len(m.Ents))
		for i, e := range m.Ents {
			w.Ents[i] = []string{e.Level.String(), e.Cat, e.DB, e.Table}
			// Version 1 goes as that release wrote it: whole partitions.
			if e.Added && e.Level == cache.LevelPartitions && w.Version != 0 {
				w.Added = append(w.Added, i)
			}
		}
	}
	return string(appendWire(make([]byte, 0, 128+48*len(w.Ents)), &w)), nil
}

// ownPrefix is how the encoding of node's entries begins.
func ownPrefix(node string) string {
	b, _ := json.Marshal(wireMessage{Node: node})
	return string(b[:len(b)-len(`,"s":0,"t":0}`)]) + ","
}

func decode(raw string) (message, error) {
	var w wireMessage
	if !decodeFast(raw, &w) {
		w = wireMessage{}
		if err := json.Unmarshal([]byte(raw), &w); err != nil {
			return message{}, fmt.Errorf("coherence: decode entry: %w", err)
		}
	}
	return decodeWire(w)
}

// decodeWire checks and converts what an entry read as.
func decodeWire(w wireMessage) (message, error) {
	v := max(w.Version, wireV1)
	if v < FormatVersion-1 || v > FormatVersion+1 {
		return message{}, fmt.Errorf("%w: version %d, this node reads %d to %d", ErrFormat, v, FormatVersion-1, FormatVersion+1)
	}
	if w.Node == "" {
		return message{}, fmt.Errorf("coherence: decode entry: no node")
	}
	m := message{Version: v, Node: w.Node, Seq: w.Seq, Time: w.Time, Layout: w.Layout, Hello: w.Hello, Bye: w.Bye}
	if len(w.Ents) > 0 {
		m.Ents = make([]cache.Entity, len(w.Ents))
		for i, f := range w.Ents {
			// The next version may append fields to an entity.
			if len(f) < 4 || len(f) > 4 && v <= FormatVersion {
				return message{}, fmt.Errorf("coherence: decode entry: entity has %d fields, want 4", len(f))
			}
			m.Ents[i] = cache.Entity{Level: parseLevel(f[0]), Cat: f[1], DB: f[2], Table: f[3]}
		}
		for _, i := range w.Added {
			// An index that names no partitions entity narrows nothing.
			if i >= 0 && i < len(m.Ents) && m.Ents[i].Level == cache.LevelPartitions {
				m.Ents[i].Added = true
			}
		}
	}
	return m, nil
}

// parseLevel reads Level.String; anything unknown is LevelAll, the safe
// reading of a level a newer node knows and this one does not.
func parseLevel(s string) cache.Level {
	for l := cache.LevelAll; l <= cache.LevelFunction; l++ {
		if l.String() == s {
			return l
		}
	}
	return cache.LevelAll
}

// streamID is a Redis stream entry id, ordered as Redis orders them.
type streamID struct{ ms, seq uint64 }

func parseID(s string) (streamID, bool) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return streamID{}, false
	}
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	return streamID{ms, seq}, err1 == nil && err2 == nil
}

// mustID parses an id Redis gave; an odd one reads as 0-0.
func mustID(s string) streamID {
	id, _ := parseID(s)
	return id
}

func (a streamID) less(b streamID) bool {
	return a.ms < b.ms || a.ms == b.ms && a.seq < b.seq
}

func (a streamID) String() string {
	return strconv.FormatUint(a.ms, 10) + "-" + strconv.FormatUint(a.seq, 10)
}

// Stats are the bus's counters.
type Stats struct {
	// Published counts appends (invalidations, heartbeats, hellos);
	// Batches those that carried invalidations, each for one or more
	// concurrent writes.
	Published, Batches, PublishErrors atomic.Uint64
	// Received counts entries read, Applied those with other nodes'
	// invalidations.
	Received, Applied atomic.Uint64
	// AckTimeouts counts publishes answered at the heartbeat timeout
	// with a live peer that had not acknowledged.
	AckTimeouts atomic.Uint64
	// LayoutAlarms counts peers seen announcing another group layout.
	LayoutAlarms atomic.Uint64
	// Rejoins counts appends that came so long after this node's
	// previous one that it served no cache until it read up to them.
	Rejoins atomic.Uint64
	// Losses by reason: reconnect, gap, redis-restart, redis-reset,
	// trimmed, undecodable, unreadable (a format version this node
	// cannot read), peer-silent, peer-returned, peer-gone.
	Losses sync.Map // string -> *atomic.Uint64

	lags  ring // propagation lags, publish to apply
	waits ring // how long Publish held its caller
}

// LossReasons are the reasons Stats.Losses counts.
var LossReasons = []string{"reconnect", "gap", "redis-restart", "redis-reset", "trimmed", "undecodable",
	"unreadable", "peer-silent", "peer-returned", "peer-gone"}

// Lags returns the recent propagation lags (publish on another node to
// apply here).
func (s *Stats) Lags() []time.Duration { return s.lags.get() }

// PublishWaits returns how long recent publishes held their writer: the
// latency the bus adds to a write.
func (s *Stats) PublishWaits() []time.Duration { return s.waits.get() }

func (s *Stats) loss(reason string) {
	v, _ := s.Losses.LoadOrStore(reason, new(atomic.Uint64))
	v.(*atomic.Uint64).Add(1)
}

// Loss is the count of flushes for reason.
func (s *Stats) Loss(reason string) uint64 {
	if v, ok := s.Losses.Load(reason); ok {
		return v.(*atomic.Uint64).Load()
	}
	return 0
}

// ring keeps the last 4096 durations.
type ring struct {
	mu sync.Mutex // guards d, at
	d  []time.Duration
	at int
}

func (r *ring) add(d time.Duration) {
	r.mu.Lock()
	if len(r.d) < 4096 {
		r.d = append(r.d, d)
	} else {
		r.d[r.at] = d
		r.at = (r.at + 1) % len(r.d)
	}
	r.mu.Unlock()
}

func (r *ring) get() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.d...)
}
