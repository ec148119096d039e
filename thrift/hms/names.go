package hms

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Names as the metastore reads them. Every version normalises catalog,
// database, table and function names with Java's String.trim (which
// drops the characters up to U+0020 at both ends: blanks, tabs, line
// ends and the other control characters, but not a no-break space) and
// then String.toLowerCase, before it looks anything up. Whoever keys,
// invalidates or routes by a name must normalise it the same way, or
// "t1 " and "t1" become two entities to it and one to the metastore.
//
// The metastore refuses to create an object whose name is not made of
// ASCII letters, digits and a few punctuation marks (MetaStoreUtils
// validateName), so every stored name is ASCII. A name that is not ASCII
// after normalisation therefore names no stored object, whatever its
// exact lower case is; the one non-ASCII character whose lower case is
// ASCII, U+212A KELVIN SIGN (to 'k'), is mapped as Java maps it, and
// U+0130, which Go would map to ASCII and Java does not, as Java does.

// Normalize returns the name the metastore uses for b.
func Normalize(b []byte) string {
	b = trimJava(b)
	for i, c := range b {
		if c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return lowerFrom(b, i)
		}
	}
	return string(b)
}

// NormalizeString is Normalize of a string.
func NormalizeString(s string) string {
	t := trimJavaString(s)
	for i := 0; i < len(t); i++ {
		if c := t[i]; c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return lowerFrom([]byte(t), i)
		}
	}
	return t
}

// AppendNormalized appends Normalize(b) to dst.
func AppendNormalized(dst, b []byte) []byte {
	b = trimJava(b)
	for i, c := range b {
		if c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return append(dst, lowerFrom(b, i)...)
		}
	}
	return append(dst, b...)
}

// lowerFrom lower-cases b from byte i on, as Java's toLowerCase does for
// every name that can match a stored one (see above).
func lowerFrom(b []byte, i int) string {
	var sb strings.Builder
	sb.Grow(len(b))
	sb.Write(b[:i])
	for len(b[i:]) > 0 {
		c := b[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			sb.WriteByte(c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		i += size
		switch {
		case r == '\u212a': // KELVIN SIGN
			sb.WriteByte('k')
		case r == '\u0130':
			// Java lower-cases CAPITAL I WITH DOT ABOVE to "i" and a
			// combining dot; Go's unicode.ToLower to a plain "i", which
			// would name a stored object the metastore does not.
			sb.WriteString("i\u0307")
		case r == utf8.RuneError && size == 1:
			// Java decodes a malformed byte as U+FFFD.
			sb.WriteRune(utf8.RuneError)
		default:
			sb.WriteRune(unicode.ToLower(r))
		}
	}
	return sb.String()
}

// trimJava drops the bytes up to 0x20 at both ends, as Java's
// String.trim drops the characters up to U+0020 (no byte of a multi-byte
// UTF-8 sequence is that small).
func trimJava(b []byte) []byte {
	for len(b) > 0 && b[0] <= ' ' {
		b = b[1:]
	}
	for len(b) > 0 && b[len(b)-1] <= ' ' {
		b = b[:len(b)-1]
	}
	return b
}

func trimJavaString(s string) string {
	for len(s) > 0 && s[0] <= ' ' {
		s = s[1:]
	}
	for len(s) > 0 && s[len(s)-1] <= ' ' {
		s = s[:len(s)-1]
	}
	return s
}

// NeedsNormalizing reports whether Normalize(b) differs from b: the
// name is written otherwise than the metastore stores it.
func NeedsNormalizing(b []byte) bool {
	if len(b) > 0 && (b[0] <= ' ' || b[len(b)-1] <= ' ') {
		return true
	}
	for i, c := range b {
		if c >= utf8.RuneSelf {
			return lowerFrom(b, i) != string(b)
		}
		if 'A' <= c && c <= 'Z' {
			return true
		}
	}
	return false
}

// DefaultPartitionName is the name the metastore gives an empty or null
// partition value (hard-coded in FileUtils.makePartName, whatever
// hive.exec.default.partition.name says).
const DefaultPartitionName = "__HIVE_DEFAULT_PARTITION__"

// escapeInPartName marks the bytes FileUtils.escapePathName writes as %XX
// (two upper-case hex digits) in partition names, in every version from
// 2.3 to 4.0: the control characters, DEL and " # % ' * / : = ? \ { [ ] ^.
var escapeInPartName = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	for _, c := range []byte("\"#%'*/:=?\\\x7f{[]^") {
		t[c] = true
	}
	return t
}()

// AppendPartName appends the name the metastore stores for a partition
// with these keys and values (Warehouse.makePartName): each key
// lower-cased and each part escaped, an empty one replaced by
// DefaultPartitionName, "k=v" joined by "/". It panics if the lengths
// differ.
func AppendPartName(dst []byte, keys, values []string) []byte {
	if len(keys) != len(values) {
		panic("hms: AppendPartName with keys and values of different lengths")
	}
	for i := range keys {
		if i > 0 {
			dst = append(dst, '/')
		}
		dst = appendPartNamePart(dst, strings.ToLower(keys[i]))
		dst = append(dst, '=')
		dst = appendPartNamePart(dst, values[i])
	}
	return dst
}

func appendPartNamePart(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, DefaultPartitionName...)
	}
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if escapeInPartName[c] {
			dst = append(dst, '%', hex[c>>4], hex[c&15])
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}

// NeedsEscaping reports whether s holds a character the metastore writes
// as %XX in a partition name.
func NeedsEscaping(s string) bool {
	for i := 0; i < len(s); i++ {
		if escapeInPartName[s[i]] {
			return true
		}
	}
	return false
}
