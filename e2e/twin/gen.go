package twin

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// The generators. Each session draws its steps from a random source of
// its own (seeded from the run's seed), over a fixed universe of names
// and values, without looking at what the other sessions did: a seed
// gives every session the same steps whatever the interleaving. The
// universe is small, so reads often meet what writes made, and every
// name is also drawn in the forms a client may write it.

// template is the shape of the tables of one base name: a table's name
// says its partition keys.
type template struct {
	base string
	spec TableSpec
}

var dataCols = []Col{{"id", "int"}, {"name", "string"}}

func tmpl(base string, kind TableKind, keys ...Col) template {
	return template{base: base, spec: TableSpec{Kind: kind, Cols: dataCols, Keys: keys}}
}

var templates = []template{
	tmpl("ts", Managed, Col{"ds", "string"}),
	tmpl("tsi", Managed, Col{"ds", "string"}, Col{"hr", "int"}),
	tmpl("tss", External, Col{"a", "string"}, Col{"b", "string"}),
	tmpl("tv", Managed, Col{"v", "varchar(10)"}),
	tmpl("tc", Managed, Col{"c", "char(5)"}),
	tmpl("tb", Managed, Col{"n", "bigint"}),
	tmpl("td", Managed, Col{"dt", "date"}),
	tmpl("tt", Managed, Col{"ts", "timestamp"}),
	tmpl("tu", Managed, Col{"_k", "string"}),
	tmpl("tn", Managed),
	tmpl("io", InsertOnly, Col{"ds", "string"}),
}

// iceTable is the Iceberg table of each database; only IcebergCommit
// changes it after the setup.
var iceTable = template{base: "ice", spec: TableSpec{Kind: Iceberg, Cols: dataCols,
	Params: map[string]string{"table_type": "ICEBERG", iceLocation: "init"}}}

// iceLocationRoot is where the Iceberg tables live.
const iceLocationRoot = "file:/tmp/hmsproxy-twin-ice"

var dbBases = []string{"d0", "d1", "d2"}

var fnBases = []string{"f0", "f1"}

// values are the partition values drawn per key type: the characters
// Hive escapes, case, blanks, numbers written several ways, the default
// partition name. No value ends in a blank: Derby compares "a " equal to
// "a" in the metastore's unique index of partition names, and the
// metastore retries the failed insert for 20 seconds.
var values = map[string][]string{
	"string":    {"a", "b", "A", "ab", "a:b", "a/b", "a%3Ab", "a b", "a_b", "a%b", "é", "a=b", "#h", "a\\b", "q'", "x*", "1", "01", "10", " a", "a^b", "[x]", "__HIVE_DEFAULT_PARTITION__"},
	"varchar":   {"a", "ab", "abcde", "a_b", "a%", "A", "b"},
	"char":      {"a", "ab", "abcde", "a_b", "A"},
	"int":       {"1", "2", "07", "7", "10", "-1", "100", "x"},
	"bigint":    {"1", "2", "07", "7", "10", "-1", "100", "5000000000"},
	"date":      {"2024-01-01", "2024-01-02", "2024-1-2", "2023-12-31", "2024-02-30"},
	"timestamp": {"2024-01-01 00:00:00", "2024-01-01 10:00:00", "2024-01-01 10:00:00.5", "2023-12-31 23:59:59"},
}

func typeClass(t string) string {
	if i := strings.IndexByte(t, '('); i >= 0 {
		t = t[:i]
	}
	return t
}

// escapePart writes a partition name component as Hive does:
// FileUtils.escapePathName, % and two upper-case hex digits for control
// characters, DEL and " # % ' * / : = ? \ { [ ] ^; an empty value is the
// default partition.
func escapePart(s string) string {
	if s == "" {
		return "__HIVE_DEFAULT_PARTITION__"
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || strings.IndexByte("\"#%'*/:=?\\{[]^", c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// partName is the name Hive gives a partition with these keys and values.
func partName(keys []Col, vals []string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = escapePart(strings.ToLower(k.Name)) + "=" + escapePart(vals[i])
	}
	return strings.Join(parts, "/")
}

// gen draws one session's steps.
type gen struct {
	rnd     *rand.Rand
	version string
	session int
	// fleet: the session's writes and reads may meet other nodes.
	nodes int
	// direct is the share of writes made straight to the metastore.
	direct float64
	// fed: a federated member's databases are in the universe too.
	fed bool
}

func newGen(seed uint64, session int, version string, nodes int, direct float64, fed bool) *gen {
	return &gen{rnd: rand.New(rand.NewPCG(seed, uint64(session)+1)), version: version, session: session, nodes: nodes,
		direct: direct, fed: fed}
}

func (g *gen) pick(n int) int        { return g.rnd.IntN(n) }
func (g *gen) chance(p float64) bool { return g.rnd.Float64() < p }

func pickOf[T any](g *gen, xs []T) T { return xs[g.rnd.IntN(len(xs))] }

// form is how a name is written: mostly as stored.
func (g *gen) form() (Form, string) {
	if g.chance(0.6) {
		return Form{}, "plain"
	}
	switch g.pick(9) {
	case 0:
		return Form{Case: 1}, "upper"
	case 1:
		return Form{Case: 2}, "title"
	case 2:
		return Form{Trail: pickOf(g, []string{" ", "  ", "\t", "\n"})}, "trail"
	case 3:
		return Form{Lead: pickOf(g, []string{" ", "\t", "\x01"})}, "lead"
	case 4:
		return Form{Trail: "\u00a0"}, "nbsp"
	case 5:
		return Form{Uni: uint8(1 + g.pick(3))}, "unicode"
	case 6:
		return Form{Pad: pickOf(g, []int{127, 128, 129, 255, 256, 257})}, "long"
	case 7:
		return Form{Case: 1, Trail: " "}, "upper+trail"
	default:
		return Form{Lead: " ", Trail: " ", Case: 2}, "both"
	}
}

// name draws a name of base in some form; tag says which.
func (g *gen) name(base string) (Name, string) {
	f, tag := g.form()
	return Name{Base: base, Form: f}, tag
}

// db draws a db argument of a legacy method: a form, and sometimes a
// catalog folded in.
func (g *gen) db(base string) (DBName, string) {
	n, tag := g.name(base)
	d := DBName{Name: n}
	if g.chance(0.1) {
		d.Cat = pickOf(g, []string{"@hive#", "@HIVE#", "@hive# ", "@spark#"})
		tag = "catalog+" + tag
	}
	return d, tag
}

func (g *gen) dbBase() string {
	if g.fed && g.chance(0.4) {
		return pickOf(g, memberBases)
	}
	return pickOf(g, dbBases[:2+boolInt(g.chance(0.2))])
}

// primaryBase is a database of the primary metastore: what the calls
// that name no database (transactions) may be tied to.
func (g *gen) primaryBase() string { return pickOf(g, dbBases[:2]) }

// setupDBs are the databases every run creates first.
func (g *gen) setupDBs() []string {
	if g.fed {
		return append(append([]string(nil), dbBases[:2]...), memberBases...)
	}
	return dbBases[:2]
}
func (g *gen) tmpl() template { return pickOf(g, templates) }
func (g *gen) fnBase() string { return pickOf(g, fnBases) }
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// vals draws one partition's values for keys.
func (g *gen) vals(keys []Col) []string {
	v := make([]string, len(keys))
	for i, k := range keys {
		v[i] = pickOf(g, values[typeClass(k.Type)])
	}
	return v
}

// partNames draws partition names for a by-names read: as Hive writes
// them, or as a client might (unescaped, another key, upper-case key).
// statCols are the columns of a statistics read: the data columns in
// any order, sometimes in upper case, repeated, or with one the table
// does not have (the metastore reads them as a lower-cased set).
func (g *gen) statCols() []string {
	var out []string
	for _, i := range g.rnd.Perm(len(dataCols))[:1+g.pick(len(dataCols))] {
		name := dataCols[i].Name
		if g.chance(0.2) {
			name = strings.ToUpper(name)
		}
		out = append(out, name)
	}
	if g.chance(0.2) {
		out = append(out, out[0])
	}
	if g.chance(0.2) {
		out = append(out, "nope")
	}
	return out
}

func (g *gen) partNames(keys []Col) ([]string, string) {
	n := 1 + g.pick(4)
	out := make([]string, 0, n+1)
	tag := "canonical"
	for i := 0; i < n; i++ {
		v := g.vals(keys)
		name := partName(keys, v)
		switch g.pick(8) {
		case 0:
			// Unescaped values: the metastore matches names exactly. Alone
			// or next to the stored form: a reply to both must not answer
			// a later request for the unescaped one alone.
			parts := make([]string, len(keys))
			for j, k := range keys {
				parts[j] = k.Name + "=" + v[j]
			}
			if g.chance(0.5) {
				out = append(out, name)
			}
			out = append(out, strings.Join(parts, "/"))
			tag = "unescaped"
			continue
		case 1:
			if len(keys) == 1 {
				if g.chance(0.5) {
					out = append(out, name)
				}
				out = append(out, "zz="+escapePart(v[0]))
				tag = "wrong-key"
				continue
			}
		case 2:
			out = append(out, strings.ToUpper(name[:1])+name[1:])
			tag = "upper-key"
			continue
		}
		out = append(out, name)
	}
	return out, tag
}

// filter draws a partition filter over keys, in the metastore's filter
// grammar and its quirks.
func (g *gen) filter(keys []Col) (string, string) {
	if len(keys) == 0 {
		return "x = 'a'", "no-keys"
	}
	tag := "filter"
	atom := func() string {
		k := pickOf(g, keys)
		tc := typeClass(k.Type)
		lit := func() string {
			v := pickOf(g, values[tc])
			switch tc {
			case "int", "bigint":
				if g.chance(0.8) {
					return v
				}
			}
			if g.chance(0.3) {
				v = pickOf(g, []string{"a_", "a%", "_", "%", "a\\_b", "ab%"})
				tag = "filter-wildcard"
			}
			q := "'"
			if g.chance(0.2) {
				q = `"`
			}
			return q + strings.ReplaceAll(v, q, "") + q
		}
		switch g.pick(9) {
		case 0:
			return fmt.Sprintf("%s like %s", k.Name, lit())
		case 1:
			return fmt.Sprintf("%s in (%s, %s)", k.Name, lit(), lit())
		case 2:
			tag = "filter-not-in"
			return fmt.Sprintf("%s not in (%s, %s)", k.Name, lit(), lit())
		case 3:
			return fmt.Sprintf("%s between %s and %s", k.Name, lit(), lit())
		case 4:
			return fmt.Sprintf("%s not between %s and %s", k.Name, lit(), lit())
		case 5:
			tag = "filter-ne"
			return fmt.Sprintf("%s <> %s", k.Name, lit())
		default:
			return fmt.Sprintf("%s %s %s", k.Name, pickOf(g, []string{"=", "!=", "<", "<=", ">", ">="}), lit())
		}
	}
	f := atom()
	for g.chance(0.35) {
		op := pickOf(g, []string{"and", "or", "AND", "OR"})
		if g.chance(0.3) {
			f = "(" + f + ") " + op + " " + atom()
		} else {
			f = f + " " + op + " " + atom()
		}
	}
	if strings.HasPrefix(keys[0].Name, "_") {
		tag = "filter-underscore-key"
	}
	return f, tag
}

// via draws the path of a write.
func (g *gen) via() Via {
	if g.chance(g.direct) {
		return Direct
	}
	return Proxy
}

// setup are the steps that create each session's share of the universe
// before the random steps: session 0 the databases, every session some
// tables, partitions and functions.
func (g *gen) setup() []Step {
	var out []Step
	add := func(via Via, op Op, tag string) { out = append(out, Step{S: g.session, Via: via, Op: op, Gen: tag}) }
	if g.session == 0 {
		for _, db := range g.setupDBs() {
			add(Proxy, CreateDatabase{DB: N(db)}, "setup")
		}
		for _, db := range g.setupDBs() {
			add(Proxy, CreateTable{DB: D(db), Table: N(iceTable.base), Spec: iceTable.spec, Location: iceLocationRoot}, "setup")
		}
	}
	for i, t := range templates {
		if i%4 != g.session%4 {
			continue
		}
		for _, db := range g.setupDBs() {
			add(g.via(), CreateTable{DB: D(db), Table: N(t.base), Spec: t.spec}, "setup")
			if len(t.spec.Keys) > 0 {
				var vs [][]string
				for j := 0; j < 3+g.pick(8); j++ {
					vs = append(vs, g.vals(t.spec.Keys))
				}
				add(g.via(), AddPartitions{DB: D(db), Table: N(t.base), Values: vs, Cols: dataCols}, "setup")
			}
		}
	}
	if g.session == 1 {
		for _, db := range g.setupDBs() {
			add(Proxy, CreateFunction{DB: D(db), Fn: N(fnBases[0]), Impl: "com.example.F0"}, "setup")
		}
	}
	return out
}

// next draws a random step.
func (g *gen) next() Step {
	st := g.step()
	st.S = g.session
	if st.Via == Both && st.Op.Class() == Read && g.chance(0.05) {
		st.Racy = true
	}
	return st
}

func (g *gen) step() Step {
	reads := 0.67 // and 0.13 of locks, transactions and Iceberg commits
	if g.version == "4.0" {
		// The test bed's 4.0 on Derby stalls lock calls for 30 s at
		// times (its lock tables deadlock and it retries): fewer of them.
		reads = 0.70
	}
	switch p := g.rnd.Float64(); {
	case p < reads:
		return g.read()
	case p < reads+0.15:
		return g.write()
	case p < reads+0.20:
		return g.sessionStep()
	default:
		return g.txnStep()
	}
}

func (g *gen) read() Step {
	dbb := g.dbBase()
	t := g.tmpl()
	if g.chance(0.05) {
		t = iceTable
	}
	db, dtag := g.db(dbb)
	tbl, ttag := g.name(t.base)
	both := func(op Op, tag string) Step { return Step{Via: Both, Op: op, Gen: tag} }
	keys := t.spec.Keys
	switch g.pick(26) {
	case 0:
		return both(GetDatabase{DB: db}, "names:"+dtag)
	case 1:
		return both(GetAllDatabases{}, "lists")
	case 2:
		if g.fed {
			// A pattern's rewriting for each group is the federation's;
			// the twin compares whole listings there.
			return both(GetAllDatabases{}, "lists")
		}
		return both(GetDatabases{Suffix: pickOf(g, []string{"*", "_d*", "_D0", "_d0|*_d1"})}, "lists")
	case 3, 4, 5:
		return both(GetTable{DB: db, Table: tbl}, "names:"+dtag+"/"+ttag)
	case 6:
		var caps []int32
		if g.chance(0.5) {
			caps = []int32{int32(1 + g.pick(2))}
		}
		dn, _ := g.name(dbb)
		return both(GetTableReq{DB: dn, Table: tbl, Cat: pickOf(g, []string{"", "", "hive", "HIVE", "spark"}), Caps: caps}, "names:req/"+ttag)
	case 7:
		n := []Name{tbl}
		for i := 0; i < g.pick(3); i++ {
			x, _ := g.name(g.tmpl().base)
			n = append(n, x)
		}
		return both(GetTableObjects{DB: db, Tables: n}, "names:objects/"+ttag)
	case 8:
		return both(GetAllTables{DB: db}, "lists:"+dtag)
	case 9:
		return both(GetTables{DB: db, Pattern: pickOf(g, []string{"*", "t*", "T*", "ts|tv", "i*"})}, "lists:"+dtag)
	case 10:
		return both(GetFields{DB: db, Table: tbl}, "names:"+ttag)
	case 11:
		if len(keys) == 0 {
			return both(GetPartitionNames{DB: db, Table: tbl, Max: -1}, "parts")
		}
		return both(GetPartition{DB: db, Table: tbl, Values: g.vals(keys)}, "parts:values")
	case 12:
		if len(keys) == 0 {
			return both(GetPartitions{DB: db, Table: tbl, Max: -1}, "parts")
		}
		names, tag := g.partNames(keys)
		return both(GetPartitionByName{DB: db, Table: tbl, Part: names[0]}, "parts:byname-"+tag)
	case 13:
		return both(GetPartitions{DB: db, Table: tbl, Max: pickOf(g, []int16{-1, -1, 1, 5, 13})}, "parts:"+ttag)
	case 14:
		return both(GetPartitionNames{DB: db, Table: tbl, Max: pickOf(g, []int16{-1, -1, 2, 13})}, "parts:"+ttag)
	case 15:
		if len(keys) == 0 {
			return both(GetPartitionNames{DB: db, Table: tbl, Max: -1}, "parts")
		}
		v := g.vals(keys)
		if len(v) > 1 && g.chance(0.5) {
			v[len(v)-1] = ""
		}
		return both(GetPartitionsPs{DB: db, Table: tbl, Values: v, Max: -1, Names: g.chance(0.5)}, "parts:ps")
	case 16, 17, 18:
		if len(keys) == 0 {
			return both(GetPartitionNames{DB: db, Table: tbl, Max: -1}, "parts")
		}
		names, tag := g.partNames(keys)
		return both(GetPartitionsByNames{DB: db, Table: tbl, Names: names, Req: g.version == "4.0" && g.chance(0.5)}, "bynames:"+tag)
	case 19, 20, 21:
		f, tag := g.filter(keys)
		if g.version == "4.0" && g.chance(0.3) {
			dn, _ := g.name(dbb)
			return both(GetPartitionsByFilterReq{DB: dn, Table: tbl, Filter: f, Max: pickOf(g, []int16{-1, -1, 3})}, tag+":req")
		}
		return both(GetPartitionsByFilter{DB: db, Table: tbl, Filter: f, Max: pickOf(g, []int16{-1, -1, -1, 3}), Count: g.chance(0.2)}, tag)
	case 22:
		dn, _ := g.name(dbb)
		return both(GetTableColStats{DB: dn, Table: tbl, Cols: g.statCols()}, "stats")
	case 23:
		dn, _ := g.name(dbb)
		var parts []string
		if len(keys) > 0 {
			parts, _ = g.partNames(keys)
		}
		return both(GetPartColStats{DB: dn, Table: tbl, Cols: g.statCols(), Parts: parts, Aggr: g.chance(0.3)}, "stats")
	case 24:
		fn, tag := g.name(g.fnBase())
		if g.chance(0.3) {
			return both(GetFunctions{DB: db, Pattern: pickOf(g, []string{"*", "f*", "F0"})}, "functions")
		}
		return both(GetFunction{DB: db, Fn: fn}, "functions:"+tag)
	default:
		switch g.pick(4) {
		case 0:
			return both(GetConfigValue{Key: pickOf(g, []string{"hive.metastore.limit.partition.request", "metastore.catalog.default", "hive.metastore.try.direct.sql", "no.such.key"}), Default: "x"}, "config")
		case 1:
			return both(Unknown{Name: pickOf(g, []string{"get_tablex", "get_\xff\xfetable", "drop_everything", ""}), Strs: []string{"a"}}, "unknown")
		case 2:
			dn, _ := g.name(dbb)
			return both(GetPrimaryKeys{DB: dn, Table: tbl}, "constraints")
		default:
			return both(GetTable{DB: db, Table: tbl}, "names:"+dtag+"/"+ttag)
		}
	}
}

// writeForm is how a write writes a name: as stored, or in a form the
// metastore normalises. Not near the length limits, nor in other
// scripts: the metastore checks such a name as written and stores it
// normalised, and its unique indexes then refuse the insert, which it
// retries for 20 seconds.
func (g *gen) writeForm() (Form, string) {
	if g.chance(0.6) {
		return Form{}, "plain"
	}
	for {
		if f, tag := g.form(); f.Pad == 0 && f.Uni == 0 {
			return f, tag
		}
	}
}

func (g *gen) write() Step {
	dbb := g.dbBase()
	t := g.tmpl()
	via := g.via()
	w := func(op Op, tag string) Step { return Step{Via: via, Op: op, Gen: "write:" + tag} }
	df, dtag := g.writeForm()
	db := DBName{Name: Name{Base: dbb, Form: df}}
	tf, ttag := g.writeForm()
	tbl := Name{Base: t.base, Form: tf}
	keys := t.spec.Keys
	switch g.pick(21) {
	case 0:
		f, tag := g.writeForm()
		return w(CreateDatabase{DB: Name{Base: dbb, Form: f}}, "names:"+tag)
	case 1:
		if dbb == "d2" {
			return w(DropDatabase{DB: db, Cascade: true}, "names:"+dtag)
		}
		return w(AlterDatabase{DB: db, Desc: fmt.Sprintf("v%d", g.pick(100))}, "names:"+dtag)
	case 2, 3:
		return w(CreateTable{DB: db, Table: tbl, Spec: t.spec}, "names:"+ttag)
	case 4:
		return w(DropTable{DB: db, Table: tbl}, "names:"+ttag)
	case 5, 6, 7:
		// alter_table lower-cases the names but does not trim them (3.1):
		// blanks make its queries find two rows, which it retries for 20
		// seconds. Case forms only.
		db.Form.Lead, db.Form.Trail, tbl.Form.Lead, tbl.Form.Trail = "", "", "", ""
		spec := t.spec
		spec.Params = map[string]string{"p": fmt.Sprint(g.pick(1000))}
		if g.chance(0.2) {
			spec.Cols = append(append([]Col(nil), spec.Cols...), Col{"extra", "string"})
		}
		return w(AlterTable{DB: db, Table: tbl, NewName: N(t.base), Spec: spec}, "alter:"+ttag)
	case 8, 9, 10:
		if len(keys) == 0 {
			return w(AlterTable{DB: db, Table: tbl, NewName: N(t.base), Spec: t.spec}, "alter")
		}
		var vs [][]string
		for i := 0; i < 1+g.pick(3); i++ {
			vs = append(vs, g.vals(keys))
		}
		return w(AddPartitions{DB: db, Table: tbl, Values: vs, Cols: dataCols}, "parts:"+ttag)
	case 11:
		if len(keys) == 0 {
			break
		}
		return w(DropPartition{DB: db, Table: tbl, Values: g.vals(keys)}, "parts")
	case 12:
		if len(keys) == 0 {
			break
		}
		return w(AlterPartition{DB: db, Table: tbl, Values: g.vals(keys), Cols: dataCols, Key: "p", Value: fmt.Sprint(g.pick(1000))}, "parts")
	case 13, 14:
		c := pickOf(g, dataCols)
		part := ""
		if len(keys) > 0 && g.chance(0.5) {
			part = partName(keys, g.vals(keys))
		}
		return w(UpdateColStats{DB: db, Table: tbl, Part: part, Col: c, N: int64(g.pick(1000))}, "stats")
	case 15:
		return w(DeleteTableColStats{DB: db, Table: tbl, Col: pickOf(g, dataCols).Name}, "stats")
	case 16:
		// Plain names only: the metastore checks a new function's name as
		// written and stores it normalised, and the unique index then
		// refuses the insert, which it retries for 20 seconds.
		return w(CreateFunction{DB: D(dbb), Fn: N(g.fnBase()), Impl: "com.example.F"}, "functions")
	case 17:
		f, tag := g.writeForm()
		return w(AlterFunction{DB: db, Fn: Name{Base: g.fnBase(), Form: f}, Impl: fmt.Sprintf("com.example.F%d", g.pick(100))}, "functions:"+tag)
	case 18:
		f, tag := g.writeForm()
		return w(DropFunction{DB: db, Fn: Name{Base: g.fnBase(), Form: f}}, "functions:"+tag)
	case 19:
		plain := D(dbb)
		switch g.pick(5) {
		case 0:
			return w(AddPrimaryKey{DB: plain, Table: N(t.base), Col: "id", PK: "pk_" + t.base}, "constraints")
		case 1:
			return w(DropConstraint{DB: N(dbb), Table: N(t.base), Name: "pk_" + t.base}, "constraints")
		case 2:
			if g.version != "2.3" && len(keys) == 0 {
				return w(TruncateTable{DB: plain, Table: N(t.base)}, "truncate")
			}
		case 3:
			part := ""
			if len(keys) > 0 {
				part = partName(keys, g.vals(keys))
			}
			return w(SetAggrStats{DB: plain, Table: N(t.base), Part: part, Col: pickOf(g, dataCols), N: int64(g.pick(1000))}, "stats")
		case 4:
			if len(keys) > 0 {
				return w(DeletePartColStats{DB: plain, Table: N(t.base), Part: partName(keys, g.vals(keys)), Col: pickOf(g, dataCols).Name}, "stats")
			}
		}
	}
	return w(AlterTable{DB: db, Table: tbl, NewName: N(t.base), Spec: t.spec}, "alter")
}

// metaConfs are setMetaConf keys that change answers, and one that does
// not (a client-side timeout), and one the metastore refuses.
var metaConfs = [][2]string{
	{"metastore.client.capability.check", "false"},
	{"hive.metastore.client.capability.check", "false"},
	{"hive.metastore.try.direct.sql", "false"},
	{"metastore.try.direct.sql", "false"},
	{"hive.metastore.client.socket.timeout", "700"},
	{"hive.metastore.partition.name.whitelist.pattern", "[a-z0-9]*"},
	{"no.such.setting", "1"},
}

func (g *gen) sessionStep() Step {
	switch g.pick(5) {
	case 0, 1:
		kv := pickOf(g, metaConfs)
		return Step{Via: Both, Op: SetMetaConf{Key: kv[0], Value: kv[1]}, Gen: "session:conf"}
	case 2, 3:
		return Step{Via: Both, Op: SetUGI{User: pickOf(g, []string{"alice", "bob", "twin"}), Groups: []string{"users"}}, Gen: "session:ugi"}
	}
	return Step{Via: Both, Op: Reconnect{}, Gen: "session:reconnect"}
}

func (g *gen) txnStep() Step {
	dbb := g.primaryBase()
	if g.fed && g.chance(0.5) {
		dbb = g.dbBase() // locks and Iceberg commits on a member's tables too
	}
	via := g.via()
	if g.nodes > 1 || g.chance(0.5) {
		// Half the commits through the proxy, half straight: a mixed
		// deployment.
		via = pickOf(g, []Via{Proxy, Direct})
	}
	s := func(op Op, tag string) Step { return Step{Via: via, Op: op, Gen: tag} }
	// Iceberg commits are three in ten (two on 4.0, whose locks stall):
	// a lost commit needs a commit through a proxy soon after one
	// straight to the table, and at two in ten and 10% of steps a
	// ten-minute run on 3.1 made under 200 commits.
	k := g.pick(10)
	if k == 2 && g.version == "4.0" {
		k = 3
	}
	switch k {
	case 0, 1, 2:
		if g.chance(0.4) {
			// A reader of the table (an engine planning a query reads
			// its metadata location): what fills the proxy's cache
			// between commits.
			var rd Op = GetTable{DB: D(dbb), Table: N(iceTable.base)}
			if g.version == "4.0" {
				rd = GetTableReq{DB: N(dbb), Table: N(iceTable.base)}
			}
			return Step{Via: Both, Op: rd, Gen: "iceberg:read"}
		}
		return s(IcebergCommit{DB: D(dbb), Table: N(iceTable.base), Spec: iceTable.spec}, "iceberg")
	case 3, 4:
		t := g.tmpl()
		lk := Lock{DB: D(dbb), Table: N(t.base), Type: pickOf(g, []int32{SharedRead, SharedWrite, Exclusive}), Level: LevelTable, Txn: -1, Hold: g.pick(3)}
		switch g.pick(4) {
		case 0:
			// A database lock blocks every table lock of the database
			// (the Iceberg commits' too) while it is held: a shared one.
			lk.Level, lk.Table, lk.Type = LevelDB, Name{}, pickOf(g, []int32{SharedRead, SharedWrite})
		case 1:
			if len(t.spec.Keys) > 0 {
				lk.Level, lk.Part = LevelPartition, partName(t.spec.Keys, g.vals(t.spec.Keys))
			}
		}
		return s(lk, "locks")
	case 5:
		return s(CheckLock{Which: 0}, "locks")
	case 6:
		return s(Unlock{Which: 0}, "locks")
	case 7:
		if g.chance(0.3) && g.version != "2.3" {
			// A write lock of the session's newest transaction: its
			// commit invalidates what it locked.
			return s(Lock{DB: D(dbb), Table: N("io"), Type: SharedWrite, Level: LevelTable, Txn: 0}, "txns:lock")
		}
		return s(OpenTxn{}, "txns")
	case 8:
		if g.version == "2.3" {
			return s(OpenTxn{}, "txns")
		}
		return s(AllocWriteIDs{Txn: 0, DB: D(dbb), Table: N("io")}, "txns")
	}
	return s(EndTxn{Txn: 0, Abort: g.chance(0.3)}, "txns")
}
