package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/internal/hms"
)

// fileConfig is the YAML config file. Every field can also be set by the
// flag named in its comment; flags win over the file.
type fileConfig struct {
	Listen    string `yaml:"listen"`    // -listen
	Transport string `yaml:"transport"` // -transport

	Upstream struct {
		URIs []string `yaml:"uris"` // -upstream (comma-separated)
		// Name names the group in Redis keys (stream, lease, cursor,
		// changes) and cache keys; nodes that share it must list the same
		// metastores. Default: the normalised, sorted URIs.
		Name           string        `yaml:"name"`            // -upstream-name
		Transport      string        `yaml:"transport"`       // -upstream-transport
		MaxConns       int           `yaml:"max_conns"`       // -upstream-max-conns
		DialTimeout    time.Duration `yaml:"dial_timeout"`    // -dial-timeout
		ReadTimeout    time.Duration `yaml:"read_timeout"`    // -read-timeout
		WriteTimeout   time.Duration `yaml:"write_timeout"`   // -write-timeout
		IdleTimeout    time.Duration `yaml:"idle_timeout"`    // -upstream-idle-timeout
		HealthInterval time.Duration `yaml:"health_interval"` // -health-interval
	} `yaml:"upstream"`

	Limits struct {
		MaxMessageBytes int `yaml:"max_message_bytes"` // -max-message-bytes
		MaxDepth        int `yaml:"max_depth"`         // -max-depth
		MaxClients      int `yaml:"max_clients"`       // -max-clients
	} `yaml:"limits"`

	Cache cacheConfig `yaml:"cache"`

	EventLog struct {
		Interval time.Duration `yaml:"interval"` // -eventlog-interval; 0 turns the poller off
		Batch    int32         `yaml:"batch"`    // -eventlog-batch
	} `yaml:"eventlog"`

	Housekeeping struct {
		User                string        `yaml:"user"`                 // set_ugi identity of the workers' metastore connections
		OpenTxnsInterval    time.Duration `yaml:"open_txns_interval"`   // -open-txns-interval; 0 off
		CompactionsInterval time.Duration `yaml:"compactions_interval"` // -compactions-interval; 0 off
		Reaper              struct {
			Enabled bool          `yaml:"enabled"` // -txn-reaper
			Abort   bool          `yaml:"abort"`   // -txn-reaper-abort; false is a dry run that only logs
			Timeout time.Duration `yaml:"timeout"` // -txn-timeout, as hive.txn.timeout
		} `yaml:"reaper"`
		WarmUp []string `yaml:"warm_up"` // -warm-up: "db" or "db.table" loaded into the cache at start
	} `yaml:"housekeeping"`

	Redis struct {
		URL    string `yaml:"url"`     // -redis: host:port or redis://; empty runs one node alone
		NodeID string `yaml:"node_id"` // -node-id; default random per process
		// Heartbeat is how often a node announces itself on the bus.
		Heartbeat time.Duration `yaml:"heartbeat"` // -redis-heartbeat
		// HeartbeatTimeout is how long a silent peer is trusted, and the
		// longest a write waits for the peers' acknowledgements; 0 is
		// 3 × heartbeat.
		HeartbeatTimeout time.Duration `yaml:"heartbeat_timeout"` // -redis-heartbeat-timeout
		// PeerGone is when a silent peer is forgotten and the cache served
		// again.
		PeerGone time.Duration `yaml:"peer_gone"` // -redis-peer-gone
		// The password comes from HMSPROXY_REDIS_PASSWORD or the URL.
	} `yaml:"redis"`

	Admin struct {
		Listen string `yaml:"listen"` // -admin; empty disables the admin port
		// Token guards the /cache/ flush API. A secret: from this file or
		// HMSPROXY_ADMIN_TOKEN (which wins), never a flag, which any user
		// could read from the process list.
		Token string `yaml:"token"`
	} `yaml:"admin"`

	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"` // -shutdown-timeout

	Log struct {
		Level  string `yaml:"level"`  // -log-level
		Format string `yaml:"format"` // -log-format
	} `yaml:"log"`

	Demo bool `yaml:"demo"` // -demo
}

// cacheConfig uses the names of Trino's metastore cache settings
// (hive.metastore-cache-ttl, hive.metastore-refresh-interval,
// hive.metastore-cache.cache-missing) where one exists.
type cacheConfig struct {
	Enabled         bool          `yaml:"enabled"`          // -cache
	MaximumBytes    int64         `yaml:"maximum_bytes"`    // -cache-maximum-bytes
	TTL             time.Duration `yaml:"ttl"`              // -cache-ttl: every kind's TTL, unless set per kind
	RefreshInterval time.Duration `yaml:"refresh_interval"` // -cache-refresh-interval: every kind's refresh-ahead age
	CacheMissing    *bool         `yaml:"cache_missing"`    // -cache-missing: negative caching for every kind that supports it
	PerUser         bool          `yaml:"per_user"`         // -cache-per-user
	DefaultCatalog  string        `yaml:"default_catalog"`  // -default-catalog
	Allow           []string      `yaml:"allow"`            // -cache-allow
	Deny            []string      `yaml:"deny"`             // -cache-deny
	RefreshWorkers  int           `yaml:"refresh_workers"`  // -cache-refresh-workers
	// Kinds overrides per kind: database, database_names, table,
	// table_names, partition, partitions, partition_names,
	// partition_filter, statistics, function, config, constraints.
	Kinds map[string]kindConfig `yaml:"kinds"`
}

type kindConfig struct {
	TTL             *time.Duration `yaml:"ttl"`
	RefreshInterval *time.Duration `yaml:"refresh_interval"`
	CacheMissing    *bool          `yaml:"cache_missing"`
}

func defaults() fileConfig {
	var c fileConfig
	c.Listen = ":9083"
	c.Transport = "buffered"
	c.Upstream.Transport = "buffered"
	c.Upstream.MaxConns = 64
	c.Upstream.DialTimeout = 5 * time.Second
	c.Upstream.ReadTimeout = 10 * time.Minute
	c.Upstream.IdleTimeout = 5 * time.Minute
	c.Upstream.HealthInterval = 5 * time.Second
	c.Limits.MaxMessageBytes = 100 << 20
	c.Limits.MaxDepth = 64
	c.Limits.MaxClients = 10000
	c.EventLog.Interval = 2 * time.Second
	c.EventLog.Batch = 500
	c.Housekeeping.OpenTxnsInterval = time.Minute
	c.Housekeeping.CompactionsInterval = 5 * time.Minute
	c.Housekeeping.Reaper.Timeout = 300 * time.Second
	c.Redis.Heartbeat = time.Second
	c.Redis.PeerGone = time.Minute
	c.Cache.Enabled = true
	c.Cache.MaximumBytes = 512 << 20
	c.Cache.DefaultCatalog = "hive"
	c.Cache.RefreshWorkers = 4
	c.Admin.Listen = "127.0.0.1:9084"
	c.ShutdownTimeout = 30 * time.Second
	c.Log.Level = "info"
	c.Log.Format = "text"
	return c
}

// load reads the config: defaults, then the file named by -config (or
// HMSPROXY_CONFIG), then the flags that were set on the command line.
func load(args []string) (fileConfig, error) {
	c := defaults()
	fs := flag.NewFlagSet("hmsproxy", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `hmsproxy: a caching proxy for the Hive Metastore Thrift API.

Usage:
  hmsproxy --upstream thrift://hms:9083 [flags]
  hmsproxy --config hmsproxy.yaml [flags]
  hmsproxy --demo            (proxy in front of an embedded demo metastore)

Clients point hive.metastore.uris at the proxy's listen address.
Flags override the YAML file; the file's keys are given in brackets.
Environment: HMSPROXY_CONFIG names the config file when -config is not given;
HMSPROXY_ADMIN_TOKEN is the bearer token of the admin flush API [admin.token].

Flags:
`)
		fs.PrintDefaults()
	}
	path := fs.String("config", os.Getenv("HMSPROXY_CONFIG"), "YAML config file")
	listen := fs.String("listen", c.Listen, "client listen address [listen]")
	transport := fs.String("transport", c.Transport, "client transport, buffered or framed, as hive.metastore.thrift.framed.transport.enabled [transport]")
	uris := fs.String("upstream", "", "metastore URIs, comma-separated thrift://host:port, in failover order [upstream.uris]")
	upName := fs.String("upstream-name", "", "name of the metastore group in Redis and cache keys; default the normalised, sorted URIs [upstream.name]")
	upTransport := fs.String("upstream-transport", c.Upstream.Transport, "upstream transport, buffered or framed [upstream.transport]")
	maxConns := fs.Int("upstream-max-conns", c.Upstream.MaxConns, "max open connections per metastore [upstream.max_conns]")
	dialTimeout := fs.Duration("dial-timeout", c.Upstream.DialTimeout, "upstream connect timeout [upstream.dial_timeout]")
	readTimeout := fs.Duration("read-timeout", c.Upstream.ReadTimeout, "timeout of read calls, negative for none [upstream.read_timeout]")
	writeTimeout := fs.Duration("write-timeout", c.Upstream.WriteTimeout, "timeout of write calls, 0 for none: DDL on wide tables can run for half an hour [upstream.write_timeout]")
	idleTimeout := fs.Duration("upstream-idle-timeout", c.Upstream.IdleTimeout, "close upstream connections idle longer than this [upstream.idle_timeout]")
	health := fs.Duration("health-interval", c.Upstream.HealthInterval, "period of upstream health checks [upstream.health_interval]")
	maxMsg := fs.Int("max-message-bytes", c.Limits.MaxMessageBytes, "largest client request accepted, as hive.metastore.server.max.message.size [limits.max_message_bytes]")
	maxDepth := fs.Int("max-depth", c.Limits.MaxDepth, "deepest struct/container nesting accepted [limits.max_depth]")
	maxClients := fs.Int("max-clients", c.Limits.MaxClients, "max concurrent client connections [limits.max_clients]")
	shutdown := fs.Duration("shutdown-timeout", c.ShutdownTimeout, "on SIGTERM, how long in-flight calls may finish [shutdown_timeout]")
	level := fs.String("log-level", c.Log.Level, "debug, info, warn or error [log.level]")
	format := fs.String("log-format", c.Log.Format, "text or json [log.format]")
	cacheOn := fs.Bool("cache", c.Cache.Enabled, "serve cacheable reads from the cache [cache.enabled]")
	cacheBytes := fs.Int64("cache-maximum-bytes", c.Cache.MaximumBytes, "byte budget of all caches, entry overhead included [cache.maximum_bytes]")
	cacheTTL := fs.Duration("cache-ttl", 0, "TTL of every cache kind; 0 keeps the per-kind defaults (objects 10m, lists 5m) [cache.ttl]")
	cacheRefresh := fs.Duration("cache-refresh-interval", 0, "refresh-ahead age of every kind; 0 keeps the per-kind defaults (objects 5m, lists 2m) [cache.refresh_interval]")
	cacheMissing := fs.Bool("cache-missing", true, "cache not-found answers of point lookups (database, table, partition) [cache.cache_missing]")
	perUser := fs.Bool("cache-per-user", c.Cache.PerUser, "key entries by set_ugi identity instead of sharing them [cache.per_user]")
	defCat := fs.String("default-catalog", c.Cache.DefaultCatalog, "catalog of requests that name none, as metastore.catalog.default [cache.default_catalog]")
	allow := fs.String("cache-allow", "", "comma-separated db or db.table patterns that may be cached; empty: all [cache.allow]")
	deny := fs.String("cache-deny", "", "comma-separated db or db.table patterns never cached [cache.deny]")
	refreshWorkers := fs.Int("cache-refresh-workers", c.Cache.RefreshWorkers, "concurrent refresh-ahead loads [cache.refresh_workers]")
	evInterval := fs.Duration("eventlog-interval", c.EventLog.Interval, "poll interval of the metastore notification log; 0 turns it off [eventlog.interval]")
	evBatch := fs.Int("eventlog-batch", int(c.EventLog.Batch), "events asked for per get_next_notification [eventlog.batch]")
	otInterval := fs.Duration("open-txns-interval", c.Housekeeping.OpenTxnsInterval, "period of the open-transactions gauge; 0 off [housekeeping.open_txns_interval]")
	cmInterval := fs.Duration("compactions-interval", c.Housekeeping.CompactionsInterval, "period of the compaction monitor; 0 off [housekeeping.compactions_interval]")
	reaper := fs.Bool("txn-reaper", false, "find transactions whose heartbeats stopped [housekeeping.reaper.enabled]")
	reaperAbort := fs.Bool("txn-reaper-abort", false, "abort them; without it the reaper only logs (dry run) [housekeeping.reaper.abort]")
	txnTimeout := fs.Duration("txn-timeout", c.Housekeeping.Reaper.Timeout, "heartbeat age after which a transaction is stale, as hive.txn.timeout [housekeeping.reaper.timeout]")
	warmUp := fs.String("warm-up", "", "comma-separated db or db.table to load into the cache at start [housekeeping.warm_up]")
	redisURL := fs.String("redis", "", "Redis for invalidations between proxy nodes, host:port or redis://; empty: this node alone [redis.url]")
	nodeID := fs.String("node-id", "", "this node's name on the invalidation bus; default random [redis.node_id]")
	heartbeat := fs.Duration("redis-heartbeat", c.Redis.Heartbeat, "how often a node announces itself on the invalidation bus [redis.heartbeat]")
	hbTimeout := fs.Duration("redis-heartbeat-timeout", 0, "a peer silent this long stops this node's cache, and writes wait at most this long for the peers; 0 is 3 × heartbeat [redis.heartbeat_timeout]")
	peerGone := fs.Duration("redis-peer-gone", c.Redis.PeerGone, "a peer silent this long is forgotten and the cache served again [redis.peer_gone]")
	adminListen := fs.String("admin", c.Admin.Listen, "admin HTTP address (/metrics, /healthz, /cache/flush); empty disables it [admin.listen]")
	demo := fs.Bool("demo", false, "start an embedded demo metastore with sample data and use it as the upstream [demo]")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *path != "" {
		b, err := os.ReadFile(*path)
		if err != nil {
			return c, fmt.Errorf("read config: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b)) // an empty file (io.EOF) means all defaults
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
			return c, fmt.Errorf("parse config %s: %w", *path, err)
		}
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "listen":
			c.Listen = *listen
		case "transport":
			c.Transport = *transport
		case "upstream":
			c.Upstream.URIs = splitList(*uris)
		case "upstream-name":
			c.Upstream.Name = *upName
		case "upstream-transport":
			c.Upstream.Transport = *upTransport
		case "upstream-max-conns":
			c.Upstream.MaxConns = *maxConns
		case "dial-timeout":
			c.Upstream.DialTimeout = *dialTimeout
		case "read-timeout":
			c.Upstream.ReadTimeout = *readTimeout
		case "write-timeout":
			c.Upstream.WriteTimeout = *writeTimeout
		case "upstream-idle-timeout":
			c.Upstream.IdleTimeout = *idleTimeout
		case "health-interval":
			c.Upstream.HealthInterval = *health
		case "max-message-bytes":
			c.Limits.MaxMessageBytes = *maxMsg
		case "max-depth":
			c.Limits.MaxDepth = *maxDepth
		case "max-clients":
			c.Limits.MaxClients = *maxClients
		case "shutdown-timeout":
			c.ShutdownTimeout = *shutdown
		case "log-level":
			c.Log.Level = *level
		case "log-format":
			c.Log.Format = *format
		case "demo":
			c.Demo = *demo
		case "eventlog-interval":
			c.EventLog.Interval = *evInterval
		case "eventlog-batch":
			c.EventLog.Batch = int32(*evBatch)
		case "open-txns-interval":
			c.Housekeeping.OpenTxnsInterval = *otInterval
		case "compactions-interval":
			c.Housekeeping.CompactionsInterval = *cmInterval
		case "txn-reaper":
			c.Housekeeping.Reaper.Enabled = *reaper
		case "txn-reaper-abort":
			c.Housekeeping.Reaper.Abort = *reaperAbort
		case "txn-timeout":
			c.Housekeeping.Reaper.Timeout = *txnTimeout
		case "warm-up":
			c.Housekeeping.WarmUp = splitList(*warmUp)
		case "redis":
			c.Redis.URL = *redisURL
		case "node-id":
			c.Redis.NodeID = *nodeID
		case "redis-heartbeat":
			c.Redis.Heartbeat = *heartbeat
		case "redis-heartbeat-timeout":
			c.Redis.HeartbeatTimeout = *hbTimeout
		case "redis-peer-gone":
			c.Redis.PeerGone = *peerGone
		case "admin":
			c.Admin.Listen = *adminListen
		case "cache":
			c.Cache.Enabled = *cacheOn
		case "cache-maximum-bytes":
			c.Cache.MaximumBytes = *cacheBytes
		case "cache-ttl":
			c.Cache.TTL = *cacheTTL
		case "cache-refresh-interval":
			c.Cache.RefreshInterval = *cacheRefresh
		case "cache-missing":
			c.Cache.CacheMissing = cacheMissing
		case "cache-per-user":
			c.Cache.PerUser = *perUser
		case "default-catalog":
			c.Cache.DefaultCatalog = *defCat
		case "cache-allow":
			c.Cache.Allow = splitList(*allow)
		case "cache-deny":
			c.Cache.Deny = splitList(*deny)
		case "cache-refresh-workers":
			c.Cache.RefreshWorkers = *refreshWorkers
		}
	})
	if tok := os.Getenv("HMSPROXY_ADMIN_TOKEN"); tok != "" {
		c.Admin.Token = tok
	}
	if len(c.Upstream.URIs) == 0 && !c.Demo {
		return c, errors.New("no upstream: give --upstream thrift://host:port (or --demo)")
	}
	return c, nil
}

// groupName is the upstream group's name: upstream.name, or the
// normalised, sorted URIs, so that nodes listing one group in another
// order or spelling share their Redis keys.
func (c fileConfig) groupName() string {
	if c.Upstream.Name != "" {
		return c.Upstream.Name
	}
	return coherence.GroupName(c.Upstream.URIs)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// kinds resolves the per-kind cache policies: defaults, then the global
// settings, then the per-kind overrides.
func (c cacheConfig) kinds() ([cache.NumKinds]cache.KindConfig, error) {
	k := cache.DefaultKinds()
	for i := range k {
		if k[i].TTL == 0 {
			continue
		}
		if c.TTL > 0 {
			k[i].TTL = c.TTL
		}
		if c.RefreshInterval > 0 {
			k[i].RefreshAfter = c.RefreshInterval
		}
		if c.CacheMissing != nil && !*c.CacheMissing {
			k[i].Negative = false
		}
	}
	for name, o := range c.Kinds {
		kind := hms.KindNone
		for i := hms.Kind(1); i < cache.NumKinds; i++ {
			if i.String() == name {
				kind = i
			}
		}
		if kind == hms.KindNone {
			return k, fmt.Errorf("cache.kinds: unknown kind %q", name)
		}
		if o.TTL != nil {
			k[kind].TTL = *o.TTL
		}
		if o.RefreshInterval != nil {
			k[kind].RefreshAfter = *o.RefreshInterval
		}
		if o.CacheMissing != nil {
			k[kind].Negative = *o.CacheMissing
		}
	}
	return k, nil
}
