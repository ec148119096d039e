package filter

import (
	"fmt"
	"strings"
)

// tokKind is the kind of a lexical token of a partition filter.
type tokKind uint8

const (
	tEOF       tokKind = iota
	tIdent             // unquoted identifier or keyword; text as written
	tQuoted            // back-quoted identifier; text unquoted
	tString            // string literal; text without quotes, backslashes kept
	tInt               // integer literal, optional '-' included
	tDate              // bare yyyy-mm-dd
	tTimestamp         // bare yyyy-mm-dd hh:mm:ss
	tOp                // comparison operator other than LIKE
	tLParen
	tRParen
	tComma
)

var tokNames = [...]string{
	tEOF: "end of filter", tIdent: "identifier", tQuoted: "quoted identifier",
	tString: "string", tInt: "integer", tDate: "date", tTimestamp: "timestamp",
	tOp: "operator", tLParen: `"("`, tRParen: `")"`, tComma: `","`,
}

type token struct {
	kind tokKind
	pos  int    // byte offset in the filter
	text string // see tokKind
	// flags for Exact: spacedMinus for "- 5", backslash for a string
	// literal with a backslash in it.
	spacedMinus, backslash bool
}

// describe names the token for error messages.
func (t token) describe(src string) string {
	switch t.kind {
	case tEOF, tLParen, tRParen, tComma:
		return tokNames[t.kind]
	}
	end := t.pos + 20
	if end > len(src) {
		end = len(src)
	}
	s := src[t.pos:end]
	if i := strings.IndexAny(s, " \t\r\n"); i > 0 && t.kind != tTimestamp && t.kind != tString {
		s = s[:i]
	}
	return fmt.Sprintf("%q", s)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isWordByte(c byte) bool {
	return c == '_' || isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// lex splits a filter into tokens, the last of which is tEOF.
func lex(src string) ([]token, error) {
	var toks []token
	i := 0
	for {
		for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\r' || src[i] == '\n') {
			i++
		}
		if i == len(src) {
			return append(toks, token{kind: tEOF, pos: i}), nil
		}
		c, start := src[i], i
		switch {
		case c == '(':
			toks = append(toks, token{kind: tLParen, pos: i})
			i++
		case c == ')':
			toks = append(toks, token{kind: tRParen, pos: i})
			i++
		case c == ',':
			toks = append(toks, token{kind: tComma, pos: i})
			i++
		case c == '\'' || c == '"':
			j := i + 1
			bs := false
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					bs = true
					j++
				}
				j++
			}
			if j >= len(src) {
				return nil, syntaxErr(start, "unterminated string literal")
			}
			toks = append(toks, token{kind: tString, pos: start, text: src[i+1 : j], backslash: bs})
			i = j + 1
		case c == '`':
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(src) {
					return nil, syntaxErr(start, "unterminated back-quoted identifier")
				}
				if src[j] == '`' {
					if j+1 < len(src) && src[j+1] == '`' {
						b.WriteByte('`')
						j += 2
						continue
					}
					break
				}
				b.WriteByte(src[j])
				j++
			}
			if b.Len() == 0 {
				return nil, syntaxErr(start, "empty back-quoted identifier")
			}
			toks = append(toks, token{kind: tQuoted, pos: start, text: b.String()})
			i = j + 1
		case c == '=' || c == '!' || c == '<' || c == '>':
			op := string(c)
			if i+1 < len(src) && (src[i+1] == '=' || c == '<' && src[i+1] == '>') {
				op = src[i : i+2]
			}
			if op == "<=" && i+2 < len(src) && src[i+2] == '>' {
				return nil, syntaxErr(start, "operator <=> is not supported by the metastore")
			}
			if op == "!" {
				return nil, syntaxErr(start, `unexpected "!"`)
			}
			toks = append(toks, token{kind: tOp, pos: start, text: op})
			i += len(op)
		case c == '-':
			j := i + 1
			for j < len(src) && (src[j] == ' ' || src[j] == '\t' || src[j] == '\r' || src[j] == '\n') {
				j++
			}
			if j == len(src) || !isDigit(src[j]) {
				return nil, syntaxErr(start, `"-" must be followed by digits`)
			}
			t, k := lexWord(src, j)
			if t.kind != tInt {
				return nil, syntaxErr(start, `"-" must be followed by an integer`)
			}
			t.pos, t.text, t.spacedMinus = start, "-"+t.text, j > i+1
			toks = append(toks, t)
			i = k
		case isWordByte(c):
			t, k := lexWord(src, i)
			toks = append(toks, t)
			i = k
		default:
			return nil, syntaxErr(start, fmt.Sprintf("unexpected character %q", rune(c)))
		}
	}
}

// lexWord reads an identifier, integer, bare date or bare timestamp at
// src[i:] and returns it and the offset after it.
func lexWord(src string, i int) (token, int) {
	j := i
	for j < len(src) && isWordByte(src[j]) {
		j++
	}
	word := src[i:j]
	allDigits := true
	for k := 0; k < len(word); k++ {
		if !isDigit(word[k]) {
			allDigits = false
			break
		}
	}
	if !allDigits {
		return token{kind: tIdent, pos: i, text: word}, j
	}
	if len(word) == 4 && matchShape(src[j:], "-dd-dd") && (len(src) == j+6 || !isWordByte(src[j+6])) {
		end := j + 6
		if matchShape(src[end:], " dd:dd:dd") && (len(src) == end+9 || !isWordByte(src[end+9])) {
			return token{kind: tTimestamp, pos: i, text: src[i : end+9]}, end + 9
		}
		return token{kind: tDate, pos: i, text: src[i:end]}, end
	}
	return token{kind: tInt, pos: i, text: word}, j
}

// matchShape reports whether s starts with shape, where 'd' in shape stands
// for a digit and every other byte for itself.
func matchShape(s, shape string) bool {
	if len(s) < len(shape) {
		return false
	}
	for k := 0; k < len(shape); k++ {
		if shape[k] == 'd' {
			if !isDigit(s[k]) {
				return false
			}
		} else if s[k] != shape[k] {
			return false
		}
	}
	return true
}
