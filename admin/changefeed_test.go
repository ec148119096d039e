package admin

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/changes/kafka"
	"github.com/hmsproxy/hmsproxy/changes/outbox"
)

// fixedFeed is a hand-written ChangeFeed with fixed counters.
type fixedFeed struct{ st kafka.Stats }

func (f fixedFeed) Stats() kafka.Stats { return f.st }

// TestChangeFeedLossesShown: the feed's losses reach /metrics by reason
// and the status page, with its outbox and stall.
func TestChangeFeedLossesShown(t *testing.T) {
	st := kafka.Stats{Topic: "changes", Format: "atlas", FromWrites: 7, FromLog: 2, Claimed: 5, Produced: 4,
		LostOutbox: 3, LostLogGap: 1, Lost: 4, Stalled: true, LastError: "kafka: records not acknowledged in time",
		LastErrorAt: time.Unix(1764745200, 0), Outbox: outbox.Stats{Waiting: 12, Bytes: 4096, MaxBytes: 1 << 20}}
	e := startEnv(t, envOpts{changeFeed: fixedFeed{st}})
	series, _ := scrape(t, e.url)
	wantSeries(t, series, map[string]float64{
		`hmsproxy_changefeed_lost_total{reason="outbox_full"}`: 3,
		`hmsproxy_changefeed_lost_total{reason="log_gap"}`:     1,
		`hmsproxy_changefeed_lost_total{reason="queue_full"}`:  0,
		`hmsproxy_changefeed_changes_total{source="proxy"}`:    7,
		`hmsproxy_changefeed_changes_total{source="eventlog"}`: 2,
		`hmsproxy_changefeed_outbox_records`:                   12,
		`hmsproxy_changefeed_stalled`:                          1,
		`hmsproxy_changefeed_outbox_limit_bytes`:               1 << 20,
	})
	resp, err := http.Get(e.url + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		ChangeFeed *changeFeedStatus `json:"change_feed"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	cf := body.ChangeFeed
	if cf == nil || cf.Lost != 4 || cf.LostOutbox != 3 || !cf.Stalled || cf.OutboxRecords != 12 || cf.Format != "atlas" {
		t.Fatalf("status change_feed %+v; want 4 lost (3 outbox), stalled, 12 waiting", cf)
	}
}
