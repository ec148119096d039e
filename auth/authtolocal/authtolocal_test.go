package authtolocal

import (
	"errors"
	"strings"
	"testing"
)

func split(p string) ([]string, string) {
	name, realm, _ := strings.Cut(p, "@")
	return strings.Split(name, "/"), realm
}

// TestHadoopRules: Hadoop's own TestKerberosName cases give Hadoop's
// names; a principal no rule applies to keeps its whole name (where
// Hadoop refuses it).
func TestHadoopRules(t *testing.T) {
	const hadoop = `RULE:[1:$1@$0](.*@YAHOO\.COM)s/@.*//
RULE:[2:$1](johndoe)s/^.*$/guest/
RULE:[2:$1;$2](^.*;admin$)s/;admin$//
RULE:[2:$2](root)
DEFAULT`
	const lower = `RULE:[1:$1]/L
RULE:[2:$1]/L
RULE:[2:$1;$2](^.*;admin$)s/;admin$///L
RULE:[2:$1;$2](^.*;guest$)s/;guest$//g/L
DEFAULT`
	for _, tc := range []struct {
		rules, principal, want string
	}{
		{hadoop, "omalley@EXAMPLE.COM", "omalley"},
		{hadoop, "hdfs/10.0.0.1@EXAMPLE.COM", "hdfs"},
		{hadoop, "oom@YAHOO.COM", "oom"},
		{hadoop, "johndoe/zoo@FOO.COM", "guest"},
		{hadoop, "joe/admin@FOO.COM", "joe"},
		{hadoop, "joe/root@FOO.COM", "root"},
		{hadoop, "foo@ACME.COM", "foo@ACME.COM"},         // Hadoop: no rule applies
		{hadoop, "root/joe@FOO.COM", "root/joe@FOO.COM"}, // Hadoop: no rule applies
		{lower, "Joe@EXAMPLE.COM", "joe"},
		{lower, "Joe/root@EXAMPLE.COM", "joe"},
		{lower, "Joe/admin@EXAMPLE.COM", "joe"},
		{lower, "Joe/guestguest@EXAMPLE.COM", "joe"},
		// the default: short names for the default realm only
		{"", "alice@EXAMPLE.COM", "alice"},
		{"", "hive/host.example.com@EXAMPLE.COM", "hive"},
		{"", "alice@FOREIGN.TEST", "alice@FOREIGN.TEST"},
		{" \n ", "alice@FOREIGN.TEST", "alice@FOREIGN.TEST"},
		// a foreign realm mapped by an explicit rule, and only that realm
		{`RULE:[1:$1@$0](.*@FOREIGN\.TEST)s/@.*// DEFAULT`, "alice@FOREIGN.TEST", "alice"},
		{`RULE:[1:$1@$0](.*@FOREIGN\.TEST)s/@.*// DEFAULT`, "alice@FOREIGN.TESTX", "alice@FOREIGN.TESTX"},
		{`RULE:[1:$1@$0](.*@FOREIGN\.TEST)s/@.*// DEFAULT`, "alice@OTHER.TEST", "alice@OTHER.TEST"},
		{`RULE:[1:$1@$0](.*@FOREIGN\.TEST)s/@.*// DEFAULT`, "svc/host@FOREIGN.TEST", "svc/host@FOREIGN.TEST"},
		// rules without DEFAULT: the default realm is not special
		{`RULE:[1:$1@$0](.*@FOREIGN\.TEST)s/@.*//`, "alice@EXAMPLE.COM", "alice@EXAMPLE.COM"},
		// groups in the replacement; first vs every match
		{`RULE:[1:$1](a.c)s/a(.)c/x$1y/`, "abc@X", "xby"}, // a match holds no parenthesis in Hadoop's syntax
		{`RULE:[1:$1]s/o/0/`, "foo@X", "f0o"},
		{`RULE:[1:$1]s/o/0/g`, "foo@X", "f00"},
		{`RULE:[1:$1]s/o/\$/g`, "foo@X", "f$$"},
		{`RULE:[1:x$1y]`, "a@X", "xay"},
	} {
		r, err := Parse(tc.rules, "EXAMPLE.COM")
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.rules, err)
		}
		got, err := r.ShortName(split(tc.principal))
		if err != nil || got != tc.want {
			t.Errorf("rules %q: %s gives %q, %v; want %q", tc.rules, tc.principal, got, err, tc.want)
		}
	}
}

// TestParseRefuses: a rule set that would not do what it says is refused
// when the configuration loads, not when a client arrives.
func TestParseRefuses(t *testing.T) {
	for _, text := range []string{
		"NOPE",
		"DEFAULT junk",
		"RULE:[1:$1]s/a/b",            // unterminated substitution
		"RULE:[:$1]",                  // no number of components
		"RULE:[0:$1]",                 // no principal has 0 components
		"RULE:[1:$2]",                 // a component the principal does not have
		"RULE:[1:$x]",                 // not a parameter
		`RULE:[1:$1](a\1)`,            // a back-reference (Java only)
		`RULE:[1:$1]((?=a))`,          // look-ahead (Java only); also a ')' Hadoop cannot parse
		"RULE:[1:$1]s/(a)/$2/",        // no group 2
		"RULE:[1:$1]s/a/$/",           // a bare $
		`RULE:[1:$1]s/a/b\/`,          // ends in a backslash, unterminated
		"RULE:[1:$1](x) RULE:[1:$1](", // the second is broken
	} {
		if _, err := Parse(text, "EXAMPLE.COM"); !errors.Is(err, ErrRule) {
			t.Errorf("Parse(%q): %v; want ErrRule", text, err)
		}
	}
}

// TestRuleGivesNoName: a rule that applies but gives an empty name, or a
// name that is still a principal, is an error, never an identity (an
// empty identity would be the proxy's own).
func TestRuleGivesNoName(t *testing.T) {
	for _, text := range []string{
		`RULE:[1:$1@$0](.*@FOREIGN\.TEST)s/.*//`,
		`RULE:[1:$1@$0](.*@FOREIGN\.TEST)`,
		`RULE:[1:$1/x](.*)`,
	} {
		r, err := Parse(text, "EXAMPLE.COM")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := r.ShortName([]string{"alice"}, "FOREIGN.TEST"); !errors.Is(err, ErrName) {
			t.Errorf("rules %q: %q, %v; want ErrName", text, got, err)
		}
	}
}

// FuzzRules: no rule text or principal makes Parse or ShortName panic,
// and a name given is simple.
func FuzzRules(f *testing.F) {
	f.Add(`RULE:[1:$1@$0](.*@FOREIGN\.TEST)s/@.*// DEFAULT`, "alice", "FOREIGN.TEST")
	f.Add(`RULE:[2:$1;$2](^.*;admin$)s/;admin$///L`, "joe/admin", "X")
	f.Add(`RULE:[1:$1]s/(o)/$1$1$10/g`, "foo", "X")
	f.Add("DEFAULT", "a/b/c", "EXAMPLE.COM")
	f.Fuzz(func(t *testing.T, text, name, realm string) {
		r, err := Parse(text, "EXAMPLE.COM")
		if err != nil {
			return
		}
		got, err := r.ShortName(strings.Split(name, "/"), realm)
		if err == nil && got == "" {
			t.Fatalf("rules %q: empty name for %s@%s", text, name, realm)
		}
	})
}
