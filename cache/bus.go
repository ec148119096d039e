package cache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The invalidation bus carries what writes changed from the proxy node
// that saw them to every other node, on a Redis stream per upstream. A
// stream, unlike pub/sub, keeps entries across a reader's reconnect; each
// node also numbers its messages and sends a heartbeat, so a reader that
// missed entries (trimmed, or Redis restarted empty) sees a gap in some
// node's numbers. Whenever a node may have missed an invalidation it drops
// everything cached for the upstream, says so, and serves from the
// metastore until it is caught up again (promise 5).

// BusConfig configures a Bus. The zero value of each field selects the
// default in its comment; Client and Upstream are required.
type BusConfig struct {
	Client *redis.Client
	// Upstream names the metastore group; one stream per group.
	Upstream string
	// NodeID names this proxy process. Default: random per process, so
	// a restarted node never continues an old numbering.
	NodeID string
	// MaxLen trims the stream to about this many entries. Default 100,000.
	MaxLen int64
	// Block is how long one read waits for entries. Default 1s.
	Block time.Duration
	// Heartbeat is how often the node announces its sequence number, so
	// that a lost tail of its messages shows as a gap. Default 2s.
	Heartbeat time.Duration
	// Prefix of the Redis keys. Default "hmsproxy".
	Prefix string
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
}

// BusStats are the bus's counters.
type BusStats struct {
	Published, PublishErrors, Received, Applied atomic.Uint64
	// Losses by reason: reconnect, gap, redis-restart, publish-failed.
	Losses sync.Map // string -> *atomic.Uint64
	// LagNanos is a ring of recent propagation lags (publish to apply).
	lagMu sync.Mutex // guards lags, lagPos
	lags  []int64
	lagAt int
}

// Lags returns a copy of the recent propagation lags.
func (s *BusStats) Lags() []time.Duration {
	s.lagMu.Lock()
	defer s.lagMu.Unlock()
	out := make([]time.Duration, len(s.lags))
	for i, l := range s.lags {
		out[i] = time.Duration(l)
	}
	return out
}

func (s *BusStats) lag(d time.Duration) {
	s.lagMu.Lock()
	if len(s.lags) < 4096 {
		s.lags = append(s.lags, int64(d))
	} else {
		s.lags[s.lagAt] = int64(d)
		s.lagAt = (s.lagAt + 1) % len(s.lags)
	}
	s.lagMu.Unlock()
}

func (s *BusStats) loss(reason string) {
	v, _ := s.Losses.LoadOrStore(reason, new(atomic.Uint64))
	v.(*atomic.Uint64).Add(1)
}

// Loss is the count of flushes for reason.
func (s *BusStats) Loss(reason string) uint64 {
	if v, ok := s.Losses.Load(reason); ok {
		return v.(*atomic.Uint64).Load()
	}
	return 0
}

// Bus is one node's end of the invalidation stream.
type Bus struct {
	cfg    BusConfig
	key    string
	log    *slog.Logger
	sendMu sync.Mutex // serialises numbering and appending
	seq    atomic.Uint64
	synced atomic.Bool // reading side connected and caught up
	stats  BusStats

	// apply receives invalidations from other nodes; lost is called when
	// invalidations may have been missed. Both are set by Run's caller.
	apply func(ents []Entity)
	lost  func(reason string)
}

// ErrBusConfig reports an unusable BusConfig.
var ErrBusConfig = errors.New("cache: bad bus config")

// NewBus validates cfg.
func NewBus(cfg BusConfig) (*Bus, error) {
	if cfg.Client == nil || cfg.Upstream == "" {
		return nil, fmt.Errorf("%w: client and upstream are required", ErrBusConfig)
	}
	if cfg.NodeID == "" {
		var b [8]byte
		rand.Read(b[:])
		cfg.NodeID = hex.EncodeToString(b[:])
	}
	if cfg.MaxLen <= 0 {
		cfg.MaxLen = 100_000
	}
	if cfg.Block <= 0 {
		cfg.Block = time.Second
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 2 * time.Second
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "hmsproxy"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Bus{cfg: cfg, key: cfg.Prefix + ":inval:" + cfg.Upstream, log: cfg.Logger}, nil
}

// NodeID is this node's name on the bus.
func (b *Bus) NodeID() string { return b.cfg.NodeID }

// Synced reports whether the node is connected and has applied every
// invalidation published so far, as far as it can tell. While it is not,
// the cache must not be served.
func (b *Bus) Synced() bool { return b.synced.Load() }

// Stats are the bus counters.
func (b *Bus) Stats() *BusStats { return &b.stats }

type busMsg struct {
	Node string   `json:"n"`
	Seq  uint64   `json:"s"`
	Time int64    `json:"t"` // publish time, unix ns
	Ents []Entity `json:"e,omitempty"`
}

// MarshalJSON keeps entities compact on the wire.
func (e Entity) MarshalJSON() ([]byte, error) {
	return json.Marshal([]string{e.Level.String(), e.Cat, e.DB, e.Table})
}

// UnmarshalJSON reads the compact form.
func (e *Entity) UnmarshalJSON(b []byte) error {
	var f []string
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	if len(f) != 4 {
		return fmt.Errorf("cache: entity has %d fields, want 4", len(f))
	}
	e.Level = ParseLevel(f[0])
	e.Cat, e.DB, e.Table = f[1], f[2], f[3]
	return nil
}

// ParseLevel reads Level.String; anything unknown is LevelAll.
func ParseLevel(s string) Level {
	for l := LevelDatabase; l <= LevelFunction; l++ {
		if l.String() == s {
			return l
		}
	}
	return LevelAll
}

// Publish sends invalidations to the other nodes. It returns once Redis
// has the entry, so a write's reply can wait for it.
func (b *Bus) Publish(ctx context.Context, ents []Entity) error {
	return b.send(ctx, ents)
}

func (b *Bus) send(ctx context.Context, ents []Entity) error {
	// One publish at a time: entries must reach the stream in the order
	// of their numbers, or readers would see gaps that are not losses.
	b.sendMu.Lock()
	defer b.sendMu.Unlock()
	msg := busMsg{Node: b.cfg.NodeID, Seq: b.seq.Add(1), Time: time.Now().UnixNano(), Ents: ents}
	body, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("cache: encode invalidation: %w", err)
	}
	err = b.cfg.Client.XAdd(ctx, &redis.XAddArgs{
		Stream: b.key, MaxLen: b.cfg.MaxLen, Approx: true, Values: []any{"m", body},
	}).Err()
	if err != nil {
		b.stats.PublishErrors.Add(1)
		return fmt.Errorf("cache: publish invalidation: %w", err)
	}
	b.stats.Published.Add(1)
	return nil
}

// Run reads the stream until ctx ends, applying other nodes'
// invalidations with apply and calling lost when some may have been
// missed. It owns its goroutines and returns when they have stopped.
func (b *Bus) Run(ctx context.Context, apply func(ents []Entity), lost func(reason string)) error {
	b.apply, b.lost = apply, lost
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b.heartbeats(ctx)
	}()
	defer wg.Wait()

	cursor := ""
	read := int64(0) // the stream's entries up to and including cursor
	runID := ""
	first := true // nothing can be cached before the first sync
	lastSeq := map[string]uint64{}
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		if cursor == "" {
			// (Re)connect: start after the newest entry. Whatever was
			// cached may be stale, so flush first, then serve again.
			id, added, rid, err := b.position(ctx)
			if err != nil {
				if !first {
					b.markLost("reconnect", err)
				}
				sleepCtx(ctx, backoff)
				backoff = min(2*backoff, 2*time.Second)
				continue
			}
			if runID != "" && rid != runID {
				b.stats.loss("redis-restart")
			}
			runID = rid
			clear(lastSeq)
			cursor, read = id, added
			if !first {
				b.flush("reconnect")
			}
			first = false
			b.synced.Store(true)
			backoff = 50 * time.Millisecond
		}
		res, err := b.cfg.Client.XRead(ctx, &redis.XReadArgs{
			Streams: []string{b.key, cursor}, Count: 512, Block: b.cfg.Block,
		}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			b.markLost("reconnect", err)
			cursor = ""
			continue
		}
		n := 0
		for _, st := range res {
			for _, m := range st.Messages {
				cursor = m.ID
				b.receive(m, lastSeq)
				n++
			}
		}
		// Entries trimmed before this node read them leave no gap in the
		// numbers if their sender never publishes again, and a Redis that
		// lost its data may not have dropped our connection: compare the
		// stream's own count of entries with what this node consumed.
		if info, err := b.cfg.Client.XInfoStream(ctx, b.key).Result(); err == nil {
			switch {
			case info.EntriesAdded < read+int64(n):
				b.markLost("redis-reset", fmt.Errorf("stream has %d entries ever, this node read %d", info.EntriesAdded, read+int64(n)))
				cursor = ""
				continue
			case info.EntriesAdded-info.Length > read:
				b.log.Warn("invalidations trimmed before this node read them; flushing", "read", read, "deleted", info.EntriesAdded-info.Length)
				b.flush("trimmed")
			}
		}
		read += int64(n)
	}
	b.synced.Store(false)
	return nil
}

// position returns the stream's newest entry id and the Redis run id.
func (b *Bus) position(ctx context.Context) (string, int64, string, error) {
	info, err := b.cfg.Client.Info(ctx, "server").Result()
	if err != nil {
		return "", 0, "", err
	}
	runID := ""
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			runID = v
		}
	}
	// One command gives the newest id and how many entries the stream has
	// ever had up to it, so the node can tell later whether entries it had
	// not read yet were trimmed away.
	st, err := b.cfg.Client.XInfoStream(ctx, b.key).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return "0-0", 0, runID, nil
		}
		return "", 0, "", err
	}
	return st.LastGeneratedID, st.EntriesAdded, runID, nil
}

func (b *Bus) receive(m redis.XMessage, lastSeq map[string]uint64) {
	raw, _ := m.Values["m"].(string)
	var msg busMsg
	if err := json.Unmarshal([]byte(raw), &msg); err != nil {
		b.log.Warn("undecodable invalidation; flushing", "id", m.ID, "err", err)
		b.flush("undecodable")
		return
	}
	b.stats.Received.Add(1)
	if msg.Node == b.cfg.NodeID {
		return
	}
	if prev, ok := lastSeq[msg.Node]; ok && msg.Seq != prev+1 {
		b.log.Warn("gap in invalidations from a node; flushing", "node", msg.Node, "after", prev, "got", msg.Seq)
		b.flush("gap")
	}
	lastSeq[msg.Node] = msg.Seq
	if len(msg.Ents) > 0 {
		b.apply(msg.Ents)
		b.stats.Applied.Add(1)
		b.stats.lag(time.Since(time.Unix(0, msg.Time)))
	}
}

func (b *Bus) markLost(reason string, err error) {
	if b.synced.Swap(false) {
		b.log.Warn("invalidation bus lost; serving from the metastore until it is back", "err", err)
	}
	b.flush(reason)
}

func (b *Bus) flush(reason string) {
	b.stats.loss(reason)
	if b.lost != nil {
		b.lost(reason)
	}
}

// heartbeats publish an empty message now and then, so that a reader who
// lost this node's latest messages sees the gap.
func (b *Bus) heartbeats(ctx context.Context) {
	t := time.NewTicker(b.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := b.send(ctx, nil); err != nil && ctx.Err() == nil {
				b.log.Debug("heartbeat failed", "err", err)
			}
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// ParseRedisURL accepts "host:port" or a redis:// URL.
func ParseRedisURL(s string) (*redis.Options, error) {
	if strings.Contains(s, "://") {
		return redis.ParseURL(s)
	}
	if _, err := strconv.Atoi(s[strings.LastIndexByte(s, ':')+1:]); err != nil {
		return nil, fmt.Errorf("%w: redis address %q", ErrBusConfig, s)
	}
	return &redis.Options{Addr: s}, nil
}
