package filter

import "fmt"

// Bound is an Expr bound to the partition keys of one table: Eval takes
// a partition's values by key position, so deciding a filter for each of
// a table's partitions builds no map and looks up no type per value. It
// is immutable and safe for concurrent use.
type Bound struct {
	root bnode
}

// bnode mirrors a node, with its key resolved to a position.
type bnode struct {
	n        *node
	kids     []bnode
	pos      int  // leaves: the key's position
	integral bool // leaves: the key's type is integral
}

// Bind binds e to a table whose partition keys, in order, are keys
// (lower-cased) of the given Hive types. It fails with ErrMissingKey when
// the filter names a key that is not one of them: Eval would fail for
// every partition.
func (e *Expr) Bind(keys, types []string) (*Bound, error) {
	if len(keys) != len(types) {
		return nil, fmt.Errorf("%w: %d keys, %d types", errInternal, len(keys), len(types))
	}
	root, err := bind(e.root, keys, types)
	if err != nil {
		return nil, err
	}
	return &Bound{root: root}, nil
}

func bind(n *node, keys, types []string) (bnode, error) {
	b := bnode{n: n}
	if len(n.kids) > 0 {
		b.kids = make([]bnode, len(n.kids))
		for i, k := range n.kids {
			kb, err := bind(k, keys, types)
			if err != nil {
				return b, err
			}
			b.kids[i] = kb
		}
		return b, nil
	}
	b.pos = -1
	for i, k := range keys {
		if k == n.key {
			b.pos = i
			break
		}
	}
	if b.pos < 0 {
		return b, fmt.Errorf("%w: %q", ErrMissingKey, n.key)
	}
	b.integral = classify(types[b.pos]) == classIntegral
	return b, nil
}

// Eval is Expr.Eval for a partition whose values are given in the order
// of the keys the filter was bound to; values must hold one for each.
func (b *Bound) Eval(values []string) (bool, error) {
	t, err := b.root.eval(values)
	return t == triTrue, err
}

func (b *bnode) eval(values []string) (tri, error) {
	switch b.n.kind {
	case nAnd:
		res := triTrue
		for i := range b.kids {
			t, err := b.kids[i].eval(values)
			if err != nil {
				return triUnknown, err
			}
			res = min(res, t)
		}
		return res, nil
	case nOr:
		res := triFalse
		for i := range b.kids {
			t, err := b.kids[i].eval(values)
			if err != nil {
				return triUnknown, err
			}
			res = max(res, t)
		}
		return res, nil
	case nNot:
		t, err := b.kids[0].eval(values)
		return -t, err
	}
	if b.pos >= len(values) {
		return triUnknown, fmt.Errorf("%w: %q", ErrMissingKey, b.n.key)
	}
	return evalLeaf(b.n, values[b.pos], b.integral)
}

// Sans returns b less the conjunct that Pinned reads key's set from (b
// itself when no conjunct pins key): the filter as it decides the
// partitions whose value of key is one of that set. Such a conjunct holds
// for every one of them (a string key's value is the literal's text, an
// integral key's the canonical form of its number), so a cache that
// tests only those partitions skips it: a planner's "ds = 'day' and ..."
// is then a test of the other keys alone.
func (b *Bound) Sans(key string, keyTypes map[string]string) *Bound {
	drop := pins(b.root.n, keyTypes)[key]
	if drop == nil {
		return b
	}
	root, empty := without(b.root, drop)
	if empty {
		// Nothing left: an AND of no conjuncts, true for every partition.
		root = bnode{n: &node{kind: nAnd}}
	}
	return &Bound{root: root}
}

// without is b with the conjunct drop (reached through ANDs only, as
// pins finds it) taken out, an AND left with one conjunct replaced by
// it; empty when nothing is left.
func without(b bnode, drop *node) (_ bnode, empty bool) {
	if b.n == drop {
		return bnode{}, true
	}
	if b.n.kind != nAnd {
		return b, false
	}
	kids := make([]bnode, 0, len(b.kids))
	for _, k := range b.kids {
		if nk, gone := without(k, drop); !gone {
			kids = append(kids, nk)
		}
	}
	switch len(kids) {
	case 0:
		return bnode{}, true
	case 1:
		return kids[0], false
	}
	return bnode{n: b.n, kids: kids}, false
}
