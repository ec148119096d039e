// Package authtolocal maps Kerberos principals to short user names with
// the rules of Hadoop's hadoop.security.auth_to_local, so that a rule set
// copied from a metastore's core-site.xml gives the same names here.
//
// A rule set is a whitespace-separated list, tried in order; the first
// rule that applies gives the name:
//
//	DEFAULT
//	RULE:[n:format](match)s/from/to/g/L
//
// DEFAULT applies to any principal of the default realm and gives its
// first component. RULE applies to principals of n components: format
// builds a string from $0 (the realm) and $1..$n (the components); the
// rule applies when match (optional) matches all of it; the sed-style
// substitution (optional; g replaces every match, else the first) then
// gives the name, and /L lower-cases it. The regular expressions are
// Go's (RE2): Java-only constructs (back-references, look-around) are
// refused by Parse.
//
// Unlike Hadoop, a principal no rule applies to is not refused: its name
// is the whole principal, "alice@OTHER.REALM". A rule that gives an empty
// name, or one holding '/' or '@', is an error, as in Hadoop.
package authtolocal

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Default is the rule set when none is configured: short names for the
// default realm only.
const Default = "DEFAULT"

// ErrRule is wrapped by Parse's errors.
var ErrRule = errors.New("authtolocal: invalid rule")

// ErrName is wrapped by the errors of a rule that gives no usable name.
var ErrName = errors.New("authtolocal: the rule gives no simple name")

// Rules is a parsed rule set for one default realm. Safe for concurrent
// use.
type Rules struct {
	realm string
	rules []rule
	text  []string // each rule as written, for errors
}

type rule struct {
	isDefault bool
	n         int            // components the principal must have
	format    []piece        // the string built from the principal
	match     *regexp.Regexp // nil: any
	from      *regexp.Regexp // nil: no substitution
	to        string         // in regexp.Expand syntax
	global    bool
	lower     bool
}

// piece is a literal, or the parameter $param when literal is "".
type piece struct {
	literal string
	param   int
}

// ruleSyntax is Hadoop's KerberosName rule parser, anchored.
var ruleSyntax = regexp.MustCompile(`^\s*((DEFAULT)|(RULE:\[(\d*):([^\]]*)](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?))/?(L)?`)

// maxRules bounds a rule set; Hadoop deployments use a handful.
const maxRules = 1000

// Parse reads a rule set (Default when text is blank) whose DEFAULT rule
// means defaultRealm.
func Parse(text, defaultRealm string) (*Rules, error) {
	rest := strings.TrimSpace(text)
	if rest == "" {
		rest = Default
	}
	r := &Rules{realm: defaultRealm}
	for rest != "" {
		m := ruleSyntax.FindStringSubmatch(rest)
		if m == nil {
			return nil, fmt.Errorf("%w at %q: want DEFAULT or RULE:[n:format](match)s/from/to/", ErrRule, clip(rest))
		}
		if len(r.rules) == maxRules {
			return nil, fmt.Errorf("%w: more than %d rules", ErrRule, maxRules)
		}
		written := strings.TrimSpace(m[0])
		rl, err := parseRule(m)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %v", ErrRule, written, err)
		}
		r.rules = append(r.rules, rl)
		r.text = append(r.text, written)
		rest = strings.TrimLeft(rest[len(m[0]):], " \t\r\n")
	}
	return r, nil
}

func parseRule(m []string) (rule, error) {
	rl := rule{lower: m[12] == "L"}
	if m[2] == "DEFAULT" {
		rl.isDefault = true
		return rl, nil
	}
	n, err := strconv.Atoi(m[4])
	if err != nil || n < 1 || n > 16 {
		return rule{}, fmt.Errorf("the number of components %q is not between 1 and 16", m[4])
	}
	rl.n = n
	if rl.format, err = parseFormat(m[5], n); err != nil {
		return rule{}, err
	}
	if m[6] != "" {
		// Java's matches(): the whole string
		if rl.match, err = regexp.Compile(`^(?:` + m[7] + `)$`); err != nil {
			return rule{}, fmt.Errorf("match: %v", err)
		}
	}
	if m[8] != "" {
		if rl.from, err = regexp.Compile(m[9]); err != nil {
			return rule{}, fmt.Errorf("substitution: %v", err)
		}
		if rl.to, err = replacement(m[10], rl.from.NumSubexp()); err != nil {
			return rule{}, fmt.Errorf("substitution: %v", err)
		}
		rl.global = m[11] == "g"
	}
	return rl, nil
}

// parseFormat splits "$1@$0" into literals and parameters, each at most n.
func parseFormat(f string, n int) ([]piece, error) {
	var ps []piece
	for f != "" {
		i := strings.IndexByte(f, '$')
		if i < 0 {
			ps = append(ps, piece{literal: f})
			break
		}
		if i > 0 {
			ps = append(ps, piece{literal: f[:i]})
		}
		j := i + 1
		for j < len(f) && f[j] >= '0' && f[j] <= '9' {
			j++
		}
		p, err := strconv.Atoi(f[i+1 : j])
		if err != nil || p > n {
			return nil, fmt.Errorf("format %q: $%s is not one of $0..$%d", f, f[i+1:j], n)
		}
		ps = append(ps, piece{param: p})
		f = f[j:]
	}
	return ps, nil
}

// replacement turns a Java replacement string into regexp.Expand's
// syntax: \c is a literal c; $g is group g, taking further digits only
// while they name a group, as Java does.
func replacement(to string, groups int) (string, error) {
	var b strings.Builder
	for i := 0; i < len(to); i++ {
		switch c := to[i]; c {
		case '\\':
			i++
			if i == len(to) {
				return "", fmt.Errorf("replacement %q ends in a backslash", to)
			}
			if to[i] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(to[i])
			}
		case '$':
			if i+1 == len(to) || to[i+1] < '0' || to[i+1] > '9' {
				return "", fmt.Errorf("replacement %q: $ must name a group ($1) or be escaped (\\$)", to)
			}
			g := int(to[i+1] - '0')
			i++
			for i+1 < len(to) && to[i+1] >= '0' && to[i+1] <= '9' && g*10+int(to[i+1]-'0') <= groups {
				g = g*10 + int(to[i+1]-'0')
				i++
			}
			if g > groups {
				return "", fmt.Errorf("replacement %q: no group %d", to, g)
			}
			fmt.Fprintf(&b, "${%d}", g)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// ShortName maps the principal of the given name components and realm:
// the name of the first rule that applies, or the whole principal when
// none does. A rule that applies but gives an empty name or one holding
// '/' or '@' is an ErrName error.
func (r *Rules) ShortName(components []string, realm string) (string, error) {
	for i, rl := range r.rules {
		name, ok := rl.apply(components, realm, r.realm)
		if !ok {
			continue
		}
		if name == "" || strings.ContainsAny(name, "/@") {
			return "", fmt.Errorf("%w: %q for %s after rule %s", ErrName, name, Principal(components, realm), r.text[i])
		}
		return name, nil
	}
	return Principal(components, realm), nil
}

// Principal writes a principal out, "hive/host@REALM".
func Principal(components []string, realm string) string {
	return strings.Join(components, "/") + "@" + realm
}

func (rl *rule) apply(components []string, realm, defaultRealm string) (string, bool) {
	var name string
	switch {
	case rl.isDefault:
		if realm != defaultRealm || len(components) == 0 {
			return "", false
		}
		name = components[0]
	case len(components) == rl.n:
		var b strings.Builder
		for _, p := range rl.format {
			switch {
			case p.literal != "":
				b.WriteString(p.literal)
			case p.param == 0:
				b.WriteString(realm)
			default:
				b.WriteString(components[p.param-1])
			}
		}
		name = b.String()
		if rl.match != nil && !rl.match.MatchString(name) {
			return "", false
		}
		if rl.from != nil {
			name = rl.substitute(name)
		}
	default:
		return "", false
	}
	if rl.lower {
		name = strings.ToLower(name)
	}
	return name, true
}

func (rl *rule) substitute(s string) string {
	if rl.global {
		return rl.from.ReplaceAllString(s, rl.to)
	}
	loc := rl.from.FindStringSubmatchIndex(s)
	if loc == nil {
		return s
	}
	out := []byte(s[:loc[0]])
	out = rl.from.ExpandString(out, rl.to, s, loc)
	return string(out) + s[loc[1]:]
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
