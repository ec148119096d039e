package filter

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrPartName is wrapped by the errors of PartitionValues.
var ErrPartName = errors.New("filter: malformed partition name")

// needsEscape marks the bytes the metastore writes as %XX in partition names:
// control characters, DEL, and " # % ' * / : = ? \ { [ ] ^.
var needsEscape = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	for _, c := range []byte("\"#%'*/:=?\\\x7f{[]^") {
		t[c] = true
	}
	return t
}()

// MakePartName builds a partition name "k1=v1/k2=v2" from keys and values of
// equal length, escaping as the metastore does. Keys are used as given (the
// metastore stores them lower-cased). Unlike the metastore, an empty value
// is kept empty rather than replaced by the default partition name, so that
// PartitionValues gives it back. It panics if the lengths differ.
func MakePartName(keys, values []string) string {
	if len(keys) != len(values) {
		panic(fmt.Sprintf("filter: MakePartName with %d keys and %d values", len(keys), len(values)))
	}
	n := 0
	for i := range keys {
		n += len(keys[i]) + len(values[i]) + 2
	}
	b := make([]byte, 0, n+n/4)
	for i := range keys {
		if i > 0 {
			b = append(b, '/')
		}
		b = appendEscaped(b, keys[i])
		b = append(b, '=')
		b = appendEscaped(b, values[i])
	}
	return string(b)
}

func appendEscaped(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape[c] {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return b
}

// PartitionValues splits a partition name "k1=v1/k2=v2" into its keys and
// unescaped values, in order. Every component must hold exactly one '=' and
// a non-empty key; a value may be empty. Unescaping follows the metastore: %
// and two hex digits (either case) stand for that character code, and a %
// not followed by two hex digits is kept as it is. Codes %80-%FF decode to
// the runes U+0080-U+00FF (the metastore never writes them).
func PartitionValues(name string) (keys, values []string, err error) {
	if name == "" {
		return nil, nil, fmt.Errorf("%w: empty", ErrPartName)
	}
	n := strings.Count(name, "/") + 1
	keys, values = make([]string, 0, n), make([]string, 0, n)
	off := 0
	for comp := range strings.SplitSeq(name, "/") {
		k, v, ok := strings.Cut(comp, "=")
		switch {
		case !ok:
			return nil, nil, fmt.Errorf("%w: component at offset %d has no '='", ErrPartName, off)
		case k == "":
			return nil, nil, fmt.Errorf("%w: component at offset %d has an empty key", ErrPartName, off)
		case strings.IndexByte(v, '=') >= 0:
			return nil, nil, fmt.Errorf("%w: component at offset %d has more than one '='", ErrPartName, off)
		}
		keys = append(keys, unescape(k))
		values = append(values, unescape(v))
		off += len(comp) + 1
	}
	return keys, values, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func unescape(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b = utf8.AppendRune(b, rune(hi<<4|lo))
				i += 2
				continue
			}
		}
		b = append(b, c)
	}
	return string(b)
}
