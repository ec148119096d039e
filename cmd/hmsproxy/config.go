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
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// fileConfig is the YAML config file. Every field can also be set by the
// flag named in its comment; flags win over the file.
type fileConfig struct {
	Listen    string    `yaml:"listen"`    // -listen
	Transport string    `yaml:"transport"` // -transport
	TLS       tlsConfig `yaml:"tls"`       // client listener TLS (tls.go); file only
	// Kerberos (SASL/GSSAPI) toward clients and metastores (kerberos.go); file only
	Kerberos kerberosConfig `yaml:"kerberos"`

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
		TLS            tlsConfig     `yaml:"tls"`             // TLS toward the metastores (tls.go); file only
		// AcquireTimeout bounds the wait for a connection of calls with
		// no timeout of their own (writes by default).
		AcquireTimeout time.Duration `yaml:"acquire_timeout"` // -acquire-timeout
		// ReservedReadConns: connections per metastore only reads may
		// use; 0 picks max_conns/4, negative none.
		ReservedReadConns int `yaml:"reserved_read_conns"` // -upstream-reserved-read-conns
		// HoldMaxBytes: larger replies stream to their client.
		HoldMaxBytes int `yaml:"hold_max_bytes"` // -upstream-hold-max-bytes
		// StreamWriteTimeout bounds each write of a streamed reply.
		StreamWriteTimeout time.Duration `yaml:"stream_write_timeout"` // -stream-write-timeout
	} `yaml:"upstream"`

	Limits struct {
		MaxMessageBytes int `yaml:"max_message_bytes"` // -max-message-bytes
		MaxDepth        int `yaml:"max_depth"`         // -max-depth
		MaxClients      int `yaml:"max_clients"`       // -max-clients
		// MaxClientsPerAddress bounds one source address's connections
		// (an IPv4 address, an IPv6 /64); 0 is the default (1,000, at
		// most max_clients), negative none.
		MaxClientsPerAddress int `yaml:"max_clients_per_address"` // -max-clients-per-address
		// Client deadlines; negative for none.
		ClientReadTimeout  time.Duration `yaml:"client_read_timeout"`  // -client-read-timeout
		ClientIdleTimeout  time.Duration `yaml:"client_idle_timeout"`  // -client-idle-timeout
		ClientWriteTimeout time.Duration `yaml:"client_write_timeout"` // -client-write-timeout
		// InflightBytes bounds request and reply bytes held in flight
		// across all connections; 0 or negative for no bound.
		InflightBytes int64 `yaml:"inflight_bytes"` // -inflight-bytes
		// MaxSessionBytes bounds the set_ugi and setMetaConf state one
		// connection keeps; claimed from inflight_bytes.
		MaxSessionBytes int64 `yaml:"max_session_bytes"` // -max-session-bytes
		// Cache-wide flushes (unknown methods, flushCache) per client
		// identity: FlushBurst at once, refilled at FlushRate a second;
		// past it, calls share one flush per FlushInterval (negative: no
		// budget).
		FlushBurst    int           `yaml:"flush_burst"`    // -flush-burst
		FlushRate     float64       `yaml:"flush_rate"`     // -flush-rate
		FlushInterval time.Duration `yaml:"flush_interval"` // -flush-interval
	} `yaml:"limits"`

	Cache cacheConfig `yaml:"cache"`

	// Federation puts further metastore groups behind the listener
	// (federation.go); file only.
	Federation federationConfig `yaml:"federation"`

	EventLog struct {
		Interval time.Duration `yaml:"interval"` // -eventlog-interval; 0 turns the poller off
		Batch    int32         `yaml:"batch"`    // -eventlog-batch
		// HealthInterval is how often each node checks that the
		// notification log records the writes passing through it;
		// -eventlog-health-interval; 0 turns the check off.
		HealthInterval time.Duration `yaml:"health_interval"`
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
		// WarmUp (-warm-up) is what is loaded into the cache at start:
		// "db", "db.table", globs over either side or "re:EXPR", as in
		// cache.allow. Default none.
		WarmUp []string `yaml:"warm_up"`
		// WarmUpBatch (-warm-up-batch) is the partition names per
		// get_partitions_by_names call of the warm-up. Default 500.
		WarmUpBatch int `yaml:"warm_up_batch"`
		// WarmUpConcurrency (-warm-up-concurrency) is the warm-up's calls
		// in flight. Default 4; at most half the connections per
		// metastore that reads do not reserve, so client writes keep the
		// other half and client reads their reserved ones.
		WarmUpConcurrency int `yaml:"warm_up_concurrency"`
		// WarmUpUser is the set_ugi identity the warm-up loads as
		// (-warm-up-user); default: user. With a per-user cache scope
		// only that user's entries are warmed.
		WarmUpUser string `yaml:"warm_up_user"`
	} `yaml:"housekeeping"`

	RateLimit rateLimitConfig `yaml:"ratelimit"`

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
		// Password is the Redis password of a Sentinel's primary or a
		// Cluster's nodes (a single server's may also be in the URL). A
		// secret: from this file or HMSPROXY_REDIS_PASSWORD (which wins),
		// never a flag.
		Password string `yaml:"password"`
		// Sentinel: the primary named Master, found through the sentinels
		// at Addrs, followed over failovers. Instead of url.
		Sentinel struct {
			Master string   `yaml:"master"` // -redis-sentinel-master
			Addrs  []string `yaml:"addrs"`  // -redis-sentinel (comma-separated host:port)
			// Password of the sentinels themselves; file or
			// HMSPROXY_REDIS_SENTINEL_PASSWORD (which wins).
			Password string `yaml:"password"`
		} `yaml:"sentinel"`
		// Cluster: a Redis Cluster reached through any of Addrs. Instead
		// of url; each group's keys are hash-tagged to one slot.
		Cluster struct {
			Addrs []string `yaml:"addrs"` // -redis-cluster (comma-separated host:port)
		} `yaml:"cluster"`
	} `yaml:"redis"`

	Admin struct {
		Listen string `yaml:"listen"` // -admin; empty disables the admin port
		// Token guards the /cache/ flush API. A secret: from this file or
		// HMSPROXY_ADMIN_TOKEN (which wins), never a flag, which any user
		// could read from the process list.
		Token string    `yaml:"token"`
		TLS   tlsConfig `yaml:"tls"` // HTTPS on the admin port (tls.go); file only
	} `yaml:"admin"`

	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"` // -shutdown-timeout

	Shutdown struct {
		// DrainDelay: on SIGTERM /readyz fails at once and the listener
		// closes only this much later, so that the load balancer's health
		// check takes the node out before its clients are closed; an
		// admin drain (POST /drain) waits as long before closing client
		// connections. 0: none.
		DrainDelay time.Duration `yaml:"drain_delay"` // -drain-delay
	} `yaml:"shutdown"`

	Log struct {
		Level  string `yaml:"level"`  // -log-level
		Format string `yaml:"format"` // -log-format
	} `yaml:"log"`

	Demo bool `yaml:"demo"` // -demo

	strippedUserinfo bool // load dropped credentials from upstream URIs
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
	Scope           string        `yaml:"scope"`            // -cache-scope: auto, shared or user
	ScopeInterval   time.Duration `yaml:"scope_interval"`   // -cache-scope-interval: how often auto asks the metastore again
	PerUser         bool          `yaml:"per_user"`         // -cache-per-user; deprecated: true is scope user
	DefaultCatalog  string        `yaml:"default_catalog"`  // -default-catalog
	Allow           []string      `yaml:"allow"`            // -cache-allow
	Deny            []string      `yaml:"deny"`             // -cache-deny
	RefreshWorkers  int           `yaml:"refresh_workers"`  // -cache-refresh-workers
	// Prune answers exact partition filters and full partial specs from
	// the cached table, name list and partitions (-cache-prune). Nil:
	// true.
	Prune *bool `yaml:"prune"`
	// KnownReads lists methods outside the method table that only read
	// (-cache-known-reads): they pass through. Any other unknown method
	// invalidates everything cached for the upstream group once answered.
	KnownReads []string `yaml:"known_reads"`
	// TTLWithoutEventLog bounds every kind's TTL while the metastore's
	// notification log is missing, and always the kinds changed by the
	// writes the log does not record (UnloggedWrites);
	// -cache-ttl-without-eventlog.
	TTLWithoutEventLog time.Duration `yaml:"ttl_without_eventlog"`
	// UnloggedWrites lists the writes the metastore's notification log
	// does not record (-cache-unlogged-writes); empty: the table of the
	// metastore's version, as measured on the test bed.
	UnloggedWrites []string `yaml:"unlogged_writes"`
	// UserScopeTTL bounds every TTL while entries are keyed by identity
	// (-cache-user-scope-ttl): grants, revokes and an external
	// authoriser's policy changes leave no event. 0: no bound.
	UserScopeTTL time.Duration `yaml:"user_scope_ttl"`
	Shadow       struct {
		Rate         float64 `yaml:"rate"`           // -cache-shadow-rate: fraction of hits re-read and compared; 0 off
		MaxPerSecond int     `yaml:"max_per_second"` // bound on those re-reads
	} `yaml:"shadow"`
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
	c.Upstream.AcquireTimeout = time.Minute
	c.Upstream.HoldMaxBytes = 8 << 20
	c.Upstream.StreamWriteTimeout = 30 * time.Second
	c.Limits.MaxMessageBytes = 100 << 20
	c.Limits.MaxDepth = 64
	c.Limits.MaxClients = 10000
	c.Limits.ClientReadTimeout = proxy.DefaultReadTimeout
	c.Limits.ClientIdleTimeout = proxy.DefaultIdleTimeout
	c.Limits.ClientWriteTimeout = proxy.DefaultWriteTimeout
	c.Limits.InflightBytes = 256 << 20
	c.Limits.MaxSessionBytes = proxy.DefaultMaxSessionBytes
	c.Limits.FlushBurst = 10
	c.Limits.FlushRate = 1
	c.Limits.FlushInterval = time.Second
	c.EventLog.Interval = 250 * time.Millisecond
	c.EventLog.Batch = 500
	c.EventLog.HealthInterval = 10 * time.Second
	c.Cache.TTLWithoutEventLog = 30 * time.Second
	c.Cache.UserScopeTTL = 30 * time.Second
	c.Housekeeping.OpenTxnsInterval = time.Minute
	c.Housekeeping.CompactionsInterval = 5 * time.Minute
	c.Housekeeping.Reaper.Timeout = 300 * time.Second
	c.Redis.Heartbeat = time.Second
	c.Redis.PeerGone = time.Minute
	c.Cache.Enabled = true
	c.Cache.MaximumBytes = 512 << 20
	c.Cache.DefaultCatalog = "hive"
	c.Cache.RefreshWorkers = 4
	c.Cache.Scope = "auto"
	c.Cache.ScopeInterval = 10 * time.Minute
	c.Cache.Shadow.Rate = 0.001
	c.Cache.Shadow.MaxPerSecond = 20
	c.Admin.Listen = "127.0.0.1:9084"
	c.ShutdownTimeout = 30 * time.Second
	c.Shutdown.DrainDelay = 5 * time.Second
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
TLS is set in the file only [tls.*, upstream.tls.*, admin.tls.*]; SIGHUP reloads its files.
Kerberos is set in the file only [kerberos.*].
Exit status: 0 clean stop, 1 error, 2 bad flags or config, 3 shutdown_timeout
cut off calls in flight.

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
	acquire := fs.Duration("acquire-timeout", c.Upstream.AcquireTimeout, "longest wait for an upstream connection of a call with no timeout of its own (writes), negative for none [upstream.acquire_timeout]")
	holdMax := fs.Int("upstream-hold-max-bytes", c.Upstream.HoldMaxBytes, "largest reply held whole; larger ones stream to their client through a 256 KiB buffer while the metastore connection is held, negative never [upstream.hold_max_bytes]")
	streamWrite := fs.Duration("stream-write-timeout", c.Upstream.StreamWriteTimeout, "bound on each write of a streamed reply to its client [upstream.stream_write_timeout]")
	reserved := fs.Int("upstream-reserved-read-conns", c.Upstream.ReservedReadConns, "connections per metastore kept for reads so long writes cannot take them all; 0: max_conns/4, negative: none [upstream.reserved_read_conns]")
	maxMsg := fs.Int("max-message-bytes", c.Limits.MaxMessageBytes, "largest client request accepted, as hive.metastore.server.max.message.size [limits.max_message_bytes]")
	maxDepth := fs.Int("max-depth", c.Limits.MaxDepth, "deepest struct/container nesting accepted [limits.max_depth]")
	maxClients := fs.Int("max-clients", c.Limits.MaxClients, "max concurrent client connections; at the limit the longest-idle one makes room for a new one [limits.max_clients]")
	maxPerAddr := fs.Int("max-clients-per-address", c.Limits.MaxClientsPerAddress, "max client connections of one source address (IPv4 address, IPv6 /64); 0 default (1000, at most max-clients), negative none [limits.max_clients_per_address]")
	clientRead := fs.Duration("client-read-timeout", c.Limits.ClientReadTimeout, "cut off a client whose request is not complete this long after its first bytes (slowloris); negative for none [limits.client_read_timeout]")
	clientIdle := fs.Duration("client-idle-timeout", c.Limits.ClientIdleTimeout, "close a client connection that starts no request for this long; negative for none [limits.client_idle_timeout]")
	clientWrite := fs.Duration("client-write-timeout", c.Limits.ClientWriteTimeout, "cut off a client that has not taken a reply within this; negative for none [limits.client_write_timeout]")
	inflightBytes := fs.Int64("inflight-bytes", c.Limits.InflightBytes, "bytes of requests and replies held in flight across all connections; beyond it readers wait; 0 for no bound [limits.inflight_bytes]")
	maxSession := fs.Int64("max-session-bytes", c.Limits.MaxSessionBytes, "session state (set_ugi names, setMetaConf overrides) one client connection may keep; more is refused with a MetaException [limits.max_session_bytes]")
	flushBurst := fs.Int("flush-burst", c.Limits.FlushBurst, "cache-wide flushes (unknown methods, flushCache) one client identity may cause at once [limits.flush_burst]")
	flushRate := fs.Float64("flush-rate", c.Limits.FlushRate, "flushes a second that refill a client identity's flush burst [limits.flush_rate]")
	flushInterval := fs.Duration("flush-interval", c.Limits.FlushInterval, "past its flush budget, a client's cache-wide writes share one flush per interval, made before their replies; negative for no budget [limits.flush_interval]")
	shutdown := fs.Duration("shutdown-timeout", c.ShutdownTimeout, "on SIGTERM, how long in-flight calls may finish [shutdown_timeout]")
	drainDelay := fs.Duration("drain-delay", c.Shutdown.DrainDelay, "on SIGTERM, how long /readyz fails before the listener closes, so the load balancer stops sending clients; also the wait of POST /drain before client connections close; 0 none [shutdown.drain_delay]")
	level := fs.String("log-level", c.Log.Level, "debug, info, warn or error [log.level]")
	format := fs.String("log-format", c.Log.Format, "text or json [log.format]")
	cacheOn := fs.Bool("cache", c.Cache.Enabled, "serve cacheable reads from the cache [cache.enabled]")
	cacheBytes := fs.Int64("cache-maximum-bytes", c.Cache.MaximumBytes, "byte budget of all caches, entry overhead included [cache.maximum_bytes]")
	cacheTTL := fs.Duration("cache-ttl", 0, "TTL of every cache kind; 0 keeps the per-kind defaults (objects 10m, lists 5m) [cache.ttl]")
	cacheRefresh := fs.Duration("cache-refresh-interval", 0, "refresh-ahead age of every kind; 0 keeps the per-kind defaults (objects 5m, lists 2m) [cache.refresh_interval]")
	cacheMissing := fs.Bool("cache-missing", true, "cache not-found answers of point lookups (database, table, partition) [cache.cache_missing]")
	scope := fs.String("cache-scope", c.Cache.Scope, "share entries across set_ugi identities (shared), key them by identity (user), or decide from the metastore's filter hook and pre-event listeners (auto) [cache.scope]")
	scopeInterval := fs.Duration("cache-scope-interval", c.Cache.ScopeInterval, "how often cache scope auto asks the metastore again [cache.scope_interval]")
	perUser := fs.Bool("cache-per-user", c.Cache.PerUser, "deprecated: --cache-scope user [cache.per_user]")
	warmUpUser := fs.String("warm-up-user", "", "set_ugi identity of the warm-up; default housekeeping.user [housekeeping.warm_up_user]")
	defCat := fs.String("default-catalog", c.Cache.DefaultCatalog, "catalog of requests that name none, as metastore.catalog.default [cache.default_catalog]")
	allow := fs.String("cache-allow", "", "comma-separated db or db.table patterns that may be cached; empty: all [cache.allow]")
	deny := fs.String("cache-deny", "", "comma-separated db or db.table patterns never cached [cache.deny]")
	refreshWorkers := fs.Int("cache-refresh-workers", c.Cache.RefreshWorkers, "concurrent refresh-ahead loads [cache.refresh_workers]")
	prune := fs.Bool("cache-prune", true, "answer exact partition filters and full partial specs from the cached table, partition names and partitions; false caches filter replies whole [cache.prune]")
	knownReads := fs.String("cache-known-reads", "", "comma-separated methods outside the method table that only read; any other unknown method flushes the cache once answered [cache.known_reads]")
	shadowRate := fs.Float64("cache-shadow-rate", c.Cache.Shadow.Rate, "fraction of cache hits re-read from the metastore in the background and compared (shadow validation); 0 off [cache.shadow.rate]")
	evInterval := fs.Duration("eventlog-interval", c.EventLog.Interval, "poll interval of the metastore notification log; 0 turns it off [eventlog.interval]")
	evBatch := fs.Int("eventlog-batch", int(c.EventLog.Batch), "events asked for per get_next_notification [eventlog.batch]")
	evHealth := fs.Duration("eventlog-health-interval", c.EventLog.HealthInterval, "how often each node checks that the notification log records the writes through it; 0 off [eventlog.health_interval]")
	ttlNoLog := fs.Duration("cache-ttl-without-eventlog", c.Cache.TTLWithoutEventLog, "TTL bound of every kind while the metastore keeps no notification log, and of the kinds its unlogged writes change [cache.ttl_without_eventlog]")
	unlogged := fs.String("cache-unlogged-writes", "", "comma-separated writes the metastore's notification log does not record; empty: the table of its version [cache.unlogged_writes]")
	userTTL := fs.Duration("cache-user-scope-ttl", c.Cache.UserScopeTTL, "TTL bound of every kind while entries are keyed by identity; 0 none [cache.user_scope_ttl]")
	otInterval := fs.Duration("open-txns-interval", c.Housekeeping.OpenTxnsInterval, "period of the open-transactions gauge; 0 off [housekeeping.open_txns_interval]")
	cmInterval := fs.Duration("compactions-interval", c.Housekeeping.CompactionsInterval, "period of the compaction monitor; 0 off [housekeeping.compactions_interval]")
	reaper := fs.Bool("txn-reaper", false, "find transactions whose heartbeats stopped [housekeeping.reaper.enabled]")
	reaperAbort := fs.Bool("txn-reaper-abort", false, "abort them; without it the reaper only logs (dry run) [housekeeping.reaper.abort]")
	txnTimeout := fs.Duration("txn-timeout", c.Housekeeping.Reaper.Timeout, "heartbeat age after which a transaction is stale, as hive.txn.timeout [housekeeping.reaper.timeout]")
	warmUp := fs.String("warm-up", "", "comma-separated db, db.table or cache.allow patterns to load into the cache at start [housekeeping.warm_up]")
	warmUpBatch := fs.Int("warm-up-batch", 0, "partition names per get_partitions_by_names call of the warm-up; default 500 [housekeeping.warm_up_batch]")
	warmUpConc := fs.Int("warm-up-concurrency", 0, "warm-up calls in flight; default 4, at most half the unreserved upstream connections [housekeeping.warm_up_concurrency]")
	rlRead := fs.Float64("ratelimit-read", 0, "read calls per second per client (its Kerberos identity, else its source address); 0 no limit [ratelimit.read.rate]")
	rlWrite := fs.Float64("ratelimit-write", 0, "write calls per second per client; 0 no limit [ratelimit.write.rate]")
	rlOther := fs.Float64("ratelimit-other", 0, "other calls per second per client; 0 no limit [ratelimit.other.rate]")
	rlRedis := fs.Bool("ratelimit-redis", false, "share each client's rate limit across nodes through --redis [ratelimit.redis]")
	redisURL := fs.String("redis", "", "Redis for invalidations between proxy nodes, host:port or redis://; empty: this node alone [redis.url]")
	sentinelMaster := fs.String("redis-sentinel-master", "", "the primary's name in Redis Sentinel, instead of --redis [redis.sentinel.master]")
	sentinels := fs.String("redis-sentinel", "", "Redis Sentinel addresses, comma-separated host:port [redis.sentinel.addrs]")
	redisCluster := fs.String("redis-cluster", "", "Redis Cluster node addresses, comma-separated host:port, instead of --redis [redis.cluster.addrs]")
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
		case "acquire-timeout":
			c.Upstream.AcquireTimeout = *acquire
		case "upstream-hold-max-bytes":
			c.Upstream.HoldMaxBytes = *holdMax
		case "stream-write-timeout":
			c.Upstream.StreamWriteTimeout = *streamWrite
		case "upstream-reserved-read-conns":
			c.Upstream.ReservedReadConns = *reserved
		case "max-message-bytes":
			c.Limits.MaxMessageBytes = *maxMsg
		case "max-depth":
			c.Limits.MaxDepth = *maxDepth
		case "max-clients":
			c.Limits.MaxClients = *maxClients
		case "max-clients-per-address":
			c.Limits.MaxClientsPerAddress = *maxPerAddr
		case "client-read-timeout":
			c.Limits.ClientReadTimeout = *clientRead
		case "client-idle-timeout":
			c.Limits.ClientIdleTimeout = *clientIdle
		case "client-write-timeout":
			c.Limits.ClientWriteTimeout = *clientWrite
		case "inflight-bytes":
			c.Limits.InflightBytes = *inflightBytes
		case "max-session-bytes":
			c.Limits.MaxSessionBytes = *maxSession
		case "flush-burst":
			c.Limits.FlushBurst = *flushBurst
		case "flush-rate":
			c.Limits.FlushRate = *flushRate
		case "flush-interval":
			c.Limits.FlushInterval = *flushInterval
		case "shutdown-timeout":
			c.ShutdownTimeout = *shutdown
		case "drain-delay":
			c.Shutdown.DrainDelay = *drainDelay
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
		case "eventlog-health-interval":
			c.EventLog.HealthInterval = *evHealth
		case "cache-ttl-without-eventlog":
			c.Cache.TTLWithoutEventLog = *ttlNoLog
		case "cache-unlogged-writes":
			c.Cache.UnloggedWrites = splitList(*unlogged)
		case "cache-user-scope-ttl":
			c.Cache.UserScopeTTL = *userTTL
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
		case "warm-up-batch":
			c.Housekeeping.WarmUpBatch = *warmUpBatch
		case "warm-up-concurrency":
			c.Housekeeping.WarmUpConcurrency = *warmUpConc
		case "ratelimit-read":
			c.RateLimit.Read.Rate = *rlRead
		case "ratelimit-write":
			c.RateLimit.Write.Rate = *rlWrite
		case "ratelimit-other":
			c.RateLimit.Other.Rate = *rlOther
		case "ratelimit-redis":
			c.RateLimit.Redis = *rlRedis
		case "redis":
			c.Redis.URL = *redisURL
		case "redis-sentinel-master":
			c.Redis.Sentinel.Master = *sentinelMaster
		case "redis-sentinel":
			c.Redis.Sentinel.Addrs = splitList(*sentinels)
		case "redis-cluster":
			c.Redis.Cluster.Addrs = splitList(*redisCluster)
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
		case "cache-scope":
			c.Cache.Scope = *scope
		case "cache-scope-interval":
			c.Cache.ScopeInterval = *scopeInterval
		case "warm-up-user":
			c.Housekeeping.WarmUpUser = *warmUpUser
		case "default-catalog":
			c.Cache.DefaultCatalog = *defCat
		case "cache-allow":
			c.Cache.Allow = splitList(*allow)
		case "cache-deny":
			c.Cache.Deny = splitList(*deny)
		case "cache-refresh-workers":
			c.Cache.RefreshWorkers = *refreshWorkers
		case "cache-known-reads":
			c.Cache.KnownReads = splitList(*knownReads)
		case "cache-prune":
			c.Cache.Prune = prune
		case "cache-shadow-rate":
			c.Cache.Shadow.Rate = *shadowRate
		}
	})
	if tok := os.Getenv("HMSPROXY_ADMIN_TOKEN"); tok != "" {
		c.Admin.Token = tok
	}
	if pw := os.Getenv("HMSPROXY_REDIS_PASSWORD"); pw != "" {
		c.Redis.Password = pw
	}
	if pw := os.Getenv("HMSPROXY_REDIS_SENTINEL_PASSWORD"); pw != "" {
		c.Redis.Sentinel.Password = pw
	}
	if err := c.checkRedis(); err != nil {
		return c, err
	}
	if c.Limits.InflightBytes > 0 && c.Limits.InflightBytes < int64(c.Limits.MaxMessageBytes) {
		// One legal request must fit, or it would wait forever.
		return c, fmt.Errorf("limits.inflight_bytes (%d) is smaller than limits.max_message_bytes (%d)",
			c.Limits.InflightBytes, c.Limits.MaxMessageBytes)
	}
	if c.Limits.MaxSessionBytes <= 0 {
		return c, fmt.Errorf("limits.max_session_bytes must be positive, got %d", c.Limits.MaxSessionBytes)
	}
	if c.Limits.FlushInterval >= 0 && (c.Limits.FlushBurst <= 0 || c.Limits.FlushRate <= 0 || c.Limits.FlushInterval == 0) {
		return c, fmt.Errorf("limits.flush_burst (%d), flush_rate (%g) and flush_interval (%v) must be positive (a negative flush_interval turns the flush budget off)",
			c.Limits.FlushBurst, c.Limits.FlushRate, c.Limits.FlushInterval)
	}
	for i, u := range c.Upstream.URIs {
		var stripped bool
		if c.Upstream.URIs[i], stripped = stripUserinfo(u); stripped {
			c.strippedUserinfo = true
		}
	}
	if c.Shutdown.DrainDelay < 0 {
		return c, fmt.Errorf("shutdown.drain_delay must not be negative, got %v", c.Shutdown.DrainDelay)
	}
	for _, g := range c.Federation.Federated {
		for i, u := range g.URIs {
			var stripped bool
			if g.URIs[i], stripped = stripUserinfo(u); stripped {
				c.strippedUserinfo = true
			}
		}
	}
	if len(c.Upstream.URIs) == 0 && !c.Demo {
		return c, errors.New("no upstream: give --upstream thrift://host:port (or --demo)")
	}
	return c, nil
}

// requestLimits bound client requests: the proxy reads them under these,
// and whatever decodes them after (the federation router) decodes under
// the same, so that a request read is one it can decode.
func (c fileConfig) requestLimits() wire.Limits {
	return wire.Limits{MaxMessage: c.Limits.MaxMessageBytes, MaxDepth: c.Limits.MaxDepth}
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

// checkRedis allows one Redis topology at a time.
func (c fileConfig) checkRedis() error {
	r := c.Redis
	n := 0
	for _, set := range []bool{r.URL != "", r.Sentinel.Master != "" || len(r.Sentinel.Addrs) > 0, len(r.Cluster.Addrs) > 0} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return errors.New("redis: give one of redis.url, redis.sentinel and redis.cluster")
	case (r.Sentinel.Master == "") != (len(r.Sentinel.Addrs) == 0):
		return errors.New("redis.sentinel needs both master and addrs")
	}
	return nil
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
