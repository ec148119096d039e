package upstream

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/hmsproxy/hmsproxy/thrift/hmsclient"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// Session is the per-connection state HMS keeps for a client: the identity
// from set_ugi and the overrides from setMetaConf. An upstream connection
// carries exactly one Session; calls for a client only ever run on
// connections carrying that client's Session. Values are immutable.
type Session struct {
	ugi  []byte // set_ugi args struct as the client sent it; nil: no identity
	user string
	// authenticated: user is a principal the listener authenticated
	// (Kerberos), not a set_ugi claim; set_ugi then changes nothing
	authenticated bool
	conf          []confKV // setMetaConf overrides in the order first set
	key           string   // identity of the state, for pooling
	// background: the calls are the proxy's own bulk loads (the warm-up),
	// which may not take the connections reserved for client reads. Not
	// part of key: a background session shares connections with its
	// client twin.
	background bool
}

type confKV struct{ k, v string }

// NoSession is the state of a connection on which nothing was set.
var NoSession = &Session{}

// AuthenticatedSession is the initial state of a connection whose client
// authenticated as user (a Kerberos principal's short name). As on a
// metastore with SASL, that identity holds for the connection's life.
func AuthenticatedSession(user string) *Session {
	n := &Session{user: user, authenticated: true}
	n.key = n.makeKey()
	return n
}

// InBackground returns the session marked as the proxy's own bulk
// loading: its read calls leave Config.ReservedReadConns to client reads,
// sharing the rest with writes. The mark survives set_ugi and
// setMetaConf.
func (s *Session) InBackground() *Session {
	n := *s
	n.background = true
	return &n
}

// Background reports whether the session is marked by InBackground.
func (s *Session) Background() bool { return s.background }

// User is the identity set by set_ugi or authenticated, "" when none.
func (s *Session) User() string { return s.user }

// Authenticated is the user a listener authenticated, "" for a session
// whose identity (if any) is a set_ugi claim. Metastore connections for
// the session authenticate as, or on behalf of, this user.
func (s *Session) Authenticated() string {
	if s.authenticated {
		return s.user
	}
	return ""
}

// HasUGI reports whether set_ugi was applied.
func (s *Session) HasUGI() bool { return s.ugi != nil }

// Key identifies the state: two sessions with equal keys are
// interchangeable on an upstream connection.
func (s *Session) Key() string { return s.key }

// WithUGI returns the session after a successful set_ugi whose args struct
// is args.
func (s *Session) WithUGI(args []byte) *Session {
	if s.authenticated {
		return s // set_ugi has no effect on identity under SASL
	}
	n := &Session{ugi: append([]byte(nil), args...), conf: s.conf, background: s.background}
	wire.NewDecoder(args).Struct(wire.StringAt(1, &n.user))
	n.key = n.makeKey()
	return n
}

// WithConf returns the session after a successful setMetaConf(key, value).
func (s *Session) WithConf(key, value string) *Session {
	n := &Session{ugi: s.ugi, user: s.user, authenticated: s.authenticated, background: s.background}
	n.conf = make([]confKV, 0, len(s.conf)+1)
	replaced := false
	for _, kv := range s.conf {
		if kv.k == key {
			kv.v, replaced = value, true
		}
		n.conf = append(n.conf, kv)
	}
	if !replaced {
		n.conf = append(n.conf, confKV{key, value})
	}
	n.key = n.makeKey()
	return n
}

// makeKey digests the state: the key names idle metastore connections in
// the pool for as long as they idle (IdleTimeout), after the client has
// gone, so it must not keep the state's names alive (issue 22: 40 MiB
// set_ugi names stayed for 5 minutes). SHA-256 makes two states sharing
// a key, and so a connection, as unlikely as forging a digest.
func (s *Session) makeKey() string {
	h := sha256.New()
	var n [4]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	if s.authenticated {
		// A set_ugi args struct is never empty, so these keys never
		// meet a set_ugi session's.
		field(nil)
		field([]byte(s.user))
	} else {
		field(s.ugi)
	}
	for _, kv := range s.conf {
		field([]byte(kv.k))
		field([]byte(kv.v))
	}
	return string(h.Sum(nil))
}

// Size is about the bytes the session keeps: its set_ugi args, user and
// overrides, with a little for the headers around them.
func (s *Session) Size() int64 {
	n := 64 + len(s.ugi) + len(s.user) + len(s.key)
	for _, kv := range s.conf {
		n += 32 + len(kv.k) + len(kv.v)
	}
	return int64(n)
}

// EachConf calls fn with each setMetaConf override of the session, in the
// order first set.
func (s *Session) EachConf(fn func(key, value string)) {
	for _, kv := range s.conf {
		fn(kv.k, kv.v)
	}
}

// HasConf reports whether the session has setMetaConf overrides.
func (s *Session) HasConf() bool { return len(s.conf) > 0 }

// ConfArgs decodes setMetaConf args into key and value.
func ConfArgs(args []byte) (key, value string, err error) {
	d := wire.NewDecoder(args)
	d.Struct(wire.StringAt(1, &key), wire.StringAt(2, &value))
	if err := d.Err(); err != nil {
		return "", "", err
	}
	return key, value, nil
}

// replay lists the calls that put a fresh connection into this state.
func (s *Session) replay() []replayCall {
	var calls []replayCall
	if s.ugi != nil {
		calls = append(calls, replayCall{"set_ugi", s.ugi})
	}
	for _, kv := range s.conf {
		calls = append(calls, replayCall{"setMetaConf", hmsclient.Args(kv.k, kv.v)})
	}
	return calls
}

type replayCall struct {
	method string
	args   []byte
}
