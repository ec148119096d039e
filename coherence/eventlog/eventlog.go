// Package eventlog tails the metastore's notification log and turns its
// events into cache invalidations, so writes that bypass every proxy are
// seen within one poll interval (promise 4).
package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Caller makes one metastore call on a connection of the poller's own.
type Caller interface {
	Call(ctx context.Context, method string, args []byte) (wire.Message, error)
}

// Cursor keeps the id of the last event applied, shared by the nodes that
// may take over polling.
type Cursor interface {
	Load(ctx context.Context) (id int64, ok bool, err error)
	Save(ctx context.Context, id int64) error
}

// MemCursor is a Cursor for a single node.
type MemCursor struct {
	id atomic.Int64
	ok atomic.Bool
}

func (m *MemCursor) Load(context.Context) (int64, bool, error) { return m.id.Load(), m.ok.Load(), nil }
func (m *MemCursor) Save(_ context.Context, id int64) error {
	m.id.Store(id)
	m.ok.Store(true)
	return nil
}

// Config configures a Poller. Caller, Cursor, Apply and Drop are
// required.
type Config struct {
	Caller Caller
	Cursor Cursor
	// Apply invalidates what events changed (locally and on the bus).
	Apply func(ctx context.Context, ents []cache.Entity)
	// Drop drops everything cached: events were lost.
	Drop func(reason string)
	// Changed, if set, is told of each event and what it invalidates (the
	// change-event stream). It must not block.
	Changed func(ev Event, ents []cache.Entity)
	// Batch is the events asked for per call. Default 500.
	Batch int32
	// DefaultCatalog names events without a catalog. Default "hive".
	DefaultCatalog string
	// Now is the clock. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// Synced reports whether this node's cache is served: a node that
	// may have missed invalidations reports nothing through Follow.
	// Default: always.
	Synced func() bool
}

// Stats are the poller's numbers.
type Stats struct {
	Latest, Applied atomic.Int64 // newest event id in the metastore; last applied
	BehindNanos     atomic.Int64 // age of the oldest unapplied event, 0 when caught up
	Events, Gaps    atomic.Uint64
	Polls, Failures atomic.Uint64
	// Health is this node's verdict on the log (a HealthState), when a
	// Health check reports here (HealthConfig.Stats).
	Health atomic.Int32
}

// Poller reads the notification log.
type Poller struct {
	cfg   Config
	log   *slog.Logger
	stats Stats

	// local is the id this process applied events up to, whatever became
	// of its saves: when the shared cursor is lost (Redis restarted empty)
	// the poller resumes from here instead of dropping every cache again
	// on each poll. -1: nothing applied yet.
	local atomic.Int64
}

// New validates cfg.
func New(cfg Config) (*Poller, error) {
	if cfg.Caller == nil || cfg.Cursor == nil || cfg.Apply == nil || cfg.Drop == nil {
		return nil, errors.New("eventlog: caller, cursor, apply and drop are required")
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.DefaultCatalog == "" {
		cfg.DefaultCatalog = "hive"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Poller{cfg: cfg, log: cfg.Logger}
	p.local.Store(-1)
	return p, nil
}

// Stats are the poller's numbers.
func (p *Poller) Stats() *Stats { return &p.stats }

// Follow makes a node that does not poll report how far the shared
// cursor has come (Stats.Applied), which the node has applied too: the
// poller saves the cursor only once its invalidations were published
// and every live peer acknowledged them; a peer that did not is not
// Synced, and its cache is not served. Whoever waits for a write made
// straight to the metastore to be visible everywhere (the twin, an
// operator) reads Applied on every node. Applied only moves forward
// here; on the polling node it is Poll's.
func (p *Poller) Follow(ctx context.Context) error {
	if p.cfg.Synced != nil && !p.cfg.Synced() {
		return nil
	}
	id, ok, err := p.cfg.Cursor.Load(ctx)
	if err != nil || !ok {
		return err
	}
	for {
		cur := p.stats.Applied.Load()
		if id <= cur || p.stats.Applied.CompareAndSwap(cur, id) {
			return nil
		}
	}
}

// Event is the part of a NotificationEvent the poller uses.
type Event = hms.NotificationEvent

// Poll applies every event newer than the cursor: a cheap check of the
// newest id first, then batches until caught up. A gap (purged events, or
// a log that went backwards) drops the cache and moves on.
func (p *Poller) Poll(ctx context.Context) error {
	p.stats.Polls.Add(1)
	err := p.poll(ctx)
	if err != nil {
		p.stats.Failures.Add(1)
	}
	return err
}

func (p *Poller) poll(ctx context.Context) error {
	latest, err := currentID(ctx, p.cfg.Caller)
	if err != nil {
		return err
	}
	p.stats.Latest.Store(latest)
	cursor, ok, err := p.cfg.Cursor.Load(ctx)
	if err != nil {
		return fmt.Errorf("eventlog: load cursor: %w", err)
	}
	if !ok {
		if local := p.local.Load(); local >= 0 {
			// The shared cursor is gone (Redis restarted empty), but this
			// process knows how far it applied: replaying from there
			// loses nothing and needs no flush. Replays are harmless.
			p.log.Info("notification log cursor missing; resuming from this node's position", "id", local)
			cursor, ok = local, true
		}
	}
	switch {
	case !ok:
		// First poll ever: start at the newest event. Anything cached
		// before now may predate events we will never read. One flush:
		// the next polls start from here even if the save fails.
		p.gap("start", cursor, latest)
		return p.save(ctx, latest)
	case latest < cursor:
		p.gap("log went backwards", cursor, latest)
		return p.save(ctx, latest)
	}
	for cursor < latest {
		events, err := p.next(ctx, cursor)
		if err != nil {
			return err
		}
		if len(events) == 0 {
			// Newer ids exist but none came back: purged.
			p.gap("purged", cursor, latest)
			return p.save(ctx, latest)
		}
		var ents []cache.Entity
		for _, ev := range events {
			if ev.ID != cursor+1 {
				p.gap("missing events", cursor, ev.ID)
			}
			evEnts := Entities(ev, p.cfg.DefaultCatalog)
			if p.cfg.Changed != nil && len(evEnts) > 0 {
				p.cfg.Changed(ev, evEnts)
			}
			ents = append(ents, evEnts...)
			cursor = ev.ID
			p.stats.Events.Add(1)
		}
		if len(ents) > 0 {
			p.cfg.Apply(ctx, ents)
		}
		p.local.Store(cursor)
		last := events[len(events)-1]
		if cursor < latest {
			p.stats.BehindNanos.Store(int64(p.cfg.Now().Sub(time.Unix(int64(last.Time), 0))))
		}
		if err := p.save(ctx, cursor); err != nil {
			return err
		}
	}
	p.stats.BehindNanos.Store(0)
	return nil
}

func (p *Poller) save(ctx context.Context, id int64) error {
	p.local.Store(id)
	if err := p.cfg.Cursor.Save(ctx, id); err != nil {
		return fmt.Errorf("eventlog: save cursor: %w", err)
	}
	p.stats.Applied.Store(id)
	return nil
}

func (p *Poller) gap(why string, from, to int64) {
	p.stats.Gaps.Add(1)
	if why != "start" {
		p.log.Warn("notification log gap: dropping the cache", "why", why, "cursor", from, "next", to)
	}
	p.cfg.Drop("eventlog " + why)
}

func currentID(ctx context.Context, c Caller) (int64, error) {
	m, err := c.Call(ctx, "get_current_notificationEventId", []byte{wire.TStop})
	if err != nil {
		return 0, fmt.Errorf("eventlog: get_current_notificationEventId: %w", err)
	}
	d, err := success(m)
	if err != nil {
		return 0, fmt.Errorf("eventlog: get_current_notificationEventId: %w", err)
	}
	return ReadCurrentID(d)
}

// ReadCurrentID reads the event id of the CurrentNotificationEventId
// struct at d's position, which get_current_notificationEventId answers
// with.
func ReadCurrentID(d *wire.Decoder) (int64, error) {
	var id int64
	d.Struct(wire.I64At(1, &id))
	return id, d.Err()
}

// next asks for events after cursor, without a server-side skip list: a
// filtered reply has natural gaps, and gaps must mean lost events.
func (p *Poller) next(ctx context.Context, cursor int64) ([]Event, error) {
	m, err := p.cfg.Caller.Call(ctx, "get_next_notification", hmsreq.Req(hmsreq.I64(1, cursor), hmsreq.I32(2, p.cfg.Batch)))
	if err != nil {
		return nil, fmt.Errorf("eventlog: get_next_notification: %w", err)
	}
	d, err := success(m)
	if err != nil {
		return nil, fmt.Errorf("eventlog: get_next_notification: %w", err)
	}
	return ReadEvents(d)
}

// ReadEvents reads the events of the NotificationEventResponse struct at
// d's position, which get_next_notification answers with.
func ReadEvents(d *wire.Decoder) ([]Event, error) {
	var events []Event
	d.Struct(wire.ListAt(1, func(d *wire.Decoder) { events = append(events, readEvent(d)) }))
	return events, d.Err()
}

// success positions a decoder on the struct returned in field 0 of a
// reply, or reports the exception.
func success(m wire.Message) (*wire.Decoder, error) {
	if m.Type == wire.Exception {
		ex, err := wire.DecodeApplicationException(m.Body())
		if err != nil {
			return nil, err
		}
		return nil, ex
	}
	d := wire.NewDecoder(m.Body())
	typ, id := d.FieldBegin()
	if d.Err() != nil {
		return nil, d.Err()
	}
	if id != 0 || typ != wire.TStruct {
		return nil, fmt.Errorf("metastore answered with exception field %d", id)
	}
	return d, nil
}

func readEvent(d *wire.Decoder) Event {
	var ev Event
	d.Struct(wire.I64At(1, &ev.ID), wire.I32At(2, &ev.Time), wire.StringAt(3, &ev.Type), wire.StringAt(4, &ev.DB),
		wire.StringAt(5, &ev.Table), wire.StringAt(6, &ev.Message), wire.StringAt(7, &ev.Format), wire.StringAt(8, &ev.Cat))
	return ev
}

// Entities maps one event to what it invalidates. Unknown event types
// invalidate what they name: the table, else the database, else all.
func Entities(ev Event, defaultCat string) []cache.Entity {
	cat := hms.NormalizeString(ev.Cat)
	if cat == "" {
		cat = defaultCat
	}
	db, tbl := hms.NormalizeString(ev.DB), hms.NormalizeString(ev.Table)
	table := func(d, t string) cache.Entity {
		return cache.Entity{Level: cache.LevelTable, Cat: cat, DB: d, Table: t}
	}
	switch ev.Type {
	case "OPEN_TXN", "ABORT_TXN", "ALLOC_WRITE_ID_EVENT",
		"CREATE_ISCHEMA", "ALTER_ISCHEMA", "DROP_ISCHEMA",
		"ADD_SCHEMA_VERSION", "ALTER_SCHEMA_VERSION", "DROP_SCHEMA_VERSION":
		return nil // nothing the cache holds
	case "CREATE_DATABASE", "DROP_DATABASE", "ALTER_DATABASE":
		return []cache.Entity{{Level: cache.LevelDatabase, Cat: cat, DB: db}}
	case "CREATE_FUNCTION", "DROP_FUNCTION":
		return []cache.Entity{{Level: cache.LevelFunction, Cat: cat, DB: db}}
	case "ADD_PARTITION":
		// New partitions only (see hms.Effect.Adds): the table's
		// partition set, not its existing partitions.
		if db != "" && tbl != "" {
			return []cache.Entity{{Level: cache.LevelPartitions, Cat: cat, DB: db, Table: tbl, Added: true}}
		}
	case "DROP_PARTITION", "ALTER_PARTITION",
		"UPDATE_PART_COL_STAT_EVENT", "UPDATE_PART_COL_STAT_EVENT_BATCH", "DELETE_PART_COL_STAT_EVENT":
		if db != "" && tbl != "" {
			return []cache.Entity{{Level: cache.LevelPartitions, Cat: cat, DB: db, Table: tbl}}
		}
	case "ALTER_TABLE":
		ents := []cache.Entity{}
		if db != "" && tbl != "" {
			ents = append(ents, table(db, tbl))
		}
		// A rename: the other name is only in the message.
		for _, n := range renameNames(ev) {
			ents = append(ents, table(n[0], n[1]))
		}
		if len(ents) > 0 {
			return ents
		}
	case "COMMIT_TXN":
		// 4.0 lists the tables written; 3.1 lists none, and those tables
		// had their own ACID_WRITE / ALTER events.
		return commitTables(ev, cat)
	case "CREATE_CATALOG", "DROP_CATALOG", "ALTER_CATALOG",
		"CREATE_DATACONNECTOR", "DROP_DATACONNECTOR", "ALTER_DATACONNECTOR":
		return []cache.Entity{{Level: cache.LevelAll}}
	}
	switch {
	case db != "" && tbl != "":
		return []cache.Entity{table(db, tbl)}
	case db != "":
		return []cache.Entity{{Level: cache.LevelDatabase, Cat: cat, DB: db}}
	}
	return []cache.Entity{{Level: cache.LevelAll}}
}

// renameNames finds (db, table) pairs in an ALTER_TABLE message: the
// before and after Table objects (Thrift JSON: field 1 tableName, 2
// dbName), and the plain keys some producers use.
func renameNames(ev Event) [][2]string {
	m := hms.NotificationJSON(ev.Message, ev.Format)
	if m == nil {
		return nil
	}
	var out [][2]string
	for _, k := range []string{"tableObjBeforeJson", "tableObjAfterJson"} {
		var s string
		if json.Unmarshal(m[k], &s) != nil {
			continue
		}
		var obj map[string]map[string]json.RawMessage
		if json.Unmarshal([]byte(s), &obj) != nil {
			continue
		}
		var name, db string
		json.Unmarshal(obj["1"]["str"], &name)
		json.Unmarshal(obj["2"]["str"], &db)
		if name != "" && db != "" {
			out = append(out, [2]string{hms.NormalizeString(db), hms.NormalizeString(name)})
		}
	}
	for _, p := range [][2]string{{"oldDb", "oldTable"}, {"db", "table"}} {
		var db, name string
		json.Unmarshal(m[p[0]], &db)
		json.Unmarshal(m[p[1]], &name)
		if name != "" && db != "" {
			out = append(out, [2]string{hms.NormalizeString(db), hms.NormalizeString(name)})
		}
	}
	return out
}

func commitTables(ev Event, cat string) []cache.Entity {
	m := hms.NotificationJSON(ev.Message, ev.Format)
	var dbs, tbls []string
	if m != nil {
		json.Unmarshal(m["databases"], &dbs)
		json.Unmarshal(m["tables"], &tbls)
	}
	var out []cache.Entity
	if len(dbs) == len(tbls) {
		for i := range tbls {
			out = append(out, cache.Entity{Level: cache.LevelTable, Cat: cat, DB: hms.NormalizeString(dbs[i]), Table: hms.NormalizeString(tbls[i])})
		}
	}
	return out
}
