package federation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/hmsproxy/hmsproxy/federation/dbname"
	"github.com/hmsproxy/hmsproxy/proxy"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// A listing asks every group at once, each bounded by the listing
// timeout, and merges what each group serves: the primary's databases
// that no federated group claims, and each federated group's claimed
// ones. Name lists come back sorted, as a metastore sorts them; lists of
// objects in group order (the primary first, then the federated groups
// as configured), each group's in its metastore's order.

// groupReply is one group's answer to a listing.
type groupReply struct {
	items [][]byte // list elements: strings, or whole structs
	fail  string   // why the group has no answer; "" when it has one
}

// capture keeps a reply; not borrowing, it gets a buffer of its own.
type capture struct {
	typ  byte
	body []byte
}

func (c *capture) Reply(m wire.Message) error {
	c.typ, c.body = m.Type, m.Body()
	return nil
}

// errListing is a group's reply the merge cannot read.
var errListing = errors.New("federation: unreadable listing reply")

// FanOut implements proxy.Router: it answers a listing from every group.
// Each group's part is read through read: from the group's cache when
// the listing is a cached read, so a part is dropped by its own group's
// invalidations (a database created in one member drops that member's
// part alone) and the merge, made afresh on every call, is never older
// than its parts.
func (r *Router) FanOut(ctx context.Context, sess *upstream.Session, meth *hms.Method, m wire.Message, read proxy.GroupReader) (byte, []byte, error) {
	replies := make([]groupReply, len(r.groups))
	// A federated member may be older than the client: a 2.3 metastore
	// takes "@hive#pattern" literally and lists nothing. The default
	// catalog's prefix is dropped toward the members, which means the
	// same to a 3.x metastore.
	plain := m
	if nm, ok := dropDefaultCatalog(meth, m); ok {
		plain = nm
	}
	var wg sync.WaitGroup
	for i, g := range r.groups {
		msg := m
		if i > 0 {
			msg = plain
		}
		if r.mode == Prefixed && i > 0 {
			var ok bool
			if msg, ok = prefixedPattern(g, meth, msg); !ok {
				continue // the pattern matches none of the group's names
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = r.ask(ctx, g, sess, meth, msg, read)
		}()
	}
	wg.Wait()

	var merged [][]byte
	for i, g := range r.groups {
		rep := &replies[i]
		if rep.fail != "" {
			g.stats.ListingFailures.Add(1)
			if !r.partial {
				r.log.Warn("listing failed: a group did not answer", "method", meth.Name, "group", g.Name, "reason", rep.fail)
				return wire.Reply, metaException(meth.Name, fmt.Sprintf(
					"hmsproxy: %s failed: federated group %q did not answer: %s", meth.Name, g.Name, rep.fail)), nil
			}
			g.stats.ListingOmitted.Add(1)
			r.log.Warn("listing answered without a group (partial results)", "method", meth.Name, "group", g.Name, "reason", rep.fail)
			continue
		}
		for _, it := range rep.items {
			if r.keeps(g, meth.Name, it) {
				merged = append(merged, it)
			}
		}
	}
	return wire.Reply, encodeListing(meth.Name, merged), nil
}

// ask gets one group's part of a listing within the listing timeout.
func (r *Router) ask(ctx context.Context, g *group, sess *upstream.Session, meth *hms.Method, m wire.Message, read proxy.GroupReader) groupReply {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var c capture
	var err error
	if read != nil {
		c.typ, c.body, err = read(ctx, g.idx, sess, meth, m)
	} else {
		err = g.Up.Do(ctx, upstream.Call{Session: sess, Class: upstream.Read, Msg: m}, &c)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return groupReply{fail: fmt.Sprintf("no answer within %v", r.timeout)}
		}
		return groupReply{fail: err.Error()}
	}
	if c.typ != wire.Reply {
		return groupReply{fail: "the metastore answered with a TApplicationException"}
	}
	if r.renames(g) {
		b, err := dbname.Reply(nil, meth, c.typ, c.body, g.toClient)
		if err != nil {
			return groupReply{fail: err.Error()}
		}
		c.body = b
	}
	items, msg, err := decodeListing(meth.Name, c.body)
	switch {
	case err != nil:
		return groupReply{fail: err.Error()}
	case msg != "":
		return groupReply{fail: "the metastore answered: " + msg}
	}
	return groupReply{items: items}
}

// keeps reports whether a listing element from g belongs in the merged
// reply: the element's database is served by g.
func (r *Router) keeps(g *group, method string, item []byte) bool {
	db := ""
	switch method {
	case "get_all_databases", "get_databases":
		db = string(item)
	case "get_table_meta":
		db = stringField(item, 1) // TableMeta.dbName
	case "get_all_functions":
		db = stringField(item, 2) // Function.dbName
	}
	owner, refuse := r.resolve(hms.NormalizeString(db))
	return refuse == "" && owner == g
}

// stringField is the string at field id of the struct s, "" when absent.
func stringField(s []byte, id int16) string {
	out := ""
	hms.Walk(s, hms.Path{id}, func(typ byte, v []byte) bool {
		if typ == wire.TString {
			out = string(v)
		}
		return true
	})
	return out
}

// decodeListing splits a listing reply into its elements, or returns the
// message of the exception it carries.
func decodeListing(method string, body []byte) (items [][]byte, exc string, err error) {
	d := wire.NewDecoder(body)
	typ, id := d.FieldBegin()
	if d.Err() != nil {
		return nil, "", fmt.Errorf("%w: %w", errListing, d.Err())
	}
	if id != 0 {
		if typ == wire.TStruct {
			exc = stringField(body[d.Pos():], 1)
		}
		if exc == "" {
			exc = fmt.Sprintf("exception at result field %d", id)
		}
		return nil, exc, nil
	}
	if method == "get_all_functions" {
		// GetAllFunctionsResponse: 1 functions (optional list<Function>).
		if typ != wire.TStruct {
			return nil, "", fmt.Errorf("%w: %s result is not a struct", errListing, method)
		}
		for {
			ft, fid := d.FieldBegin()
			if d.Err() != nil || ft == wire.TStop {
				return items, "", d.Err()
			}
			if fid == 1 && ft == wire.TList {
				items = listItems(d, body, &err)
				if err != nil {
					return nil, "", err
				}
				continue
			}
			d.Skip(ft)
		}
	}
	if typ != wire.TList {
		return nil, "", fmt.Errorf("%w: %s result is not a list", errListing, method)
	}
	items = listItems(d, body, &err)
	return items, "", err
}

// listItems reads a list at d's position (d decodes src): strings as their bytes,
// structs as their whole encoding.
func listItems(d *wire.Decoder, src []byte, err *error) [][]byte {
	et, n := d.ListBegin()
	if d.Err() != nil {
		*err = d.Err()
		return nil
	}
	out := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		if et == wire.TString {
			out = append(out, d.Bytes())
		} else {
			from := d.Pos()
			d.Skip(et)
			out = append(out, src[from:d.Pos()])
		}
		if d.Err() != nil {
			*err = d.Err()
			return nil
		}
	}
	return out
}

// encodeListing is the reply body of a merged listing.
func encodeListing(method string, items [][]byte) []byte {
	e := wire.Encoder{}
	switch method {
	case "get_all_databases", "get_databases":
		names := make([]string, len(items))
		for i, it := range items {
			names[i] = string(it)
		}
		slices.Sort(names)
		names = slices.Compact(names)
		e.StringListField(0, names)
	case "get_table_meta":
		e.FieldBegin(wire.TList, 0)
		structList(&e, items)
	case "get_all_functions":
		e.FieldBegin(wire.TStruct, 0)
		e.FieldBegin(wire.TList, 1)
		structList(&e, items)
		e.Stop()
	}
	e.Stop()
	return e.B
}

func structList(e *wire.Encoder, items [][]byte) {
	e.ListBegin(wire.TStruct, len(items))
	for _, it := range items {
		e.B = append(e.B, it...)
	}
}

// metaException is a reply body carrying a MetaException with msg at the
// field method declares it (1 for every listing that fans out).
func metaException(method, msg string) []byte {
	f := hms.MetaExceptionField(method)
	if f <= 0 {
		f = 1
	}
	return hms.AppendMetaException(nil, f, msg)
}

// dropDefaultCatalog rewrites a listing whose database pattern (field 1 of
// get_databases and get_table_meta) carries the default catalog's prefix
// to the pattern alone: "@hive#" (every database) becomes "*". False when
// there is nothing to rewrite.
func dropDefaultCatalog(meth *hms.Method, m wire.Message) (wire.Message, bool) {
	if meth.Name != "get_databases" && meth.Name != "get_table_meta" {
		return m, false
	}
	pat, ok := patternArg(m)
	const prefix = "@hive#"
	if !ok || len(pat) < len(prefix) || !strings.EqualFold(pat[:len(prefix)], prefix) {
		return m, false
	}
	pat = pat[len(prefix):]
	if pat == "" {
		pat = "*"
	}
	return withPattern(m, pat)
}

// prefixedPattern maps a listing's database pattern (get_databases,
// get_table_meta) onto group g's own names in Prefixed mode: each
// alternative ("a*|b*") that starts with g's prefix loses it; "*" stays;
// any other cannot match a name of g and is dropped. False when none is
// left: g is not asked. Methods without a pattern are sent as they are.
func prefixedPattern(g *group, meth *hms.Method, m wire.Message) (wire.Message, bool) {
	if meth.Name != "get_databases" && meth.Name != "get_table_meta" {
		return m, true
	}
	pat, ok := patternArg(m)
	if !ok || strings.HasPrefix(pat, "@") {
		return m, true // another catalog's: the group answers as it can
	}
	var keep []string
	for _, alt := range strings.Split(pat, "|") {
		l := strings.ToLower(strings.TrimSpace(alt))
		switch {
		case l == "*" || l == "":
			keep = append(keep, "*")
		case strings.HasPrefix(l, g.prefix):
			keep = append(keep, l[len(g.prefix):])
		case strings.HasPrefix(g.prefix, strings.TrimSuffix(l, "*")) && strings.HasSuffix(l, "*"):
			keep = append(keep, "*") // "la*" covers every "lake_" name
		}
	}
	if len(keep) == 0 {
		return m, false
	}
	return withPattern(m, strings.Join(keep, "|"))
}

// patternArg is the database pattern of a listing (get_databases,
// get_table_meta): its string arg 1.
func patternArg(m wire.Message) (pat string, ok bool) {
	hms.Walk(m.Body(), hms.Path{1}, func(typ byte, v []byte) bool {
		pat, ok = string(v), typ == wire.TString
		return true
	})
	return pat, ok
}

// withPattern is m with its pattern arg replaced by pat; false, with m,
// when the message cannot be rebuilt.
func withPattern(m wire.Message, pat string) (wire.Message, bool) {
	var e wire.Encoder
	e.B = append(e.B, m.Header()...)
	e.StringField(1, pat)
	e.B = hms.DropField(e.B, m.Body(), hms.Path{1})
	nm, err := wire.Parse(e.B, wire.Limits{MaxMessage: len(e.B)})
	if err != nil {
		return m, false
	}
	return nm, true
}
