package main

import "testing"

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"redis://:pw@host:6379", "redis://:xxxxx@host:6379"},
		{"redis://user:pw@host:6379/0", "redis://user:xxxxx@host:6379/0"},
		{"rediss://token@host", "rediss://xxxxx@host"},
		{"redis://:p@ss@host", "redis://:xxxxx@host"},
		{`parse "redis://:pw@h:x": invalid port`, `parse "redis://:xxxxx@h:x": invalid port`},
		{"a redis://:a@h and thrift://u:b@m:9083", "a redis://:xxxxx@h and thrift://u:xxxxx@m:9083"},
		{"redis://host:6379", "redis://host:6379"},
		{"user@example.com wrote", "user@example.com wrote"},
	} {
		if got := redact(tc.in); got != tc.want {
			t.Errorf("redact(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}
