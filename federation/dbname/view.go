package dbname

import "strings"

// View rewrites the database qualifiers of the table references (and
// qualified function calls) in a
// HiveQL query (a view's original or expanded text): in `db`.`tbl` or
// db.tbl right after FROM or JOIN, or after a comma in a FROM list, the
// db part is replaced by fn's answer. Everything else is copied as it
// came: string literals ('...' and "..." with backslash escapes),
// comments (-- to the end of the line, /* ... */), column references
// (`t`.`col` in a select list or a condition), unqualified tables.
//
// A qualified function call (db.fn(...), a permanent UDF) has its db
// part rewritten too; an unqualified one is left alone.
//
// Limits (what it does not see): a table named in a position other than
// FROM/JOIN/comma-list (INSERT INTO, TABLESAMPLE arguments, a function
// that takes a table name as a string), a FROM list broken by a
// construct it does not know. Hive's own view text has table references
// only in FROM and JOIN clauses, which is what Waggle Dance rewrites too.
//
// A name fn maps to one that is not a plain identifier is written
// backquoted. With an fn that returns its argument, the result is text.
func View(text string, fn func(db string) (string, error)) (string, error) {
	v := viewScanner{s: text}
	var b strings.Builder
	last := 0
	// expect: the next identifier starts a table reference. list: the
	// innermost open FROM list (a comma starts another table reference),
	// kept per paren depth.
	expect := false
	var lists []bool // lists[depth]
	depth := 0
	setList := func(on bool) {
		for len(lists) <= depth {
			lists = append(lists, false)
		}
		lists[depth] = on
	}
	inList := func() bool { return depth < len(lists) && lists[depth] }
	prevDot := false // the token before t was a '.': t is no qualifier
	for {
		t := v.next()
		dot := prevDot
		prevDot = t.kind == tokDot
		switch t.kind {
		case tokEOF:
			if last == 0 {
				return text, nil
			}
			b.WriteString(text[last:])
			return b.String(), nil
		case tokWord, tokQuoted:
			word := strings.ToUpper(t.text)
			if t.kind == tokWord {
				switch word {
				case "FROM", "JOIN":
					expect = true
					setList(true)
					continue
				case "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "UNION", "SORT", "CLUSTER", "DISTRIBUTE",
					"WINDOW", "LATERAL", "ON", "USING", "SELECT", "INTERSECT", "EXCEPT", "MINUS":
					expect = false
					setList(false)
					continue
				}
			}
			// A table reference right after FROM/JOIN/comma, or a
			// qualified function call anywhere: db.tbl, db.fn(.
			table := expect
			expect = false
			if !table && dot {
				continue
			}
			save := v.pos
			if v.next().kind != tokDot {
				v.pos = save
				continue
			}
			if n := v.next(); n.kind != tokWord && n.kind != tokQuoted {
				v.pos = save
				continue
			}
			if !table {
				if v.next().kind != tokOpen {
					v.pos = save
					continue
				}
			}
			v.pos = save
			name := t.text
			if t.kind == tokQuoted {
				name = unquote(t.text)
			}
			mapped, err := fn(name)
			if err != nil {
				return "", err
			}
			if mapped == name {
				continue
			}
			if b.Len() == 0 {
				b.Grow(len(text) + 16)
			}
			b.WriteString(text[last:t.from])
			if t.kind == tokWord && plainIdent(mapped) {
				b.WriteString(mapped)
			} else {
				b.WriteString(quote(mapped))
			}
			last = t.to
		case tokComma:
			expect = inList()
		case tokOpen:
			// "FROM (": a subquery or a parenthesised join; its own FROM
			// starts its own list.
			expect = false
			depth++
			setList(false)
		case tokClose:
			if depth > 0 {
				depth--
			}
			expect = false
		default:
			expect = false
		}
	}
}

type tokKind uint8

const (
	tokEOF tokKind = iota
	tokWord
	tokQuoted // `...`
	tokDot
	tokComma
	tokOpen
	tokClose
	tokOther
)

type token struct {
	kind     tokKind
	text     string
	from, to int
}

// viewScanner cuts HiveQL into the tokens View cares about, skipping
// white space, comments and string literals.
type viewScanner struct {
	s   string
	pos int
}

func (v *viewScanner) next() token {
	s := v.s
	for v.pos < len(s) {
		c := s[v.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			v.pos++
		case c == '-' && v.pos+1 < len(s) && s[v.pos+1] == '-':
			if i := strings.IndexByte(s[v.pos:], '\n'); i >= 0 {
				v.pos += i + 1
			} else {
				v.pos = len(s)
			}
		case c == '/' && v.pos+1 < len(s) && s[v.pos+1] == '*':
			if i := strings.Index(s[v.pos+2:], "*/"); i >= 0 {
				v.pos += i + 4
			} else {
				v.pos = len(s)
			}
		case c == '\'' || c == '"':
			from := v.pos
			v.pos++
			for v.pos < len(s) && s[v.pos] != c {
				if s[v.pos] == '\\' {
					v.pos++
				}
				v.pos++
			}
			if v.pos < len(s) {
				v.pos++
			} else {
				v.pos = len(s)
			}
			return token{kind: tokOther, from: from, to: v.pos}
		case c == '`':
			from := v.pos
			v.pos++
			for v.pos < len(s) {
				if s[v.pos] == '`' {
					if v.pos+1 < len(s) && s[v.pos+1] == '`' { // `` is a quoted backquote
						v.pos += 2
						continue
					}
					break
				}
				v.pos++
			}
			if v.pos < len(s) {
				v.pos++
			}
			return token{kind: tokQuoted, text: s[from:v.pos], from: from, to: v.pos}
		case identByte(c):
			from := v.pos
			for v.pos < len(s) && identByte(s[v.pos]) {
				v.pos++
			}
			return token{kind: tokWord, text: s[from:v.pos], from: from, to: v.pos}
		default:
			from := v.pos
			v.pos++
			k := tokOther
			switch c {
			case '.':
				k = tokDot
			case ',':
				k = tokComma
			case '(':
				k = tokOpen
			case ')':
				k = tokClose
			}
			return token{kind: k, from: from, to: v.pos}
		}
	}
	return token{kind: tokEOF, from: len(s), to: len(s)}
}

func identByte(c byte) bool {
	return c == '_' || c == '$' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// plainIdent reports whether s can stand unquoted: identifier bytes, not
// all digits.
func plainIdent(s string) bool {
	if s == "" {
		return false
	}
	digits := true
	for i := 0; i < len(s); i++ {
		if !identByte(s[i]) || s[i] == '$' {
			return false
		}
		if s[i] < '0' || s[i] > '9' {
			digits = false
		}
	}
	return !digits
}

// unquote turns `a“b` into a`b; an unterminated quote keeps what follows it.
func unquote(q string) string {
	q = q[1:]
	if strings.HasSuffix(q, "`") {
		q = q[:len(q)-1]
	}
	return strings.ReplaceAll(q, "``", "`")
}

func quote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
