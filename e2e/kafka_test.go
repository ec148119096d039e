package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/changes/feed"
	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/internal/testenv/kafkatest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proctest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/redistest"
	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
)

// feedNode is one hmsproxy process with the Kafka change feed on.
type feedNode struct {
	addr, admin string
}

func freeLoopback(t *testing.T) string {
	ln := proxytest.Listen(t)
	defer ln.Close()
	return ln.Addr().String()
}

// startFeedNode runs the binary in front of ms, in group name, with the
// feed on topic in format; extra are more flags.
func startFeedNode(t *testing.T, bin string, ms *metastore, redisAddr, broker, name, topic, format string, extra ...string) *feedNode {
	t.Helper()
	n := &feedNode{addr: freeLoopback(t), admin: freeLoopback(t)}
	args := append([]string{"--upstream.uris", "thrift://" + ms.addr, "--upstream.name", name, "--listen", n.addr,
		"--admin.listen", n.admin, "--redis.url", redisAddr, "--redis.heartbeat", "200ms",
		"--change_feed.kafka.brokers", broker, "--change_feed.kafka.topic", topic,
		"--change_feed.kafka.format", format, "--change_feed.kafka.atlas_cluster", "e2e",
		"--change_feed.kafka.outbox_dir", t.TempDir(), "--change_feed.kafka.grace", "1s",
		"--change_feed.kafka.delivery_timeout", "3s", "--log.format", "json", "--log.level", "warn"}, extra...)
	proctest.Start(t, name+" ("+n.addr+")", exec.Command(bin, args...), os.Interrupt, 15*time.Second)
	proxytest.Eventually(t, "node "+n.addr+" ready", func() bool {
		resp, err := http.Get("http://" + n.admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return n
}

// metric reads one series of the node's /metrics.
func (n *feedNode) metric(t *testing.T, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + n.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 64<<10)
	for {
		k, err := resp.Body.Read(buf)
		b.Write(buf[:k])
		if err != nil {
			break
		}
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	t.Fatalf("no series %s on %s", series, n.admin)
	return 0
}

// logEvents reads the metastore's notification log after id from, with
// the poller the proxy uses.
func logEvents(t *testing.T, ms *metastore, from int64) []eventlog.Event {
	t.Helper()
	caller := &hmsclient.Redialer{Addr: ms.addr}
	defer caller.Close()
	cur := &eventlog.MemCursor{}
	cur.Save(context.Background(), from)
	var out []eventlog.Event
	p, err := eventlog.New(eventlog.Config{Caller: caller, Cursor: cur, Apply: func(context.Context, []cache.Entity) {},
		Drop: func(string) { t.Fatal("the notification log has a gap") }, Changed: func(ev eventlog.Event, _ []cache.Entity) { out = append(out, ev) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out
}

func currentEventID(t *testing.T, ms *metastore) int64 {
	t.Helper()
	caller := &hmsclient.Redialer{Addr: ms.addr}
	defer caller.Close()
	p, _ := eventlog.New(eventlog.Config{Caller: caller, Cursor: &eventlog.MemCursor{}, Apply: func(context.Context, []cache.Entity) {}, Drop: func(string) {}})
	if err := p.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p.Stats().Latest.Load()
}

// feedWrites makes the Go client's writes, through a node or straight to
// the metastore: a database, a partitioned table, partitions added,
// altered and dropped, the table altered, renamed and dropped.
func feedWrites(t *testing.T, c *hmsclient.Client, db string) {
	t.Helper()
	loc := "file:" + t.TempDir()
	tbl := hmsreq.Table{DB: db, Name: "events", Owner: "go", SD: hmsreq.TextSD(loc+"/events", hmsreq.Column{Name: "id", Type: "bigint"}),
		PartKeys: []hmsreq.Column{{Name: "dt", Type: "string"}}}
	part := func(v string) hmsreq.Partition {
		return hmsreq.Partition{DB: db, Table: "events", Values: []string{v}, SD: hmsreq.TextSD(loc + "/events/dt=" + v)}
	}
	renamed := tbl
	renamed.Name = "events_v2"
	for _, w := range []struct {
		method string
		args   []byte
	}{
		{"drop_database", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Bool(2, true), hmsreq.Bool(3, true))},
		{"create_database", hmsreq.Args(hmsreq.Database{Name: db, Location: loc}.Field(1))},
		{"create_table", hmsreq.Args(tbl.Field(1))},
		{"add_partitions", hmsreq.Args(hmsreq.Partitions(1, part("1"), part("2"), part("3")))},
		{"alter_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), part("2").Field(3))},
		{"drop_partition", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), hmsreq.Strings(3, "1"), hmsreq.Bool(4, false))},
		{"alter_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), tbl.Field(3))},
		{"alter_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events"), renamed.Field(3))},
		{"drop_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "events_v2"), hmsreq.Bool(3, false))},
	} {
		call(t, c, w.method, w.args)
	}
}

// feedRecord is one record consumed from a topic.
type feedRecord struct {
	key, value string
	partition  int32
	offset     int64
}

func consumeAll(t *testing.T, broker, topic string, idle time.Duration) []feedRecord {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []feedRecord
	for {
		ctx, cancel := context.WithTimeout(context.Background(), idle)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			out = append(out, feedRecord{key: string(r.Key), value: string(r.Value), partition: r.Partition, offset: r.Offset})
		})
		if n == 0 {
			return out
		}
	}
}

// claimCounts is a multiset of claim keys.
func claimCounts(keys []string) map[string]int {
	m := map[string]int{}
	for _, k := range keys {
		m[k]++
	}
	return m
}

// TestKafkaChangeFeedE2E: HMS 3.1, a real broker and Redis, four proxy
// processes. A Java client (HiveMetaStoreClient) creates, alters,
// renames and drops a table and its partitions through node A of group
// "native"; a Go client does the same through node C of group "atlas";
// more writes go straight to the metastore. Every change the
// notification log records arrives on each group's topic exactly once
// after de-duplication by key, in the log's order per table, whoever
// published it; the atlas topic's messages deserialise with Atlas's own
// classes. Then the broker stops: writes through A keep their latency,
// the outbox holds the changes, and they all arrive once it is back.
func TestKafkaChangeFeedE2E(t *testing.T) {
	if !slices.Contains(versions(t), "3.1") {
		t.Skip("the change feed's e2e runs on HMS 3.1")
	}
	ms := start(t, "3.1")
	r := redistest.Start(t)
	b := kafkatest.Start(t)
	native, atlas := b.Topic(t, 3), b.Topic(t, 3)
	bin := proctest.Hmsproxy(t)
	base := currentEventID(t, ms)
	a := startFeedNode(t, bin, ms, r.Addr, b.Addr, "feed-native", native, "native")
	startFeedNode(t, bin, ms, r.Addr, b.Addr, "feed-native", native, "native") // B: may lead, publishes A's claims' rest
	c := startFeedNode(t, bin, ms, r.Addr, b.Addr, "feed-atlas", atlas, "atlas")

	work := t.TempDir()
	out, err, took := runTimed(exec.Command("bash", filepath.Join(repoRoot(), "testbed/clients/java_client.sh"), "3.1", "thrift://"+a.addr, work))
	if err != nil {
		t.Fatalf("java client through A: %v\n%s", err, out)
	}
	t.Logf("e2e: java client through A in %v", took.Round(time.Millisecond))
	feedWrites(t, dial(t, c.addr), "kf_through_c")
	feedWrites(t, dial(t, ms.addr), "kf_direct")

	events := logEvents(t, ms, base)
	var want []string
	order := map[string]int64{} // claim key -> the log's first event id with it, in order
	for _, ev := range events {
		ch, ok := feed.FromEvent("x", ev, "hive")
		if !ok {
			continue
		}
		for _, k := range ch.ClaimKeys() {
			want = append(want, k)
			if _, seen := order[k]; !seen {
				order[k] = ev.ID
			}
		}
	}
	if len(want) < 20 {
		t.Fatalf("only %d changes in the log after event %d: is the notification log on?", len(want), base)
	}
	// Each group's topic: every change of the log, once, by claim keys.
	var nativeChanges []feed.Change
	within(t, 60*time.Second, "the native topic to carry every change", func() bool {
		nativeChanges = dedup(t, consumeAll(t, b.Addr, native, 2*time.Second))
		var got []string
		for _, ch := range nativeChanges {
			got = append(got, ch.ClaimKeys()...)
		}
		return maps.Equal(claimCounts(got), claimCounts(want))
	}, func() string { return diffClaims(nativeChanges, want) })
	bySource := map[string]int{}
	for _, ch := range nativeChanges {
		bySource[ch.Source]++
	}
	if bySource["proxy"] == 0 || bySource["eventlog"] == 0 {
		t.Fatalf("native topic by source %v; want both the node's writes and the log's", bySource)
	}
	t.Logf("e2e: %d log events, native topic %d changes after de-duplication %v", len(events), len(nativeChanges), bySource)
	checkOrder(t, b.Addr, native, order)
	checkAtlas(t, b.Addr, atlas)
	kafkaOutage(t, a, b, native, ms)
}

// dedup decodes native records, keeping the first of each key.
func dedup(t *testing.T, recs []feedRecord) []feed.Change {
	seen := map[string]bool{}
	var out []feed.Change
	for _, r := range recs {
		if seen[r.key] {
			continue
		}
		seen[r.key] = true
		var ch feed.Change
		if err := json.Unmarshal([]byte(r.value), &ch); err != nil {
			t.Fatalf("record %s: %v", r.key, err)
		}
		out = append(out, ch)
	}
	return out
}

func diffClaims(got []feed.Change, want []string) string {
	g := map[string]int{}
	src := map[string]string{}
	for _, ch := range got {
		for _, k := range ch.ClaimKeys() {
			g[k]++
			src[k] += ch.Source + ":" + ch.Key + " "
		}
	}
	w := claimCounts(want)
	var lines []string
	for k, n := range g {
		if w[k] != n {
			lines = append(lines, fmt.Sprintf("%q: topic %d (%s), log %d", k, n, src[k], w[k]))
		}
	}
	for k, n := range w {
		if _, ok := g[k]; !ok {
			lines = append(lines, fmt.Sprintf("%q: topic 0, log %d", k, n))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// checkOrder: along each Kafka partition, the changes of one table come
// in the log's order.
func checkOrder(t *testing.T, broker, topic string, order map[string]int64) {
	t.Helper()
	last := map[string]int64{} // partition key -> last event id
	for _, ch := range dedup(t, consumeAll(t, broker, topic, 2*time.Second)) {
		keys := ch.ClaimKeys()
		id := order[keys[0]]
		pk := ch.PartitionKey()
		if id < last[pk] {
			t.Errorf("%s: %s (log event %d) after log event %d", pk, ch.Type, id, last[pk])
		}
		last[pk] = id
	}
}

// checkAtlas feeds the atlas topic to Atlas's own deserialiser and looks
// for the Go client's table's life in it.
func checkAtlas(t *testing.T, broker, topic string) {
	t.Helper()
	recs := consumeAll(t, broker, topic, 2*time.Second)
	var lines []string
	seen := map[string]bool{}
	for _, r := range recs {
		if !seen[r.key] {
			seen[r.key] = true
			lines = append(lines, r.value)
		}
	}
	file := filepath.Join(t.TempDir(), "atlas.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err, _ := runTimed(exec.Command("bash", filepath.Join(repoRoot(), "testbed/clients/atlas_reader.sh"), file))
	if err != nil {
		t.Fatalf("Atlas's deserialiser refused the feed: %v\n%s", err, out)
	}
	for _, w := range []string{
		"CREATE hive_db kf_through_c@e2e", "CREATE hive_table kf_through_c.events@e2e",
		"CREATE hive_storagedesc kf_through_c.events@e2e_storage", "CREATE hive_column kf_through_c.events.id@e2e",
		"CREATE hive_partition kf_through_c.events.3@e2e", "UPDATE hive_partition kf_through_c.events.2@e2e",
		"DELETE hive_partition kf_through_c.events.1@e2e", "UPDATE hive_table kf_through_c.events@e2e kf_through_c.events_v2@e2e",
		"DELETE hive_table kf_through_c.events_v2@e2e", "CREATE hive_table kf_direct.events@e2e", "CREATE hive_table hmstb_java.clicks@e2e",
	} {
		if !strings.Contains(string(out), w) {
			t.Errorf("Atlas read no %q in:\n%s", w, out)
		}
	}
	t.Logf("e2e: Atlas's HookMessageDeserializer read %d messages", len(lines))
}

// kafkaOutage stops the broker for KAFKA_OUTAGE_SECONDS (default 5; make
// kafka-outage: 30) while a client writes through A, and compares the
// latency of those writes with as many made just before, broker up.
func kafkaOutage(t *testing.T, a *feedNode, b *kafkatest.Broker, topic string, ms *metastore) {
	t.Helper()
	secs, _ := strconv.Atoi(os.Getenv("KAFKA_OUTAGE_SECONDS"))
	if secs <= 0 {
		secs = 5
	}
	outage := time.Duration(secs) * time.Second
	c := dial(t, a.addr)
	db := "kf_outage"
	dropDatabase(t, c, db)
	call(t, c, "create_database", hmsreq.Args(hmsreq.Database{Name: db, Location: "file:" + t.TempDir()}.Field(1)))
	tbl := hmsreq.Table{DB: db, Name: "t", SD: hmsreq.TextSD("file:" + t.TempDir())}
	call(t, c, "create_table", hmsreq.Args(tbl.Field(1)))
	n := 0
	alter := func() time.Duration {
		n++
		tbl.Params = map[string]string{"n": strconv.Itoa(n)}
		s := time.Now()
		call(t, c, "alter_table", hmsreq.Args(hmsreq.Str(1, db), hmsreq.Str(2, "t"), tbl.Field(3)))
		return time.Since(s)
	}
	var up, down []time.Duration
	for end := time.Now().Add(outage); time.Now().Before(end); {
		up = append(up, alter())
		time.Sleep(50 * time.Millisecond)
	}
	produced := a.metric(t, "hmsproxy_changefeed_produced_total")
	b.Stop(t)
	for end := time.Now().Add(outage); time.Now().Before(end); {
		down = append(down, alter())
		time.Sleep(50 * time.Millisecond)
	}
	waiting := a.metric(t, "hmsproxy_changefeed_outbox_records")
	b.Restart(t)
	p99 := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[(len(s)*99)/100]
	}
	t.Logf("e2e: Kafka down %v: %d writes through A, p99 %v; broker up: %d writes, p99 %v; %v waiting in the outbox at the end",
		outage, len(down), p99(down), len(up), p99(up), waiting)
	if p99(down) > 2*p99(up)+20*time.Millisecond {
		t.Errorf("writes' p99 with Kafka down %v; up %v: the feed made clients wait", p99(down), p99(up))
	}
	if waiting == 0 {
		t.Error("nothing waited in the outbox while the broker was down: was it down?")
	}
	within(t, 60*time.Second, "the feed to catch up", func() bool {
		return a.metric(t, "hmsproxy_changefeed_outbox_records") == 0 && a.metric(t, "hmsproxy_changefeed_produced_total") >= produced+float64(len(down))
	}, func() string { return "" })
	keys := map[string]bool{}
	for _, ch := range dedup(t, consumeAll(t, b.Addr, topic, 2*time.Second)) {
		if ch.DB == db && ch.Type == "ALTER_TABLE" {
			keys[ch.Key] = true
		}
	}
	if len(keys) != n {
		t.Fatalf("%d alters of %s.t on the topic after the outage; want %d", len(keys), db, n)
	}
	if lost := a.metric(t, `hmsproxy_changefeed_lost_total{reason="outbox_full"}`); lost != 0 {
		t.Fatalf("lost %v changes to a full outbox; want none", lost)
	}
}

// within polls cond every half second for up to d; on timeout it fails
// with what it waited for and describe's account of the difference.
func within(t *testing.T, d time.Duration, what string, cond func() bool, describe func() string) {
	t.Helper()
	for end := time.Now().Add(d); ; time.Sleep(500 * time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("not within %v: %s\n%s", d, what, describe())
		}
	}
}
