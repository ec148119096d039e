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
	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/coherence/eventlog"
	"github.com/hmsproxy/hmsproxy/coherence/leader"
	"github.com/hmsproxy/hmsproxy/ops/housekeeping"
	"github.com/hmsproxy/hmsproxy/ops/worker"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// saslMechanism is the configured SASL mechanism; nil without one.
func saslMechanism(c settings.ChangeFeed) (sasl.Mechanism, error) {
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
	mech, err := saslMechanism(n.cfg.ChangeFeed)
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
