package settings

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// This file turns the declaration of the settings, the tagged fields of
// File (config.go), into everything else: their list, defaults,
// flags, the rule for 0 and off, and the YAML of --print-defaults.

// setting is one key of the config: a value, a section (a struct), or a
// list or map of sections.
type setting struct {
	key string // "upstream.max_conns"; in a list "federation.federated[].name", a map "cache.kinds.<kind>.ttl"
	// index is the field's path from File; nil inside lists and
	// maps, whose keys have no flag and no default.
	index   []int
	typ     reflect.Type
	def     string // the default as written in the file; "" for the zero value
	defDoc  string // the default in words, where the code works it out
	doc     string
	note    string   // more for docs/configuration.md than the one line of --help
	offDoc  string   // what off does; "" when the setting cannot be off
	zeroOff bool     // an explicit 0 or "" still means off (deprecated)
	old     []string // deprecated flag names
	env     string   // a secret's environment variable
	section bool     // a struct, list or map: a heading
}

// flag reports whether the setting has a flag: every value outside lists
// and maps but secrets, which any user could read from the process list.
func (s *setting) flag() bool { return s.index != nil && !s.section && s.env == "" }

var durationType = reflect.TypeFor[time.Duration]()

// settings lists the keys of File in declaration order.
var settings = sync.OnceValue(func() []*setting {
	var out []*setting
	walkSettings(reflect.TypeFor[File](), "", []int{}, nil, &out)
	return out
})

// settingByKey finds a key's setting.
func settingByKey(key string) *setting {
	for _, s := range settings() {
		if s.key == key {
			return s
		}
	}
	return nil
}

// walkSettings appends the keys of struct type t. index is nil inside
// lists and maps; oldTo gives the old flag names a parent declared for
// its children ("ratelimit-read=rate").
func walkSettings(t reflect.Type, prefix string, index []int, oldTo map[string][]string, out *[]*setting) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || f.Tag.Get("alias") != "" {
			continue
		}
		s := &setting{key: prefix + name, typ: f.Type, def: f.Tag.Get("default"), defDoc: f.Tag.Get("defdoc"),
			doc: f.Tag.Get("doc"), note: f.Tag.Get("note"), offDoc: f.Tag.Get("off"), zeroOff: f.Tag.Get("zerooff") != "", env: f.Tag.Get("env")}
		if index != nil {
			s.index = append(append([]int{}, index...), i)
		}
		childOld := map[string][]string{}
		for _, o := range strings.Split(f.Tag.Get("old"), ",") {
			if old, sub, ok := strings.Cut(o, "="); ok {
				childOld[sub] = append(childOld[sub], old)
			} else if o != "" {
				s.old = append(s.old, o)
			}
		}
		s.old = append(s.old, oldTo[name]...)
		*out = append(*out, s)
		ft := f.Type
		if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			s.section = true
			walkSettings(ft, s.key+".", s.index, childOld, out)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			s.section = true
			walkSettings(ft.Elem(), s.key+".<"+f.Tag.Get("key")+">.", nil, nil, out)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			s.section = true
			walkSettings(ft.Elem(), s.key+"[].", nil, nil, out)
		}
	}
}

// field is the setting's field in c.
func (s *setting) field(c *File) reflect.Value {
	return reflect.ValueOf(c).Elem().FieldByIndex(s.index)
}

// set parses text as the setting's value into v, the way a flag or a
// default is written: off (where the setting can be off), a duration, a
// number, a boolean, a comma-separated list.
func (s *setting) set(v reflect.Value, text string) error {
	if v.Kind() == reflect.Pointer {
		p := reflect.New(v.Type().Elem())
		if err := s.set(p.Elem(), text); err != nil {
			return err
		}
		v.Set(p)
		return nil
	}
	if s.offDoc != "" && strings.EqualFold(strings.TrimSpace(text), "off") {
		setOff(v)
		return nil
	}
	var err error
	switch {
	case v.Type() == durationType:
		var d time.Duration
		d, err = time.ParseDuration(text)
		v.SetInt(int64(d))
	case v.CanInt():
		var n int64
		n, err = strconv.ParseInt(text, 0, v.Type().Bits())
		v.SetInt(n)
	case v.CanFloat():
		var x float64
		x, err = strconv.ParseFloat(text, 64)
		v.SetFloat(x)
	case v.Kind() == reflect.Bool:
		var b bool
		b, err = strconv.ParseBool(text)
		v.SetBool(b)
	case v.Kind() == reflect.String:
		v.SetString(text)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		v.Set(reflect.ValueOf(SplitList(text)))
	default:
		return fmt.Errorf("%s: no flag for a %s", s.key, v.Type())
	}
	if err != nil {
		return fmt.Errorf("%s: %q is not a %s", s.key, text, typeName(v.Type()))
	}
	return nil
}

// setOff stores off: negative for numbers, empty for strings.
func setOff(v reflect.Value) {
	switch {
	case v.CanInt():
		v.SetInt(-1)
	case v.CanFloat():
		v.SetFloat(-1)
	case v.Kind() == reflect.String:
		v.SetString("off") // applyZeroRule stores it as ""
	}
}

// isOff reports whether v holds off.
func (s *setting) isOff(v reflect.Value) bool {
	if s.offDoc == "" {
		return false
	}
	switch {
	case v.CanInt():
		return v.Int() < 0
	case v.CanFloat():
		return v.Float() < 0
	case v.Kind() == reflect.String:
		return v.String() == "" && s.def != ""
	}
	return false
}

// format writes v as a flag or the file would: off, 250ms, a,b.
func (s *setting) format(v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	if s.isOff(v) {
		return "off"
	}
	switch {
	case v.Type() == durationType:
		return formatDuration(time.Duration(v.Int()))
	case v.CanFloat():
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		return strings.Join(v.Interface().([]string), ",")
	}
	return fmt.Sprint(v.Interface())
}

// formatDuration is d without the zero units time.Duration.String keeps:
// 5m, not 5m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func typeName(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType:
		return "duration"
	case t.Kind() == reflect.Bool:
		return "bool"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "number"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "integer"
	case t.Kind() == reflect.Slice:
		return "list"
	case t.Kind() == reflect.Map:
		return "map"
	case t.Kind() == reflect.Struct:
		return "section"
	}
	return "string"
}

// defaults is the config with every setting at its declared default.
func defaults() File {
	var c File
	for _, s := range settings() {
		if s.index == nil || s.section || s.def == "" {
			continue
		}
		if err := s.set(s.field(&c), s.def); err != nil {
			panic("hmsproxy: the default of " + err.Error()) // TestDeclaredDefaults keeps this from happening
		}
	}
	return c
}

// applyZeroRule makes 0 and "" mean the default: a setting left at its
// zero value takes its declared default, but where 0 or "" meant off
// before the rule (zerooff), it still does, with a warning.
func (c *File) applyZeroRule() {
	for _, s := range settings() {
		if s.index == nil || s.section || s.def == "" || s.typ.Kind() == reflect.Bool || s.typ.Kind() == reflect.Pointer {
			continue
		}
		v := s.field(c)
		if v.Kind() == reflect.String && s.offDoc != "" && strings.EqualFold(v.String(), "off") {
			v.SetString("") // off, for a string
			continue
		}
		if !v.IsZero() {
			continue
		}
		if s.zeroOff {
			c.warnf("%s: %s for off is deprecated; write off", s.key, zeroWord(v))
			if v.Kind() != reflect.String { // "" is already off
				setOff(v)
			}
			continue
		}
		if err := s.set(v, s.def); err != nil {
			panic("hmsproxy: the default of " + err.Error())
		}
	}
	for name, k := range c.Cache.Kinds {
		for key, d := range map[string]*time.Duration{"ttl": k.TTL, "refresh_interval": k.RefreshInterval} {
			if d != nil && *d == 0 {
				c.warnf("cache.kinds.%s.%s: 0 for off is deprecated; write off", name, key)
				*d = -1
			}
		}
	}
}

func zeroWord(v reflect.Value) string {
	if v.Kind() == reflect.String {
		return `""`
	}
	return "0"
}

// warnf records a deprecated spelling; run logs them once it has a logger.
func (c *File) warnf(format string, args ...any) {
	c.Warnings = append(c.Warnings, fmt.Sprintf(format, args...))
}

// decodeFile reads a config file over c. Where a setting can be off, the
// file may say off, which YAML cannot put into a number: those scalars
// are rewritten to the negative (or empty) value that stands for off.
func decodeFile(b []byte, c *File) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return err
	}
	if markOff(&doc, reflect.TypeFor[File](), false) {
		var err error
		if b, err = yaml.Marshal(&doc); err != nil {
			return err
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) { // an empty file (io.EOF) means all defaults
		return err
	}
	return nil
}

// markOff rewrites the scalars reading off under keys that can be off
// (and a duration written 0); it reports whether it changed any.
func markOff(n *yaml.Node, t reflect.Type, offable bool) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	changed := false
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			changed = markOff(c, t, offable) || changed
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch t.Kind() {
			case reflect.Struct:
				if f, ok := fieldByKey(t, n.Content[i].Value); ok {
					changed = markOff(n.Content[i+1], f.Type, f.Tag.Get("off") != "") || changed
				}
			case reflect.Map:
				changed = markOff(n.Content[i+1], t.Elem(), false) || changed
			}
		}
	case yaml.SequenceNode:
		if t.Kind() == reflect.Slice {
			for _, c := range n.Content {
				changed = markOff(c, t.Elem(), false) || changed
			}
		}
	case yaml.ScalarNode:
		if t == durationType && n.Value == "0" { // YAML wants 0s; 0 is as good
			n.Value, n.Tag, n.Style = "0s", "", 0
			return true
		}
		if !offable || !strings.EqualFold(n.Value, "off") || t.Kind() == reflect.String {
			return false // a string holds off as it is
		}
		n.Tag, n.Style = "", 0
		n.Value = "-1"
		if t == durationType {
			n.Value = "-1ns"
		}
		return true
	}
	return changed
}

func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// configYAML is c as a config file, each key under its doc: what
// --print-defaults prints, and what reads back as the same config.
func configYAML(c *File) ([]byte, error) {
	n, err := yamlNode(reflect.ValueOf(c).Elem(), "")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func yamlNode(v reflect.Value, prefix string) (*yaml.Node, error) {
	m := &yaml.Node{Kind: yaml.MappingNode}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || f.Tag.Get("alias") != "" {
			continue
		}
		key := prefix + name
		s := settingByKey(key)
		k := &yaml.Node{Kind: yaml.ScalarNode, Value: name, HeadComment: s.comment()}
		fv := v.Field(i)
		var val *yaml.Node
		switch {
		case fv.Kind() == reflect.Struct && fv.Type() != durationType:
			var err error
			if val, err = yamlNode(fv, key+"."); err != nil {
				return nil, err
			}
		case fv.Kind() == reflect.Map || fv.Kind() == reflect.Slice || fv.Kind() == reflect.Pointer && fv.IsNil():
			val = &yaml.Node{}
			if err := val.Encode(fv.Interface()); err != nil {
				return nil, err
			}
			if fv.Len() == 0 && fv.Kind() != reflect.Pointer {
				val.Style = yaml.FlowStyle
			}
		default:
			val = &yaml.Node{Kind: yaml.ScalarNode, Value: s.format(fv)}
			if reflect.Indirect(fv).Kind() == reflect.String && !s.isOff(reflect.Indirect(fv)) {
				val.Tag = "!!str"
			}
		}
		m.Content = append(m.Content, k, val)
	}
	return m, nil
}

// comment is the doc of a key in --print-defaults.
func (s *setting) comment() string {
	var b strings.Builder
	b.WriteString(s.doc)
	if s.defDoc != "" {
		fmt.Fprintf(&b, "; default %s", s.defDoc)
	}
	if s.offDoc != "" {
		fmt.Fprintf(&b, "; off: %s", s.offDoc)
	}
	if s.env != "" {
		fmt.Fprintf(&b, "; $%s wins", s.env)
	}
	return wrap(b.String(), 76)
}

// wrap breaks text into lines of at most width characters, at spaces.
func wrap(text string, width int) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}
