package settings

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

// WriteConfigDoc writes docs/configuration.md from the declaration of the
// settings; TestConfigurationDoc fails when the committed file differs.
func WriteConfigDoc(w io.Writer) error {
	def := defaults()
	fmt.Fprintf(w, configDocHead, envRows())
	section := "-"
	for _, s := range settings() {
		if sec := s.sectionName(); sec != section {
			writeSectionTail(w, section)
			section = sec
			writeSectionHead(w, sec)
		}
		if s.section && !strings.Contains(s.key, ".") {
			continue // the heading said it
		}
		fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", s.key, s.flagCell(), s.defaultCell(&def), s.meaningCell())
	}
	writeSectionTail(w, section)
	writeDeprecated(w)
	fmt.Fprintf(w, "\n## Example\n\n```yaml\n%s```\n", configDocExample)
	fmt.Fprint(w, "\n## The defaults as a file\n\n`hmsproxy --print-defaults` prints them; the output is a config file.\n\n```yaml\n")
	b, err := configYAML(&def)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	_, err = fmt.Fprint(w, "```\n")
	return err
}

const configDocHead = `# Configuration

<!-- Generated from the declaration of the settings in cmd/internal/settings (config.go and
sections.go) by go generate ./cmd/hmsproxy, that is hmsproxy --print-config-doc.
Edit the declaration, not this file: a test fails when the two differ. -->

hmsproxy reads one YAML file, named by ` + "`--config FILE`" + ` or ` + "`$HMSPROXY_CONFIG`" + `, and
flags. Every setting is a key of the file and a flag of the same name: ` + "`cache.ttl`" + ` is
` + "`--cache.ttl`" + `. Flags win over the file. In a flag, a list is comma-separated.
` + "`hmsproxy --help`" + ` lists the flags by section; ` + "`hmsproxy --print-defaults`" + ` prints the
whole default config as a file (at the end of this page).

Durations take Go syntax (` + "`90s`" + `, ` + "`2m`" + `, ` + "`1h30m`" + `). Sizes are in bytes. Settings in
lists and maps (` + "`federation.federated[]`" + `, ` + "`cache.kinds.<kind>`" + `, ` + "`ratelimit.users.<identity>`" + `)
are set in the file only.

## 0, empty and off

One rule for every setting:

- **Left out, ` + "`0`" + ` or ` + "`\"\"`" + ` (empty) means the default** given below. Where the default
  is worked out (` + "`max_conns/4`" + `, ` + "`3 × heartbeat`" + `), 0 asks for that.
- **` + "`off`" + ` turns a setting off**, where the table says what off does. A negative number
  or duration means off as well (` + "`-1s`" + `), as it always did for the timeouts.
- **Booleans** say what they mean: ` + "`true`" + ` or ` + "`false`" + `.

Before this rule, an explicit 0 or empty value meant off for some settings (marked
*0 is off, deprecated* below). Those spellings still mean off, and the proxy logs a
deprecation warning at start for each: write ` + "`off`" + `.

## Secrets

Secrets have no flag, which any user could read from the process list: they come from
the file or from an environment variable, which wins over the file.

| variable | key |
| --- | --- |
` + "%s"

// envRows are the secrets' rows of the environment table.
func envRows() string {
	var rows strings.Builder
	for _, s := range settings() {
		if s.env != "" {
			fmt.Fprintf(&rows, "| `%s` | `%s` |\n", s.env, s.key)
		}
	}
	return rows.String()
}

func writeSectionHead(w io.Writer, sec string) {
	if sec == "" {
		fmt.Fprint(w, "\n## General\n\n")
	} else {
		s := settingByKey(sec)
		fmt.Fprintf(w, "\n## `%s`\n\n", sec)
		if s != nil && s.doc != "" {
			fmt.Fprintf(w, "%s.\n\n", upperFirst(s.doc))
		}
		if n := sectionNotes[sec]; n != "" {
			fmt.Fprintf(w, "%s\n\n", n)
		}
	}
	fmt.Fprint(w, "| key | flag | default | meaning |\n| --- | --- | --- | --- |\n")
}

func (s *setting) flagCell() string {
	switch {
	case s.flag():
		return "`--" + s.key + "`"
	case s.env != "":
		return "`$" + s.env + "`"
	}
	return "—"
}

func (s *setting) defaultCell(def *File) string {
	switch {
	case s.section:
		return ""
	case s.defDoc != "":
		return s.defDoc
	case s.def != "":
		v := s.format(s.field(def))
		if n := s.field(def); n.CanInt() && n.Int() >= 1<<20 && strings.HasSuffix(s.key, "bytes") {
			v += fmt.Sprintf(" (%d MiB)", n.Int()>>20)
		}
		return "`" + v + "`"
	case typeName(s.typ) == "bool":
		return "`false`"
	}
	return "none"
}

func (s *setting) meaningCell() string {
	m := s.doc
	if s.section {
		m = "*" + typeName(s.typ) + "*: " + m
	}
	if s.note != "" {
		m += "; " + s.note
	}
	if s.offDoc != "" {
		m += "; **off**: " + s.offDoc
	}
	if s.zeroOff {
		m += " (*0 is off, deprecated*)"
	}
	return strings.ReplaceAll(m, "|", `\|`)
}

func writeDeprecated(w io.Writer) {
	fmt.Fprint(w, "\n## Deprecated names\n\nThese still work; each use logs a deprecation warning at start.\n\n")
	fmt.Fprint(w, "| old name | use |\n| --- | --- |\n| `shutdown_timeout` (key) | `shutdown.timeout` |\n")
	fmt.Fprint(w, "| `cache.per_user: true` (key), `--cache-per-user` | `cache.scope: user` |\n")
	for _, s := range settings() {
		for _, old := range s.old {
			fmt.Fprintf(w, "| `--%s` | `--%s` |\n", old, s.key)
		}
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// sectionNotes are prose under a section's heading that is not the doc
// of any one key.
var sectionNotes = map[string]string{
	"federation": "See [federation.md](federation.md) for what each setting does, and Waggle Dance's equivalents.",
}

// writeSectionTail writes what follows a section's table: for the
// cache, the defaults of each kind, read from the cache package.
func writeSectionTail(w io.Writer, sec string) {
	if sec != "cache" {
		return
	}
	fmt.Fprint(w, "\nThe defaults of each kind. `cache.ttl` and `cache.refresh_interval` set every kind at once, "+
		"`cache.cache_missing: false` turns not-found caching off for all, and `cache.kinds.<kind>` sets one kind:\n\n"+
		"| kind | TTL | refresh-ahead age | not-found answers cached |\n| --- | --- | --- | --- |\n")
	yesNo := map[bool]string{true: "yes", false: "no"}
	none := func(d time.Duration) string {
		if d <= 0 {
			return "none"
		}
		return formatDuration(d)
	}
	for i, k := range cache.DefaultKinds() {
		if k.TTL <= 0 {
			continue // not a cached kind
		}
		fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", hms.Kind(i), none(k.TTL), none(k.RefreshAfter), yesNo[k.Negative])
	}
}

// configDocExample is the example of docs/configuration.md;
// TestConfigurationDocExample loads it.
const configDocExample = `listen: ":9083"
upstream:
  uris: ["thrift://hms1:9083", "thrift://hms2:9083"]
  read_timeout: 2m
cache:
  maximum_bytes: 1073741824
  scope: auto   # per user behind a filter hook or authorizer; shared | user force it
redis:
  url: redis://redis:6379
log:
  format: json
`
