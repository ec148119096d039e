package twin

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Federation: the fleet puts two metastores of the version behind one
// endpoint, the primary and a member, in manual mode (the member serves
// the databases its patterns name) or in prefixed mode (its databases
// are seen with a prefix, and the proxy renames them both ways). A call
// made straight goes to the metastore that owns what it names; a
// listing is the union of both metastores' lists, each keeping the
// databases it serves.

// federation is how the fleet federates.
type federation struct {
	mode   string // "manual" or "prefixed"
	prefix string // prefixed: the member's databases as clients see them
	ms     *Metastore
	bases  map[string]bool // the bases of the member's databases
}

// memberBases are the databases the generators make on the member.
var memberBases = []string{"m0", "m1"}

func newFederation(mode string, member *Metastore) *federation {
	f := &federation{mode: mode, ms: member, bases: map[string]bool{}}
	if mode == "prefixed" {
		f.prefix = "fed_"
	}
	for _, b := range memberBases {
		f.bases[b] = true
	}
	return f
}

// local is the member's name for a database of its base as a client
// writes it in a prefixed federation: the name the member would read
// after the metastore's own normalisation (trim of characters up to
// the blank, then Java's lower case), without the prefix. A form that
// does not normalise to the prefix names no database of the member;
// the proxy sends it to the primary, which has none by that name
// either, so the member is asked for the name as written.
func (f *federation) local(ns string, n Name) string {
	return f.localOf(n.renderCanon(f.prefix + Canon(ns, n.Base)))
}

// localOf is local for a name as written.
func (f *federation) localOf(written string) string {
	l := strings.TrimFunc(written, func(r rune) bool { return r <= ' ' })
	// Java lower-cases CAPITAL I WITH DOT to i and a combining dot; Go
	// to a plain i.
	l = strings.ToLower(strings.ReplaceAll(l, "\u0130", "i\u0307"))
	if rest, ok := strings.CutPrefix(l, f.prefix); ok {
		return rest
	}
	return written
}

// renames reports whether clients and the member name a database of
// base differently (prefixed mode).
func (f *federation) renames(base string) bool {
	return f != nil && f.mode == "prefixed" && f.member(base)
}

// member reports whether a database base is the member's.
func (f *federation) member(base string) bool { return f != nil && f.bases[base] }

// config is the fleet's federation settings, as YAML.
func (f *federation) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "federation:\n  database_resolution: %s\n  federated:\n  - name: member\n", f.mode)
	fmt.Fprintf(&b, "    uris: [thrift://%s]\n    access: read-write\n", f.ms.Addr)
	if f.mode == "prefixed" {
		fmt.Fprintf(&b, "    prefix: %s\n", f.prefix)
	} else {
		b.WriteString("    databases:\n")
		for _, m := range memberBases {
			fmt.Fprintf(&b, "    - \"twkis*_%s\"\n", m)
		}
	}
	return b.String()
}

// writeConfig writes the settings into dir and returns the file.
func (f *federation) writeConfig(dir string) (string, error) {
	p := filepath.Join(dir, "federation.yaml")
	return p, os.WriteFile(p, []byte(f.config()), 0o600)
}

// clientNames rewrites, in a member's reply made straight, its database
// names as the proxy shows them to clients (prefixed mode): every string
// that is exactly one of them, length prefix and all. Names inside other
// strings (locations, messages) stay as they are, as the proxy leaves
// them.
func (f *federation) clientNames(ns string, body []byte) []byte {
	if f == nil || f.mode != "prefixed" {
		return body
	}
	for _, b := range memberBases {
		local := Canon(ns, b)
		body = bytes.ReplaceAll(body, lengthPrefixed(local), lengthPrefixed(f.prefix+local))
	}
	return body
}

func lengthPrefixed(s string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(s))), s...)
}

// store is one metastore as the runner sees it: the twin's own
// connection, and how far every node applied its notification log.
type store struct {
	ms      *Metastore
	metric  string // the nodes' applied-event series of its group
	ctlMu   sync.Mutex
	ctl     *hmsclient.Client // guarded by ctlMu
	applied []atomic.Int64    // per node
}

func newStore(ms *Metastore, metric string, nodes int) (*store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := hmsclient.Dial(ctx, ms.Addr, wire.Buffered)
	if err != nil {
		return nil, err
	}
	return &store{ms: ms, metric: metric, ctl: c, applied: make([]atomic.Int64, nodes)}, nil
}

// call makes one call on the twin's own connection, dialling again
// after a failure.
func (st *store) call(method string, args []byte) reply {
	st.ctlMu.Lock()
	defer st.ctlMu.Unlock()
	rp := call(st.ctl, method, args)
	if rp.err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st.ctl.Close()
		if c, err := hmsclient.Dial(ctx, st.ms.Addr, wire.Buffered); err == nil {
			st.ctl = c
		}
	}
	return rp
}

// latestEvent is the metastore's newest notification event id.
func (st *store) latestEvent() (int64, error) {
	rp := st.call("get_current_notificationEventId", []byte{wire.TStop})
	if rp.err != nil {
		return 0, rp.err
	}
	d := wire.NewDecoder(rp.body)
	var id int64
	d.Fields(func(fid int16, typ byte) bool {
		if fid != 0 || typ != wire.TStruct {
			return false
		}
		d.Fields(func(fid int16, typ byte) bool {
			if fid == 1 && typ == wire.TI64 {
				id = d.I64()
				return true
			}
			return false
		})
		return true
	})
	return id, d.Err()
}

func (st *store) appliedAll(id int64) bool {
	for i := range st.applied {
		if st.applied[i].Load() < id {
			return false
		}
	}
	return true
}

func (st *store) close() {
	st.ctlMu.Lock()
	defer st.ctlMu.Unlock()
	st.ctl.Close()
}

// storeOf is the metastore a call that touches what touches names goes
// to: 1 for the member's databases, 0 for the primary's; -1 for a
// listing of every database (a fan-out), under federation only.
func (r *runner) storeOf(touches []string) int {
	if r.fed == nil {
		return 0
	}
	for _, t := range touches {
		if t == "*" {
			return -1
		}
		base, _, _ := strings.Cut(t, "/")
		if r.fed.member(base) {
			return 1
		}
	}
	return 0
}

// listing answers a fan-out straight: each metastore's list of database
// names, the member's as clients see them, each keeping the databases
// its group serves.
func (r *runner) listing(s *session, method string, args []byte) (names []string, err error) {
	for i, c := range []*hmsclient.Client{s.dc, s.dm} {
		rp := call(c, method, args)
		if rp.err != nil {
			return nil, rp.err
		}
		list, ok := stringList(rp)
		if !ok {
			return nil, fmt.Errorf("%s from metastore %d: %s", method, i, rp)
		}
		for _, n := range list {
			served := r.servesMember(n)
			switch {
			case i == 0 && !served:
				names = append(names, n)
			case i == 1 && r.fed.mode == "prefixed":
				names = append(names, r.fed.prefix+n)
			case i == 1 && served:
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// servesMember reports whether, in manual mode, the member's patterns
// name database n (in prefixed mode: whether n has the prefix).
func (r *runner) servesMember(n string) bool {
	if r.fed.mode == "prefixed" {
		return strings.HasPrefix(n, r.fed.prefix)
	}
	for _, b := range memberBases {
		if strings.HasPrefix(n, "twkis") && strings.HasSuffix(n, "_"+b) {
			return true
		}
	}
	return false
}

// stringList reads a reply whose success is a list of strings.
func stringList(rp reply) ([]string, bool) {
	if rp.err != nil || rp.typ != wire.Reply {
		return nil, false
	}
	d := wire.NewDecoder(rp.body)
	typ, id := d.FieldBegin()
	if d.Err() != nil || id != 0 || typ != wire.TList {
		return nil, false
	}
	_, n := d.ListBegin()
	out := make([]string, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		out = append(out, d.String())
	}
	return out, d.Err() == nil
}
