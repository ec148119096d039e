package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/hmsproxy/hmsproxy/changes/feed"
	"github.com/hmsproxy/hmsproxy/changes/outbox"
	"github.com/hmsproxy/hmsproxy/internal/testenv/kafkatest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
)

func TestMain(m *testing.M) { os.Exit(kafkatest.Main(m)) }

func newFeed(t *testing.T, cfg Config, maxBytes int64) *Feed {
	t.Helper()
	ob, err := outbox.Open(outbox.Config{Dir: t.TempDir(), MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Outbox = ob
	if cfg.Claims == nil {
		cfg.Claims = &MemClaims{}
	}
	cfg.Group, cfg.Node = "g", "n1"
	if cfg.Grace == 0 {
		cfg.Grace = 100 * time.Millisecond
	}
	if cfg.DeliveryTimeout == 0 {
		cfg.DeliveryTimeout = 2 * time.Second
	}
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.Close(ctx)
		ob.Close()
	})
	return f
}

func table(name string) []byte {
	return hmsreq.Args(hmsreq.Table{DB: "sales", Name: name, SD: hmsreq.TextSD("file:/w/" + name),
		PartKeys: []hmsreq.Column{{Name: "dt", Type: "string"}}}.Field(1))
}

func names(db, tbl string) []byte { return hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, tbl)) }

func parts(tbl string, vals ...string) []byte {
	var ps []hmsreq.Partition
	for _, v := range vals {
		ps = append(ps, hmsreq.Partition{DB: "sales", Table: tbl, Values: []string{v}, SD: hmsreq.TextSD("file:/w/p")})
	}
	return hmsreq.Args(hmsreq.Partitions(1, ps...))
}

// consumed is what arrived: the native changes by key, the keys in
// arrival order per partition key, and the Kafka partition of each.
type consumed struct {
	byKey     map[string]feed.Change
	order     map[string][]string
	partition map[string]map[int32]bool
	dups      int
}

func consume(t *testing.T, b *kafkatest.Broker, topic string, want int) consumed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	recs, err := b.Consume(ctx, topic, want)
	if err != nil {
		t.Fatal(err)
	}
	// Anything past want would be a duplicate or a change published twice:
	// read a little longer to see it.
	more, _ := func() ([]*kgo.Record, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		return b.Consume(ctx, topic, want+1)
	}()
	if len(more) > len(recs) {
		recs = more
	}
	c := consumed{byKey: map[string]feed.Change{}, order: map[string][]string{}, partition: map[string]map[int32]bool{}}
	for _, r := range recs {
		var ch feed.Change
		if err := json.Unmarshal(r.Value, &ch); err != nil {
			t.Fatalf("record %s: %v", r.Key, err)
		}
		if string(r.Key) != ch.Key {
			t.Fatalf("record key %s; its change says %s", r.Key, ch.Key)
		}
		if _, dup := c.byKey[ch.Key]; dup {
			c.dups++
			continue
		}
		c.byKey[ch.Key] = ch
		pk := ch.PartitionKey()
		c.order[pk] = append(c.order[pk], ch.Type+" "+ch.Source)
		if c.partition[pk] == nil {
			c.partition[pk] = map[int32]bool{}
		}
		c.partition[pk][r.Partition] = true
	}
	return c
}

// TestKafkaFeedPublishesEachChangeOnce: the writes through the node are
// published by the node, their echoes in the log are not published
// again, and the log's changes that bypassed the node are; each table's
// changes arrive on one partition, in order.
func TestKafkaFeedPublishesEachChangeOnce(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.Topic(t, 3)
	f := newFeed(t, Config{Brokers: []string{b.Addr}, Topic: topic}, 0)
	f.Wrote("create_table", table("t1"), "alice", true)
	f.Wrote("add_partitions", parts("t1", "1", "2"), "alice", true)
	f.Wrote("alter_table", hmsreq.Args(hmsreq.Str(1, "sales"), hmsreq.Str(2, "t1"), hmsreq.Table{DB: "sales", Name: "t1", SD: hmsreq.TextSD("file:/w/t1")}.Field(3)), "alice", true)
	f.Wrote("create_table", table("t2"), "bob", true)
	f.Wrote("drop_table", names("sales", "t2"), "bob", true)
	f.Wrote("drop_table", names("sales", "t9"), "bob", false) // refused: no change
	wait.Eventually(t, 5*time.Second, func() bool { return f.Stats().FromWrites == 5 }, "the node's writes in the outbox")
	events := []feed.Event{
		{ID: 101, Type: "CREATE_TABLE", DB: "sales", Table: "t1"},
		{ID: 102, Type: "ADD_PARTITION", DB: "sales", Table: "t1", Message: `{"partitions":[{"dt":"1"},{"dt":"2"}]}`},
		{ID: 103, Type: "CREATE_TABLE", DB: "sales", Table: "t3"}, // bypassed the node
		{ID: 104, Type: "ALTER_TABLE", DB: "sales", Table: "t1"},
		{ID: 105, Type: "CREATE_TABLE", DB: "sales", Table: "t2"},
		{ID: 106, Type: "DROP_TABLE", DB: "sales", Table: "t2"},
		{ID: 107, Type: "ADD_PARTITION", DB: "sales", Table: "t3", Message: `{"partitions":[{"dt":"1"}]}`},
		{ID: 108, Type: "OPEN_TXN"},
	}
	fetched := time.Now()
	for _, ev := range events {
		f.Event(context.Background(), ev, fetched)
	}
	got := consume(t, b, topic, 7)
	if len(got.byKey) != 7 || got.dups != 0 {
		t.Fatalf("got %d changes and %d duplicates; want 7 and none: %v", len(got.byKey), got.dups, got.order)
	}
	want := map[string][]string{
		"sales.t1": {"CREATE_TABLE proxy", "ADD_PARTITION proxy", "ALTER_TABLE proxy"},
		"sales.t2": {"CREATE_TABLE proxy", "DROP_TABLE proxy"},
		"sales.t3": {"CREATE_TABLE eventlog", "ADD_PARTITION eventlog"},
	}
	for pk, w := range want {
		if fmt.Sprint(got.order[pk]) != fmt.Sprint(w) {
			t.Errorf("%s: got %v; want %v", pk, got.order[pk], w)
		}
		if len(got.partition[pk]) != 1 {
			t.Errorf("%s spread over partitions %v; want one", pk, got.partition[pk])
		}
	}
	if c := got.byKey["g/e/103"]; c.EventID != 103 {
		t.Errorf("the bypassing create came as %+v", c)
	}
	if st := f.Stats(); st.Claimed != 5 || st.FromLog != 2 || st.Lost != 0 {
		t.Errorf("got %+v; want 5 claimed, 2 from the log, none lost", st)
	}
}

// TestKafkaOutageOutboxCatchesUp: with the broker away, writes are
// queued without waiting, the producer keeps failing and the outbox
// keeps the changes; when the broker is back, every one arrives. A
// second feed whose outbox is too small counts what it could not keep.
func TestKafkaOutageOutboxCatchesUp(t *testing.T) {
	b := kafkatest.Start(t)
	topic := b.Topic(t, 3)
	f := newFeed(t, Config{Brokers: []string{b.Addr}, Topic: topic}, 0)
	small := newFeed(t, Config{Brokers: []string{b.Addr}, Topic: topic + "-small"}, 4096)
	f.Wrote("create_table", table("warm"), "", true)
	wait.Eventually(t, 30*time.Second, func() bool { return f.Stats().Produced == 1 }, "the first record produced")
	b.Stop(t)
	const n = 300
	for i := range n {
		f.Wrote("create_table", table(fmt.Sprintf("t%d", i)), "", true)
		small.Wrote("create_table", table(fmt.Sprintf("t%d", i)), "", true)
	}
	wait.Eventually(t, 30*time.Second, func() bool {
		st := f.Stats()
		return st.FromWrites == n+1 && st.Stalled
	}, "every write in the outbox, and the feed stalled")
	if st := f.Stats(); st.Produced != 1 || st.Outbox.Waiting != n || st.Lost != 0 {
		t.Fatalf("during the outage: %+v; want 1 produced, %d waiting, none lost", st, n)
	}
	wait.Eventually(t, 10*time.Second, func() bool { return small.Stats().FromWrites+small.Stats().Lost == n }, "the small feed's writes handled")
	if st := small.Stats(); st.LostOutbox == 0 || st.Outbox.Bytes > 4096 {
		t.Fatalf("small outbox: %+v; want losses counted and at most 4096 bytes", st)
	}
	b.Restart(t)
	got := consume(t, b, topic, n+1)
	if len(got.byKey) != n+1 {
		t.Fatalf("after the outage: %d changes; want %d", len(got.byKey), n+1)
	}
	wait.Eventually(t, 30*time.Second, func() bool { st := f.Stats(); return st.Outbox.Waiting == 0 && !st.Stalled }, "the outbox drained")
}

// TestKafkaSASLAndAtlasFormat: the feed authenticates with SASL PLAIN
// and publishes Atlas notifications; a wrong password produces nothing
// and says so in the stats.
func TestKafkaSASLAndAtlasFormat(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.Topic(t, 1)
	good := newFeed(t, Config{Brokers: []string{b.SASLAddr}, Topic: topic, Format: FormatAtlas, Cluster: "prod",
		SASL: plain.Auth{User: kafkatest.SASLUser, Pass: kafkatest.SASLPassword}.AsMechanism()}, 0)
	bad := newFeed(t, Config{Brokers: []string{b.SASLAddr}, Topic: topic, Format: FormatAtlas, Cluster: "prod",
		SASL: plain.Auth{User: kafkatest.SASLUser, Pass: "wrong"}.AsMechanism()}, 0)
	good.Wrote("create_table", table("orders"), "alice", true)
	bad.Wrote("create_table", table("other"), "alice", true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := b.Consume(ctx, topic, 1)
	if err != nil {
		t.Fatal(err)
	}
	v := string(recs[0].Value)
	for _, w := range []string{`"type":"ENTITY_CREATE_V2"`, `"qualifiedName":"sales.orders@prod"`, `"user":"alice"`} {
		if !strings.Contains(v, w) {
			t.Fatalf("Atlas message %s lacks %s", v, w)
		}
	}
	wait.Eventually(t, 20*time.Second, func() bool { return bad.Stats().LastError != "" }, "the wrong password failing")
	if st := bad.Stats(); st.Produced != 0 || st.Outbox.Waiting != 1 || st.LastError == "" {
		t.Fatalf("wrong password: %+v; want nothing produced, the change kept, an error", st)
	}
}

// TestKafkaClaims: both claim stores take a claim once, take an event's
// claims only when all are there, and forget claims after their TTL.
func TestKafkaClaims(t *testing.T) {
	r := redistest.Start(t)
	now := time.Now()
	clock := func() time.Time { return now }
	for _, tc := range []struct {
		name   string
		claims Claims
		expire func(t *testing.T)
	}{
		{"redis", &RedisClaims{Client: r.Client(), Prefix: "c:", TTL: 300 * time.Millisecond}, func(t *testing.T) {
			wait.Eventually(t, 5*time.Second, func() bool { return r.Client().Exists(context.Background(), "c:B|d|t").Val() == 0 },
				"the claim's key outlived its TTL")
		}},
		{"memory", &MemClaims{TTL: time.Minute, Now: clock}, func(*testing.T) { now = now.Add(2 * time.Minute) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := tc.claims
			c.Claim(ctx, []string{"A|d|t"})
			c.Claim(ctx, []string{"P|d|t|1", "P|d|t|2"})
			for _, step := range []struct {
				keys []string
				want bool
			}{
				{[]string{"A|d|t"}, true},
				{[]string{"A|d|t"}, false}, // taken once
				{[]string{"P|d|t|1", "P|d|t|3"}, false},
				{[]string{"P|d|t|1"}, true}, // the failed take took nothing
				{[]string{"P|d|t|2"}, true},
				{nil, false},
			} {
				if got, err := c.Take(ctx, step.keys); got != step.want || err != nil {
					t.Fatalf("take %q: got %v, %v; want %v", step.keys, got, err, step.want)
				}
			}
			c.Claim(ctx, []string{"B|d|t"})
			tc.expire(t)
			if got, _ := c.Take(ctx, []string{"B|d|t"}); got {
				t.Fatal("an expired claim was taken")
			}
		})
	}
}

// TestKafkaClaimsHungRedis: with the claims' Redis hung (its process
// stopped, so each claim waits out its timeout), writes keep flowing to
// Kafka, unclaimed, instead of waiting a timeout each until the queue
// overflows; once Redis answers again, writes are claimed again.
func TestKafkaClaimsHungRedis(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.Topic(t, 1)
	r := redistest.Start(t)
	claims := &RedisClaims{Client: r.Client(), Prefix: "c:"}
	f := newFeed(t, Config{Brokers: []string{b.Addr}, Topic: topic, Claims: claims, Queue: 64}, 0)
	r.Freeze()
	defer r.Thaw()
	// Writes at a planner's pace for about 2 s: each claim would take the
	// client's 2 s read timeout, so one by one they would need 40 s.
	const n = 20
	start := time.Now()
	for i := range n {
		f.Wrote("create_table", table(fmt.Sprintf("h%d", i)), "", true)
		time.Sleep(100 * time.Millisecond) // the writers' pace, not a wait for the feed
	}
	wait.Eventually(t, 10*time.Second, func() bool { return f.Stats().FromWrites == n }, "every write appended while Redis hangs")
	if st := f.Stats(); st.Lost != 0 || !strings.Contains(st.LastError, "claims skipped") {
		t.Fatalf("while Redis hangs: %+v; want nothing lost and the claim failure said", st)
	}
	if got := consume(t, b, topic, n); len(got.byKey) != n {
		t.Fatalf("%d of %d changes published", len(got.byKey), n)
	}
	t.Logf("%d writes appended within %v of the first", n, time.Since(start).Round(time.Millisecond))
	r.Thaw()
	// Past the back-off, the next write's claim goes through: the leader
	// would skip its event.
	wait.Eventually(t, 15*time.Second, func() bool {
		f.Wrote("create_table", table("after"), "", true)
		ok, _ := claims.Take(context.Background(), []string{"CREATE_TABLE|sales|after"})
		return ok
	}, "a write claimed once Redis answers")
}

// TestKafkaTLSVerifiesTheBroker: over TLS, a feed that trusts the
// broker's certificate publishes; one that trusts only the system roots
// publishes nothing and says why.
func TestKafkaTLSVerifiesTheBroker(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.Topic(t, 1)
	pem, err := os.ReadFile(b.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", b.CAFile)
	}
	trusting := newFeed(t, Config{Brokers: []string{b.SSLAddr}, Topic: topic,
		TLS: func() *tls.Config { return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12} }}, 0)
	system := newFeed(t, Config{Brokers: []string{b.SSLAddr}, Topic: topic,
		TLS: func() *tls.Config { return &tls.Config{MinVersion: tls.VersionTLS12} }}, 0)
	trusting.Wrote("create_table", table("over_tls"), "alice", true)
	system.Wrote("create_table", table("unverified"), "alice", true)
	got := consume(t, b, topic, 1)
	if len(got.byKey) != 1 || got.order["sales.over_tls"] == nil {
		t.Fatalf("over TLS got %v; want the trusting feed's one change", got.order)
	}
	wait.Eventually(t, 20*time.Second, func() bool { return system.Stats().LastError != "" }, "the unverified broker refused")
	if st := system.Stats(); st.Produced != 0 || st.Outbox.Waiting != 1 {
		t.Fatalf("unverified broker: %+v; want nothing produced, the change kept", st)
	}
}
