// Package kafka publishes the metastore change feed to Apache Kafka.
//
// Who publishes what, so that each change is published once: every node
// publishes the writes that passed through it (Wrote), at once, and
// claims the notification-log events they will cause (Claims); the
// leader reads the notification log and publishes the events nobody
// claimed (Event), a grace period after reading them, so that the
// claims of writes answered just before have landed. What the log shows
// of a write the feed does not describe (see feed.FromWrite) is
// published from the log.
//
// Nothing waits on Kafka. A write is queued without blocking (a full
// queue counts it lost); a goroutine renders it and appends it to the
// outbox, a bounded file queue; another drains the outbox to Kafka with
// an idempotent producer (acks from all in-sync replicas), acknowledging
// the outbox only once Kafka has, so the feed is at least once: a record
// may come twice (after a failed produce, a crash), never with another
// key. Records are keyed by the change's key, and partitioned by
// "db.table", so one table's changes stay in order on one partition.
package kafka

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/hmsproxy/hmsproxy/changes"
	"github.com/hmsproxy/hmsproxy/changes/feed"
	"github.com/hmsproxy/hmsproxy/changes/outbox"
)

// Formats of the feed.
const (
	FormatNative = "native"
	FormatAtlas  = "atlas"
)

// PartitionKeyHeader is the record header holding the partition key.
const PartitionKeyHeader = "partition_key"

// Config configures a Feed. Brokers, Topic, Outbox and Claims are
// required.
type Config struct {
	Brokers []string
	Topic   string
	// Format is FormatNative (default) or FormatAtlas.
	Format string
	// Cluster is the Atlas cluster name in qualified names. Required
	// with FormatAtlas.
	Cluster string
	// Group names the metastore group in keys; Node this node.
	Group, Node string
	// DefaultCatalog names changes without a catalog. Default "hive".
	DefaultCatalog string
	// TLS, if set, gives the TLS config of each new broker connection
	// (so reloaded certificates apply). Nil: plaintext.
	TLS func() *tls.Config
	// SASL, if set, authenticates to the brokers.
	SASL sasl.Mechanism
	// ClientID names the producer to the brokers. Default "hmsproxy".
	ClientID string

	Outbox *outbox.Outbox
	Claims Claims
	// Queue bounds the writes waiting to be appended to the outbox.
	// Default 10,000.
	Queue int
	// Grace is how long the leader holds an event after reading it
	// before it looks for its claim. Default 2s.
	Grace time.Duration
	// Batch is the records produced at once. Default 500.
	Batch int
	// DeliveryTimeout is how long a record may wait for Kafka before the
	// feed is reported stalled (and before the producer fails a record it
	// has not sent yet, which is then sent again). Default 10s.
	DeliveryTimeout time.Duration
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Stats are a Feed's counters.
type Stats struct {
	Produced      uint64 // records Kafka acknowledged
	ProduceErrors uint64 // records Kafka refused (and that were sent again)
	// Stalled: the oldest record sent has waited for Kafka's
	// acknowledgement longer than DeliveryTimeout.
	Stalled    bool
	FromWrites uint64 // changes of writes through this node, appended
	FromLog    uint64 // changes from the notification log, appended
	Claimed    uint64 // log events skipped: a node published their write
	// Lost counts changes the feed will never carry: the queue was full,
	// the outbox was full or failed, or the log lost events before the
	// feed read them (a gap).
	Lost          uint64
	LostQueueFull uint64
	LostOutbox    uint64
	LostLogGap    uint64
	Outbox        outbox.Stats
	LastError     string
	LastErrorAt   time.Time
	LastProduceAt time.Time
	Format        string
	Topic         string
}

// Feed is the change feed of one metastore group.
type Feed struct {
	cfg    Config
	log    *slog.Logger
	client *kgo.Client
	q      *changes.Queue[pending]
	seq    atomic.Uint64

	produced, produceErrors, fromWrites, fromLog, claimed atomic.Uint64
	lostQueue, lostLogGap                                 atomic.Uint64
	stalled                                               atomic.Bool

	errMu       sync.Mutex // guards lastErr, lastErrAt, lastProduce
	lastErr     string
	lastErrAt   time.Time
	lastProduce time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// appended is closed when appendLoop has taken the last queued write
	// after Close: the producer may stop then.
	appended chan struct{}
}

// pending is a write waiting for the outbox: its request is a copy.
type pending struct {
	w feed.Write
}

// ErrConfig reports an unusable Config.
var ErrConfig = errors.New("kafka: bad config")

// New validates cfg, makes the producer (which connects lazily) and
// starts the appender and the producer loop; Close stops them.
func New(cfg Config) (*Feed, error) {
	switch {
	case len(cfg.Brokers) == 0 || cfg.Topic == "":
		return nil, fmt.Errorf("%w: brokers and topic are required", ErrConfig)
	case cfg.Outbox == nil || cfg.Claims == nil:
		return nil, fmt.Errorf("%w: outbox and claims are required", ErrConfig)
	case cfg.Format == "":
		cfg.Format = FormatNative
	case cfg.Format != FormatNative && cfg.Format != FormatAtlas:
		return nil, fmt.Errorf("%w: format %q: want native or atlas", ErrConfig, cfg.Format)
	}
	if cfg.Format == FormatAtlas && cfg.Cluster == "" {
		return nil, fmt.Errorf("%w: the atlas format needs a cluster name", ErrConfig)
	}
	if cfg.DefaultCatalog == "" {
		cfg.DefaultCatalog = "hive"
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "hmsproxy"
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 10_000
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 2 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.DeliveryTimeout <= 0 {
		cfg.DeliveryTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	client, err := kgo.NewClient(clientOpts(cfg)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: client: %w", err)
	}
	// The write keys name this process, not only the node: a node that
	// restarts counts its writes from 1 again.
	var inc [4]byte
	rand.Read(inc[:])
	cfg.Node += "." + hex.EncodeToString(inc[:])
	f := &Feed{cfg: cfg, log: cfg.Logger, client: client, q: changes.NewQueue[pending](cfg.Queue), appended: make(chan struct{})}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.wg.Add(2)
	go f.appendLoop()
	go f.produceLoop()
	return f, nil
}

func clientOpts(cfg Config) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.ClientID(cfg.ClientID),
		// Idempotent writes are franz-go's default; they need acks from
		// all in-sync replicas, which is the default too. Said here so
		// that nobody turns either off without reading this.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(cfg.DeliveryTimeout),
		kgo.ProducerBatchCompression(kgo.Lz4Compression(), kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
			return partitionOf
		})),
		kgo.WithLogger(slogger{cfg.Logger}),
	}
	if cfg.TLS != nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		opts = append(opts, kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			c := cfg.TLS().Clone()
			if c.ServerName == "" {
				c.ServerName, _, _ = net.SplitHostPort(host)
			}
			return (&tls.Dialer{NetDialer: d, Config: c}).DialContext(ctx, network, host)
		}))
	}
	if cfg.SASL != nil {
		opts = append(opts, kgo.SASL(cfg.SASL))
	}
	return opts
}

// partitionOf picks a record's partition from its partition key header:
// one table, one partition, whatever the record's key.
func partitionOf(r *kgo.Record, n int) int {
	h := fnv.New32a()
	for _, hd := range r.Headers {
		if hd.Key == PartitionKeyHeader {
			h.Write(hd.Value)
			break
		}
	}
	return int(h.Sum32() % uint32(n))
}

// Wrote is told of a write through this node, on the client's path: it
// copies the request and queues it, never blocking. Writes the
// metastore refused change nothing; writes whose outcome is unknown are
// left to the notification log, which knows.
func (f *Feed) Wrote(method string, args []byte, user string, ok bool) {
	if !ok {
		return
	}
	w := feed.Write{Group: f.cfg.Group, Node: f.cfg.Node, Method: method, Args: append([]byte(nil), args...),
		User: user, Cat: f.cfg.DefaultCatalog, At: f.cfg.Now()}
	if !f.q.Put(pending{w: w}) {
		f.lostQueue.Add(1)
	}
}

// claimTimeout bounds one claim, and claimBackoff is how long the
// appender appends writes unclaimed after a claim failed: a hung Redis
// then costs one timeout per back-off, not one per write, so the queue
// keeps draining instead of overflowing (queue losses are real losses;
// unclaimed writes are only published twice).
const (
	claimTimeout = 5 * time.Second
	claimBackoff = 5 * time.Second
)

// appendLoop turns queued writes into records: it claims their events,
// then appends them to the outbox.
func (f *Feed) appendLoop() {
	defer f.wg.Done()
	defer close(f.appended)
	var claimsDown time.Time // claims fail: append unclaimed until then
	for p := range f.q.Items() {
		p.w.Seq = f.seq.Add(1)
		c, ok := feed.FromWrite(p.w)
		if !ok {
			continue
		}
		// Unclaimed, the leader publishes the event as well: a duplicate
		// under another key, which is better than a loss.
		if now := time.Now(); !now.Before(claimsDown) {
			ctx, cancel := context.WithTimeout(f.ctx, claimTimeout)
			if err := f.cfg.Claims.Claim(ctx, c.ClaimKeys()); err != nil {
				f.fail(fmt.Errorf("claim %s (claims skipped for %v): %w", c.Key, claimBackoff, err))
				claimsDown = time.Now().Add(claimBackoff)
			}
			cancel()
		}
		if f.append(c) {
			f.fromWrites.Add(1)
		}
	}
}

// Event is told of a notification-log event by the leader's poller,
// fetched at the time given; it returns once the event is in the outbox,
// skipped or counted lost, after the grace period. It blocks, so the
// poller moves its cursor only past events the feed has kept.
func (f *Feed) Event(ctx context.Context, ev feed.Event, fetched time.Time) {
	c, ok := feed.FromEvent(f.cfg.Group, ev, f.cfg.DefaultCatalog)
	if !ok {
		return
	}
	if wait := fetched.Add(f.cfg.Grace).Sub(f.cfg.Now()); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-f.ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	claimed, err := f.cfg.Claims.Take(ctx, c.ClaimKeys())
	if err != nil {
		f.fail(fmt.Errorf("take claims of event %d: %w", ev.ID, err))
	}
	if claimed {
		f.claimed.Add(1)
		return
	}
	if f.append(c) {
		f.fromLog.Add(1)
	}
}

// LogGap counts changes lost to a gap in the notification log.
func (f *Feed) LogGap() { f.lostLogGap.Add(1) }

// append renders c and appends its records; false when it was lost.
func (f *Feed) append(c *feed.Change) bool {
	recs, err := f.render(c)
	if err != nil {
		f.fail(fmt.Errorf("render %s: %w", c.Key, err))
		return false
	}
	if len(recs) == 0 {
		return true
	}
	n, err := f.cfg.Outbox.Append(recs...)
	if err != nil {
		f.fail(fmt.Errorf("outbox: %w", err))
	}
	if n < len(recs) {
		f.log.Warn("change feed: the outbox is full; change lost", "key", c.Key, "type", c.Type, "db", c.DB, "table", c.Table)
		return false
	}
	return true
}

func (f *Feed) render(c *feed.Change) ([]outbox.Record, error) {
	pk := []byte(c.PartitionKey())
	if f.cfg.Format == FormatNative {
		v, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		return []outbox.Record{{Key: []byte(c.Key), PartitionKey: pk, Value: v}}, nil
	}
	msgs, err := feed.Atlas(c, f.cfg.Cluster, f.cfg.Now())
	if err != nil {
		return nil, err
	}
	recs := make([]outbox.Record, len(msgs))
	for i, m := range msgs {
		// One key per record: consumers drop duplicates by key.
		key := c.Key
		if i > 0 {
			key += "#" + strconv.Itoa(i)
		}
		recs[i] = outbox.Record{Key: []byte(key), PartitionKey: pk, Value: m}
	}
	return recs, nil
}

// produceLoop drains the outbox to Kafka. It hands records to the
// producer as they come, up to a window, and acknowledges the outbox up to
// the first record Kafka has not acknowledged yet, so acknowledgements
// keep the outbox's order whatever order partitions answer in. The
// producer retries by itself while the brokers are away (it must: an
// idempotent producer cannot give up on a record it sent without an
// answer); a record it fails (refused, or the topic missing) makes the
// loop wait for the window to settle, rewind the outbox and send again
// from the first record not acknowledged, after a backoff.
func (f *Feed) produceLoop() {
	defer f.wg.Done()
	w := &window{signal: make(chan struct{}, 1)}
	backoff := time.Duration(0)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for f.ctx.Err() == nil {
		f.ackSettled(w)
		if err, settled := w.failure(); err != nil {
			if !settled {
				f.await(w, tick)
				continue
			}
			f.produceErrors.Add(1)
			f.fail(err)
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
			f.log.Warn("change feed: Kafka refused records; sending them again", "err", err, "backoff", backoff)
			f.sleep(backoff)
			w.reset()
			f.cfg.Outbox.Rewind()
			continue
		}
		if n, bytes := w.load(); n < windowRecords && bytes < windowBytes {
			ents, err := f.cfg.Outbox.Read(min(f.cfg.Batch, windowRecords-n))
			if err != nil {
				f.fail(err)
				f.sleep(time.Second)
				continue
			}
			for _, e := range ents {
				f.send(w, e)
			}
			if len(ents) > 0 {
				continue
			}
		}
		if f.checkStall(w) {
			backoff = 0
		}
		f.await(w, tick)
	}
}

// checkStall reports a stall, once, when the oldest record sent has
// waited longer than DeliveryTimeout, and its end; it returns whether
// the feed flows.
func (f *Feed) checkStall(w *window) bool {
	since := w.oldest()
	flowing := since.IsZero() || f.cfg.Now().Sub(since) <= f.cfg.DeliveryTimeout
	was := f.stalled.Swap(!flowing)
	switch {
	case !flowing && !was:
		f.fail(errors.New("kafka: records not acknowledged in time; the brokers may be away"))
		f.log.Warn("change feed: Kafka does not acknowledge records; the outbox keeps them", "since", since)
	case flowing && was:
		f.log.Info("change feed: Kafka acknowledges records again", "waiting", f.cfg.Outbox.Stats().Waiting)
	}
	return flowing
}

// await waits for a completion, an append, a tick or the end.
func (f *Feed) await(w *window, tick *time.Ticker) {
	select {
	case <-f.ctx.Done():
	case <-w.signal:
	case <-f.cfg.Outbox.Ready():
	case <-tick.C:
	}
}

// send hands one record to the producer.
func (f *Feed) send(w *window, e outbox.Entry) {
	seq := w.add(e.End, len(e.Value), f.cfg.Now())
	r := &kgo.Record{Key: e.Key, Value: e.Value,
		Headers: []kgo.RecordHeader{{Key: PartitionKeyHeader, Value: e.PartitionKey}}}
	f.client.Produce(f.ctx, r, func(_ *kgo.Record, err error) { w.complete(seq, err) })
}

// ackSettled acknowledges the outbox up to the first record not settled.
func (f *Feed) ackSettled(w *window) {
	end, n := w.popDone()
	if n == 0 {
		return
	}
	if err := f.cfg.Outbox.Ack(end, n); err != nil {
		f.fail(err)
	}
	f.produced.Add(uint64(n))
	f.errMu.Lock()
	f.lastProduce = f.cfg.Now()
	f.errMu.Unlock()
}

// The window's bounds: what the producer may hold at once.
const (
	windowRecords = 5000
	windowBytes   = 16 << 20
)

// window is the records handed to the producer and not yet acknowledged
// to the outbox, in outbox order. The producer's callbacks complete
// them; the produce loop pops them.
type window struct {
	signal chan struct{} // a token after each completion

	mu    sync.Mutex // guards the fields below
	slots []slot
	base  uint64 // sequence number of slots[0]
	bytes int
	err   error // the first failure since the last reset
}

type slot struct {
	end   outbox.Pos
	size  int
	sent  time.Time
	done  bool // Kafka acknowledged it
	ended bool // acknowledged or failed
}

func (w *window) add(end outbox.Pos, size int, now time.Time) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.slots = append(w.slots, slot{end: end, size: size, sent: now})
	w.bytes += size
	return w.base + uint64(len(w.slots)-1)
}

func (w *window) complete(seq uint64, err error) {
	w.mu.Lock()
	if i := seq - w.base; seq >= w.base && i < uint64(len(w.slots)) {
		w.slots[i].ended = true
		w.slots[i].done = err == nil
		if err != nil && w.err == nil {
			w.err = err
		}
	}
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// popDone removes the acknowledged prefix and returns the outbox
// position after it and its length.
func (w *window) popDone() (outbox.Pos, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for n < len(w.slots) && w.slots[n].done {
		w.bytes -= w.slots[n].size
		n++
	}
	if n == 0 {
		return outbox.Pos{}, 0
	}
	end := w.slots[n-1].end
	w.slots = w.slots[n:]
	w.base += uint64(n)
	return end, n
}

// failure is the first failure, and whether every record handed over
// has completed since (a rewind must not race records still in flight).
func (w *window) failure() (error, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		return nil, false
	}
	for _, s := range w.slots {
		if !s.ended {
			return w.err, false
		}
	}
	return w.err, true
}

// reset forgets every record after a failure: they are read again. The
// sequence numbers move past them, so a late callback changes nothing.
func (w *window) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.base += uint64(len(w.slots))
	w.slots, w.bytes, w.err = nil, 0, nil
}

func (w *window) load() (int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.slots), w.bytes
}

// oldest is when the oldest record not acknowledged was handed over.
func (w *window) oldest() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.slots) == 0 {
		return time.Time{}
	}
	return w.slots[0].sent
}

func (f *Feed) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.ctx.Done():
	case <-t.C:
	}
}

func (f *Feed) fail(err error) {
	if f.ctx.Err() != nil {
		return
	}
	f.errMu.Lock()
	f.lastErr, f.lastErrAt = err.Error(), f.cfg.Now()
	f.errMu.Unlock()
	f.log.Debug("change feed", "err", err)
}

// Stats returns the counters.
func (f *Feed) Stats() Stats {
	ob := f.cfg.Outbox.Stats()
	st := Stats{Produced: f.produced.Load(), ProduceErrors: f.produceErrors.Load(), Stalled: f.stalled.Load(),
		FromWrites: f.fromWrites.Load(), FromLog: f.fromLog.Load(), Claimed: f.claimed.Load(),
		LostQueueFull: f.lostQueue.Load(), LostOutbox: ob.Lost, LostLogGap: f.lostLogGap.Load(),
		Outbox: ob, Format: f.cfg.Format, Topic: f.cfg.Topic}
	st.Lost = st.LostQueueFull + st.LostOutbox + st.LostLogGap
	f.errMu.Lock()
	st.LastError, st.LastErrorAt, st.LastProduceAt = f.lastErr, f.lastErrAt, f.lastProduce
	f.errMu.Unlock()
	return st
}

// Close appends what is queued (bounded by ctx), stops producing and
// closes the producer; the outbox keeps what Kafka has not acknowledged
// for the next start. The caller closes the outbox after. Safe twice.
func (f *Feed) Close(ctx context.Context) {
	f.q.Close()
	// The appender ends once it has taken the last queued write; then
	// the producer may stop. A ctx that ends first stops both at once.
	select {
	case <-f.appended:
	case <-ctx.Done():
	}
	f.cancel()
	f.wg.Wait()
	f.client.Close()
}

// slogger adapts franz-go's logger to slog, at its error level: the
// broker being away is the feed's own to report, once, not at each retry.
type slogger struct{ l *slog.Logger }

func (s slogger) Level() kgo.LogLevel { return kgo.LogLevelError }

func (s slogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelWarn
	if level == kgo.LogLevelError {
		lv = slog.LevelError
	}
	s.l.Log(context.Background(), lv, "kafka: "+msg, keyvals...)
}
