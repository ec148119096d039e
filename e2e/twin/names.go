package twin

import (
	"strings"
)

// Name is a database, table or function name of a generated call. Its
// base is qualified by the run's namespace when the call is made, so a
// sequence can be replayed on the same metastore without meeting the
// objects of an earlier run. Form says how the client writes it: the
// metastore normalises identifiers (trim, then lower-case), so every
// form of one base names the same object there, and the proxy must
// agree.
type Name struct {
	Base string
	Form Form
}

// Form is how a name is written.
type Form struct {
	// Case: 0 as is (lower), 1 upper, 2 first letter upper.
	Case uint8
	// Lead and Trail are written before and after the name: blanks,
	// tabs, control characters, or a no-break space the metastore's trim
	// keeps.
	Lead, Trail string
	// Uni replaces one letter with a character whose lower case in Java
	// is or is not that letter: 1 KELVIN SIGN for 'k' (lower-cases to
	// 'k'), 2 CAPITAL I WITH DOT for 'i' (lower-cases to "i" and a
	// combining dot), 3 LONG S for 's' (folds to 's' but lower-cases to
	// itself).
	Uni uint8
	// Pad, when longer than the name, fills it with 'x' to that many
	// bytes: names near the metastore's column limits.
	Pad int
}

// N is a name in its plain form.
func N(base string) Name { return Name{Base: base} }

// DBName is a database name as a legacy method's db argument carries it,
// where 3.x and 4.0 clients may fold a catalog in: Cat "@hive#" (in any
// case) is written before the name.
type DBName struct {
	Name
	Cat string
}

// D is a database name in its plain form, without a catalog.
func D(base string) DBName { return DBName{Name: N(base)} }

// Canon is the name the metastore stores for base in namespace ns.
func Canon(ns, base string) string {
	if base == "" {
		return ""
	}
	return ns + "_" + base
}

// Render writes the name in namespace ns.
func (n Name) Render(ns string) string { return n.renderCanon(Canon(ns, n.Base)) }

// renderCanon writes the name in its form, over the stored name s.
func (n Name) renderCanon(s string) string {
	if n.Form.Pad > len(s) {
		s += strings.Repeat("x", n.Form.Pad-len(s))
	}
	switch n.Form.Case {
	case 1:
		s = strings.ToUpper(s)
	case 2:
		if s != "" {
			s = strings.ToUpper(s[:1]) + s[1:]
		}
	}
	switch n.Form.Uni {
	case 1:
		s = replaceFirst(s, "k", "\u212a")
	case 2:
		s = replaceFirst(s, "i", "\u0130")
	case 3:
		s = replaceFirst(s, "s", "\u017f")
	}
	return n.Form.Lead + s + n.Form.Trail
}

func replaceFirst(s, old, repl string) string {
	if i := strings.Index(strings.ToLower(s), old); i >= 0 {
		return s[:i] + repl + s[i+len(old):]
	}
	return s
}

// Plain reports whether the name is written exactly as stored.
func (n Name) Plain() bool { return n.Form == Form{} }
