package coherence

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// NormalizeURIs returns the metastore URIs in one spelling, sorted: the
// scheme thrift://, the host lower-cased, the port kept (9083 when none
// is given, as HMS clients assume). Two nodes that list the same
// metastores in another order or spelling get the same list, so they
// share one stream, lease and cursor.
func NormalizeURIs(uris []string) []string {
	out := make([]string, 0, len(uris))
	for _, u := range uris {
		out = append(out, normalizeURI(u))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func normalizeURI(s string) string {
	s = strings.TrimSpace(s)
	hostport := s
	if i := strings.Index(s, "://"); i >= 0 {
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			hostport = u.Host
		} else {
			hostport = s[i+3:]
		}
	}
	hostport = strings.TrimSuffix(hostport, "/")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil { // no port
		host, port = strings.Trim(hostport, "[]"), "9083"
	}
	return "thrift://" + net.JoinHostPort(strings.ToLower(host), port)
}

// GroupName is the default name of an upstream group (upstream.name): its
// normalised URIs joined by commas.
func GroupName(uris []string) string {
	return strings.Join(NormalizeURIs(uris), ",")
}

// Layout is a short digest of the group's normalised URIs. Nodes announce
// it on the bus; two nodes on one stream (one group name) with different
// layouts are configured for different metastores, and would each miss
// the other's writes, so the bus raises an alarm.
func Layout(uris []string) string {
	h := sha256.Sum256([]byte(strings.Join(NormalizeURIs(uris), "\n")))
	return hex.EncodeToString(h[:8])
}

// Key names one of a group's Redis keys (kind: "inval", "acks", "peers",
// "leader", "eventlog", "changes", ...). Tagged names,
// prefix:{group}:kind, put every key of a group in one Redis Cluster hash
// slot, which the multi-key commands need (XREAD over the invalidation
// and acknowledgement streams, the transactions, the leader's scripts
// over the lease, its token and the event-log cursor). Untagged names,
// prefix:kind:group, are those of the releases before Cluster support:
// a node on one server or on Sentinel keeps them, so that old and new
// nodes upgraded one at a time stay on one bus (a Cluster, which no
// older release could use, has no old nodes to meet).
func Key(prefix, group, kind string, tagged bool) string {
	if tagged {
		return prefix + ":{" + group + "}:" + kind
	}
	return prefix + ":" + kind + ":" + group
}

// Tagged reports whether keys for c must be hash-tagged: c is a Redis
// Cluster client.
func Tagged(c redis.UniversalClient) bool {
	_, ok := c.(*redis.ClusterClient)
	return ok
}
