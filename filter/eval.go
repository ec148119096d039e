package filter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// DefaultPartition is the value the metastore stores for a NULL or empty
// partition value.
const DefaultPartition = "__HIVE_DEFAULT_PARTITION__"

var (
	// ErrMissingKey: the filter names a key that has no value in the
	// partition (or that is not a partition key of the table).
	ErrMissingKey = errors.New("filter: key is not a partition key")
	// ErrNotInteger: a value of an integral key is not an integer, so the
	// metastore's numeric comparison cannot be reproduced.
	ErrNotInteger = errors.New("filter: value of integral key is not an integer")
	// ErrLikePattern: a LIKE pattern is not a regular expression Go can
	// compile.
	ErrLikePattern = errors.New("filter: unsupported LIKE pattern")
	// errInternal: a tree the parser should never have built; the fuzzer
	// fails on it, where the other errors are answers about the input.
	errInternal = errors.New("filter: internal error")
)

// keyClass groups partition key types by how comparisons on them behave.
type keyClass uint8

const (
	classOther    keyClass = iota // date, timestamp, decimal, float, boolean, char, unknown
	classString                   // string, varchar(n)
	classIntegral                 // tinyint, smallint, int, integer, bigint
)

// classify maps a Hive type name such as "INT" or "varchar(10)" to its class.
// It does not allocate for lower-case names.
func classify(typ string) keyClass {
	if i := strings.IndexByte(typ, '('); i >= 0 {
		typ = typ[:i]
	}
	switch typ { // the common spellings, without case folding
	case "string", "varchar":
		return classString
	case "int", "bigint", "smallint", "tinyint", "integer":
		return classIntegral
	}
	typ = strings.TrimSpace(typ)
	switch {
	case strings.EqualFold(typ, "string"), strings.EqualFold(typ, "varchar"):
		return classString
	case strings.EqualFold(typ, "tinyint"), strings.EqualFold(typ, "smallint"),
		strings.EqualFold(typ, "int"), strings.EqualFold(typ, "integer"),
		strings.EqualFold(typ, "bigint"):
		return classIntegral
	}
	return classOther
}

// Integral reports whether a Hive type is one Eval compares numerically
// with integer literals (tinyint, smallint, int, integer, bigint).
func Integral(typ string) bool { return classify(typ) == classIntegral }

// Exact reports whether Eval is certain to agree with the metastore for
// every partition of a table whose partition keys have the given types
// (key name, lower-cased, to Hive type name). See the package documentation
// for the rules; a key missing from keyTypes makes the filter inexact.
func (e *Expr) Exact(keyTypes map[string]string) bool {
	return exact(e.root, keyTypes)
}

func exact(n *node, keyTypes map[string]string) bool {
	if n.odd {
		return false
	}
	switch n.kind {
	case nAnd, nOr:
		for _, k := range n.kids {
			if !exact(k, keyTypes) {
				return false
			}
		}
		return true
	case nCmp:
		if n.op == Like {
			return false
		}
	case nIn, nBetween:
	default: // nNot is always odd
		return false
	}
	typ, ok := keyTypes[n.key]
	if !ok {
		return false
	}
	// Ranges (<, <=, >, >=, [NOT] BETWEEN) only on integral keys, which
	// every version compares as numbers (direct SQL casts the value);
	// the order of strings is the backing database's collation, which
	// the proxy cannot know.
	ranged := n.kind == nBetween || (n.kind == nCmp && n.op != EQ && n.op != NE)
	want := litString
	switch classify(typ) {
	case classString:
		if ranged {
			return false
		}
	case classIntegral:
		want = litInt
	default:
		return false
	}
	for _, l := range n.lits {
		if l.kind != want || l.odd {
			return false
		}
	}
	return true
}

// tri is a truth value of SQL's three-valued logic.
type tri int8

const (
	triFalse   tri = -1
	triUnknown tri = 0
	triTrue    tri = 1
)

func triOf(b bool) tri {
	if b {
		return triTrue
	}
	return triFalse
}

// Eval reports whether a partition with the given values (partition key,
// lower-cased, to its unescaped value) satisfies the filter. keyTypes maps
// keys to Hive types; a key without a type compares as a string. An integer
// literal compared with an integral key compares numerically (the default
// partition compares as SQL NULL and never matches); every other comparison
// is by bytes. A partition matches only when the filter is true, not unknown.
//
// Eval fails with ErrMissingKey when values lacks a key the filter uses,
// ErrNotInteger when a value of an integral key is neither an integer nor the
// default partition, and ErrLikePattern for a LIKE pattern RE2 cannot compile.
func (e *Expr) Eval(values map[string]string, keyTypes map[string]string) (bool, error) {
	t, err := eval(e.root, values, keyTypes)
	return t == triTrue, err
}

func eval(n *node, values, keyTypes map[string]string) (tri, error) {
	switch n.kind {
	case nAnd:
		res := triTrue
		for _, k := range n.kids {
			t, err := eval(k, values, keyTypes)
			if err != nil {
				return triUnknown, err
			}
			res = min(res, t)
		}
		return res, nil
	case nOr:
		res := triFalse
		for _, k := range n.kids {
			t, err := eval(k, values, keyTypes)
			if err != nil {
				return triUnknown, err
			}
			res = max(res, t)
		}
		return res, nil
	case nNot:
		t, err := eval(n.kids[0], values, keyTypes)
		return -t, err
	}

	v, ok := values[n.key]
	if !ok {
		return triUnknown, fmt.Errorf("%w: %q", ErrMissingKey, n.key)
	}
	return evalLeaf(n, v, classify(keyTypes[n.key]) == classIntegral)
}

// evalLeaf decides a comparison, IN or BETWEEN node for the value v of
// its key; integral: the key's type is integral.
func evalLeaf(n *node, v string, integral bool) (tri, error) {
	switch n.kind {
	case nCmp:
		if n.op == Like {
			if n.reErr != nil {
				return triUnknown, fmt.Errorf("%w: %v", ErrLikePattern, n.reErr)
			}
			return triOf(n.re.MatchString(v)), nil
		}
		return compare(n.key, v, n.op, &n.lits[0], integral)
	case nIn:
		// IN is an OR of =; NOT IN an AND of !=.
		res, op := triFalse, EQ
		if n.neg {
			res, op = triTrue, NE
		}
		// An integral value is parsed once for the whole list: compare
		// parses it again only for a literal of another kind.
		var x int64
		parsed := false
		if integral && v != DefaultPartition {
			x, parsed = parseInt(v)
		}
		for i := range n.lits {
			if parsed && n.lits[i].kind == litInt {
				if x == n.lits[i].n {
					// Decided: with v parsed, no literal left can raise an
					// error (only an unparsed value fails to compare).
					return triOf(!n.neg), nil
				}
				continue
			}
			t, err := compare(n.key, v, op, &n.lits[i], integral)
			if err != nil {
				return triUnknown, err
			}
			if n.neg {
				res = min(res, t)
			} else {
				res = max(res, t)
			}
		}
		return res, nil
	case nBetween:
		// BETWEEN is lo <= v AND v <= hi; NOT BETWEEN is v < lo OR v > hi.
		opLo, opHi := GE, LE
		if n.neg {
			opLo, opHi = LT, GT
		}
		a, err := compare(n.key, v, opLo, &n.lits[0], integral)
		if err != nil {
			return triUnknown, err
		}
		b, err := compare(n.key, v, opHi, &n.lits[1], integral)
		if err != nil {
			return triUnknown, err
		}
		if n.neg {
			return max(a, b), nil
		}
		return min(a, b), nil
	}
	return triUnknown, fmt.Errorf("%w: node kind %d", errInternal, n.kind)
}

// parseInt is strconv.ParseInt(v, 10, 64) succeeding: a partition value
// of a few digits, as nearly all are, is read in a loop that returns
// no error value (filters test it once per candidate partition).
func parseInt(v string) (int64, bool) {
	if n := len(v); n > 0 && n <= 18 {
		var x int64
		for i := 0; i < n; i++ {
			d := v[i] - '0'
			if d > 9 {
				goto slow // a sign, or not a number at all
			}
			x = x*10 + int64(d)
		}
		return x, true
	}
slow:
	x, err := strconv.ParseInt(v, 10, 64)
	return x, err == nil
}

// compare decides "v op lit".
func compare(key, v string, op Op, lit *literal, integral bool) (tri, error) {
	var c int
	if integral && lit.kind == litInt {
		if v == DefaultPartition {
			return triUnknown, nil
		}
		x, ok := parseInt(v)
		if !ok {
			return triUnknown, fmt.Errorf("%w: %s=%q", ErrNotInteger, key, v)
		}
		switch {
		case x < lit.n:
			c = -1
		case x > lit.n:
			c = 1
		}
	} else {
		c = strings.Compare(v, lit.text)
	}
	switch op {
	case EQ:
		return triOf(c == 0), nil
	case NE:
		return triOf(c != 0), nil
	case LT:
		return triOf(c < 0), nil
	case LE:
		return triOf(c <= 0), nil
	case GT:
		return triOf(c > 0), nil
	case GE:
		return triOf(c >= 0), nil
	}
	return triUnknown, fmt.Errorf("%w: operator %v", errInternal, op)
}

// Pinned returns, for each key that a conjunct at the top of the filter
// pins to a finite set of literals ("key = lit", "(key) IN (lits)"), the
// values written as they must be stored to equal one of them: a string
// literal's text, an integer literal's canonical decimal form (for an
// integral key). A partition whose value of such a key is not in its
// set cannot match, so a cache may test only the partitions that have
// one (Presto's partial spec); the filter is still evaluated on them.
// For an integral key this holds only when the key's stored values are
// all canonical ("7", never "07"): the caller checks that. Keys pinned
// by more than one conjunct keep the first set.
func (e *Expr) Pinned(keyTypes map[string]string) map[string][]string {
	var out map[string][]string
	for key, n := range pins(e.root, keyTypes) {
		vals := make([]string, len(n.lits))
		for i, l := range n.lits {
			vals[i] = l.text
		}
		if out == nil {
			out = map[string][]string{}
		}
		out[key] = vals
	}
	return out
}

// pins returns, by key, the conjunct that Pinned reads that key's set
// from: the first one at the top of the filter under root that pins it.
func pins(root *node, keyTypes map[string]string) map[string]*node {
	var out map[string]*node
	var visit func(n *node)
	visit = func(n *node) {
		switch n.kind {
		case nAnd:
			for _, k := range n.kids {
				visit(k)
			}
			return
		case nCmp:
			if n.op != EQ {
				return
			}
		case nIn:
			if n.neg {
				return
			}
		default:
			return
		}
		if _, done := out[n.key]; done {
			return
		}
		want := litString
		switch classify(keyTypes[n.key]) {
		case classString:
		case classIntegral:
			want = litInt
		default:
			return
		}
		for _, l := range n.lits {
			if l.kind != want || l.odd {
				return
			}
		}
		if out == nil {
			out = map[string]*node{}
		}
		out[n.key] = n
	}
	visit(root)
	return out
}
