package demohms

import (
	"strings"

	"github.com/hmsproxy/hmsproxy/filter"
)

// partFilter is a partition filter bound to one table's partition keys.
// The grammar and the evaluation are the product's own (package filter), so
// the demo and the proxy never disagree about what a filter means.
type partFilter struct {
	expr  *filter.Expr
	keys  []fieldSchema
	types map[string]string // lower-case key -> Hive type
	vals  map[string]string // scratch for match
}

// parseFilter parses s for a table with the given partition keys; an error
// is the MetaException HMS sends for a filter it cannot use.
func parseFilter(s string, keys []fieldSchema) (*partFilter, error) {
	e, err := filter.Parse(s)
	if err != nil {
		return nil, metaErr("Error parsing partition filter : " + err.Error())
	}
	f := &partFilter{expr: e, keys: keys, types: map[string]string{}, vals: map[string]string{}}
	for _, k := range keys {
		f.types[strings.ToLower(k.Name)] = k.Type
	}
	for _, k := range e.Keys() {
		if _, ok := f.types[k]; !ok {
			return nil, metaErr("Invalid partition key name: " + k)
		}
	}
	return f, nil
}

// match reports whether a partition with these values (in key order)
// satisfies the filter.
func (f *partFilter) match(vals []string) (bool, error) {
	clear(f.vals)
	for i, k := range f.keys {
		if i < len(vals) {
			f.vals[strings.ToLower(k.Name)] = vals[i]
		}
	}
	ok, err := f.expr.Eval(f.vals, f.types)
	if err != nil {
		return false, metaErr("Error evaluating partition filter : " + err.Error())
	}
	return ok, nil
}
