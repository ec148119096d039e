package main

import (
	"testing"
	"time"
)

func TestAdminConfig(t *testing.T) {
	tests := []struct {
		name       string
		yaml       string // written and passed with -config when set
		args       []string
		env        string // HMSPROXY_ADMIN_TOKEN
		wantListen string
		wantToken  string
	}{
		{"defaults", "", nil, "", "127.0.0.1:9084", ""},
		{"flag", "", []string{"-admin", ":9999"}, "", ":9999", ""},
		{"flag disables", "", []string{"-admin", ""}, "", "", ""},
		{"file", "admin:\n  listen: 0.0.0.0:9100\n  token: fromfile\n", nil, "", "0.0.0.0:9100", "fromfile"},
		{"file disables", "admin:\n  listen: \"\"\n", nil, "", "", ""},
		{"flag wins over file", "admin:\n  listen: 0.0.0.0:9100\n", []string{"-admin", "127.0.0.1:1"}, "", "127.0.0.1:1", ""},
		{"env token", "", nil, "fromenv", "127.0.0.1:9084", "fromenv"},
		{"env wins over file", "admin:\n  token: fromfile\n", nil, "fromenv", "127.0.0.1:9084", "fromenv"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HMSPROXY_CONFIG", "")
			t.Setenv("HMSPROXY_ADMIN_TOKEN", tc.env)
			args := append([]string{"-demo"}, tc.args...)
			if tc.yaml != "" {
				args = append(args, "-config", writeConfig(t, tc.yaml))
			}
			c, err := load(args)
			if err != nil {
				t.Fatal(err)
			}
			if c.Admin.Listen != tc.wantListen || c.Admin.Token != tc.wantToken {
				t.Errorf("got listen %q token %q; want %q %q", c.Admin.Listen, c.Admin.Token, tc.wantListen, tc.wantToken)
			}
		})
	}
}

func TestNoTokenFlag(t *testing.T) {
	if _, err := load([]string{"-demo", "-admin-token", "x"}); err == nil {
		t.Fatal("a token flag was accepted; secrets come from the environment or the file")
	}
}

// TestEventLogHealthConfig (issue 10, item 9): the health check's period
// and the TTL bound without a notification log, from defaults, file and
// flags.
func TestEventLogHealthConfig(t *testing.T) {
	p := writeConfig(t, "eventlog:\n  health_interval: 1m\ncache:\n  ttl_without_eventlog: 5s\n")
	tests := []struct {
		name         string
		args         []string
		wantInterval time.Duration
		wantTTL      time.Duration
	}{
		{"defaults", nil, 10 * time.Second, 30 * time.Second},
		{"file", []string{"-config", p}, time.Minute, 5 * time.Second},
		// 0 is the old spelling of off, still read as off (stored negative).
		{"flags win", []string{"-config", p, "-eventlog-health-interval", "0", "-cache-ttl-without-eventlog", "1m"}, -1, time.Minute},
		{"off", []string{"-config", p, "--eventlog.health_interval", "off"}, -1, 5 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := loadDemo(t, tc.args...)
			if c.EventLog.HealthInterval != tc.wantInterval || c.Cache.TTLWithoutEventLog != tc.wantTTL {
				t.Errorf("got interval %v ttl %v; want %v %v", c.EventLog.HealthInterval, c.Cache.TTLWithoutEventLog, tc.wantInterval, tc.wantTTL)
			}
		})
	}
}

// TestGroupName (issue 10, item 3): nodes listing one group in another
// order or spelling share its name; upstream.name overrides it.
func TestGroupName(t *testing.T) {
	a, err := load([]string{"-upstream", "thrift://hms2:9083,thrift://HMS1:9083"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := load([]string{"-upstream", "hms1:9083, thrift://hms2"})
	if err != nil {
		t.Fatal(err)
	}
	if a.GroupName() != b.GroupName() || a.GroupName() != "thrift://hms1:9083,thrift://hms2:9083" {
		t.Fatalf("group names %q and %q; want both thrift://hms1:9083,thrift://hms2:9083", a.GroupName(), b.GroupName())
	}
	c, err := load([]string{"-upstream", "thrift://hms1:9083", "-upstream-name", "warehouse", "-redis-heartbeat", "250ms"})
	if err != nil {
		t.Fatal(err)
	}
	if c.GroupName() != "warehouse" || c.Redis.Heartbeat != 250*time.Millisecond || c.Redis.PeerGone != time.Minute {
		t.Fatalf("got name %q heartbeat %v peer-gone %v", c.GroupName(), c.Redis.Heartbeat, c.Redis.PeerGone)
	}
}
