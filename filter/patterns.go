package filter

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Patterns decides which databases and tables may be cached. It is built once
// by Compile and is safe for concurrent use. A nil *Patterns allows everything.
type Patterns struct {
	allow []namePattern
	deny  []namePattern
	// bufs holds *[]byte scratch buffers for regular expressions, which
	// need "db.table" as one lower-cased string.
	bufs sync.Pool
}

// namePattern is one compiled allow or deny entry.
type namePattern struct {
	src string
	re  *regexp.Regexp // "re:" patterns; db and table are unused
	db  string         // lower-cased glob over the database name
	// table is the lower-cased glob over the table name; hasTable is false
	// for a pattern without a dot, which matches a whole database.
	table    string
	hasTable bool
}

// Compile compiles allow and deny patterns. A pattern is one of:
//
//   - "db": a glob over database names; it matches the database's own
//     objects and every table in it;
//   - "db.table": globs over the database and the table name; it matches
//     tables, and database-level objects only when the table glob is "*";
//   - "re:EXPR": a regular expression (Go syntax, case-insensitive, unanchored
//     unless EXPR anchors it) over "db" for database-level objects and
//     "db.table" for tables.
//
// In globs, * matches any run of characters and ? exactly one; matching is
// case-insensitive. An empty pattern, or a glob with an empty side or more
// than one dot, is an error.
func Compile(allow, deny []string) (*Patterns, error) {
	p := &Patterns{}
	p.bufs.New = func() any { b := make([]byte, 0, 128); return &b }
	var err error
	if p.allow, err = compileList("allow", allow); err != nil {
		return nil, err
	}
	if p.deny, err = compileList("deny", deny); err != nil {
		return nil, err
	}
	return p, nil
}

func compileList(which string, srcs []string) ([]namePattern, error) {
	out := make([]namePattern, 0, len(srcs))
	for i, s := range srcs {
		np, err := compileOne(s)
		if err != nil {
			return nil, fmt.Errorf("filter: %s pattern %d %q: %w", which, i, s, err)
		}
		out = append(out, np)
	}
	return out, nil
}

func compileOne(s string) (namePattern, error) {
	np := namePattern{src: s}
	if expr, ok := strings.CutPrefix(s, "re:"); ok {
		if expr == "" {
			return np, fmt.Errorf("empty regular expression")
		}
		re, err := regexp.Compile("(?i:" + expr + ")")
		if err != nil {
			return np, err
		}
		np.re = re
		return np, nil
	}
	if strings.TrimSpace(s) != s {
		return np, fmt.Errorf("leading or trailing space")
	}
	db, table, hasTable := strings.Cut(strings.ToLower(s), ".")
	switch {
	case db == "":
		return np, fmt.Errorf("empty database part")
	case hasTable && table == "":
		return np, fmt.Errorf("empty table part")
	case strings.Contains(table, "."):
		return np, fmt.Errorf("more than one dot")
	}
	np.db, np.table, np.hasTable = db, table, hasTable
	return np, nil
}

// String returns the patterns as "allow=[...] deny=[...]".
func (p *Patterns) String() string {
	if p == nil {
		return "allow=[] deny=[]"
	}
	srcs := func(l []namePattern) string {
		s := make([]string, len(l))
		for i := range l {
			s[i] = l[i].src
		}
		return strings.Join(s, " ")
	}
	return "allow=[" + srcs(p.allow) + "] deny=[" + srcs(p.deny) + "]"
}

// Allowed reports whether the object named by db and table may be cached:
// when some allow pattern matches (or there are none) and no deny pattern
// does. table is "" for database-level objects (the database itself, its
// table-name lists). Allowed does not allocate.
func (p *Patterns) Allowed(db, table string) bool {
	if p == nil {
		return true
	}
	for i := range p.deny {
		if p.match(&p.deny[i], db, table) {
			return false
		}
	}
	if len(p.allow) == 0 {
		return true
	}
	for i := range p.allow {
		if p.match(&p.allow[i], db, table) {
			return true
		}
	}
	return false
}

func (p *Patterns) match(np *namePattern, db, table string) bool {
	if np.re != nil {
		bp := p.bufs.Get().(*[]byte)
		b := appendLower((*bp)[:0], db)
		if table != "" {
			b = append(b, '.')
			b = appendLower(b, table)
		}
		ok := np.re.Match(b)
		*bp = b
		p.bufs.Put(bp)
		return ok
	}
	if !globMatch(np.db, db) {
		return false
	}
	if !np.hasTable {
		return true
	}
	if table == "" {
		return np.table == "*"
	}
	return globMatch(np.table, table)
}

// appendLower appends s lower-cased to b.
func appendLower(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b = append(b, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, c) // keep invalid bytes as they are
		} else {
			b = utf8.AppendRune(b, unicode.ToLower(r))
		}
		i += n
	}
	return b
}

// nextLower decodes the rune at s[i:], lower-cased, and its width.
// Invalid bytes decode as themselves (as runes 0x80-0xFF are never produced
// by a lower-cased pattern for an invalid byte, they only match '?' and '*').
func nextLower(s string, i int) (rune, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		return rune(c), 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && n == 1 {
		return -int32(c), 1 // distinct from every valid rune
	}
	return unicode.ToLower(r), n
}

// globMatch reports whether name matches the lower-cased glob pat, comparing
// name lower-cased. It backtracks only to the last star, so it runs in
// O(len(pat)*len(name)).
func globMatch(pat, name string) bool {
	pi, ni := 0, 0
	starP, starN := -1, 0
	for ni < len(name) {
		if pi < len(pat) {
			switch pat[pi] {
			case '*':
				starP, starN = pi, ni
				pi++
				continue
			case '?':
				_, n := nextLower(name, ni)
				pi++
				ni += n
				continue
			default:
				pr, pn := nextLower(pat, pi)
				nr, nn := nextLower(name, ni)
				if pr == nr {
					pi += pn
					ni += nn
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Let the last star swallow one more rune of name and retry.
		_, n := nextLower(name, starN)
		starN += n
		pi, ni = starP+1, starN
	}
	for pi < len(pat) && pat[pi] == '*' {
		pi++
	}
	return pi == len(pat)
}
