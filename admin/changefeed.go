package admin

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hmsproxy/hmsproxy/changes/kafka"
)

// ChangeFeed is the Kafka change feed; *kafka.Feed implements it.
type ChangeFeed interface {
	Stats() kafka.Stats
}

// changeFeedCollector exports the feed's counters at scrape time.
type changeFeedCollector struct {
	src                                      ChangeFeed
	changes, claimed, produced, produceErrs  *prometheus.Desc
	lost, outboxRecords, outboxBytes, outMax *prometheus.Desc
	stalled                                  *prometheus.Desc
}

func newChangeFeedCollector(src ChangeFeed) *changeFeedCollector {
	return &changeFeedCollector{src: src,
		changes:       prometheus.NewDesc("hmsproxy_changefeed_changes_total", "Changes this node put in its outbox, by source: proxy (writes through this node), eventlog (the leader's, from the notification log).", []string{"source"}, nil),
		claimed:       prometheus.NewDesc("hmsproxy_changefeed_claimed_total", "Notification-log events the leader did not publish because a node had published their write.", nil, nil),
		produced:      prometheus.NewDesc("hmsproxy_changefeed_produced_total", "Records Kafka acknowledged.", nil, nil),
		produceErrs:   prometheus.NewDesc("hmsproxy_changefeed_produce_errors_total", "Records Kafka refused; they are sent again from the outbox.", nil, nil),
		lost:          prometheus.NewDesc("hmsproxy_changefeed_lost_total", "Changes the feed will never carry, by reason: queue_full (writes faster than the outbox takes them), outbox_full (Kafka away longer than the outbox holds), log_gap (events purged from the notification log before the feed read them).", []string{"reason"}, nil),
		outboxRecords: prometheus.NewDesc("hmsproxy_changefeed_outbox_records", "Records in the outbox that Kafka has not acknowledged.", nil, nil),
		outboxBytes:   prometheus.NewDesc("hmsproxy_changefeed_outbox_bytes", "Bytes of those records on disk.", nil, nil),
		outMax:        prometheus.NewDesc("hmsproxy_changefeed_outbox_limit_bytes", "The outbox's bound (change_feed.kafka.outbox_max_bytes).", nil, nil),
		stalled:       prometheus.NewDesc("hmsproxy_changefeed_stalled", "1 while the oldest record sent has waited for Kafka longer than change_feed.kafka.delivery_timeout.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *changeFeedCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.changes, c.claimed, c.produced, c.produceErrs, c.lost, c.outboxRecords, c.outboxBytes, c.outMax, c.stalled} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *changeFeedCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats()
	ch <- constMetric(c.changes, prometheus.CounterValue, float64(st.FromWrites), "proxy")
	ch <- constMetric(c.changes, prometheus.CounterValue, float64(st.FromLog), "eventlog")
	ch <- constMetric(c.claimed, prometheus.CounterValue, float64(st.Claimed))
	ch <- constMetric(c.produced, prometheus.CounterValue, float64(st.Produced))
	ch <- constMetric(c.produceErrs, prometheus.CounterValue, float64(st.ProduceErrors))
	ch <- constMetric(c.lost, prometheus.CounterValue, float64(st.LostQueueFull), "queue_full")
	ch <- constMetric(c.lost, prometheus.CounterValue, float64(st.LostOutbox), "outbox_full")
	ch <- constMetric(c.lost, prometheus.CounterValue, float64(st.LostLogGap), "log_gap")
	ch <- constMetric(c.outboxRecords, prometheus.GaugeValue, float64(st.Outbox.Waiting))
	ch <- constMetric(c.outboxBytes, prometheus.GaugeValue, float64(st.Outbox.Bytes))
	ch <- constMetric(c.outMax, prometheus.GaugeValue, float64(st.Outbox.MaxBytes))
	stalled := 0.0
	if st.Stalled {
		stalled = 1
	}
	ch <- constMetric(c.stalled, prometheus.GaugeValue, stalled)
}

// changeFeedStatus is the change feed on the status page.
type changeFeedStatus struct {
	Topic         string     `json:"topic"`
	Format        string     `json:"format"`
	FromWrites    uint64     `json:"from_writes"`
	FromLog       uint64     `json:"from_log"`
	Claimed       uint64     `json:"claimed"`
	Produced      uint64     `json:"produced"`
	Lost          uint64     `json:"lost"`
	LostQueueFull uint64     `json:"lost_queue_full"`
	LostOutbox    uint64     `json:"lost_outbox_full"`
	LostLogGap    uint64     `json:"lost_log_gap"`
	OutboxRecords int64      `json:"outbox_records"`
	OutboxBytes   int64      `json:"outbox_bytes"`
	OutboxMax     int64      `json:"outbox_limit_bytes"`
	Stalled       bool       `json:"stalled"`
	LastError     string     `json:"last_error,omitempty"`
	LastErrorAt   *time.Time `json:"last_error_at,omitempty"`
	LastProduceAt *time.Time `json:"last_produce_at,omitempty"`
}

func takeChangeFeed(src ChangeFeed) *changeFeedStatus {
	if src == nil {
		return nil
	}
	st := src.Stats()
	cs := &changeFeedStatus{Topic: st.Topic, Format: st.Format, FromWrites: st.FromWrites, FromLog: st.FromLog,
		Claimed: st.Claimed, Produced: st.Produced, Lost: st.Lost, LostQueueFull: st.LostQueueFull,
		LostOutbox: st.LostOutbox, LostLogGap: st.LostLogGap, OutboxRecords: st.Outbox.Waiting,
		OutboxBytes: st.Outbox.Bytes, OutboxMax: st.Outbox.MaxBytes, Stalled: st.Stalled, LastError: st.LastError}
	if !st.LastErrorAt.IsZero() {
		cs.LastErrorAt = ptr(st.LastErrorAt)
	}
	if !st.LastProduceAt.IsZero() {
		cs.LastProduceAt = ptr(st.LastProduceAt)
	}
	return cs
}
