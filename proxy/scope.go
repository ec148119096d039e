package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// ScopeMode says whether cached entries are shared across set_ugi
// identities (cache.scope).
type ScopeMode uint8

const (
	// ScopeAuto asks the metastore for its filter hook and pre-event
	// listeners: with anything but the defaults, or when it cannot tell,
	// entries are keyed by identity; otherwise they are shared.
	ScopeAuto ScopeMode = iota
	// ScopeShared shares entries across identities, as Trino's metastore
	// cache does: the operator says no user sees less than another.
	ScopeShared
	// ScopeUser keys every entry by identity.
	ScopeUser
)

func (m ScopeMode) String() string {
	switch m {
	case ScopeAuto:
		return "auto"
	case ScopeShared:
		return "shared"
	case ScopeUser:
		return "user"
	}
	return fmt.Sprintf("ScopeMode(%d)", uint8(m))
}

// ErrScopeMode is returned by ParseScopeMode for an unknown name.
var ErrScopeMode = errors.New("proxy: cache scope must be auto, shared or user")

// ParseScopeMode reads "auto", "shared" or "user"; "" is auto.
func ParseScopeMode(s string) (ScopeMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return ScopeAuto, nil
	case "shared":
		return ScopeShared, nil
	case "user":
		return ScopeUser, nil
	}
	return ScopeAuto, fmt.Errorf("%w: %q", ErrScopeMode, s)
}

// The metastore settings that make replies depend on the caller. Each is
// asked under both its Hive 2.3 name (which 3.1 and 4.0 still resolve)
// and its MetastoreConf name (3.1 and later).
var (
	filterHookKeys = []string{"hive.metastore.filter.hook", "metastore.filter.hook"}
	preEventKeys   = []string{"hive.metastore.pre.event.listeners", "metastore.pre.event.listeners"}
)

// DefaultFilterHook is the filter hook class HMS uses when none is
// configured; it filters nothing.
const DefaultFilterHook = "org.apache.hadoop.hive.metastore.DefaultMetaStoreFilterHookImpl"

// unsetValue is the default sent with get_config_value. A metastore
// answers with it when the key is not set and it knows no default for it
// (2.3 for hive.metastore.pre.event.listeners, any version for a name it
// does not resolve): the server reads its setting under that name too, so
// nothing is configured there.
const unsetValue = "\x00hmsproxy-unset"

// ScopeStatus is the cache's scope decision, for logs, metrics and the
// status page.
type ScopeStatus struct {
	Mode    ScopeMode // as configured
	PerUser bool      // entries are keyed by identity
	// Decided is false in auto mode until the first check ended; reads
	// wait for it.
	Decided bool
	// Reason says why, in a few words.
	Reason string
	// FilterHook and PreEventListeners are what the metastore reported at
	// the last check; "" when it did not say.
	FilterHook        string
	PreEventListeners string
	Checked           time.Time // end of the last check; zero in forced modes
	Checks            uint64    // checks run
	Failures          uint64    // checks that could not tell (errors, refusals)
	Changes           uint64    // decisions changed at run time (each flushed the cache)
}

// scoper makes and keeps the scope decision. In auto mode a goroutine
// owned by the cacher asks the metastore at start and every interval.
type scoper struct {
	mode    ScopeMode
	every   time.Duration
	timeout time.Duration
	log     *slog.Logger
	flush   func() // drops what was cached under the previous decision
	// defaultCatalog is cache.default_catalog, compared with the
	// metastore's; checked is told of each check's outcome.
	defaultCatalog string
	checked        func(perUser bool, st ServerSettings)
	// settings are the metastore's settings as last read (settings.go).
	settings atomic.Pointer[ServerSettings]

	perUser atomic.Bool
	ready   chan struct{} // closed when the first decision is made
	once    sync.Once     // guards closing ready
	// read is closed when the first check of the metastore's settings
	// ended, read or not.
	read     chan struct{}
	readOnce sync.Once // guards closing read

	mu sync.Mutex // guards st
	st ScopeStatus
}

func newScoper(mode ScopeMode, every time.Duration, log *slog.Logger, flush func()) *scoper {
	if every <= 0 {
		every = 10 * time.Minute
	}
	s := &scoper{mode: mode, every: every, timeout: 15 * time.Second, log: log, flush: flush,
		ready: make(chan struct{}), read: make(chan struct{}), st: ScopeStatus{Mode: mode}, checked: func(bool, ServerSettings) {}}
	switch mode {
	case ScopeShared:
		s.decideForced(false, "cache.scope is shared")
	case ScopeUser:
		s.decideForced(true, "cache.scope is user")
	default:
		// Until the first answer, fail safe; reads wait for it anyway.
		s.perUser.Store(true)
		s.st.PerUser = true
		s.st.Reason = "not checked yet"
	}
	return s
}

func (s *scoper) decideForced(perUser bool, reason string) {
	s.perUser.Store(perUser)
	s.st.PerUser, s.st.Decided, s.st.Reason = perUser, true, reason
	s.once.Do(func() { close(s.ready) })
	s.log.Info("cache scope", "scope", scopeName(perUser), "mode", s.mode.String(), "reason", reason)
}

// scoped reports whether entries are keyed by identity. In auto mode it
// waits for the first decision (bounded by the check's timeout), so that
// nothing is cached under a scope about to be thrown away; after stop
// closes it fails safe. (The metastore's settings are not waited for:
// until they are read, the proxy makes up no answer of its own.)
func (s *scoper) scoped(stop <-chan struct{}) bool {
	select {
	case <-s.ready:
	default:
		select {
		case <-s.ready:
		case <-stop:
			return true
		}
	}
	return s.perUser.Load()
}

// Status returns the current decision.
func (s *scoper) status() ScopeStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// run checks at once, then every interval, until stop closes. A check
// that could not tell is retried sooner, so that a metastore that was down
// at start does not leave the cache scoped (and its hit ratio lower) for
// a whole interval.
func (s *scoper) run(ctx context.Context, up Forwarder, stop <-chan struct{}) {
	// A check in flight ends with stop, so that closing never waits for a
	// metastore that does not answer.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		next := s.every
		if !s.check(ctx, up) {
			next = min(s.every, 30*time.Second)
		}
		t.Reset(next)
	}
}

// check asks the metastore and applies the decision; it returns false
// when the metastore could not tell.
func (s *scoper) check(ctx context.Context, up Forwarder) bool {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	set, serr := readSettings(ctx, up, s.defaultCatalog)
	if errors.Is(serr, context.Canceled) {
		return false // closing: decide nothing
	}
	if prev := s.settings.Load(); prev != nil && !set.Known && prev.Known {
		// A check that could not tell keeps what an earlier one read.
		set = *prev
	}
	s.settings.Store(&set)
	s.readOnce.Do(func() { close(s.read) })
	if serr != nil {
		s.log.Warn("metastore settings unknown: no partitions are pruned locally until they are read", "err", serr)
	}
	if s.mode != ScopeAuto {
		s.st.Checked = time.Now()
		s.checked(s.perUser.Load(), set)
		s.once.Do(func() { close(s.ready) })
		return set.Known
	}
	hook, hookOK, err1 := askAll(ctx, up, filterHookKeys, defaultHook)
	lis, lisOK, err2 := askAll(ctx, up, preEventKeys, noListeners)
	err := errors.Join(err1, err2)
	if errors.Is(err, context.Canceled) {
		return false // closing: decide nothing
	}

	hook, lis = strings.TrimSpace(hook), strings.Trim(strings.TrimSpace(lis), ",")
	var perUser bool
	var reason string
	known := err == nil && hookOK && lisOK
	switch {
	case hookOK && !defaultHook(hook):
		perUser, reason = true, "metastore filter hook "+hook
	case lisOK && !noListeners(lis):
		perUser, reason = true, "metastore pre-event listeners "+lis
	case !known:
		perUser, reason = true, "metastore settings unknown (fail safe)"
		if err != nil {
			reason += ": " + err.Error()
		}
	default:
		perUser, reason = false, "metastore filters nothing per user (default filter hook, no pre-event listeners)"
	}

	s.mu.Lock()
	prev, wasDecided := s.st.PerUser, s.st.Decided
	s.st.PerUser, s.st.Decided, s.st.Reason = perUser, true, reason
	s.st.FilterHook, s.st.PreEventListeners = "", ""
	if hookOK {
		s.st.FilterHook = hook
	}
	if lisOK {
		s.st.PreEventListeners = lis
	}
	s.st.Checked = time.Now()
	s.st.Checks++
	if !known {
		s.st.Failures++
	}
	changed := wasDecided && prev != perUser
	if changed {
		s.st.Changes++
	}
	s.mu.Unlock()

	s.perUser.Store(perUser)
	if changed {
		// Entries of the other scope can no longer be reached (their keys
		// differ); drop them now rather than let them hold the budget, and
		// refuse loads still in flight under the old scope.
		s.flush()
	}
	s.checked(perUser, set)
	s.once.Do(func() { close(s.ready) })
	switch {
	case !wasDecided || changed:
		s.log.Info("cache scope", "scope", scopeName(perUser), "mode", s.mode.String(), "reason", reason,
			"changed", changed)
	case !known:
		s.log.Warn("cache scope: metastore settings unknown; keying entries by identity", "err", err)
	default:
		s.log.Debug("cache scope unchanged", "scope", scopeName(perUser))
	}
	return known && set.Known
}

func defaultHook(v string) bool {
	v = strings.TrimSpace(v)
	return v == "" || v == DefaultFilterHook
}

func noListeners(v string) bool { return strings.Trim(strings.TrimSpace(v), ", ") == "" }

func scopeName(perUser bool) string {
	if perUser {
		return "user"
	}
	return "shared"
}

// askAll asks get_config_value for each name of one setting and returns
// the value that matters: the first that is not a default (a server may
// resolve only one of the names), else a default when any name was
// answered. ok is false when none was (refused, or the method unknown);
// err is set only for calls that failed outright.
func askAll(ctx context.Context, up Forwarder, keys []string, def func(string) bool) (val string, ok bool, err error) {
	var errs []error
	for _, k := range keys {
		v, known, err := configValue(ctx, up, k)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !known {
			continue
		}
		if !def(v) {
			return v, true, errors.Join(errs...)
		}
		val, ok = v, true
	}
	return val, ok, errors.Join(errs...)
}

// configValue asks the metastore for one setting, without identity: the
// server's configuration is the same for every caller.
func configValue(ctx context.Context, up Forwarder, key string) (string, bool, error) {
	e := wire.Encoder{B: wire.AppendHeader(nil, wire.Call, []byte("get_config_value"), 1)}
	e.StringField(1, key)
	e.StringField(2, unsetValue)
	e.Stop()
	m, err := wire.Parse(e.B, wire.Limits{})
	if err != nil {
		return "", false, fmt.Errorf("proxy: encode get_config_value: %w", err)
	}
	var sink captureSink
	if err := up.Do(ctx, upstream.Call{Session: upstream.NoSession, Class: upstream.Read, Msg: m}, &sink); err != nil {
		return "", false, fmt.Errorf("proxy: get_config_value %s: %w", key, err)
	}
	if sink.res.typ != wire.Reply {
		return "", false, nil // an application exception: an old server without the method
	}
	d := wire.NewDecoder(sink.res.body)
	typ, id := d.FieldBegin()
	if d.Err() != nil || id != 0 || typ != wire.TString {
		// A declared exception (ConfigValSecurityException for keys the
		// server will not show), or a reply of another shape: refused.
		return "", false, nil
	}
	v := d.String()
	if d.Err() != nil {
		return "", false, nil
	}
	if v == unsetValue {
		return "", true, nil
	}
	return v, true, nil
}
