// Package coherence keeps the caches of many proxy nodes coherent through
// Redis: the invalidation bus, peer liveness and acknowledgements.
//
// # The bus
//
// Every node appends what a write changed to one Redis stream per upstream
// group (the "inval" key, see Redis keys) and reads everyone else's
// entries from it.
// A stream, unlike pub/sub, keeps entries across a reader's reconnect. Each
// node numbers its entries and sends a heartbeat every Config.Heartbeat, so
// a reader that missed entries (trimmed, or Redis restarted empty) sees a
// gap in some node's numbers. Concurrent publishes of one node share one
// entry (group commit): one Redis round trip per batch, not per write,
// while the numbers stay in stream order. Writes that come while an
// earlier entry of the node awaits its acknowledgements wait for them
// (at most 2ms) and then share the next entry, so that a node with many
// writers costs its peers and Redis an entry and an acknowledgement per
// batch, not per write.
//
// # Peer liveness
//
// Every entry carries its sender's clock; a reader takes the earlier of
// that and its own time of receipt as "last heard". A peer not heard for
// Config.HeartbeatTimeout may be writing without being able to publish,
// so the node stops serving its cache (Synced is false) until the peer is
// heard again or declared gone (Config.PeerGone), and then drops its
// cache, since what the peer sent meanwhile may be lost. A node applies
// the same rule to itself: it is not in sync while its own reads or
// publishes have not succeeded for HeartbeatTimeout, so when its peers
// stop hearing it, it has stopped serving too.
//
// Each step that may let a node serve again comes after what it needs:
// an entry's invalidations are applied, and a returning peer's flush
// done, before the sender counts as heard; a peer declared gone is
// forgotten only after the flush.
//
// # Read-your-writes across the fleet
//
// After applying other nodes' entries a node records how far it got on a
// second stream (the "acks" key). Publish returns once every live
// peer has acknowledged the writer's entry, or after HeartbeatTimeout.
// The writers of one entry wait together: the reader settles them when
// the acknowledgements arrive, a timer when a peer falls silent or time
// is up, and each writer is woken once.
//
// A pending peer is taken for silent, and no longer waited for, once
// the writer's own reader has read past the moment it fell silent, and
// has read the writer's entry, without hearing it; the reader settles
// the writers then, without waiting for its next confirmation of the
// Redis run id (see Redis topologies). A peer heard again before
// that entry is then heard; one heard only after it may be live all the
// same, its append slow to land. So a node whose append lands more than
// HeartbeatTimeout (less a heartbeat, for the clocks) after its previous
// one began serves no cache until its reader has read the stream up to
// that append: the entries of writes answered without it come before.
//
// The bound is safe: a peer that has not applied an entry within
// HeartbeatTimeout of it reaching Redis has not caught up with the stream
// within that time, and so has stopped serving its cache. A node that
// cannot publish answers after HeartbeatTimeout too: by then its peers,
// which stopped hearing it, are bypassing their caches.
//
// The argument assumes clocks that agree within a small fraction of
// HeartbeatTimeout (NTP), and a peer declared gone no longer writes: a
// node cut from Redis for longer than PeerGone has its writes reach the
// others only through the metastore's notification log.
//
// # Redis topologies and keys
//
// Config.Client is a single server's client, a Sentinel failover client
// (which follows the primary) or a Cluster client. A group's keys are
//
//	prefix:{group}:inval   the invalidation stream
//	prefix:{group}:acks    the acknowledgement stream
//	prefix:{group}:peers   the peer registry, a hash
//
// on a Cluster, where the braces put them in one hash slot: XREAD over
// both streams, the transactions of a hello and of the position read,
// and the leader's scripts (prefix:{group}:leader, its :token and
// prefix:{group}:eventlog) need that. On one server and on Sentinel they
// keep the names of the releases before Cluster support,
// prefix:inval:group and so on (Key), so that a fleet upgraded one node
// at a time keeps one bus; no earlier release ran on a Cluster.
//
// A failover of the primary is a lost-invalidation event like a restart.
// A reader whose connection breaks reconnects, and a reconnect flushes.
// A reader whose client moves to the new primary without an error (the
// failover client does) reads on from its cursor, and if the replica
// lagged, the tail it lacks is lost. The reader confirms the server's run
// id once per read interval, and counts itself caught up only to the
// last confirmation: a new run id flushes and reconnects. The entries
// lost also leave a gap in their writer's numbering (which flushes) when
// the reader had heard that writer since connecting, and a stream count
// of entries (XINFO) below what the reader read flushes too.
//
// # Message format
//
// An invalidation-stream entry has one field, "m", a JSON object:
//
//	n  string     sending node (NodeID); required
//	s  uint       the sender's number for the entry, 1, 2, ... per process
//	t  int        the sender's clock when it began the append, unix ns
//	l  string     the sender's group layout (Layout), may be absent
//	h  string     the nonce of the sender's hello, on a hello only
//	b  bool       the sender leaves cleanly (goodbye), may be absent
//	e  [][]string the invalidated entities, each [level, catalog,
//	              database, table]; level is cache.Level's name, and an
//	              unknown one reads as "all"
//	a  []int      indexes into e of "partitions" entities that only
//	              added partitions (cache.Entity.Added); may be absent
//	v  int        the format version; absent in version 1
//
// for example
//
//	{"n":"a1","s":7,"t":1764561600000000000,"l":"0123abcd","e":[["table","hive","db","t"]],"v":2}
//
// Version 1 is the format before versioning (no "v"); version 2 adds
// only "v", so a version 1 node, which ignores unknown fields, reads it.
//
// An add of partitions travels as the entity ["partitions", cat, db,
// table] that every release reads, and its index in "a" (written since
// the release that narrowed adds, in version 2 messages only). A node
// that reads "a" drops only what an add can change: the table's
// partition lists, names, filters, counts, aggregates and not-found
// answers, keeping the entries of the partitions that exist. A node
// that does not (any earlier release: Go's JSON decoding drops an
// unknown field) drops the table's partitions whole: more than needed,
// never less. "a" needs no new version for the same reason: every
// reader of versions 1 and 2 may ignore it, and a new version would
// make this release refuse version 1 writers for nothing. An index
// that names no "partitions" entity narrows nothing.
// A node reads the previous, its own and the next version: the next may
// only add fields (to the object, or after the four of an entity) that
// this one may ignore. An entry of any other version, or one that does
// not decode, is refused: the node logs an error, counts a loss
// ("unreadable" or "undecodable"), drops its cache and does not serve it
// (Synced is false) until no such entry came for HeartbeatTimeout.
// Config.Format makes a node write the previous version, byte for byte
// what that release wrote.
//
// An acknowledgement-stream entry has fields "n" (the node) and "a" (the
// invalidation-stream id up to which it applied, "ms-seq"). A peer
// registry value is "<unix ns of the latest heartbeat> <layout>". Both
// are unchanged since version 1.
package coherence
