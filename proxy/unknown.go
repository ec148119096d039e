package proxy

import (
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

// maxUnknownNames bounds the distinct unknown method names tracked one by
// one (counter, log line): names come from clients, and a hostile one
// could otherwise grow the map and the metric's label set without end.
// Names past it share one row, unknownOther.
const maxUnknownNames = 64

// maxUnknownNameLen bounds a tracked name's length for the same reason;
// a longer name is tracked as unknownOther.
const maxUnknownNameLen = 128

// unknownOther is the row of names past the bounds.
const unknownOther = "other"

// unknownMethods is what the proxy does with methods outside the method
// table (a newer metastore's writes among them): forward them, then
// invalidate everything cached for the upstream group through the path
// writes take, unless the operator listed them as reads (cache.known_reads).
type unknownMethods struct {
	knownReads map[string]bool // read-only after construction
	log        *slog.Logger

	mu     sync.Mutex // guards byName
	byName map[string]*unknownMethod
}

// unknownMethod is one tracked name: the write it is treated as, and how
// many times it flushed the cache.
type unknownMethod struct {
	meth    hms.Method // Class Write, one ScopeAll effect
	flushes atomic.Uint64
}

var flushAll = []hms.Effect{{Scope: hms.ScopeAll}}

func newUnknownMethods(knownReads []string, log *slog.Logger) *unknownMethods {
	u := &unknownMethods{knownReads: map[string]bool{}, log: log, byName: map[string]*unknownMethod{}}
	for _, n := range knownReads {
		u.knownReads[n] = true
	}
	return u
}

// isKnownRead reports whether the operator listed name as a read.
func (u *unknownMethods) isKnownRead(name []byte) bool {
	return len(u.knownReads) > 0 && u.knownReads[string(name)]
}

// writeFor returns the write an unknown method is treated as, counting
// the call and logging the first call of each name.
func (u *unknownMethods) writeFor(name []byte) *hms.Method {
	u.mu.Lock()
	um := u.byName[string(name)]
	if um == nil {
		key := string(name)
		if len(u.byName) >= maxUnknownNames || len(key) > maxUnknownNameLen {
			key = unknownOther
		}
		if um = u.byName[key]; um == nil {
			um = &unknownMethod{meth: hms.Method{Name: key, Class: hms.Write, Effects: flushAll}}
			u.byName[key] = um
			if key == unknownOther {
				u.log.Warn("unknown methods past the tracking bound: each still flushes the cache",
					"method", logName(name), "bound", maxUnknownNames)
			} else {
				u.log.Warn("unknown method: forwarded, then everything cached for the upstream group is invalidated; list it in cache.known_reads if it only reads",
					"method", logName(name))
			}
		}
	}
	u.mu.Unlock()
	um.flushes.Add(1)
	return &um.meth
}

// logName is a method name a client sent, fit for a log line: at most
// maxUnknownNameLen bytes of it, quoted with every byte that is not
// printable ASCII escaped.
func logName(name []byte) string {
	if len(name) > maxUnknownNameLen {
		return strconv.QuoteToASCII(string(name[:maxUnknownNameLen])) + fmt.Sprintf("… (%d bytes)", len(name))
	}
	return strconv.QuoteToASCII(string(name))
}

// each calls fn with every tracked name and its flush count.
func (u *unknownMethods) each(fn func(method string, flushes uint64)) {
	u.mu.Lock()
	rows := make([]*unknownMethod, 0, len(u.byName))
	for _, um := range u.byName {
		rows = append(rows, um)
	}
	u.mu.Unlock()
	for _, um := range rows {
		fn(um.meth.Name, um.flushes.Load())
	}
}

// EachUnknownFlush calls fn with every method outside the method table
// that flushed the cache, and how many times; names past the tracking
// bound are summed as "other". Nothing without caching.
func (s *Server) EachUnknownFlush(fn func(method string, flushes uint64)) {
	if s.cache != nil && s.cache.unknown != nil {
		s.cache.unknown.each(fn)
	}
}

// EachFlushBudget calls fn with the counts of the cache-wide flushes
// clients caused, summed over the upstream groups: made at once within an
// identity's budget, and calls past it that waited for a shared flush.
// Nothing without caching.
func (s *Server) EachFlushBudget(fn func(path string, calls uint64)) {
	var immediate, coalesced uint64
	for i := range s.routes {
		if k := s.routes[i].cache; k != nil && k.flushes != nil {
			st := k.flushes.Stats()
			immediate += st.Immediate
			coalesced += st.Coalesced
		}
	}
	fn("immediate", immediate)
	fn("coalesced", coalesced)
}
