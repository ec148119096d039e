package coherence

import (
	"encoding/json"
	"strconv"
)

// The bus message codec without reflection. Every write encodes one entry
// and every peer decodes it; with encoding/json's reflection that was the
// largest share of the bus's CPU per write once writes share entries.
// Both sides keep encoding/json as the definition: appendWire writes
// byte for byte what json.Marshal writes (strings that need escaping go
// through json.Marshal), and decodeFast reads only the shape appendWire
// writes, leaving anything else (escapes, non-ASCII, other key order,
// unknown fields, whitespace, null) to json.Unmarshal.

// appendWire appends the JSON of w, as json.Marshal writes it.
func appendWire(dst []byte, w *wireMessage) []byte {
	dst = append(dst, `{"n":`...)
	dst = appendString(dst, w.Node)
	dst = append(dst, `,"s":`...)
	dst = strconv.AppendUint(dst, w.Seq, 10)
	dst = append(dst, `,"t":`...)
	dst = strconv.AppendInt(dst, w.Time, 10)
	if w.Layout != "" {
		dst = append(dst, `,"l":`...)
		dst = appendString(dst, w.Layout)
	}
	if w.Hello != "" {
		dst = append(dst, `,"h":`...)
		dst = appendString(dst, w.Hello)
	}
	if w.Bye {
		dst = append(dst, `,"b":true`...)
	}
	if len(w.Ents) > 0 {
		dst = append(dst, `,"e":[`...)
		for i, e := range w.Ents {
			if i > 0 {
				dst = append(dst, ',')
			}
			if e == nil {
				dst = append(dst, "null"...)
				continue
			}
			dst = append(dst, '[')
			for j, f := range e {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = appendString(dst, f)
			}
			dst = append(dst, ']')
		}
		dst = append(dst, ']')
	}
	if len(w.Added) > 0 {
		dst = append(dst, `,"a":[`...)
		for i, n := range w.Added {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, int64(n), 10)
		}
		dst = append(dst, ']')
	}
	if w.Version != 0 {
		dst = append(dst, `,"v":`...)
		dst = strconv.AppendInt(dst, int64(w.Version), 10)
	}
	return append(dst, '}')
}

// appendString appends s as a JSON string, escaped as json.Marshal does.
func appendString(dst []byte, s string) []byte {
	if plain(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}

// plain reports whether s is printable ASCII that JSON, with
// encoding/json's HTML escaping, writes as it is.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// decodeFast fills w from raw when raw has the shape appendWire writes,
// and reports whether it did; on false, w is to be read with
// json.Unmarshal instead.
func decodeFast(raw string, w *wireMessage) bool {
	p := scan{s: raw}
	if !p.byte('{') {
		return false
	}
	last := 0 // the index of the previous key: keys come in order, once
	for i := 0; !p.byte('}'); i++ {
		if i > 0 && !p.byte(',') {
			return false
		}
		key, ok := p.str()
		if !ok || !p.byte(':') {
			return false
		}
		k := wireKeys[key]
		if k <= last {
			return false // unknown, repeated or out of order
		}
		last = k
		switch key {
		case "n":
			w.Node, ok = p.str()
		case "s":
			w.Seq, ok = p.uint()
		case "t":
			w.Time, ok = p.int()
		case "l":
			w.Layout, ok = p.str()
		case "h":
			w.Hello, ok = p.str()
		case "b":
			w.Bye, ok = p.boolean()
		case "e":
			w.Ents, ok = p.ents()
		case "a":
			w.Added, ok = p.ints()
		case "v":
			var v int64
			v, ok = p.int()
			w.Version = int(v)
			ok = ok && int64(w.Version) == v
		}
		if !ok {
			return false
		}
	}
	return p.i == len(p.s)
}

// wireKeys orders the keys of wireMessage as appendWire writes them.
var wireKeys = map[string]int{"n": 1, "s": 2, "t": 3, "l": 4, "h": 5, "b": 6, "e": 7, "a": 8, "v": 9}

// scan reads the JSON decodeFast accepts.
type scan struct {
	s string
	i int
}

func (p *scan) byte(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string of printable ASCII without escapes.
func (p *scan) str() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start := p.i
	for ; p.i < len(p.s); p.i++ {
		switch c := p.s[p.i]; {
		case c == '"':
			p.i++
			return p.s[start : p.i-1], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return "", false
		}
	}
	return "", false
}

// digits reads the digits of a JSON integer: no leading zero, no
// fraction or exponent.
func (p *scan) digits() (string, bool) {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	d := p.s[start:p.i]
	if d == "" || len(d) > 1 && d[0] == '0' {
		return "", false
	}
	if p.i < len(p.s) && (p.s[p.i] == '.' || p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		return "", false
	}
	return d, true
}

func (p *scan) uint() (uint64, bool) {
	d, ok := p.digits()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(d, 10, 64)
	return n, err == nil
}

func (p *scan) int() (int64, bool) {
	neg := p.byte('-')
	d, ok := p.digits()
	if !ok {
		return 0, false
	}
	if neg {
		d = "-" + d
	}
	n, err := strconv.ParseInt(d, 10, 64)
	return n, err == nil
}

func (p *scan) boolean() (bool, bool) {
	switch {
	case len(p.s)-p.i >= 4 && p.s[p.i:p.i+4] == "true":
		p.i += 4
		return true, true
	case len(p.s)-p.i >= 5 && p.s[p.i:p.i+5] == "false":
		p.i += 5
		return false, true
	}
	return false, false
}

// ents reads an array of arrays of strings.
func (p *scan) ents() ([][]string, bool) {
	if !p.byte('[') {
		return nil, false
	}
	out := [][]string{}
	for i := 0; !p.byte(']'); i++ {
		if i > 0 && !p.byte(',') {
			return nil, false
		}
		if !p.byte('[') {
			return nil, false
		}
		e := make([]string, 0, 4)
		for j := 0; !p.byte(']'); j++ {
			if j > 0 && !p.byte(',') {
				return nil, false
			}
			f, ok := p.str()
			if !ok {
				return nil, false
			}
			e = append(e, f)
		}
		out = append(out, e)
	}
	return out, true
}

// ints reads an array of integers that fit an int.
func (p *scan) ints() ([]int, bool) {
	if !p.byte('[') {
		return nil, false
	}
	out := []int{}
	for i := 0; !p.byte(']'); i++ {
		if i > 0 && !p.byte(',') {
			return nil, false
		}
		n, ok := p.int()
		if !ok || int64(int(n)) != n {
			return nil, false
		}
		out = append(out, int(n))
	}
	return out, true
}
