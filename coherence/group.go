package coherence

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/url"
	"slices"
	"strings"
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
