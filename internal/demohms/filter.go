package demohms

import (
	"fmt"
	"strconv"
	"strings"
)

// A small version of HMS's partition filter language:
//
//	expr   := and { OR and }
//	and    := term { AND term }
//	term   := '(' expr ')' | operand op operand
//	op     := = | == | != | <> | < | <= | > | >=
//	operand:= key | 'string' | "string" | integer
//
// Keywords are case-insensitive; exactly one side of a comparison must be a
// partition key. An integer literal against an integral key (int, bigint,
// smallint, tinyint) compares numerically; everything else compares as
// strings.

type filterNode struct {
	op          string // "and", "or", or a comparison operator
	left, right *filterNode
	key         string // comparison: lower-case key name
	lit         string // comparison: literal text
	num         bool   // literal was an integer
	n           int64
}

type token struct {
	kind string // "id", "str", "num", "op", "(", ")", "eof"
	text string
	pos  int
}

func lexFilter(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(' || c == ')':
			out = append(out, token{kind: string(c), text: string(c), pos: i})
			i++
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			out = append(out, token{kind: "str", text: s[i+1 : i+1+j], pos: i})
			i += j + 2
		case strings.IndexByte("=!<>", c) >= 0:
			op := string(c)
			if i+1 < len(s) && strings.IndexByte("=>", s[i+1]) >= 0 {
				op += string(s[i+1])
			}
			switch op {
			case "=", "==", "!=", "<>", "<", "<=", ">", ">=":
			default:
				return nil, fmt.Errorf("unknown operator %q at %d", op, i)
			}
			out = append(out, token{kind: "op", text: op, pos: i})
			i += len(op)
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j == i+1 && c == '-' {
				return nil, fmt.Errorf("unexpected '-' at %d", i)
			}
			out = append(out, token{kind: "num", text: s[i:j], pos: i})
			i = j
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] == '.' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			out = append(out, token{kind: "id", text: s[i:j], pos: i})
			i = j
		default:
			return nil, fmt.Errorf("unexpected character %q at %d", c, i)
		}
	}
	return append(out, token{kind: "eof", pos: len(s)}), nil
}

type filterParser struct {
	toks []token
	i    int
}

func (p *filterParser) peek() token { return p.toks[p.i] }
func (p *filterParser) next() token {
	t := p.toks[p.i]
	if t.kind != "eof" { // eof is sticky
		p.i++
	}
	return t
}

func (p *filterParser) keyword(kw string) bool {
	t := p.peek()
	if t.kind == "id" && strings.EqualFold(t.text, kw) {
		p.i++
		return true
	}
	return false
}

func (p *filterParser) expr() (*filterNode, error) {
	l, err := p.and()
	for err == nil && p.keyword("or") {
		var r *filterNode
		if r, err = p.and(); err == nil {
			l = &filterNode{op: "or", left: l, right: r}
		}
	}
	return l, err
}

func (p *filterParser) and() (*filterNode, error) {
	l, err := p.term()
	for err == nil && p.keyword("and") {
		var r *filterNode
		if r, err = p.term(); err == nil {
			l = &filterNode{op: "and", left: l, right: r}
		}
	}
	return l, err
}

func (p *filterParser) term() (*filterNode, error) {
	if p.peek().kind == "(" {
		p.next()
		n, err := p.expr()
		if err != nil {
			return nil, err
		}
		if t := p.next(); t.kind != ")" {
			return nil, fmt.Errorf("expected ')' at %d", t.pos)
		}
		return n, nil
	}
	a := p.next()
	op := p.next()
	if op.kind != "op" {
		return nil, fmt.Errorf("expected comparison operator at %d", op.pos)
	}
	b := p.next()
	isOperand := func(t token) bool { return t.kind == "id" || t.kind == "str" || t.kind == "num" }
	if !isOperand(a) || !isOperand(b) {
		return nil, fmt.Errorf("expected key or literal at %d", a.pos)
	}
	o := op.text
	if a.kind != "id" || isKeyword(a.text) { // literal op key: flip
		a, b = b, a
		o = flipOp[o]
	}
	if a.kind != "id" || isKeyword(a.text) || b.kind == "id" {
		return nil, fmt.Errorf("a comparison needs one partition key and one literal (at %d)", a.pos)
	}
	if o == "==" {
		o = "="
	} else if o == "<>" {
		o = "!="
	}
	n := &filterNode{op: o, key: strings.ToLower(a.text), lit: b.text}
	if b.kind == "num" {
		v, err := strconv.ParseInt(b.text, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad number %q", b.text)
		}
		n.num, n.n = true, v
	}
	return n, nil
}

// flipOp is the operator with its operands swapped.
var flipOp = map[string]string{"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": ">", ">": "<", "<=": ">=", ">=": "<="}

func isKeyword(s string) bool { return strings.EqualFold(s, "and") || strings.EqualFold(s, "or") }

// parseFilter parses a filter; an error is the MetaException HMS sends.
func parseFilter(s string) (*filterNode, error) {
	toks, err := lexFilter(s)
	if err != nil {
		return nil, metaErr("Error parsing partition filter : " + err.Error())
	}
	p := &filterParser{toks: toks}
	n, err := p.expr()
	if err == nil && p.peek().kind != "eof" {
		err = fmt.Errorf("unexpected %q at %d", p.peek().text, p.peek().pos)
	}
	if err != nil {
		return nil, metaErr("Error parsing partition filter : " + err.Error())
	}
	return n, nil
}

// check reports a key that is not a partition key of t.
func (n *filterNode) check(keys []fieldSchema) error {
	if n.op == "and" || n.op == "or" {
		if err := n.left.check(keys); err != nil {
			return err
		}
		return n.right.check(keys)
	}
	for _, k := range keys {
		if strings.EqualFold(k.Name, n.key) {
			return nil
		}
	}
	return metaErr("Invalid partition key name: " + n.key)
}

func integral(typ string) bool {
	switch strings.ToLower(typ) {
	case "int", "bigint", "smallint", "tinyint":
		return true
	}
	return false
}

// eval evaluates n for a partition with the given values.
func (n *filterNode) eval(keys []fieldSchema, vals []string) bool {
	switch n.op {
	case "and":
		return n.left.eval(keys, vals) && n.right.eval(keys, vals)
	case "or":
		return n.left.eval(keys, vals) || n.right.eval(keys, vals)
	}
	for i, k := range keys {
		if !strings.EqualFold(k.Name, n.key) || i >= len(vals) {
			continue
		}
		var c int
		if v, err := strconv.ParseInt(vals[i], 10, 64); err == nil && n.num && integral(k.Type) {
			c = cmpInt(v, n.n)
		} else {
			c = strings.Compare(vals[i], n.lit)
		}
		switch n.op {
		case "=":
			return c == 0
		case "!=":
			return c != 0
		case "<":
			return c < 0
		case "<=":
			return c <= 0
		case ">":
			return c > 0
		case ">=":
			return c >= 0
		}
	}
	return false
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
