package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/changes/kafka"
	"github.com/hmsproxy/hmsproxy/changes/outbox"
	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/coherence/leader"
	"github.com/hmsproxy/hmsproxy/ops/housekeeping"
	"github.com/hmsproxy/hmsproxy/ops/worker"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// changeFeedConfig is the change_feed section: the primary group's
// metastore changes published to Kafka (docs/change-feed.md).
type changeFeedConfig struct {
	Kafka struct {
		Brokers      []string  `yaml:"brokers" doc:"Kafka bootstrap brokers, comma-separated host:port; setting them turns the change feed on" note:"each node publishes the writes through it, the leader the notification log's other changes"`
		Topic        string    `yaml:"topic" default:"hmsproxy-changes" doc:"the topic; it must exist (the feed does not create it)" note:"Atlas's hook topic is ATLAS_HOOK"`
		Format       string    `yaml:"format" default:"native" doc:"native (versioned JSON, docs/change-feed.md) or atlas (Apache Atlas v2 hook notifications)"`
		AtlasCluster string    `yaml:"atlas_cluster" doc:"the cluster name in Atlas qualified names (db.table@cluster); required with format atlas"`
		ClientID     string    `yaml:"client_id" default:"hmsproxy" doc:"the producer's client id"`
		TLS          tlsConfig `yaml:"tls" doc:"TLS toward the brokers, keys as upstream.tls (enabled, ca, cert, key, server_name)"`
		SASL         struct {
			Mechanism string `yaml:"mechanism" off:"no SASL" doc:"PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"`
			User      string `yaml:"user" doc:"the SASL user"`
			Password  string `yaml:"password" env:"HMSPROXY_KAFKA_PASSWORD" doc:"the SASL password"`
		} `yaml:"sasl" doc:"SASL toward the brokers"`
		OutboxDir       string        `yaml:"outbox_dir" doc:"directory of the outbox, the file queue that holds changes while Kafka is away; required with brokers" note:"one per node, kept across restarts: what Kafka had not acknowledged is sent after a restart"`
		OutboxMaxBytes  int64         `yaml:"outbox_max_bytes" default:"268435456" doc:"bound of the outbox; changes beyond it are lost, counted in hmsproxy_changefeed_lost_total"`
		Queue           int           `yaml:"queue" default:"10000" doc:"writes waiting to enter the outbox; beyond it they are lost and counted, never waited for"`
		Grace           time.Duration `yaml:"grace" default:"2s" doc:"how long the leader holds a notification-log event before publishing it unless a node claimed it (published its write)"`
		ClaimTTL        time.Duration `yaml:"claim_ttl" default:"10m" doc:"how long a node's claim on an event waits for the event"`
		DeliveryTimeout time.Duration `yaml:"delivery_timeout" default:"10s" doc:"a record not acknowledged by Kafka for this long marks the feed stalled (hmsproxy_changefeed_stalled)"`
	} `yaml:"kafka" doc:"the Kafka sink"`
}

// saslMechanism is the configured SASL mechanism; nil without one.
func (c changeFeedConfig) saslMechanism() (sasl.Mechanism, error) {
	s := c.Kafka.SASL
	switch strings.ToUpper(s.Mechanism) {
	case "":
		return nil, nil
	case "PLAIN":
		return plain.Auth{User: s.User, Pass: s.Password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("change_feed.kafka.sasl.mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism)
}

// newFeed starts the primary group's Kafka change feed when brokers are
// configured, and has the group's writes told to it. It runs after
// newGroups (the node's id is the bus's) and before the proxy exists, so
// it sees every write; it is closed after the proxy, so the last writes
// still enter the outbox.
func (n *node) newFeed() error {
	k := n.cfg.ChangeFeed.Kafka
	if len(k.Brokers) == 0 {
		return nil
	}
	if k.OutboxDir == "" {
		return fmt.Errorf("change_feed.kafka.outbox_dir is required with brokers")
	}
	mech, err := n.cfg.ChangeFeed.saslMechanism()
	if err != nil {
		return err
	}
	tlsFn, err := n.tlsEP.upstream(k.TLS)
	if err != nil {
		return fmt.Errorf("change_feed.kafka.tls: %w", err)
	}
	g := n.groups[0]
	log := n.log.With("component", "changefeed")
	ob, err := outbox.Open(outbox.Config{Dir: k.OutboxDir, MaxBytes: k.OutboxMaxBytes, Logger: log})
	if err != nil {
		return err
	}
	var claims kafka.Claims = &kafka.MemClaims{TTL: k.ClaimTTL}
	if n.rdb != nil {
		claims = &kafka.RedisClaims{Client: n.rdb, TTL: k.ClaimTTL,
			Prefix: coherence.Key("hmsproxy", g.name, "feed:claim:", coherence.Tagged(n.rdb))}
	}
	f, err := kafka.New(kafka.Config{Brokers: k.Brokers, Topic: k.Topic, Format: k.Format, Cluster: k.AtlasCluster,
		Group: g.name, Node: n.nodeID(g), DefaultCatalog: n.cfg.Cache.DefaultCatalog, TLS: tlsFn, SASL: mech,
		ClientID: k.ClientID, Outbox: ob, Claims: claims, Queue: k.Queue, Grace: k.Grace,
		DeliveryTimeout: k.DeliveryTimeout, Logger: log})
	if err != nil {
		ob.Close()
		return err
	}
	n.feed = f
	g.writes.feed = f
	n.onClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.Close(ctx)
		ob.Close()
	})
	log.Info("change feed on", "brokers", k.Brokers, "topic", k.Topic, "format", k.Format)
	return nil
}

// feedTasks is the leader's share of the feed: a notification-log poller
// of its own (its own cursor, so the feed resumes where it stopped, and a
// slow Kafka never delays invalidations) that hands every event to the
// feed, which publishes those no node claimed.
func (n *node) feedTasks(w *workers, g *metastoreGroup, el *leader.Elector) ([]worker.Task, error) {
	if n.feed == nil {
		return nil, nil
	}
	hc, err := n.housekeepingClient(w, g)
	if err != nil {
		return nil, err
	}
	caller := &fetchClock{c: hc}
	var cursor eventlog.Cursor = &eventlog.MemCursor{}
	if n.rdb != nil && el != nil {
		cursor = &eventlog.RedisCursor{Client: n.rdb, Lease: el, Key: coherence.Key("hmsproxy", g.name, "feed-eventlog", coherence.Tagged(n.rdb))}
	}
	f := n.feed
	poller, err := eventlog.New(eventlog.Config{Caller: caller, Cursor: cursor, Batch: n.cfg.EventLog.Batch,
		DefaultCatalog: n.cfg.Cache.DefaultCatalog,
		Apply:          func(context.Context, []cache.Entity) {}, // the invalidation poller's job
		Drop: func(reason string) {
			// The first poll starts at the newest event: nothing lost.
			if reason != "eventlog start" {
				f.LogGap()
			}
		},
		Changed: func(ev eventlog.Event, _ []cache.Entity) {
			f.Event(context.Background(), ev, caller.last())
		},
		Logger: g.logger(n, "changefeed-eventlog")})
	if err != nil {
		return nil, err
	}
	every := n.cfg.EventLog.Interval
	if every <= 0 {
		every = time.Second
	}
	return []worker.Task{{Name: "changefeed-eventlog", Every: every, Jitter: 0.1, Timeout: 5 * time.Minute,
		Scope: worker.LeaderOnly, Run: poller.Poll}}, nil
}

// fetchClock is the feed poller's metastore client: it notes when each
// batch of events came back, the time the feed's grace period counts
// from.
type fetchClock struct {
	c  *housekeeping.Client
	at atomic.Int64 // unix nanoseconds of the last get_next_notification reply
}

func (f *fetchClock) Call(ctx context.Context, method string, args []byte) (wire.Message, error) {
	m, err := f.c.Call(ctx, method, args)
	if method == "get_next_notification" {
		f.at.Store(time.Now().UnixNano())
	}
	return m, err
}

func (f *fetchClock) last() time.Time { return time.Unix(0, f.at.Load()) }
