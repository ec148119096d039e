package settings

import "time"

// The sections' types: each field is the one declaration of its setting,
// as in File.

// TLS is one TLS endpoint in the config file: `tls:` (the client
// listener), `upstream.tls:` and `admin.tls:`. There are no flags for
// them; the files are reloaded when they change and on SIGHUP.
type TLS struct {
	// Cert and Key are PEM files. Listener and admin: setting them turns
	// TLS on. Upstream: the proxy's client certificate, if the metastore
	// asks for one.
	Cert string `yaml:"cert" doc:"PEM certificate chain; listener and admin: setting cert and key turns TLS on; upstream: the proxy's client certificate, for metastores that ask for one" note:"TLS 1.2 at least"`
	Key  string `yaml:"key" doc:"PEM key of cert"`
	// ClientCA (listener and admin): a PEM bundle; when set, clients must
	// present a certificate it signed (mutual TLS).
	ClientCA string `yaml:"client_ca" doc:"listener and admin: PEM bundle of client CAs; when set, clients must present a certificate it signed (mutual TLS)"`
	// CA (upstream): the PEM bundle that verifies the metastores'
	// certificates; default the system roots.
	CA string `yaml:"ca" defdoc:"the system roots" doc:"upstream: PEM bundle that verifies the metastores' certificates"`
	// ServerName (upstream): the name verified in the metastores'
	// certificates; default the host of each URI.
	ServerName string `yaml:"server_name" defdoc:"the host of each URI" doc:"upstream: the name verified in the metastores' certificates"`
	// Enabled (upstream): TLS toward the metastores. Implied by ca, cert
	// or server_name; set it alone to use the system roots.
	Enabled bool `yaml:"enabled" doc:"upstream: TLS toward the metastores; implied by ca, cert or server_name; set it alone to use the system roots"`
	// ReloadInterval is how often the files are checked for changes.
	// Default 10s; negative: only on SIGHUP.
	ReloadInterval time.Duration `yaml:"reload_interval" defdoc:"10s" off:"reloaded only on SIGHUP" doc:"how often the files are checked for changes"`
}

// Kerberos is the kerberos: section of the config file (file only):
// SASL/GSSAPI with QOP auth toward clients and toward the metastores.
type Kerberos struct {
	// Enabled makes the client listener accept only Kerberos clients
	// (hive.metastore.sasl.enabled=true on theirs); needs transport: framed.
	Enabled bool `yaml:"enabled" doc:"accept only Kerberos clients (hive.metastore.sasl.enabled=true on theirs); needs transport framed"`
	// Principal is the proxy's own principal, "hmsproxy/host@REALM": the
	// service principal clients ask tickets for (their
	// hive.metastore.kerberos.principal), and the client principal toward
	// the metastores. "_HOST" in it stands for this machine's host name,
	// lower-cased, as in Hadoop. Required when Enabled or UpstreamPrincipal
	// is set.
	Principal string `yaml:"principal" doc:"the proxy's own principal, hmsproxy/host@REALM (_HOST: this machine's host name): the service principal clients ask tickets for, and the client principal toward the metastores"`
	// Keytab holds Principal's keys. Required with Principal.
	Keytab string `yaml:"keytab" doc:"the keytab of principal"`
	// Krb5Conf is the krb5.conf naming the realm's KDCs; default
	// $KRB5_CONFIG, else /etc/krb5.conf.
	Krb5Conf string `yaml:"krb5_conf" defdoc:"$KRB5_CONFIG, else /etc/krb5.conf" doc:"the krb5.conf naming the realm's KDCs"`
	// UpstreamPrincipal is the metastores' service principal
	// ("hive/metastore-host@REALM", their hive.metastore.kerberos.principal
	// with the host written out: one principal for all upstream.uris);
	// non-empty makes every metastore connection authenticate with
	// Principal's keytab; needs upstream.transport: framed. Empty: none.
	UpstreamPrincipal string `yaml:"upstream_principal" defdoc:"none: no Kerberos toward the metastores" doc:"the metastores' service principal with the host written out (hive/host@REALM); authenticates every metastore connection; needs upstream.transport framed" note:"one principal for all upstream.uris; _HOST is refused"`
	// Impersonation is how metastore connections carry a Kerberos client's
	// identity: "token" (default) has the proxy, a Hadoop proxy user of
	// the metastore, fetch a delegation token per user and open that
	// user's connections with it (DIGEST-MD5), so the metastore authorizes
	// and audits the user; "none" authenticates every connection as the
	// proxy's principal, which the metastore then sees for every user.
	Impersonation string `yaml:"impersonation" defdoc:"token" doc:"token: each Kerberos client's metastore connections carry a delegation token fetched for that user; none: every connection is the proxy's principal"`
	// TokenTTL is how long a user's delegation token is reused for new
	// metastore connections. Default 1h.
	TokenTTL time.Duration `yaml:"token_ttl" defdoc:"1h" doc:"how long a user's delegation token is reused for new metastore connections"`
	// HandshakeTimeout bounds a client's handshake. Default 10s.
	HandshakeTimeout time.Duration `yaml:"handshake_timeout" defdoc:"10s" doc:"a client must finish its SASL handshake within this"`
	// MaxHandshakes bounds client handshakes in progress; at the bound
	// the oldest is cut to make room. Default 128.
	MaxHandshakes int `yaml:"max_handshakes" defdoc:"128" doc:"SASL handshakes in progress; at the bound the oldest is cut to make room"`
	// MaxHandshakesPerAddress bounds one source address's handshakes in
	// progress; past it a connection is closed at once. Default 16.
	MaxHandshakesPerAddress int `yaml:"max_handshakes_per_address" defdoc:"16" doc:"SASL handshakes in progress from one source address; past it a connection is closed at once"`
	// MaxClockSkew is the clock difference tolerated with clients, also
	// applied to their tickets' end times. Default 5m.
	MaxClockSkew time.Duration `yaml:"max_clock_skew" defdoc:"5m" doc:"clock difference tolerated with clients, also past a ticket's end"`
	// AuthToLocal maps a client's principal to the identity the proxy
	// gives its connection (cache scope, rate limits, upstream pooling,
	// the delegation token's owner), in the syntax of Hadoop's
	// hadoop.security.auth_to_local (auth/authtolocal): copy the
	// metastore's. Default "DEFAULT": principals of Principal's realm get
	// their first component, every other realm keeps the whole principal;
	// a foreign realm maps to short names only by a rule naming it.
	AuthToLocal string `yaml:"auth_to_local" defdoc:"DEFAULT" doc:"how a client's principal becomes its identity, in the syntax of hadoop.security.auth_to_local; by default only the proxy's own realm maps to short names"`
}

// Used reports whether Kerberos is used toward clients or metastores.
func (k Kerberos) Used() bool { return k.Enabled || k.UpstreamPrincipal != "" }

// Federation puts several metastore groups behind the listener:
// the primary (upstream.*) and the federated groups. Absent: one group,
// as before. File only.
type Federation struct {
	// DatabaseResolution: manual (each federated group lists its
	// databases) or prefixed. Default manual.
	DatabaseResolution string `yaml:"database_resolution" defdoc:"manual" doc:"manual (each federated group lists its databases) or prefixed"`
	// ListingTimeout bounds each group's part of a listing that asks
	// every group (get_all_databases, get_databases, get_table_meta,
	// get_all_functions). Default 10s.
	ListingTimeout time.Duration `yaml:"listing_timeout" defdoc:"10s" doc:"bound on each group's part of a listing that asks every group"`
	// ListingFailure: fail (a group that fails or times out fails the
	// listing with a MetaException naming it) or partial (it is left out,
	// counted and logged). Default fail.
	ListingFailure string `yaml:"listing_failure" defdoc:"fail" doc:"fail (a group that fails or times out fails the listing) or partial (it is left out, counted and logged)"`
	// Primary is the access rule of the primary group (upstream.*).
	Primary struct {
		Access            string   `yaml:"access" defdoc:"read-write" doc:"read-only, read-write or read-write-on-listed"`
		WritableDatabases []string `yaml:"writable_databases" doc:"with read-write-on-listed: the databases it may write"`
	} `yaml:"primary" doc:"the access rule of the primary group (upstream.*)"`
	Federated []FederatedGroup `yaml:"federated" doc:"the federated groups"`
}

// FederatedGroup is one federated group. Every upstream.* setting
// but uris and name applies to it as to the primary.
type FederatedGroup struct {
	// Name names the group in Redis keys, cache keys, metrics and the
	// messages clients get. Required, unique.
	Name string   `yaml:"name" doc:"names the group in Redis keys, cache keys, metrics and messages; required, unique"`
	URIs []string `yaml:"uris" doc:"its metastores, in failover order"`
	// Databases it serves (manual): names or patterns (glob, re:).
	Databases []string `yaml:"databases" doc:"manual: the databases it serves, names or patterns (glob, re:)"`
	// Access: read-only (default), read-write, read-write-on-listed.
	Access            string   `yaml:"access" defdoc:"read-only" doc:"read-only, read-write or read-write-on-listed"`
	WritableDatabases []string `yaml:"writable_databases" doc:"with read-write-on-listed: the databases it may write"`
	// Prefix (prefixed mode): how its databases are seen by clients.
	Prefix string `yaml:"prefix" doc:"prefixed: how its databases are seen by clients"`
	// DatabaseNameMapping: client name → the metastore's name.
	DatabaseNameMapping map[string]string `yaml:"database_name_mapping" doc:"client name to the metastore's name"`
}

// Enabled reports whether any federated group is configured.
func (f Federation) Enabled() bool { return len(f.Federated) > 0 }

// ChangeFeed is the change_feed section: the primary group's
// metastore changes published to Kafka (docs/change-feed.md).
type ChangeFeed struct {
	Kafka struct {
		Brokers      []string `yaml:"brokers" doc:"Kafka bootstrap brokers, comma-separated host:port; setting them turns the change feed on" note:"each node publishes the writes through it, the leader the notification log's other changes"`
		Topic        string   `yaml:"topic" default:"hmsproxy-changes" doc:"the topic; it must exist (the feed does not create it)" note:"Atlas's hook topic is ATLAS_HOOK"`
		Format       string   `yaml:"format" default:"native" doc:"native (versioned JSON, docs/change-feed.md) or atlas (Apache Atlas v2 hook notifications)"`
		AtlasCluster string   `yaml:"atlas_cluster" doc:"the cluster name in Atlas qualified names (db.table@cluster); required with format atlas"`
		ClientID     string   `yaml:"client_id" default:"hmsproxy" doc:"the producer's client id"`
		TLS          TLS      `yaml:"tls" doc:"TLS toward the brokers, keys as upstream.tls (enabled, ca, cert, key, server_name)"`
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

// RateLimit is the ratelimit section: token buckets per client and
// method class. A client is its authenticated identity (Kerberos), or its
// source address when it has none: a set_ugi name is only a claim.
type RateLimit struct {
	Read  Limit `yaml:"read" old:"ratelimit-read=rate" doc:"read methods"`
	Write Limit `yaml:"write" old:"ratelimit-write=rate" doc:"writes and unknown methods"`
	Other Limit `yaml:"other" old:"ratelimit-other=rate" doc:"everything else but set_ugi and setMetaConf"`
	// Users override the classes they name for one authenticated
	// identity (a Kerberos principal's name after kerberos.auth_to_local);
	// the others keep the defaults above. Needs kerberos.enabled.
	Users map[string]UserLimit `yaml:"users" key:"identity" doc:"overrides of the classes they name for one authenticated identity (after kerberos.auth_to_local); needs kerberos.enabled" note:"classes it does not name keep the defaults, and rate off (or 0) lifts one; without kerberos.enabled no client has an identity, and the proxy refuses to start rather than key limits on set_ugi claims"`
	// Sources override the classes they name for clients without an
	// authenticated identity, by source address: "10.1.0.0/16" or one
	// address; the longest prefix holding a client's address applies, and
	// each address keeps its own buckets. Useless with kerberos.enabled.
	Sources map[string]UserLimit `yaml:"sources" key:"address" doc:"overrides for clients without an authenticated identity, by source address (10.1.0.0/16 or one address; the longest prefix applies)" note:"each address still has buckets of its own; refused with kerberos.enabled, where every client is an identity"`
	// Redis shares each client's buckets across nodes through Redis
	// (calls are allowed while Redis is down).
	Redis bool `yaml:"redis" old:"ratelimit-redis" doc:"share each client's buckets across nodes through Redis; calls are allowed while Redis is down"`
}

// Limit is one class's bucket of a client.
type Limit struct {
	Rate  float64 `yaml:"rate" off:"no limit" doc:"calls per second per client"`
	Burst int     `yaml:"burst" defdoc:"the rate rounded up" doc:"calls at once"`
}

// UserLimit overrides the classes it names.
type UserLimit struct {
	Read  *Limit `yaml:"read" doc:"read methods"`
	Write *Limit `yaml:"write" doc:"writes and unknown methods"`
	Other *Limit `yaml:"other" doc:"everything else"`
}
