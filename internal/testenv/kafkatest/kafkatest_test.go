package kafkatest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestKafkaBrokerRoundTrip: the test bed's broker takes a record on its
// plain listener and hands it back; its SASL listener refuses a wrong
// password and takes the right one.
func TestKafkaBrokerRoundTrip(t *testing.T) {
	b := Shared(t)
	topic := b.Topic(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name, addr, password string
		ok                   bool
	}{
		{"plaintext", b.Addr, "", true},
		{"sasl", b.SASLAddr, SASLPassword, true},
		{"sasl wrong password", b.SASLAddr, "wrong", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []kgo.Opt{kgo.SeedBrokers(tc.addr), kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(3 * time.Second)}
			if tc.password != "" {
				opts = append(opts, kgo.SASL(plain.Auth{User: SASLUser, Pass: tc.password}.AsMechanism()))
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			err = cl.ProduceSync(ctx, &kgo.Record{Key: []byte(tc.name), Value: []byte("v")}).FirstErr()
			if (err == nil) != tc.ok {
				t.Fatalf("produce: got err %v; want ok=%v", err, tc.ok)
			}
		})
	}
	recs, err := b.Consume(ctx, topic, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range recs {
		got[string(r.Key)] = true
	}
	if !got["plaintext"] || !got["sasl"] || len(recs) != 2 {
		t.Fatalf("got records %v; want plaintext and sasl", got)
	}
}
