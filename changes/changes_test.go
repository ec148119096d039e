package changes

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
)

func TestStreamAppends(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	s, err := New(Config{Client: c, Key: "hmsproxy:changes:test", MaxLen: 100})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	s.Add(FromEntities("alter_table", "proxy", true, 0, at, []cache.Entity{
		{Level: cache.LevelTable, Cat: "hive", DB: "sales", Table: "orders"},
		{Level: cache.LevelTable, Cat: "hive", DB: "sales", Table: "orders_v2"},
	})...)
	s.Add(FromEntities("DROP_PARTITION", "eventlog", true, 42, at, []cache.Entity{{Level: cache.LevelPartitions, Cat: "hive", DB: "sales", Table: "orders"}})...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.Close(ctx)
	msgs, err := c.XRange(ctx, "hmsproxy:changes:test", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 || s.Written() != 3 {
		t.Fatalf("got %d entries (%d written); want 3", len(msgs), s.Written())
	}
	var last Change
	if err := json.Unmarshal([]byte(msgs[2].Values["c"].(string)), &last); err != nil {
		t.Fatal(err)
	}
	want := Change{Type: "DROP_PARTITION", Cat: "hive", DB: "sales", Table: "orders", Level: "partitions", Source: "eventlog", OK: true, EventID: 42, Time: at}
	if last != want {
		t.Fatalf("got %+v; want %+v", last, want)
	}
}

func TestStreamNeverBlocks(t *testing.T) {
	r := redistest.Start(t)
	s, _ := New(Config{Client: r.Client(), Key: "k", Queue: 1})
	r.Stop() // appends fail; Add must still return at once
	start := time.Now()
	for i := 0; i < 1000; i++ {
		s.Add(Change{Type: "x"})
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("Add blocked for %v", d)
	}
	if s.Dropped() == 0 {
		t.Fatal("no drops counted with a full queue")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s.Close(ctx)
}

// TestWroteAfterClose: a write that finishes while the proxy stops must
// not crash it on the closed queue; its events are counted as dropped.
func TestWroteAfterClose(t *testing.T) {
	r := redistest.Start(t)
	s, err := New(Config{Client: r.Client(), Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s.Close(ctx)
	s.Close(ctx)
	s.Wrote("alter_table", []cache.Entity{{Level: cache.LevelTable, Cat: "hive", DB: "d", Table: "t"}}, true)
	if got := s.Dropped(); got != 1 {
		t.Fatalf("dropped %d; want 1", got)
	}
}

// TestQueuePutRacesClose: puts racing Close never send on the closed
// channel (a panic), and each either lands in Items or is refused, for
// its sender to count.
func TestQueuePutRacesClose(t *testing.T) {
	const senders, puts = 4, 100
	q := NewQueue[int](64)
	var refused atomic.Int64
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for i := range puts {
				if !q.Put(i) {
					refused.Add(1)
				}
			}
		})
	}
	q.Close()
	wg.Wait()
	got := 0
	for range q.Items() {
		got++
	}
	if int64(got)+refused.Load() != senders*puts {
		t.Fatalf("%d queued + %d refused; want %d in all", got, refused.Load(), senders*puts)
	}
	if q.Put(1) {
		t.Fatal("a put after Close was queued")
	}
}
