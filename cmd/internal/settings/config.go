// Package settings is the one declaration of hmsproxy's settings (File
// and the sections' types, each setting a tagged field) and all that is
// built from it: the loader, the flags and --help, --print-defaults,
// docs/configuration.md, and the proxy's cache from the cache section.
// hmsproxy and hmsbench replay read a config file through it alike.
package settings

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hmsproxy/hmsproxy/coherence"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/trace"
)

// File is the YAML config file, and each field is the one
// declaration of its setting: the yaml tag is its key (and its flag,
// --KEY), and the other tags say the rest:
//
//	default  its default as written in the file ("" for none: the zero value)
//	defdoc   the default in words, where the code works it out
//	doc      one line for --help and docs/configuration.md
//	note     more for docs/configuration.md only: the detail --help leaves out
//	off      the setting can be turned off: off (or, for numbers, negative); the text says what off does
//	zerooff  an explicit 0 or empty still means off, as before the rule below (deprecated, warned)
//	old      the deprecated flag names it had before flags followed the keys
//	env      a secret read from this variable (which wins over the file); it has no flag
//
// The rule for 0 and empty: a setting left out, 0 or "" takes its default.
// Off is written off. Booleans are what they say. Everything is built from
// these tags (settings.go): the flags, --help, --print-defaults,
// docs/configuration.md; defaults() parses the default tags.
type File struct {
	Listen    string `yaml:"listen" default:":9083" doc:"client listen address"`
	Transport string `yaml:"transport" default:"buffered" doc:"client transport, buffered or framed, as hive.metastore.thrift.framed.transport.enabled"`
	Demo      bool   `yaml:"demo" doc:"start an embedded demo metastore with sample data and use it as the upstream"`
	Record    string `yaml:"record" doc:"record every client call to this trace file, for hmsbench replay (docs/record-replay.md); the file holds the names clients asked for" note:"works with the cache off (cache.enabled false), so a team can record with zero risk; rotated and bounded by the recording section; POST /record and DELETE /record on the admin port start and stop it"`

	Upstream struct {
		URIs []string `yaml:"uris" old:"upstream" doc:"metastore URIs, comma-separated thrift://host:port, in failover order; required unless demo"`
		// Name names the group in Redis keys (stream, lease, cursor,
		// changes) and cache keys; nodes that share it must list the same
		// metastores.
		Name               string        `yaml:"name" old:"upstream-name" defdoc:"the normalised, sorted URIs" doc:"name of the metastore group in Redis and cache keys; nodes sharing it must list the same metastores" note:"the keys are the invalidation stream, the leases, the event-log cursor and the change stream"`
		Transport          string        `yaml:"transport" old:"upstream-transport" default:"buffered" doc:"upstream transport, buffered or framed" note:"it may differ from the client side"`
		MaxConns           int           `yaml:"max_conns" old:"upstream-max-conns" default:"64" doc:"max open connections per metastore, idle ones included"`
		DialTimeout        time.Duration `yaml:"dial_timeout" old:"dial-timeout" default:"5s" doc:"upstream connect timeout"`
		ReadTimeout        time.Duration `yaml:"read_timeout" old:"read-timeout" default:"10m" off:"no timeout" doc:"timeout of read calls"`
		WriteTimeout       time.Duration `yaml:"write_timeout" old:"write-timeout" default:"off" off:"no timeout: DDL on wide tables can run for half an hour" doc:"timeout of write calls"`
		IdleTimeout        time.Duration `yaml:"idle_timeout" old:"upstream-idle-timeout" default:"5m" doc:"close upstream connections idle longer than this"`
		HealthInterval     time.Duration `yaml:"health_interval" old:"health-interval" default:"5s" doc:"period of upstream health checks (fb303 getStatus on a fresh connection)"`
		TLS                TLS           `yaml:"tls" doc:"TLS toward the metastores, as hive.metastore.use.SSL; SIGHUP reloads its files"`
		AcquireTimeout     time.Duration `yaml:"acquire_timeout" old:"acquire-timeout" default:"1m" off:"no bound" doc:"longest wait for an upstream connection of a call with no timeout of its own (writes); nothing was sent, so the client's retry is safe"`
		ReservedReadConns  int           `yaml:"reserved_read_conns" old:"upstream-reserved-read-conns" defdoc:"max_conns/4" off:"none" doc:"connections per metastore only reads (and set_ugi) may use, so long writes cannot take them all; always below max_conns" note:"16 with the default max_conns"`
		HoldMaxBytes       int           `yaml:"hold_max_bytes" old:"upstream-hold-max-bytes" default:"8388608" off:"never stream" doc:"largest reply held whole; larger ones stream to their client through a 256 KiB buffer while the metastore connection is held" note:"a held reply's metastore connection goes back to the pool before the client is written to; the default is above common large replies (a 500-partition batch of a wide table is 2–3 MiB)"`
		StreamWriteTimeout time.Duration `yaml:"stream_write_timeout" old:"stream-write-timeout" default:"30s" doc:"bound on each write of a streamed reply to its client, so a client that stops reading frees the metastore connection"`
	} `yaml:"upstream" doc:"the metastores behind the proxy (the primary group); every setting but uris and name applies to federated groups too"`

	Limits struct {
		MaxMessageBytes      int           `yaml:"max_message_bytes" old:"max-message-bytes" default:"104857600" doc:"largest client request accepted, as hive.metastore.server.max.message.size"`
		MaxDepth             int           `yaml:"max_depth" old:"max-depth" default:"64" doc:"deepest struct/container nesting accepted"`
		MaxClients           int           `yaml:"max_clients" old:"max-clients" default:"10000" doc:"max concurrent client connections; at the limit the longest-idle one makes room for a new one"`
		MaxClientsPerAddress int           `yaml:"max_clients_per_address" old:"max-clients-per-address" defdoc:"1000, at most max_clients" off:"no bound" doc:"max client connections of one source address (an IPv4 address, an IPv6 /64)"`
		ClientReadTimeout    time.Duration `yaml:"client_read_timeout" old:"client-read-timeout" default:"1m" off:"no deadline" doc:"cut off a client whose request is not complete this long after its first bytes (slowloris)"`
		ClientIdleTimeout    time.Duration `yaml:"client_idle_timeout" old:"client-idle-timeout" default:"1h" off:"no deadline" doc:"close a client connection that starts no request for this long"`
		ClientWriteTimeout   time.Duration `yaml:"client_write_timeout" old:"client-write-timeout" default:"2m" off:"no deadline" doc:"cut off a client that has not taken a reply within this"`
		InflightBytes        int64         `yaml:"inflight_bytes" old:"inflight-bytes" default:"268435456" off:"no bound" zerooff:"1" doc:"bytes of requests and replies held in flight across all connections; beyond it readers wait"`
		MaxSessionBytes      int64         `yaml:"max_session_bytes" old:"max-session-bytes" default:"65536" doc:"session state (set_ugi names, setMetaConf overrides) one client connection may keep, claimed from inflight_bytes; more is refused with a MetaException"`
		FlushBurst           int           `yaml:"flush_burst" old:"flush-burst" default:"10" doc:"cache-wide flushes (unknown methods, flushCache) one client identity may cause at once"`
		FlushRate            float64       `yaml:"flush_rate" old:"flush-rate" default:"1" doc:"flushes a second that refill a client identity's flush burst"`
		FlushInterval        time.Duration `yaml:"flush_interval" old:"flush-interval" default:"1s" off:"no flush budget" doc:"past its flush budget, a client's cache-wide writes share one flush per interval, made before their replies"`
	} `yaml:"limits" doc:"what one client, and all of them, may hold"`

	Cache Cache `yaml:"cache" doc:"the cache; names follow Trino's metastore cache settings (hive.metastore-cache-ttl, hive.metastore-refresh-interval, hive.metastore-cache.cache-missing) where one exists"`

	Federation Federation `yaml:"federation" doc:"further metastore groups behind the listener (docs/federation.md); absent: one group"`

	ChangeFeed ChangeFeed `yaml:"change_feed" doc:"the metastore change feed for lineage and catalog tools, on Kafka (docs/change-feed.md); off without brokers"`

	EventLog struct {
		Interval       time.Duration `yaml:"interval" old:"eventlog-interval" default:"250ms" off:"no poller" zerooff:"1" doc:"poll interval of the metastore notification log"`
		Batch          int32         `yaml:"batch" old:"eventlog-batch" default:"500" doc:"events asked for per get_next_notification"`
		HealthInterval time.Duration `yaml:"health_interval" old:"eventlog-health-interval" default:"10s" off:"no check" zerooff:"1" doc:"how often each node checks that the notification log records the writes through it"`
	} `yaml:"eventlog" doc:"the metastore's notification log as a source of invalidations"`

	Housekeeping struct {
		User                string        `yaml:"user" doc:"set_ugi identity of the workers' metastore connections"`
		OpenTxnsInterval    time.Duration `yaml:"open_txns_interval" old:"open-txns-interval" default:"1m" off:"no gauge" zerooff:"1" doc:"period of the open-transactions gauge"`
		CompactionsInterval time.Duration `yaml:"compactions_interval" old:"compactions-interval" default:"5m" off:"no monitor" zerooff:"1" doc:"period of the compaction monitor"`
		Reaper              struct {
			Enabled bool          `yaml:"enabled" old:"txn-reaper" doc:"find transactions whose heartbeats stopped"`
			Abort   bool          `yaml:"abort" old:"txn-reaper-abort" doc:"abort them; false is a dry run that only logs"`
			Timeout time.Duration `yaml:"timeout" old:"txn-timeout" default:"5m" doc:"heartbeat age after which a transaction is stale, as hive.txn.timeout"`
		} `yaml:"reaper" doc:"the transaction reaper"`
		WarmUp            []string `yaml:"warm_up" old:"warm-up" doc:"what is loaded into the cache at start: db, db.table, globs over either side or re:EXPR, as in cache.allow; comma-separated as a flag"`
		WarmUpBatch       int      `yaml:"warm_up_batch" old:"warm-up-batch" default:"500" doc:"partition names per get_partitions_by_names call of the warm-up" note:"a 500-partition batch of a wide table is 2–3 MiB, below upstream.hold_max_bytes"`
		WarmUpConcurrency int      `yaml:"warm_up_concurrency" old:"warm-up-concurrency" default:"4" doc:"warm-up calls in flight; at most half the connections per metastore that reads do not reserve, so client writes keep the other half" note:"24 with the default max_conns and reserved_read_conns"`
		WarmUpUser        string   `yaml:"warm_up_user" old:"warm-up-user" defdoc:"housekeeping.user" doc:"set_ugi identity the warm-up loads as; with a per-user cache scope only that user's entries are warmed"`
	} `yaml:"housekeeping" doc:"background work on the metastore: transaction and compaction monitors, the reaper, the cache warm-up"`

	RateLimit RateLimit `yaml:"ratelimit" doc:"token buckets per client (its Kerberos identity, else its source address) and method class"`

	Redis struct {
		URL              string        `yaml:"url" old:"redis" doc:"Redis for invalidations between proxy nodes, host:port or redis://; empty: this node alone"`
		NodeID           string        `yaml:"node_id" old:"node-id" defdoc:"random per process" doc:"this node's name on the invalidation bus"`
		Heartbeat        time.Duration `yaml:"heartbeat" old:"redis-heartbeat" default:"1s" doc:"how often a node announces itself on the invalidation bus"`
		HeartbeatTimeout time.Duration `yaml:"heartbeat_timeout" old:"redis-heartbeat-timeout" defdoc:"3 × heartbeat" doc:"a peer silent this long stops this node's cache, and writes wait at most this long for the peers' acknowledgements"`
		PeerGone         time.Duration `yaml:"peer_gone" old:"redis-peer-gone" default:"1m" doc:"a peer silent this long is forgotten and the cache served again"`
		Password         string        `yaml:"password" env:"HMSPROXY_REDIS_PASSWORD" doc:"password of a Sentinel's primary or a Cluster's nodes (a single server's may also be in the URL)"`
		Sentinel         struct {
			Master   string   `yaml:"master" old:"redis-sentinel-master" doc:"the primary's name in Redis Sentinel, instead of url"`
			Addrs    []string `yaml:"addrs" old:"redis-sentinel" doc:"Redis Sentinel addresses, comma-separated host:port"`
			Password string   `yaml:"password" env:"HMSPROXY_REDIS_SENTINEL_PASSWORD" doc:"password of the sentinels themselves"`
		} `yaml:"sentinel" doc:"a Sentinel-managed primary, followed over failovers; instead of url"`
		Cluster struct {
			Addrs []string `yaml:"addrs" old:"redis-cluster" doc:"Redis Cluster node addresses, comma-separated host:port; each group's keys are hash-tagged to one slot" note:"the keys are named hmsproxy:{<upstream.name>}:inval and so on"`
		} `yaml:"cluster" doc:"a Redis Cluster; instead of url"`
	} `yaml:"redis" doc:"Redis: the invalidation bus between nodes, the leases of cluster-singleton workers, the change-event stream"`

	Admin struct {
		Listen string `yaml:"listen" old:"admin" default:"127.0.0.1:9084" off:"no admin port" zerooff:"1" doc:"admin HTTP address (/metrics, /healthz, /readyz, /cache/flush, the status page)"`
		Token  string `yaml:"token" env:"HMSPROXY_ADMIN_TOKEN" doc:"bearer token of the admin write API (flush, drain, warm-up); without one they are refused beyond loopback"`
		TLS    TLS    `yaml:"tls" doc:"HTTPS on the admin port"`
	} `yaml:"admin" doc:"the admin port"`

	Recording struct {
		AtStart     bool   `yaml:"at_start" default:"true" doc:"start recording when the proxy starts; false: only on POST /record"`
		FileBytes   int64  `yaml:"file_bytes" default:"67108864" doc:"rotate the trace file at this size"`
		MaxBytes    int64  `yaml:"max_bytes" default:"1073741824" doc:"bound on the trace file and its rotated files together; the oldest go first"`
		BufferBytes int    `yaml:"buffer_bytes" default:"8388608" doc:"records waiting for the disk; a call that finds no room is recorded without its args, or dropped and counted, never waited for"`
		Redact      string `yaml:"redact" default:"off" doc:"off, names (every name, filter and user becomes a keyed hash) or bodies (no request bytes, only sizes)"`
		RedactKey   string `yaml:"redact_key" env:"HMSPROXY_RECORD_REDACT_KEY" doc:"key of the hashes of redact names and bodies; one key gives one hash per name across recordings" note:"without one, a random key per process: hashes match within one run's files only"`
	} `yaml:"recording" doc:"the trace file that record writes: rotation, bounds, redaction"`

	TLS      TLS      `yaml:"tls" doc:"TLS of the client listener; SIGHUP reloads its files"`
	Kerberos Kerberos `yaml:"kerberos" doc:"Kerberos (SASL/GSSAPI, QOP auth) toward clients and metastores"`

	Shutdown struct {
		Timeout    time.Duration `yaml:"timeout" old:"shutdown-timeout" default:"30s" off:"in-flight calls are cut at once" zerooff:"1" doc:"on SIGTERM, how long in-flight calls may finish (after the drain delay)"`
		DrainDelay time.Duration `yaml:"drain_delay" old:"drain-delay" default:"5s" off:"none" zerooff:"1" doc:"on SIGTERM, how long /readyz fails before the listener closes, so the load balancer stops sending clients; also the wait of POST /drain before client connections close"`
	} `yaml:"shutdown" doc:"stopping: exit status 0 clean stop, 1 error, 2 bad flags or config, 3 shutdown.timeout cut off calls in flight"`

	// ShutdownTimeout is the old spelling of shutdown.timeout, read and
	// warned about; nil when absent.
	ShutdownTimeout *time.Duration `yaml:"shutdown_timeout" alias:"shutdown.timeout"`

	Log struct {
		Level  string `yaml:"level" old:"log-level" default:"info" doc:"debug, info, warn or error"`
		Format string `yaml:"format" old:"log-format" default:"text" doc:"text or json"`
	} `yaml:"log" doc:"the log, on stderr (log/slog)"`

	// StrippedUserinfo says Load dropped credentials from upstream URIs;
	// Warnings are the deprecated spellings it accepted. hmsproxy logs
	// both once it has a logger.
	StrippedUserinfo bool     `yaml:"-"`
	Warnings         []string `yaml:"-"`
}

// Cache is the cache section.
type Cache struct {
	Enabled         bool          `yaml:"enabled" old:"cache" default:"true" doc:"serve cacheable reads from the cache"`
	MaximumBytes    int64         `yaml:"maximum_bytes" old:"cache-maximum-bytes" default:"536870912" doc:"byte budget of all caches, entry overhead included"`
	TTL             time.Duration `yaml:"ttl" old:"cache-ttl" defdoc:"per kind: objects 10m, lists 5m" doc:"TTL of every cache kind, unless set per kind"`
	RefreshInterval time.Duration `yaml:"refresh_interval" old:"cache-refresh-interval" defdoc:"per kind: objects 5m, lists 2m" doc:"refresh-ahead age of every kind, unless set per kind"`
	CacheMissing    *bool         `yaml:"cache_missing" old:"cache-missing" default:"true" doc:"cache not-found answers of point lookups (database, table, partition) for every kind that supports it"`
	Scope           string        `yaml:"scope" old:"cache-scope" default:"auto" doc:"share entries across set_ugi identities (shared), key them by identity (user), or decide from the metastore's filter hook and pre-event listeners (auto)" note:"auto keys entries by identity when the metastore has a filter hook or pre-event listeners, or when it cannot tell"`
	ScopeInterval   time.Duration `yaml:"scope_interval" old:"cache-scope-interval" default:"10m" doc:"how often cache scope auto asks the metastore again" note:"30s after a failed check"`
	PerUser         bool          `yaml:"per_user" old:"cache-per-user" doc:"deprecated: scope user"`
	DefaultCatalog  string        `yaml:"default_catalog" old:"default-catalog" default:"hive" doc:"catalog of requests that name none, as metastore.catalog.default"`
	Allow           []string      `yaml:"allow" old:"cache-allow" defdoc:"all" doc:"db or db.table patterns (globs, re:EXPR) that may be cached; comma-separated as a flag"`
	Deny            []string      `yaml:"deny" old:"cache-deny" doc:"db or db.table patterns never cached"`
	RefreshWorkers  int           `yaml:"refresh_workers" old:"cache-refresh-workers" default:"4" doc:"concurrent refresh-ahead loads"`
	Prune           *bool         `yaml:"prune" old:"cache-prune" default:"true" doc:"answer exact partition filters and full partial specs from the cached table, partition names and partitions; false caches filter replies whole"`
	KnownReads      []string      `yaml:"known_reads" old:"cache-known-reads" doc:"methods outside the method table that only read: they pass through; any other unknown method flushes the group's cache once answered"`
	// TTLWithoutEventLog bounds every kind's TTL while the metastore's
	// notification log is missing, and always the kinds changed by the
	// writes the log does not record (UnloggedWrites).
	TTLWithoutEventLog time.Duration `yaml:"ttl_without_eventlog" old:"cache-ttl-without-eventlog" default:"30s" off:"no bound" zerooff:"1" doc:"TTL bound of every kind while the metastore keeps no notification log, and of the kinds its unlogged writes change" note:"without the log, writes that bypass the proxy are seen only when entries expire"`
	UnloggedWrites     []string      `yaml:"unlogged_writes" old:"cache-unlogged-writes" defdoc:"the table of the metastore's version, as measured on the test bed" doc:"writes the metastore's notification log does not record" note:"[none] caps nothing"`
	// UserScopeTTL bounds every TTL while entries are keyed by identity:
	// grants, revokes and an external authoriser's policy changes leave
	// no event.
	UserScopeTTL time.Duration `yaml:"user_scope_ttl" old:"cache-user-scope-ttl" default:"30s" off:"no bound" zerooff:"1" doc:"TTL bound of every kind while entries are keyed by identity (grants and policy changes leave no event)"`
	Shadow       struct {
		Rate         float64 `yaml:"rate" old:"cache-shadow-rate" default:"0.001" off:"no shadow reads" zerooff:"1" doc:"fraction of cache hits re-read from the metastore in the background and compared, within 0 and 1"`
		MaxPerSecond int     `yaml:"max_per_second" default:"20" doc:"bound on those re-reads"`
	} `yaml:"shadow" doc:"shadow validation of cache hits"`
	// Kinds overrides per kind.
	Kinds map[string]Kind `yaml:"kinds" key:"kind" doc:"overrides per kind: database, database_names, table, table_names, partition, partitions, partition_names, partition_filter, statistics, function, config, constraints"`
}

// Kind is the overrides of one cache kind.
type Kind struct {
	TTL             *time.Duration `yaml:"ttl" off:"the kind is not cached" zerooff:"1" defdoc:"cache.ttl" doc:"TTL of the kind"`
	RefreshInterval *time.Duration `yaml:"refresh_interval" off:"no refresh-ahead" zerooff:"1" defdoc:"cache.refresh_interval" doc:"refresh-ahead age of the kind"`
	CacheMissing    *bool          `yaml:"cache_missing" defdoc:"cache.cache_missing" doc:"negative caching of the kind"`
}

// Config is the config the command line asks for: Load of its file and
// flags, which must name an upstream.
func (cl *Cmdline) Config() (File, error) {
	c, err := Load(cl.configPath, cl.apply)
	if err != nil {
		return c, err
	}
	if len(c.Upstream.URIs) == 0 && !c.Demo {
		return c, errors.New("no upstream: give --upstream.uris thrift://host:port (or --demo)")
	}
	return c, nil
}

// Load reads the config as hmsproxy does: the defaults, then the file at
// path (none when empty), then what flags sets, then the rule for 0 and
// off and the secrets from the environment; it checks the settings
// together but does not ask for an upstream, which a caller may have
// another way to name (hmsbench replay has its own flags).
func Load(path string, flags func(*File)) (File, error) {
	c := defaults()
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("read config: %w", err)
		}
		if err := decodeFile(b, &c); err != nil {
			return c, fmt.Errorf("parse config %s: %w", path, err)
		}
		if c.ShutdownTimeout != nil {
			c.warnf("shutdown_timeout is deprecated: write shutdown.timeout")
			c.Shutdown.Timeout, c.ShutdownTimeout = *c.ShutdownTimeout, nil
		}
	}
	if flags != nil {
		flags(&c)
	}
	c.applyZeroRule()
	for _, s := range settings() {
		if v := os.Getenv(s.env); s.env != "" && v != "" {
			s.field(&c).SetString(v)
		}
	}
	c.stripUserinfo()
	return c, c.validate()
}

// validate checks what the settings say together.
func (c File) validate() error {
	if err := c.checkRedis(); err != nil {
		return err
	}
	if c.Limits.InflightBytes > 0 && c.Limits.InflightBytes < int64(c.Limits.MaxMessageBytes) {
		// One legal request must fit, or it would wait forever.
		return fmt.Errorf("limits.inflight_bytes (%d) is smaller than limits.max_message_bytes (%d)",
			c.Limits.InflightBytes, c.Limits.MaxMessageBytes)
	}
	if c.Limits.MaxSessionBytes <= 0 {
		return fmt.Errorf("limits.max_session_bytes must be positive, got %d", c.Limits.MaxSessionBytes)
	}
	if c.Limits.FlushInterval >= 0 && (c.Limits.FlushBurst <= 0 || c.Limits.FlushRate <= 0) {
		return fmt.Errorf("limits.flush_burst (%d) and flush_rate (%g) must be positive (flush_interval off turns the flush budget off)",
			c.Limits.FlushBurst, c.Limits.FlushRate)
	}
	if _, err := trace.ParseRedaction(c.Recording.Redact); err != nil {
		return fmt.Errorf("recording.redact: %w", err)
	}
	return nil
}

// stripUserinfo drops credentials from the metastore URIs, which carry
// none; run warns about them.
func (c *File) stripUserinfo() {
	uris := [][]string{c.Upstream.URIs}
	for _, g := range c.Federation.Federated {
		uris = append(uris, g.URIs)
	}
	for _, us := range uris {
		for i, u := range us {
			var stripped bool
			if us[i], stripped = StripUserinfo(u); stripped {
				c.StrippedUserinfo = true
			}
		}
	}
}

// StripUserinfo drops credentials from a thrift:// URI: HMS URIs carry
// none, and one given by mistake must not reach keys, logs or metrics.
func StripUserinfo(uri string) (string, bool) {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		scheme, rest = "", uri
	}
	host := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		host = rest[:i]
	}
	at := strings.LastIndexByte(host, '@')
	if at < 0 {
		return uri, false
	}
	rest = rest[at+1:]
	if ok {
		return scheme + "://" + rest, true
	}
	return rest, true
}

// DrainWait and ShutdownWait are shutdown.drain_delay and
// shutdown.timeout as waits: off is none.
func (c File) DrainWait() time.Duration    { return max(c.Shutdown.DrainDelay, 0) }
func (c File) ShutdownWait() time.Duration { return max(c.Shutdown.Timeout, 0) }

// RequestLimits bound client requests: the proxy reads them under these,
// and whatever decodes them after (the federation router) decodes under
// the same, so that a request read is one it can decode.
func (c File) RequestLimits() wire.Limits {
	return wire.Limits{MaxMessage: c.Limits.MaxMessageBytes, MaxDepth: c.Limits.MaxDepth}
}

// GroupName is the upstream group's name: upstream.name, or the
// normalised, sorted URIs, so that nodes listing one group in another
// order or spelling share their Redis keys.
func (c File) GroupName() string {
	if c.Upstream.Name != "" {
		return c.Upstream.Name
	}
	return coherence.GroupName(c.Upstream.URIs)
}

// checkRedis allows one Redis topology at a time.
func (c File) checkRedis() error {
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

// SplitList reads a list as a flag writes it: comma-separated, each item
// trimmed, empty items dropped.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
