package proxy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
	"github.com/hmsproxy/hmsproxy/upstream"
)

// The metastore's own settings that change its answers are the proxy's
// settings: read from the metastore (get_config_value) at start and with
// every scope check, never configured twice.
//   - hive.metastore.limit.partition.request: the metastore refuses a
//     request for more partitions than this; an answer the proxy would
//     make up locally (a prune, a by-names read assembled from entries)
//     that the limit refuses is forwarded instead.
//   - metastore.catalog.default: the catalog of names without one. The
//     proxy keys and invalidates by catalog; when cache.default_catalog
//     differs, nothing is cached until it is fixed (a loud error).
//   - hive.metastore.try.direct.sql: without direct SQL the metastore
//     evaluates filters otherwise (JDO); the proxy then prunes nothing.
//   - the version (get_catalogs, getVersion): its filter grammar and
//     quirks, and which writes its notification log records.

// ServerSettings are what the proxy read of the metastore's settings.
type ServerSettings struct {
	// Known is false until every setting was read once; until then the
	// proxy answers nothing it would make up (prunes, assembled batches).
	Known   bool
	Version hms.Version
	// Limit is hive.metastore.limit.partition.request; negative: none.
	Limit int
	// Catalog is metastore.catalog.default ("hive" on 2.x, which has no
	// catalogs); CatalogMismatch: it differs from cache.default_catalog,
	// and nothing is cached.
	Catalog         string
	CatalogMismatch bool
	// DirectSQL is hive.metastore.try.direct.sql.
	DirectSQL bool
}

// The setting names, each asked under its Hive 2.3 name and its
// MetastoreConf one.
var (
	limitKeys     = []string{"hive.metastore.limit.partition.request", "metastore.limit.partition.request"}
	catalogKeys   = []string{"metastore.catalog.default", "hive.metastore.catalog.default"}
	directSQLKeys = []string{"hive.metastore.try.direct.sql", "metastore.try.direct.sql"}
)

// readSettings asks the metastore for its settings; Known is false when
// it could not tell them all.
func readSettings(ctx context.Context, up Forwarder, defaultCatalog string) (ServerSettings, error) {
	st := ServerSettings{Limit: -1, DirectSQL: true}
	var errs []error
	catalogs, err := knowsMethod(ctx, up, "get_catalogs", []byte{wire.TStop})
	errs = append(errs, err)
	version := ""
	if err == nil {
		version, _, err = callString(ctx, up, "getVersion", []byte{wire.TStop})
		errs = append(errs, err)
	}
	if err == nil {
		st.Version = hms.DetectVersion(catalogs, version)
	}
	isDefault := func(v string) bool { return strings.TrimSpace(v) == "" }
	limit, limitOK, err := askAll(ctx, up, limitKeys, func(v string) bool { return isDefault(v) || strings.TrimSpace(v) == "-1" })
	errs = append(errs, err)
	if limitOK && !isDefault(limit) {
		n, perr := strconv.Atoi(strings.TrimSpace(limit))
		if perr != nil {
			errs = append(errs, fmt.Errorf("proxy: limit.partition.request %q: %w", limit, perr))
			limitOK = false
		}
		st.Limit = n
	}
	st.Catalog = "hive"
	catOK := true
	if st.Version != hms.Version2 {
		var cat string
		cat, catOK, err = askAll(ctx, up, catalogKeys, isDefault)
		errs = append(errs, err)
		if catOK && !isDefault(cat) {
			st.Catalog = hms.NormalizeString(cat)
		}
	}
	st.CatalogMismatch = st.Catalog != defaultCatalog
	dsql, dsqlOK, err := askAll(ctx, up, directSQLKeys, func(v string) bool { return !strings.EqualFold(strings.TrimSpace(v), "false") })
	errs = append(errs, err)
	st.DirectSQL = !(dsqlOK && strings.EqualFold(strings.TrimSpace(dsql), "false"))
	err = errors.Join(errs...)
	st.Known = err == nil && st.Version != hms.VersionUnknown && limitOK && catOK && dsqlOK
	return st, err
}

// knowsMethod reports whether the metastore answers method with a reply
// (not a TApplicationException UNKNOWN_METHOD).
func knowsMethod(ctx context.Context, up Forwarder, method string, args []byte) (bool, error) {
	res, err := callUp(ctx, up, method, args)
	if err != nil {
		return false, err
	}
	if res.typ == wire.Exception {
		ex, err := wire.DecodeApplicationException(res.body)
		if err != nil {
			return false, fmt.Errorf("proxy: %s: %w", method, err)
		}
		if ex.Code == wire.ExUnknownMethod {
			return false, nil
		}
		return false, fmt.Errorf("proxy: %s: %w", method, ex)
	}
	return true, nil
}

// callString makes a call whose success is a string.
func callString(ctx context.Context, up Forwarder, method string, args []byte) (string, bool, error) {
	res, err := callUp(ctx, up, method, args)
	if err != nil {
		return "", false, err
	}
	if res.typ != wire.Reply {
		return "", false, fmt.Errorf("proxy: %s: message type %d", method, res.typ)
	}
	d := wire.NewDecoder(res.body)
	typ, id := d.FieldBegin()
	if d.Err() != nil || id != 0 || typ != wire.TString {
		return "", false, fmt.Errorf("proxy: %s: no string in the reply", method)
	}
	return d.String(), true, d.Err()
}

// callUp makes one call of the proxy's own, without identity.
func callUp(ctx context.Context, up Forwarder, method string, args []byte) (loaded, error) {
	msg := append(wire.AppendHeader(nil, wire.Call, []byte(method), 1), args...)
	m, err := wire.Parse(msg, wire.Limits{})
	if err != nil {
		return loaded{}, fmt.Errorf("proxy: encode %s: %w", method, err)
	}
	var sink captureSink
	if err := up.Do(ctx, upstream.Call{Session: upstream.NoSession, Class: upstream.Read, Msg: m}, &sink); err != nil {
		return loaded{}, fmt.Errorf("proxy: %s: %w", method, err)
	}
	return sink.res, nil
}

// checked makes the cache follow a check of the metastore: entries keyed
// by identity are bounded by UserScopeTTL, the kinds the metastore's
// unlogged writes change by TTLUnlogged, and a catalog mismatch is
// loud.
func (k *cacher) checked(perUser bool, st ServerSettings) {
	if perUser {
		k.Store.SetScopeTTLCap(k.UserScopeTTL)
	} else {
		k.Store.SetScopeTTLCap(0)
	}
	if st.CatalogMismatch {
		k.log.Error("the metastore's default catalog differs from cache.default_catalog: nothing is cached until they agree",
			"metastore", st.Catalog, "cache.default_catalog", k.DefaultCatalog)
		// What was cached before the check went by the wrong catalog.
		k.Store.Apply(k.Upstream, []cache.Entity{{Level: cache.LevelAll}})
	}
	if k.TTLUnlogged <= 0 || !st.Known && st.Version == hms.VersionUnknown && st.Catalog == "" {
		return
	}
	writes := k.UnloggedWrites
	if writes == nil {
		writes = hms.UnloggedWrites(st.Version)
	}
	for _, w := range writes {
		for _, kind := range hms.ChangedKinds(w) {
			k.Store.CapKindTTL(kind, k.TTLUnlogged)
		}
	}
}

// settings are the metastore's settings as last read; the zero value
// (not Known) until then.
func (k *cacher) settings() ServerSettings {
	if st := k.scoper.settings.Load(); st != nil {
		return *st
	}
	return ServerSettings{Limit: -1}
}

// overLimit reports whether the metastore would refuse a request for n
// partitions (asking for at most max, negative: all) under its
// partition request limit, on any of the versions st allows: 2.x and
// 3.x compare max itself when it is set, 4.x the count; a limit or
// version not known yet refuses every local answer.
func (st *ServerSettings) overLimit(n, max int) bool {
	switch {
	case !st.Known:
		return true
	case st.Limit < 0:
		return false
	case max >= 0 && max > st.Limit && (st.Version.Is(hms.Version2) || st.Version.Is(hms.Version3)):
		return true
	}
	return n > st.Limit
}

// catalogMismatch reports whether the metastore's default catalog is not
// cache.default_catalog: nothing is cached then.
func (k *cacher) catalogMismatch() bool {
	st := k.scoper.settings.Load()
	return st != nil && st.CatalogMismatch
}
