// Package changes appends normalised metastore change events to a bounded
// Redis stream, for lineage and audit consumers that want every engine's
// writes seen at the metastore edge.
//
// Each stream entry has one field, "c", holding a JSON object:
//
//	{"type":"alter_table","cat":"hive","db":"sales","table":"orders",
//	 "level":"table","source":"proxy","ok":true,"time":"2026-11-30T10:00:00.123Z"}
//
// type is the Thrift method of a write seen by the proxy (source "proxy")
// or the notification-log event type (source "eventlog", with "event_id").
// level says what changed: all, database, table, partitions or function.
// ok is false when the metastore refused the write or its outcome is
// unknown. Entries are appended asynchronously, never on a client's path;
// when the queue is full they are dropped and counted.
package changes

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/cache"
)

// Change is one normalised change event.
type Change struct {
	Type    string    `json:"type"`
	Cat     string    `json:"cat,omitempty"`
	DB      string    `json:"db,omitempty"`
	Table   string    `json:"table,omitempty"`
	Level   string    `json:"level"`
	Source  string    `json:"source"`
	OK      bool      `json:"ok"`
	EventID int64     `json:"event_id,omitempty"`
	Time    time.Time `json:"time"`
}

// FromEntities builds the change events of one write or event.
func FromEntities(typ, source string, ok bool, eventID int64, at time.Time, ents []cache.Entity) []Change {
	out := make([]Change, 0, len(ents))
	for _, e := range ents {
		out = append(out, Change{Type: typ, Cat: e.Cat, DB: e.DB, Table: e.Table, Level: e.Level.String(),
			Source: source, OK: ok, EventID: eventID, Time: at.UTC()})
	}
	return out
}

// Config configures a Stream. Client and Key are required.
type Config struct {
	Client redis.UniversalClient
	// Key is the stream, e.g. "hmsproxy:changes:<upstream>".
	Key string
	// MaxLen trims the stream to about this many entries. Default 1,000,000.
	MaxLen int64
	// Queue bounds events waiting to be appended. Default 10,000.
	Queue  int
	Logger *slog.Logger
}

// Stream appends change events in the background.
type Stream struct {
	cfg     Config
	q       *Queue[Change]
	dropped atomic.Uint64
	written atomic.Uint64
	wg      sync.WaitGroup
}

// New starts the appender; Close stops it after draining the queue.
func New(cfg Config) (*Stream, error) {
	if cfg.Client == nil || cfg.Key == "" {
		return nil, errors.New("changes: client and key are required")
	}
	if cfg.MaxLen <= 0 {
		cfg.MaxLen = 1_000_000
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 10_000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Stream{cfg: cfg, q: NewQueue[Change](cfg.Queue)}
	s.wg.Add(1)
	go s.run()
	return s, nil
}

// Add queues changes; it never blocks. After Close the changes are
// dropped and counted: a write may still finish while the proxy stops.
func (s *Stream) Add(cs ...Change) {
	for _, c := range cs {
		if !s.q.Put(c) {
			s.dropped.Add(1)
		}
	}
}

// Wrote queues the change events of a write seen by the proxy (source
// "proxy"); it never blocks. It makes a Stream the proxy's
// WriteObserver.
func (s *Stream) Wrote(method string, ents []cache.Entity, ok bool) {
	s.Add(FromEntities(method, "proxy", ok, 0, time.Now(), ents)...)
}

// Written and Dropped count events.
func (s *Stream) Written() uint64 { return s.written.Load() }
func (s *Stream) Dropped() uint64 { return s.dropped.Load() }

// Close drains the queue (bounded by ctx) and stops. Safe twice.
func (s *Stream) Close(ctx context.Context) {
	s.q.Close()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (s *Stream) run() {
	defer s.wg.Done()
	for c := range s.q.Items() {
		body, err := json.Marshal(c)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = s.cfg.Client.XAdd(ctx, &redis.XAddArgs{Stream: s.cfg.Key, MaxLen: s.cfg.MaxLen, Approx: true,
			Values: []any{"c", body}}).Err()
		cancel()
		if err != nil {
			s.dropped.Add(1)
			s.cfg.Logger.Debug("change event not appended", "err", err)
			continue
		}
		s.written.Add(1)
	}
}
