package settings

import (
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
)

// Cmdline is what the command line said: the config file, the actions
// that print and exit, and the settings given as flags, in their order.
type Cmdline struct {
	configPath     string
	printDefaults  bool
	printConfigDoc bool
	Version        bool // --version: the binary prints its build
	sets           []flagSet
	warnings       []string // deprecated flag names used
}

// flagSet is one setting given on the command line.
type flagSet struct {
	s    *setting
	text string
}

// settingFlag is the flag of one setting, under its key's name or, when
// deprecated, one of its old names.
type settingFlag struct {
	cl  *Cmdline
	s   *setting
	old string // the deprecated name this flag was given by; "" for the key
}

func (f *settingFlag) String() string { return "" }

func (f *settingFlag) Set(text string) error {
	// Parsed now, for the error message; stored after the file is read.
	if err := f.s.set(reflect.New(f.s.typ).Elem(), text); err != nil {
		return err
	}
	if f.old != "" {
		f.cl.warnings = append(f.cl.warnings, fmt.Sprintf("flag --%s is deprecated: use --%s", f.old, f.s.key))
	}
	f.cl.sets = append(f.cl.sets, flagSet{f.s, text})
	return nil
}

func (f *settingFlag) IsBoolFlag() bool {
	t := f.s.typ
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Bool
}

// ParseArgs reads the command line: a flag for every setting, named by
// its key (--cache.ttl), with its old names as deprecated aliases.
func ParseArgs(args []string, out io.Writer) (*Cmdline, error) {
	cl := &Cmdline{}
	fs := flag.NewFlagSet("hmsproxy", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { usage(out) }
	fs.StringVar(&cl.configPath, "config", os.Getenv("HMSPROXY_CONFIG"), "YAML config file")
	fs.BoolVar(&cl.printDefaults, "print-defaults", false, "print the default config as YAML and exit")
	fs.BoolVar(&cl.printConfigDoc, "print-config-doc", false, "print docs/configuration.md and exit")
	fs.BoolVar(&cl.Version, "version", false, "print the version and exit")
	for _, s := range settings() {
		if !s.flag() {
			continue
		}
		fs.Var(&settingFlag{cl: cl, s: s}, s.key, s.doc)
		for _, old := range s.old {
			fs.Var(&settingFlag{cl: cl, s: s, old: old}, old, "deprecated: --"+s.key)
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return cl, nil
}

// apply stores the settings given as flags into c, over the file.
func (cl *Cmdline) apply(c *File) {
	for _, fv := range cl.sets {
		if err := fv.s.set(fv.s.field(c), fv.text); err != nil {
			panic(err) // parsed once already by Set
		}
	}
	c.Warnings = append(c.Warnings, cl.warnings...)
}

const usageHead = `hmsproxy: a caching proxy for the Hive Metastore Thrift API.

Usage:
  hmsproxy --upstream.uris thrift://hms:9083 [flags]
  hmsproxy --config hmsproxy.yaml [flags]
  hmsproxy --demo            (proxy in front of an embedded demo metastore)

Clients point hive.metastore.uris at the proxy's listen address.
Every setting is a key of the YAML file and a flag of the same name
(cache.ttl is --cache.ttl); flags win over the file. A setting left out,
0 or "" takes its default; off turns off a setting that can be off.
Lists are comma-separated. docs/configuration.md describes every key.
Environment: HMSPROXY_CONFIG names the config file when --config is not given;
secrets come from the file or the environment, never a flag:
  %s.
SIGHUP reloads the TLS files.
Exit status: 0 clean stop, 1 error, 2 bad flags or config, 3 shutdown.timeout
cut off calls in flight.

  --config FILE
    	YAML config file
  --print-defaults
    	print the default config as YAML (a config file) and exit
  --print-config-doc
    	print docs/configuration.md and exit
  --version
    	print the version and exit
`

// usage is --help: the flags grouped by section.
func usage(w io.Writer) {
	var secrets []string
	for _, s := range settings() {
		if s.env != "" {
			secrets = append(secrets, s.env+" ["+s.key+"]")
		}
	}
	fmt.Fprintf(w, usageHead, strings.Join(secrets, ",\n  "))
	def := defaults()
	section := "-" // no section yet
	for _, s := range settings() {
		if !s.flag() {
			continue
		}
		if sec := s.sectionName(); sec != section {
			section = sec
			fmt.Fprintf(w, "\n%s:\n", sectionTitle(sec))
		}
		arg := " " + typeName(s.typ)
		if arg == " bool" {
			arg = ""
		}
		fmt.Fprintf(w, "  --%s%s\n    \t%s%s\n", s.key, arg, s.doc, s.helpNotes(&def))
	}
	fmt.Fprintln(w, "\nThe old flag names (--upstream, --cache-ttl, ...) still work, deprecated;\ndocs/configuration.md lists them.")
}

// helpNotes are the default and what off does, for --help.
func (s *setting) helpNotes(def *File) string {
	var notes []string
	switch {
	case s.defDoc != "":
		notes = append(notes, "default "+s.defDoc)
	case s.def != "":
		notes = append(notes, "default "+s.format(s.field(def)))
	}
	if s.offDoc != "" {
		notes = append(notes, "off: "+s.offDoc)
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, "; ") + ")"
}

// sectionName is the top-level key the setting belongs to; "" for the
// top-level values.
func (s *setting) sectionName() string {
	sec, _, ok := strings.Cut(s.key, ".")
	if !ok && !s.section {
		return ""
	}
	return sec
}

func sectionTitle(sec string) string {
	if sec == "" {
		return "general"
	}
	return sec
}

// PrintOnly reports whether the command line asks only to print
// something: Print's output, or the version.
func (cl *Cmdline) PrintOnly() bool { return cl.Version || cl.printDefaults || cl.printConfigDoc }

// Print writes what the command line asked for, but the version: the
// configuration reference or the default config.
func (cl *Cmdline) Print(w io.Writer) error {
	if cl.printConfigDoc {
		return WriteConfigDoc(w)
	}
	def := defaults()
	b, err := configYAML(&def)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
