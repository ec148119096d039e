package filter

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// SyntaxError is returned by Parse for a filter it cannot read.
type SyntaxError struct {
	Offset int    // byte offset in the filter where the problem was found
	Msg    string // what was wrong there
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("filter: syntax error at offset %d: %s", e.Offset, e.Msg)
}

func syntaxErr(off int, msg string) error { return &SyntaxError{Offset: off, Msg: msg} }

// maxDepth bounds the nesting of parentheses and NOT, so that a hostile
// filter cannot make Parse or Eval recurse without limit.
const maxDepth = 200

// Op is a comparison operator of a partition filter.
type Op uint8

// Comparison operators. NE covers both != and <>.
const (
	EQ Op = iota + 1
	NE
	LT
	LE
	GT
	GE
	Like
)

var opNames = [...]string{EQ: "=", NE: "!=", LT: "<", LE: "<=", GT: ">", GE: ">=", Like: "LIKE"}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// flip returns the operator that gives the same result with the operands
// swapped: 5 < hr is hr > 5.
func (o Op) flip() Op {
	switch o {
	case LT:
		return GT
	case LE:
		return GE
	case GT:
		return LT
	case GE:
		return LE
	}
	return o
}

// litKind is the type of a literal.
type litKind uint8

const (
	litString litKind = iota
	litInt
	litDate
	litTimestamp
)

// literal is a constant of a filter.
type literal struct {
	kind litKind
	text string // string value; for integers the canonical decimal form
	n    int64  // litInt only
	// odd is set when the literal's spelling is not accepted by every
	// metastore version or its value is uncertain (backslashes, adjacent
	// strings, "- 5").
	odd bool
}

// nodeKind is the kind of an AST node.
type nodeKind uint8

const (
	nAnd nodeKind = iota
	nOr
	nNot
	nCmp     // key op lit
	nIn      // key [NOT] IN (lits)
	nBetween // key [NOT] BETWEEN lits[0] AND lits[1]
)

// node is one node of a filter's syntax tree.
type node struct {
	kind nodeKind
	kids []*node // nAnd, nOr (two or more), nNot (one)
	key  string  // lower-cased; leaves only
	op   Op      // nCmp
	lits []literal
	neg  bool // nIn, nBetween: NOT IN, NOT BETWEEN
	re   *regexp.Regexp
	// reErr is why a LIKE pattern could not be compiled; Eval reports it.
	reErr error
	// odd marks syntax that not every metastore version accepts (unary NOT,
	// key IN without parentheses, ==, back-quoted keys, STRUCT IN, reversed
	// LIKE); such a node is never Exact.
	odd bool
}

// Expr is a parsed partition filter. It is immutable and safe for concurrent
// use.
type Expr struct {
	src  string
	root *node
	keys []string
}

// Parse parses an HMS partition filter. A filter it cannot read gives a
// *SyntaxError with the byte offset of the problem. The empty filter is an
// error: callers treat it as "all partitions" before parsing, as the
// metastore does.
func Parse(s string) (*Expr, error) {
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{src: s, toks: toks}
	if p.peek().kind == tEOF {
		return nil, syntaxErr(0, "empty filter")
	}
	root, err := p.parseOr(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.unexpected(t, "AND, OR or end of filter")
	}
	e := &Expr{src: s, root: root}
	seen := map[string]bool{}
	walk(root, func(n *node) {
		if n.key != "" && !seen[n.key] {
			seen[n.key] = true
			e.keys = append(e.keys, n.key)
		}
	})
	return e, nil
}

func walk(n *node, f func(*node)) {
	f(n)
	for _, k := range n.kids {
		walk(k, f)
	}
}

// String returns the filter as it was given to Parse.
func (e *Expr) String() string { return e.src }

// Keys returns the partition keys the filter refers to, lower-cased, each
// once, in order of first appearance.
func (e *Expr) Keys() []string { return append([]string(nil), e.keys...) }

type parser struct {
	src  string
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) peekAt(k int) token {
	if p.i+k < len(p.toks) {
		return p.toks[p.i+k]
	}
	return p.toks[len(p.toks)-1]
}
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }

// isKeyword reports whether t is the keyword kw (upper case).
func isKeyword(t token, kw string) bool {
	return t.kind == tIdent && strings.EqualFold(t.text, kw)
}

var keywords = map[string]bool{
	"AND": true, "OR": true, "NOT": true, "LIKE": true, "BETWEEN": true, "IN": true,
	"STRUCT": true, "CONST": true, "DATE": true, "TIMESTAMP": true,
}

func isAnyKeyword(t token) bool {
	return t.kind == tIdent && keywords[strings.ToUpper(t.text)]
}

func (p *parser) unexpected(t token, want string) error {
	return syntaxErr(t.pos, "expected "+want+"; found "+t.describe(p.src))
}

func (p *parser) expect(k tokKind, want string) (token, error) {
	t := p.peek()
	if t.kind != k {
		return t, p.unexpected(t, want)
	}
	return p.next(), nil
}

func (p *parser) parseOr(depth int) (*node, error) {
	return p.parseChain(depth, "OR", nOr, p.parseAnd)
}

func (p *parser) parseAnd(depth int) (*node, error) {
	return p.parseChain(depth, "AND", nAnd, p.parseUnary)
}

func (p *parser) parseChain(depth int, kw string, kind nodeKind, sub func(int) (*node, error)) (*node, error) {
	first, err := sub(depth)
	if err != nil {
		return nil, err
	}
	if !isKeyword(p.peek(), kw) {
		return first, nil
	}
	n := &node{kind: kind, kids: []*node{first}}
	for isKeyword(p.peek(), kw) {
		p.next()
		k, err := sub(depth)
		if err != nil {
			return nil, err
		}
		n.kids = append(n.kids, k)
	}
	return n, nil
}

func (p *parser) parseUnary(depth int) (*node, error) {
	if depth >= maxDepth {
		return nil, syntaxErr(p.peek().pos, fmt.Sprintf("nested deeper than %d", maxDepth))
	}
	if isKeyword(p.peek(), "NOT") {
		p.next()
		k, err := p.parseUnary(depth + 1)
		if err != nil {
			return nil, err
		}
		return &node{kind: nNot, kids: []*node{k}, odd: true}, nil
	}
	return p.parsePrimary(depth)
}

func (p *parser) parsePrimary(depth int) (*node, error) {
	t := p.peek()
	switch {
	case t.kind == tLParen:
		if isKeyword(p.peekAt(1), "STRUCT") {
			return p.parseStructIn()
		}
		if k := p.peekAt(1); (k.kind == tIdent && !isAnyKeyword(k) || k.kind == tQuoted) && p.peekAt(2).kind == tRParen {
			// "(key) [NOT] IN (...)", the metastore's own spelling of IN.
			p.i += 3
			key := identName(k)
			neg := false
			if isKeyword(p.peek(), "NOT") {
				p.next()
				neg = true
			}
			if !isKeyword(p.peek(), "IN") {
				return nil, p.unexpected(p.peek(), "IN after (key)")
			}
			p.next()
			n, err := p.parseInList(key, neg)
			if err == nil && k.kind == tQuoted {
				n.odd = true
			}
			return n, err
		}
		p.next()
		n, err := p.parseOr(depth + 1)
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(tRParen, `")"`); err != nil {
			return nil, err
		}
		return n, nil
	case t.kind == tIdent && !isAnyKeyword(t) || t.kind == tQuoted:
		return p.parseKeyFirst()
	case isLiteralStart(t):
		return p.parseLiteralFirst()
	}
	return nil, p.unexpected(t, "a comparison, NOT or \"(\"")
}

func identName(t token) string { return strings.ToLower(t.text) }

func isLiteralStart(t token) bool {
	switch t.kind {
	case tString, tInt, tDate, tTimestamp:
		return true
	}
	return isKeyword(t, "DATE") || isKeyword(t, "TIMESTAMP")
}

// parseOp reads a comparison operator; odd is set for ==.
func (p *parser) parseOp() (op Op, odd bool, err error) {
	t := p.peek()
	if isKeyword(t, "LIKE") {
		p.next()
		return Like, false, nil
	}
	if t.kind != tOp {
		return 0, false, p.unexpected(t, "a comparison operator")
	}
	p.next()
	switch t.text {
	case "=":
		return EQ, false, nil
	case "==":
		return EQ, true, nil
	case "!=", "<>":
		return NE, false, nil
	case "<":
		return LT, false, nil
	case "<=":
		return LE, false, nil
	case ">":
		return GT, false, nil
	case ">=":
		return GE, false, nil
	}
	return 0, false, syntaxErr(t.pos, fmt.Sprintf("unknown operator %q", t.text))
}

// parseKeyFirst reads "key op lit", "key [NOT] BETWEEN" or "key [NOT] IN".
func (p *parser) parseKeyFirst() (*node, error) {
	kt := p.next()
	key := identName(kt)
	quoted := kt.kind == tQuoted
	neg := false
	if isKeyword(p.peek(), "NOT") {
		p.next()
		neg = true
		if t := p.peek(); !isKeyword(t, "BETWEEN") && !isKeyword(t, "IN") {
			return nil, p.unexpected(t, "BETWEEN or IN after NOT")
		}
	}
	switch t := p.peek(); {
	case isKeyword(t, "BETWEEN"):
		p.next()
		lo, err := p.parseLiteral()
		if err != nil {
			return nil, err
		}
		if t := p.peek(); !isKeyword(t, "AND") {
			return nil, p.unexpected(t, "AND in BETWEEN")
		}
		p.next()
		hi, err := p.parseLiteral()
		if err != nil {
			return nil, err
		}
		return &node{kind: nBetween, key: key, neg: neg, lits: []literal{lo, hi}, odd: quoted}, nil
	case isKeyword(t, "IN"):
		p.next()
		n, err := p.parseInList(key, neg)
		if err != nil {
			return nil, err
		}
		n.odd = true // the metastore wants "(key) IN (...)"
		return n, nil
	}
	op, odd, err := p.parseOp()
	if err != nil {
		return nil, err
	}
	lit, err := p.parseLiteral()
	if err != nil {
		return nil, err
	}
	return p.cmp(key, op, lit, odd || quoted)
}

// parseLiteralFirst reads "lit op key".
func (p *parser) parseLiteralFirst() (*node, error) {
	lit, err := p.parseLiteral()
	if err != nil {
		return nil, err
	}
	op, odd, err := p.parseOp()
	if err != nil {
		return nil, err
	}
	kt := p.peek()
	if !(kt.kind == tIdent && !isAnyKeyword(kt) || kt.kind == tQuoted) {
		return nil, p.unexpected(kt, "a partition key")
	}
	p.next()
	// 'pattern' LIKE key has no sensible meaning; keep it, but never Exact.
	return p.cmp(identName(kt), op.flip(), lit, odd || kt.kind == tQuoted || op == Like)
}

func (p *parser) cmp(key string, op Op, lit literal, odd bool) (*node, error) {
	n := &node{kind: nCmp, key: key, op: op, lits: []literal{lit}, odd: odd}
	if op == Like {
		// The metastore's JDO path matches LIKE patterns as Java regular
		// expressions against the whole value; RE2 is the nearest we have.
		n.re, n.reErr = regexp.Compile(`^(?:` + lit.text + `)$`)
	}
	return n, nil
}

// parseInList reads "(lit, lit, ...)" after IN.
func (p *parser) parseInList(key string, neg bool) (*node, error) {
	if _, err := p.expect(tLParen, `"(" after IN`); err != nil {
		return nil, err
	}
	n := &node{kind: nIn, key: key, neg: neg}
	for {
		lit, err := p.parseLiteral()
		if err != nil {
			return nil, err
		}
		n.lits = append(n.lits, lit)
		if p.peek().kind == tComma {
			p.next()
			continue
		}
		if _, err := p.expect(tRParen, `"," or ")" in IN list`); err != nil {
			return nil, err
		}
		return n, nil
	}
}

// parseStructIn reads "(STRUCT(k1, k2)) [NOT] IN (CONST STRUCT(v1, v2), ...)"
// and expands it into ORs of ANDs of equalities (ANDs of ORs of
// inequalities for NOT IN).
func (p *parser) parseStructIn() (*node, error) {
	p.i += 2 // "(" STRUCT
	if _, err := p.expect(tLParen, `"(" after STRUCT`); err != nil {
		return nil, err
	}
	var keys []string
	for {
		t := p.peek()
		if !(t.kind == tIdent && !isAnyKeyword(t) || t.kind == tQuoted) {
			return nil, p.unexpected(t, "a partition key")
		}
		p.next()
		keys = append(keys, identName(t))
		if p.peek().kind == tComma {
			p.next()
			continue
		}
		break
	}
	if _, err := p.expect(tRParen, `"," or ")" in STRUCT`); err != nil {
		return nil, err
	}
	if _, err := p.expect(tRParen, `")"`); err != nil {
		return nil, err
	}
	neg := false
	if isKeyword(p.peek(), "NOT") {
		p.next()
		neg = true
	}
	if t := p.peek(); !isKeyword(t, "IN") {
		return nil, p.unexpected(t, "IN after STRUCT(...)")
	}
	p.next()
	if _, err := p.expect(tLParen, `"(" after IN`); err != nil {
		return nil, err
	}
	outer, inner, op := nOr, nAnd, EQ
	if neg {
		outer, inner, op = nAnd, nOr, NE
	}
	top := &node{kind: outer, odd: true}
	for {
		if isKeyword(p.peek(), "CONST") {
			p.next()
		}
		if t := p.peek(); !isKeyword(t, "STRUCT") {
			return nil, p.unexpected(t, "STRUCT")
		}
		structPos := p.next().pos
		if _, err := p.expect(tLParen, `"(" after STRUCT`); err != nil {
			return nil, err
		}
		row := &node{kind: inner, odd: true}
		for {
			lit, err := p.parseLiteral()
			if err != nil {
				return nil, err
			}
			if len(row.kids) == len(keys) {
				return nil, syntaxErr(structPos, fmt.Sprintf("STRUCT has more values than its %d keys", len(keys)))
			}
			c, _ := p.cmp(keys[len(row.kids)], op, lit, true)
			row.kids = append(row.kids, c)
			if p.peek().kind == tComma {
				p.next()
				continue
			}
			break
		}
		if len(row.kids) != len(keys) {
			return nil, syntaxErr(structPos, fmt.Sprintf("STRUCT has %d values for %d keys", len(row.kids), len(keys)))
		}
		if _, err := p.expect(tRParen, `"," or ")" in STRUCT`); err != nil {
			return nil, err
		}
		top.kids = append(top.kids, row)
		if p.peek().kind == tComma {
			p.next()
			continue
		}
		if _, err := p.expect(tRParen, `"," or ")" in IN list`); err != nil {
			return nil, err
		}
		return top, nil
	}
}

// parseLiteral reads a string, integer, date or timestamp constant.
func (p *parser) parseLiteral() (literal, error) {
	t := p.peek()
	switch {
	case t.kind == tString:
		p.next()
		lit := literal{kind: litString, text: t.text, odd: t.backslash}
		// Adjacent strings are one constant in HMS 4 (with the inner
		// quotes kept); HMS 2/3 reject them.
		for p.peek().kind == tString {
			u := p.next()
			lit.text = p.src[t.pos+1 : u.pos+1+len(u.text)]
			lit.odd = true
		}
		return lit, nil
	case t.kind == tInt:
		p.next()
		n, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return literal{}, syntaxErr(t.pos, fmt.Sprintf("integer %s out of range", t.describe(p.src)))
		}
		return literal{kind: litInt, n: n, text: strconv.FormatInt(n, 10), odd: t.spacedMinus}, nil
	case t.kind == tDate:
		p.next()
		if _, err := time.Parse(time.DateOnly, t.text); err != nil {
			return literal{}, syntaxErr(t.pos, fmt.Sprintf("invalid date %q", t.text))
		}
		return literal{kind: litDate, text: t.text}, nil
	case t.kind == tTimestamp:
		p.next()
		if _, err := time.Parse(time.DateTime, t.text); err != nil {
			return literal{}, syntaxErr(t.pos, fmt.Sprintf("invalid timestamp %q", t.text))
		}
		return literal{kind: litTimestamp, text: t.text}, nil
	case isKeyword(t, "DATE"), isKeyword(t, "TIMESTAMP"):
		p.next()
		s := p.peek()
		if s.kind != tString {
			return literal{}, p.unexpected(s, "a quoted value after "+strings.ToUpper(t.text))
		}
		p.next()
		if isKeyword(t, "DATE") {
			if _, err := time.Parse(time.DateOnly, s.text); err != nil {
				return literal{}, syntaxErr(s.pos, fmt.Sprintf("invalid date %q", s.text))
			}
			return literal{kind: litDate, text: s.text}, nil
		}
		if _, err := time.Parse(time.DateTime, s.text); err != nil {
			return literal{}, syntaxErr(s.pos, fmt.Sprintf("invalid timestamp %q", s.text))
		}
		return literal{kind: litTimestamp, text: s.text}, nil
	}
	return literal{}, p.unexpected(t, "a value (string, integer, date or timestamp)")
}

// Comparison is one leaf of a filter: a key compared with literals. An
// IN list is Op EQ with In set (NE for NOT IN), a BETWEEN Between
// (Negated for NOT BETWEEN).
type Comparison struct {
	Key         string // lower-cased
	Op          Op
	In, Between bool
	Negated     bool
	Literals    []string // their text; an integer in its canonical form
}

// Comparisons calls fn with every leaf of the filter, in order: what a
// caller that knows a metastore version's quirks looks at.
func (e *Expr) Comparisons(fn func(Comparison)) {
	var walk func(n *node)
	walk = func(n *node) {
		switch n.kind {
		case nCmp, nIn, nBetween:
			c := Comparison{Key: n.key, Op: n.op, Negated: n.neg}
			switch n.kind {
			case nIn:
				c.In, c.Op = true, EQ
				if n.neg {
					c.Op = NE
				}
			case nBetween:
				c.Between = true
			}
			for _, l := range n.lits {
				c.Literals = append(c.Literals, l.text)
			}
			fn(c)
		}
		for _, k := range n.kids {
			walk(k)
		}
	}
	walk(e.root)
}
