package federation

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hmsproxy/hmsproxy/federation/dbname"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Router routes the calls of a federated proxy; it implements
// proxy.Router. Safe for concurrent use.
type Router struct {
	mode    Mode
	groups  []*group
	timeout time.Duration
	partial bool
	limits  wire.Limits // with defaults
	log     *slog.Logger
	sets    sync.Pool // of *dbSet
}

// New compiles cfg into a Router. A database claimed by two federated
// groups, a group without a name, upstream or databases, stop it with an
// error wrapping ErrConfig.
func New(cfg Config) (*Router, error) {
	gs, err := compileGroups(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.ListingTimeout <= 0 {
		cfg.ListingTimeout = DefaultListingTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Router{mode: cfg.Mode, groups: gs, timeout: cfg.ListingTimeout, partial: cfg.Partial,
		limits: cfg.Limits.WithDefaults(), log: cfg.Logger, sets: sync.Pool{New: func() any { return newDBSet() }}}, nil
}

// Stats are group i's counters (0 the primary).
func (r *Router) Stats(i int) *GroupStats { return &r.groups[i].stats }

// GroupNames are the groups' names, the primary first.
func (r *Router) GroupNames() []string {
	out := make([]string, len(r.groups))
	for i, g := range r.groups {
		out[i] = g.Name
	}
	return out
}

// fanOut are the listings every group answers. Each names no database,
// or a database pattern that may match databases of several groups.
var fanOut = map[string]bool{
	"get_all_databases": true,
	"get_databases":     true,
	"get_table_meta":    true,
	"get_all_functions": true,
}

// Route implements proxy.Router. Every database the request names is
// resolved to its group and checked: wherever federation/dbname finds a
// name (the fields prefixed mode rewrites, each constraint's table_db and
// both databases of a foreign key among them, the database of "db.table"
// strings), not only the table a call creates or alters, since the
// metastore writes each constraint to its own table_db. Names are decoded
// under the limits the proxy read the request with.
func (r *Router) Route(meth *hms.Method, m wire.Message) proxy.Route {
	if meth == nil {
		// Unknown: may be a newer metastore's write of anything.
		return r.to(r.groups[0], nil, m.Name(), true)
	}
	if fanOut[meth.Name] {
		return proxy.Route{FanOut: true}
	}
	dbs := r.sets.Get().(*dbSet)
	defer func() { dbs.reset(); r.sets.Put(dbs) }()
	if err := dbname.Names(meth, m.Body(), r.limits, dbs.add); err != nil {
		// What cannot be decoded cannot be checked: no group gets it.
		return proxy.Route{Refuse: fmt.Sprintf("hmsproxy: %s refused: the request cannot be decoded to find its databases: %v", m.Name(), err)}
	}
	g, refuse := r.groupOf(dbs)
	if refuse != "" {
		return proxy.Route{Refuse: refuse}
	}
	d := r.to(g, dbs, m.Name(), IsWrite(meth))
	if d.Refuse != "" || !r.renames(g) || len(dbs.names()) == 0 {
		return d
	}
	// The group knows its databases by other names: the request is sent
	// with its names, the reply shown with the client's.
	// The header is clipped: appending to it in place would write over
	// the args being read, whenever a name grows (an alias longer than
	// the client's name).
	args, err := dbname.Args(slices.Clip(m.Header()), meth, m.Body(), r.limits, g.toLocal)
	if err != nil {
		return proxy.Route{Refuse: fmt.Sprintf("hmsproxy: %s: the database names cannot be rewritten for group %q: %v", m.Name(), g.Name, err)}
	}
	lim := r.limits
	lim.MaxMessage = len(args) // names may have grown
	nm, err := wire.Parse(args, lim)
	if err != nil {
		return proxy.Route{Refuse: fmt.Sprintf("hmsproxy: %s: rewritten request unreadable: %v", m.Name(), err)}
	}
	d.Msg = nm
	d.Reply = func(dst []byte, typ byte, body []byte) ([]byte, error) {
		return dbname.Reply(dst, meth, typ, body, g.toClient)
	}
	return d
}

// renames reports whether g's databases have other names for clients
// than in its metastore.
func (r *Router) renames(g *group) bool {
	return r.mode == Prefixed && g.idx > 0 || len(g.aliases) > 0
}

// errNotOurs: a name the rewrite meets belongs to no database of the
// group (a second name of another group in one request).
var errNotOurs = errors.New("federation: database of another group")

// toLocal is the metastore's name of a database clients name db.
// Names are compared as the metastore reads them (hms.Normalize), so
// that " Lake_Sales" is routed, refused and renamed as lake_sales is.
func (g *group) toLocal(db string) (string, error) {
	l := hms.NormalizeString(db)
	if a, ok := g.aliases[l]; ok {
		return a, nil
	}
	if g.prefix == "" || g.idx == 0 {
		return db, nil
	}
	if !strings.HasPrefix(l, g.prefix) {
		return "", fmt.Errorf("%w: %q lacks prefix %q", errNotOurs, db, g.Prefix)
	}
	return l[len(g.prefix):], nil
}

// toClient is the name clients see for the metastore's database db.
func (g *group) toClient(db string) string {
	if a, ok := g.local[hms.NormalizeString(db)]; ok {
		return a
	}
	if g.idx == 0 {
		return db
	}
	return g.Prefix + db
}

// to routes a call to g, unless g's access rule refuses it.
func (r *Router) to(g *group, dbs *dbSet, name []byte, write bool) proxy.Route {
	if write {
		if msg := g.refuses(dbs, name); msg != "" {
			g.stats.Refused.Add(1)
			r.log.Info("write refused by access rule", "group", g.Name, "method", string(name), "rule", g.access.String())
			return proxy.Route{Refuse: msg}
		}
	}
	g.stats.Routed.Add(1)
	return proxy.Route{Group: g.idx}
}

// refuses returns why g refuses a write naming dbs, "" when it does not.
func (g *group) refuses(dbs *dbSet, name []byte) string {
	switch g.access {
	case ReadOnly:
		return fmt.Sprintf("hmsproxy: %s refused: group %q is read-only (access: read-only)", name, g.Name)
	case ReadWriteListed:
		if dbs == nil || len(dbs.names()) == 0 {
			return fmt.Sprintf("hmsproxy: %s refused: group %q allows writes only to its writable_databases, and the call names no database (access: read-write-on-listed)", name, g.Name)
		}
		for _, db := range dbs.names() {
			if !g.writable.Allowed(db, "") {
				return fmt.Sprintf("hmsproxy: %s refused: database %q is not in group %q's writable_databases (access: read-write-on-listed)", name, db, g.Name)
			}
		}
	}
	return ""
}

// groupOf resolves the databases a call names to one group: the primary
// when it names none; a refusal when they belong to several.
func (r *Router) groupOf(dbs *dbSet) (*group, string) {
	var got *group
	for _, db := range dbs.names() {
		g, refuse := r.resolve(db)
		if refuse != "" {
			return nil, refuse
		}
		if got != nil && got != g {
			return nil, fmt.Sprintf("hmsproxy: the call names databases of group %q and group %q; a call cannot span groups", got.Name, g.Name)
		}
		got = g
	}
	if got == nil {
		got = r.groups[0]
	}
	return got, ""
}

// resolve is the group serving db (normalised, no catalog), as clients
// name it.
func (r *Router) resolve(db string) (*group, string) {
	if r.mode == Prefixed {
		for _, g := range r.groups[1:] {
			if _, ok := g.aliases[db]; ok || strings.HasPrefix(db, g.prefix) {
				return g, ""
			}
		}
		return r.groups[0], ""
	}
	var got *group
	for _, g := range r.groups[1:] {
		if !g.claims(db) {
			continue
		}
		if got != nil {
			// Patterns that overlap on a name the configuration does not
			// spell out: serving either would be a guess.
			return nil, fmt.Sprintf("hmsproxy: database %q is claimed by both group %q and group %q; fix the federation configuration", db, got.Name, g.Name)
		}
		got = g
	}
	if got == nil {
		got = r.groups[0]
	}
	return got, ""
}

// IsWrite reports whether a call of meth may change metastore state, so
// that an access rule applies to it: the method table's writes (every
// DDL, truncate_table, statistics, privileges), the passthroughs that
// change state (transactions, locks, write ids, compactions, functions
// of the ACID machinery, roles, resource plans, ...) and any method the
// table does not know. Delegation tokens change no metadata: a
// read-only member still hands them out.
func IsWrite(meth *hms.Method) bool {
	switch {
	case meth == nil:
		return true
	case meth.Class == hms.Write:
		return true
	case meth.Class == hms.Passthrough:
		return !meth.Idempotent() && !tokenCalls[meth.Name]
	}
	return false
}

var tokenCalls = map[string]bool{
	"get_delegation_token": true, "renew_delegation_token": true, "cancel_delegation_token": true,
}

// dbSet holds the distinct databases a call names, normalised as the
// metastore reads them and without their catalog. Most calls name one:
// the first few live inline; past them a map keeps each addition O(1),
// so a request naming many databases costs linear time. Sets are pooled
// (Router.sets): routing allocates nothing but each new name's string.
type dbSet struct {
	list    []string // starts as small[:0]
	small   [4]string
	seen    map[string]struct{} // once list is past small
	scratch []byte              // the name being added, normalised
	add     func(db []byte)     // addName, bound once
}

func newDBSet() *dbSet {
	s := new(dbSet)
	s.list = s.small[:0]
	s.add = s.addName
	return s
}

// addName adds db, which may carry its catalog ("@cat#db").
func (s *dbSet) addName(b []byte) {
	if len(b) > 0 && b[0] == '@' {
		if i := bytes.IndexByte(b, '#'); i >= 0 {
			b = b[i+1:]
		}
	}
	s.scratch = hms.AppendNormalized(s.scratch[:0], b)
	if len(s.scratch) == 0 {
		return
	}
	if s.seen != nil {
		if _, ok := s.seen[string(s.scratch)]; ok {
			return
		}
	} else {
		for _, have := range s.list {
			if have == string(s.scratch) {
				return
			}
		}
	}
	db := string(s.scratch)
	s.list = append(s.list, db)
	switch {
	case s.seen != nil:
		s.seen[db] = struct{}{}
	case len(s.list) > len(s.small):
		s.seen = make(map[string]struct{}, 2*len(s.list))
		for _, n := range s.list {
			s.seen[n] = struct{}{}
		}
	}
}

func (s *dbSet) names() []string { return s.list }

// maxKeptNames bounds what a pooled set keeps of a call that named many.
const maxKeptNames = 64

func (s *dbSet) reset() {
	clear(s.list)
	s.list = s.list[:0]
	if cap(s.list) > maxKeptNames {
		s.list = s.small[:0]
	}
	s.seen = nil // back to the linear check until a set grows past small again
	if cap(s.scratch) > 4<<10 {
		s.scratch = nil
	}
}

// GroupCounts is one group's counters, read once.
type GroupCounts struct {
	Name                                             string
	Routed, Refused, ListingFailures, ListingOmitted uint64
}

// Counts are every group's counters, the primary first.
func (r *Router) Counts() []GroupCounts {
	out := make([]GroupCounts, len(r.groups))
	for i, g := range r.groups {
		out[i] = GroupCounts{Name: g.Name, Routed: g.stats.Routed.Load(), Refused: g.stats.Refused.Load(),
			ListingFailures: g.stats.ListingFailures.Load(), ListingOmitted: g.stats.ListingOmitted.Load()}
	}
	return out
}
