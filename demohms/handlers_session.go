package demohms

import (
	"regexp"
	"slices"
	"strings"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

// ---- set_ugi, setMetaConf, getMetaConf ----

// hSetUGI behaves as TUGIBasedProcessor: the first call fixes the
// connection's user and the reply is the group list as sent; a second call
// closes the connection ("UGI is already set").
func hSetUGI(c *conn, a *tval, e *wire.Encoder) error {
	if c.ugiSet {
		return errClose
	}
	c.ugiSet, c.user = true, a.str(1)
	return okStrings(e, a.strList(2))
}

// metaConfDefaults is the Hive 2.3 setMetaConf whitelist with its defaults.
var metaConfDefaults = map[string]string{
	"hive.metastore.try.direct.sql":                   "true",
	"hive.metastore.try.direct.sql.ddl":               "true",
	"hive.metastore.client.socket.timeout":            "600s",
	"hive.metastore.partition.name.whitelist.pattern": "",
	"hive.metastore.client.capability.check":          "false",
}

func hSetMetaConf(c *conn, a *tval, e *wire.Encoder) error {
	key := a.str(1)
	if _, ok := metaConfDefaults[key]; !ok {
		return metaErr("Invalid configuration key " + key)
	}
	c.conf[key] = a.str(2)
	return nil
}

func hGetMetaConf(c *conn, a *tval, e *wire.Encoder) error {
	key := a.str(1)
	def, ok := metaConfDefaults[key]
	if !ok {
		return metaErr("Invalid configuration key " + key)
	}
	if v, ok := c.conf[key]; ok {
		return okString(e, v)
	}
	return okString(e, def)
}

// configDefaults are HMS 3.1's defaults for the keys get_config_value
// is asked about by the proxy, under both their names.
var configDefaults = map[string]string{
	"hive.metastore.filter.hook":         "org.apache.hadoop.hive.metastore.DefaultMetaStoreFilterHookImpl",
	"metastore.filter.hook":              "org.apache.hadoop.hive.metastore.DefaultMetaStoreFilterHookImpl",
	"hive.metastore.pre.event.listeners": "",
	"metastore.pre.event.listeners":      "",
}

// hGetConfigValue behaves as HMSHandler.get_config_value: only hive.*,
// hdfs.*, mapred.* and metastore.* keys may be read.
func hGetConfigValue(c *conn, a *tval, e *wire.Encoder) error {
	key, def := a.str(1), a.str(2)
	if !configKeyAllowed.MatchString(key) {
		return &hmsError{exConfigValSecurity, "For security reasons, the config key " + key + " cannot be accessed"}
	}
	if v, ok := c.s.cfg.Conf[key]; ok {
		return okString(e, v)
	}
	if v, ok := configDefaults[key]; ok {
		return okString(e, v)
	}
	return okString(e, def)
}

var configKeyAllowed = regexp.MustCompile(`^(hive|hdfs|mapred|metastore).*`)

// hides reports whether Config.Hidden hides the table from this
// connection's user.
func (c *conn) hides(db, tbl string) bool {
	h := c.s.cfg.Hidden
	return h != nil && h(c.user, hms.NormalizeString(db), hms.NormalizeString(tbl))
}

// ---- fb303 ----

func hConstString(s string) handler {
	return func(c *conn, a *tval, e *wire.Encoder) error { return okString(e, s) }
}

func hGetStatus(c *conn, a *tval, e *wire.Encoder) error { return okI32(e, 2) } // ALIVE

func hAliveSince(c *conn, a *tval, e *wire.Encoder) error { return okI64(e, c.s.started) }

func hGetCounter(c *conn, a *tval, e *wire.Encoder) error { return okI64(e, 0) }

func hVoid(c *conn, a *tval, e *wire.Encoder) error { return nil }

// hEmptyMap answers map<string,i64> (counters) or map<string,string>.
func hEmptyMap(i64 bool) handler {
	return func(c *conn, a *tval, e *wire.Encoder) error {
		e.FieldBegin(wire.TMap, 0)
		if i64 {
			e.MapBegin(wire.TString, wire.TI64, 0)
		} else {
			e.MapBegin(wire.TString, wire.TString, 0)
		}
		return nil
	}
}

// hShutdown drops the connection's setMetaConf overrides, as HMS releases
// the thread's state.
func hShutdown(c *conn, a *tval, e *wire.Encoder) error {
	clear(c.conf)
	return nil
}

// ---- catalogs ----

func hGetCatalogs(c *conn, a *tval, e *wire.Encoder) error {
	return okWrapped(e, wire.TList, func() { e.ListBegin(wire.TString, 1); e.String(defaultCatalog) })
}

func hGetCatalog(c *conn, a *tval, e *wire.Encoder) error {
	name := hms.NormalizeString(a.sub(1).str(1))
	if name != defaultCatalog {
		return noSuchObject("No catalog " + name)
	}
	return okWrapped(e, wire.TStruct, func() {
		e.StringField(1, defaultCatalog)
		e.StringField(2, "Default catalog, for Hive")
		e.StringField(3, warehouse)
		e.Stop()
	})
}

// ---- notification log ----

func hCurrentEventID(c *conn, a *tval, e *wire.Encoder) error {
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	return okWrapped(e, wire.TI64, func() { e.I64(c.s.nextEvent - 1) })
}

// hNextNotification returns events with id > lastEvent, ascending, at most
// maxEvents when > 0, honouring the 4.0 filters (skip list, cat, db,
// table names) when present.
func hNextNotification(c *conn, a *tval, e *wire.Encoder) error {
	r := a.sub(1)
	last, maxEv := r.integer(1, 0), r.integer(2, 0)
	skip := r.strList(3)
	cat, hasCat := r.strOK(4)
	db, hasDB := r.strOK(5)
	tables := r.strList(6)
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	var out []*notificationEvent
	for i := range c.s.events {
		ev := &c.s.events[i]
		if ev.EventID <= last || slices.Contains(skip, ev.EventType) ||
			hasCat && !strings.EqualFold(cat, ev.CatName) || hasDB && !strings.EqualFold(db, ev.DBName) ||
			tables != nil && !slices.ContainsFunc(tables, func(t string) bool { return strings.EqualFold(t, ev.TableName) }) {
			continue
		}
		out = append(out, ev)
		if maxEv > 0 && int64(len(out)) >= maxEv {
			break
		}
	}
	return okWrapped(e, wire.TList, func() {
		e.ListBegin(wire.TStruct, len(out))
		for _, ev := range out {
			encEvent(e, ev)
		}
	})
}

func hEventsCount(c *conn, a *tval, e *wire.Encoder) error {
	r := a.sub(1)
	from, db := r.integer(1, 0), r.str(2)
	to := r.integer(4, -1)
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	var n int64
	for _, ev := range c.s.events {
		if ev.EventID > from && (to < 0 || ev.EventID <= to) && strings.EqualFold(ev.DBName, db) {
			n++
		}
	}
	return okWrapped(e, wire.TI64, func() { e.I64(n) })
}
