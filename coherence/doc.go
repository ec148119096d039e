// Package coherence keeps the caches of many proxy nodes coherent through
// Redis: the invalidation bus, peer liveness and acknowledgements.
//
// # The bus
//
// Every node appends what a write changed to one Redis stream per upstream
// group (prefix:inval:<group>) and reads everyone else's entries from it.
// A stream, unlike pub/sub, keeps entries across a reader's reconnect. Each
// node numbers its entries and sends a heartbeat every Config.Heartbeat, so
// a reader that missed entries (trimmed, or Redis restarted empty) sees a
// gap in some node's numbers. Concurrent publishes of one node share one
// entry (group commit): one Redis round trip per batch, not per write,
// while the numbers stay in stream order.
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
// # Read-your-writes across the fleet
//
// After applying other nodes' entries a node records how far it got on a
// second stream (prefix:acks:<group>). Publish returns once every live
// peer has acknowledged the writer's entry, or after HeartbeatTimeout.
// The writers of one entry wait together: the reader settles them when
// the acknowledgements arrive, a timer when a peer falls silent or time
// is up, and each writer is woken once.
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
package coherence
