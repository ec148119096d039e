package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/changes/outbox"
)

// BenchmarkWrote is the feed's cost on a client's path: a write's
// request copied and queued (the broker address answers nothing: Kafka
// is never on this path). The floor beside it is the copy alone.
func BenchmarkWrote(b *testing.B) {
	args := table("orders")
	b.Run("copy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = append([]byte(nil), args...)
		}
	})
	b.Run("wrote", func(b *testing.B) {
		ob, err := outbox.Open(outbox.Config{Dir: b.TempDir(), MaxBytes: 1 << 30})
		if err != nil {
			b.Fatal(err)
		}
		f, err := New(Config{Brokers: []string{"127.0.0.1:1"}, Topic: "t", Outbox: ob, Claims: &MemClaims{}, Queue: 1 << 20})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			f.Wrote("create_table", args, "alice", true)
		}
		b.StopTimer()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		f.Close(ctx)
		ob.Close()
	})
}
