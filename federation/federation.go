// Package federation puts one endpoint in front of several metastore
// groups: a primary and any number of federated members, each serving
// its own databases. It is the proxy's Router: it names the group of
// every call from the database the call names (catalog prefixes
// included), refuses writes a group's access rule forbids before they
// reach any metastore, and answers listings from every group at once,
// each bounded by its own timeout.
//
// Waggle Dance is the reference design; its users' complaints are the
// rules here: a group that fails a listing fails it loudly (or, when the
// operator chose partial results, is left out and counted, never
// silently); a slow or dead member never delays calls to another, since
// every group has its own pools; truncate_table and the ACID calls are
// writes like any other.
package federation

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/filter"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Mode is how databases are resolved to groups.
type Mode uint8

const (
	// Manual: each federated group lists the databases it serves; the
	// primary serves every other one.
	Manual Mode = iota
	// Prefixed: each federated group's databases are seen with its
	// prefix; names are rewritten in requests and replies.
	Prefixed
)

// ParseMode reads the resolution mode's configuration name; "" is Manual.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(s) {
	case "", "manual":
		return Manual, nil
	case "prefixed":
		return Prefixed, nil
	}
	return 0, fmt.Errorf("%w: database resolution %q (manual or prefixed)", ErrConfig, s)
}

// Access is what a group lets clients change.
type Access uint8

const (
	// Default: read-write for the primary, read-only for a federated group.
	Default Access = iota
	ReadOnly
	ReadWrite
	// ReadWriteListed: writes only to the group's WritableDatabases.
	ReadWriteListed
)

var accessNames = [...]string{"default", "read-only", "read-write", "read-write-on-listed"}

func (a Access) String() string {
	if int(a) < len(accessNames) {
		return accessNames[a]
	}
	return fmt.Sprintf("access(%d)", a)
}

// ParseAccess reads an access rule's configuration name; "" is Default.
func ParseAccess(s string) (Access, error) {
	switch strings.ToLower(s) {
	case "":
		return Default, nil
	case "read-only", "read_only":
		return ReadOnly, nil
	case "read-write", "read_write":
		return ReadWrite, nil
	case "read-write-on-listed", "read_write_on_listed", "read-write-listed", "read_write_listed":
		return ReadWriteListed, nil
	}
	return 0, fmt.Errorf("%w: access %q (read-only, read-write or read-write-on-listed)", ErrConfig, s)
}

// ErrConfig marks a configuration the federation refuses to start with.
var ErrConfig = errors.New("federation: bad configuration")

// Member is one upstream group as the federation sees it.
type Member struct {
	// Name names the group in logs, metrics and the messages clients
	// get. Required, unique.
	Name string
	// Up takes the group's calls (listings fan out through it). Required.
	Up proxy.Forwarder
	// Databases are the databases a federated group serves in Manual
	// mode: names or patterns as filter.Compile takes them ("sales",
	// "sales_*", "re:^s[0-9]+$"), matched case-insensitively. Ignored for
	// the primary, which serves every database no other group claims.
	Databases []string
	// Access is what clients may change through the group. Default:
	// read-write for the primary, read-only for a federated group, so a
	// member joined to read is never written by mistake.
	Access Access
	// WritableDatabases are, with ReadWriteListed, the databases (names
	// or patterns) that may be written.
	WritableDatabases []string
	// Prefix is, in Prefixed mode, how the group's databases are seen by
	// clients. Ignored in Manual mode.
	Prefix string
	// Aliases map a database name clients use to the group's own name
	// (Waggle Dance's database_name_mapping). A client name is resolved
	// through them before any other rule.
	Aliases map[string]string
}

// Config configures a Router.
type Config struct {
	Mode Mode
	// Groups are the primary first, then the federated groups; their
	// order is that of proxy.Config.Federated, and listings merge in it.
	Groups []Member
	// ListingTimeout bounds each group's part of a listing that fans out
	// to every group, so a slow member delays a listing at most this long.
	// Default 10s.
	ListingTimeout time.Duration
	// Partial: a group that fails or times out is left out of a listing
	// (counted and logged) instead of failing it. Default false: the
	// listing fails with a MetaException naming the group.
	Partial bool
	// Limits are the limits the proxy reads client requests under
	// (proxy.Config.Limits); the router decodes them under the same, so
	// that a request the proxy takes is one it can route. Zero fields:
	// wire's defaults.
	Limits wire.Limits
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
}

// DefaultListingTimeout is Config.ListingTimeout's default.
const DefaultListingTimeout = 10 * time.Second

// group is a Group compiled.
type group struct {
	Member
	idx      int
	access   Access
	serves   *filter.Patterns  // Manual, federated: the databases it claims
	literals []string          // the literal names among Databases, lower-cased
	writable *filter.Patterns  // ReadWriteListed
	aliases  map[string]string // client name → the metastore's
	local    map[string]string // the metastore's name → client name
	prefix   string            // Prefixed: lower-cased
	stats    GroupStats
}

// GroupStats count what the federation did for one group.
type GroupStats struct {
	// Routed: calls sent to the group alone.
	Routed atomic.Uint64
	// Refused: writes refused by the group's access rule.
	Refused atomic.Uint64
	// ListingFailures: listings the group failed or timed out on.
	ListingFailures atomic.Uint64
	// ListingOmitted: listings answered without the group (partial
	// results).
	ListingOmitted atomic.Uint64
}

func compileGroups(cfg Config) ([]*group, error) {
	if len(cfg.Groups) == 0 {
		return nil, fmt.Errorf("%w: no groups", ErrConfig)
	}
	gs := make([]*group, len(cfg.Groups))
	names := map[string]bool{}
	for i, g := range cfg.Groups {
		if g.Name == "" {
			return nil, fmt.Errorf("%w: group %d has no name", ErrConfig, i)
		}
		if names[g.Name] {
			return nil, fmt.Errorf("%w: two groups are named %q", ErrConfig, g.Name)
		}
		names[g.Name] = true
		if g.Up == nil {
			return nil, fmt.Errorf("%w: group %q has no upstream", ErrConfig, g.Name)
		}
		c := &group{Member: g, idx: i, access: g.Access, aliases: map[string]string{}, local: map[string]string{},
			prefix: hms.NormalizeString(g.Prefix)}
		if c.access == Default {
			c.access = ReadWrite
			if i > 0 {
				c.access = ReadOnly
			}
		}
		if c.access == ReadWriteListed {
			if len(g.WritableDatabases) == 0 {
				return nil, fmt.Errorf("%w: group %q is read-write-on-listed but lists no writable_databases", ErrConfig, g.Name)
			}
			p, err := filter.Compile(g.WritableDatabases, nil)
			if err != nil {
				return nil, fmt.Errorf("%w: group %q writable_databases: %w", ErrConfig, g.Name, err)
			}
			c.writable = p
		}
		for from, to := range g.Aliases {
			from, to = hms.NormalizeString(from), hms.NormalizeString(to)
			if _, dup := c.local[to]; dup {
				return nil, fmt.Errorf("%w: group %q: two database_name_mapping entries name database %q", ErrConfig, g.Name, to)
			}
			c.aliases[from], c.local[to] = to, from
		}
		if cfg.Mode == Prefixed {
			switch {
			case i == 0 && g.Prefix != "":
				return nil, fmt.Errorf("%w: the primary takes no prefix (its databases keep their names)", ErrConfig)
			case i > 0 && g.Prefix == "":
				return nil, fmt.Errorf("%w: federated group %q has no prefix (database_resolution: prefixed)", ErrConfig, g.Name)
			}
		}
		if i > 0 && cfg.Mode == Manual {
			if len(g.Databases) == 0 {
				return nil, fmt.Errorf("%w: federated group %q serves no databases (list them in databases)", ErrConfig, g.Name)
			}
			p, err := filter.Compile(g.Databases, nil)
			if err != nil {
				return nil, fmt.Errorf("%w: group %q databases: %w", ErrConfig, g.Name, err)
			}
			for _, d := range g.Databases {
				if strings.Contains(d, ".") && !strings.HasPrefix(d, "re:") {
					return nil, fmt.Errorf("%w: group %q databases: %q names a table; a group serves whole databases", ErrConfig, g.Name, d)
				}
				if !strings.HasPrefix(d, "re:") && !strings.ContainsAny(d, "*?") {
					c.literals = append(c.literals, hms.NormalizeString(d))
				}
			}
			for a := range c.aliases {
				c.literals = append(c.literals, a)
			}
			c.serves = p
		}
		gs[i] = c
	}
	if cfg.Mode == Manual {
		if err := checkClaims(gs); err != nil {
			return nil, err
		}
	} else {
		for _, g := range gs[1:] {
			for _, o := range gs[1:] {
				if o != g && strings.HasPrefix(o.prefix, g.prefix) {
					return nil, fmt.Errorf("%w: group %q's prefix %q starts group %q's prefix %q: a database could be either's", ErrConfig, g.Name, g.Prefix, o.Name, o.Prefix)
				}
			}
		}
	}
	return gs, nil
}

// checkClaims stops a configuration where two federated groups claim one
// database: every literal name (and alias) is checked against every
// other group's patterns. Two patterns that overlap only on names not
// written out cannot be seen here; a call naming such a database is
// refused at run time (resolve).
func checkClaims(gs []*group) error {
	for _, g := range gs[1:] {
		for _, name := range g.literals {
			for _, o := range gs[1:] {
				if o == g {
					continue
				}
				if o.claims(name) {
					return fmt.Errorf("%w: database %q is claimed by both group %q and group %q", ErrConfig, name, g.Name, o.Name)
				}
			}
		}
	}
	return nil
}

// claims reports whether federated group g serves db (lower-cased, no
// catalog) in Manual mode.
func (g *group) claims(db string) bool {
	if g.serves == nil {
		return false
	}
	if _, ok := g.aliases[db]; ok {
		return true
	}
	return g.serves.Allowed(db, "")
}
