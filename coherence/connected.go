package coherence

import "time"

// Connected reports whether this node itself is in step with the bus:
// connected, its own hello read back, the stream read to its end and
// its own messages published within the heartbeat timeout. Unlike
// Synced it does not ask about the peers: a silent peer stops the cache
// of every node alike, so a readiness check built on Synced would take
// the whole fleet out of its load balancer when one node dies.
func (b *Bus) Connected() bool {
	if !b.synced.Load() {
		return false
	}
	at := min(b.caughtUp.Load(), b.published.Load())
	return time.Now().UnixNano()-at < int64(b.timeout)
}
