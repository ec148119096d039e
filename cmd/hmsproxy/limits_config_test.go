package main

import (
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/proxy"
)

// The client deadlines and the in-flight budget are settable from the
// file and from flags, with the documented defaults (#9).
func TestLimitsConfig(t *testing.T) {
	t.Setenv("HMSPROXY_CONFIG", "")
	yaml := "limits:\n  client_read_timeout: 5s\n  client_idle_timeout: 10m\n  client_write_timeout: -1s\n  inflight_bytes: 209715200\n" +
		"  max_clients_per_address: 50\n"
	file := writeConfig(t, yaml)
	type lim struct {
		read, idle, write time.Duration
		inflight          int64
		perAddress        int
	}
	for _, tc := range []struct {
		name string
		args []string
		want lim
	}{
		{"defaults", nil, lim{proxy.DefaultReadTimeout, proxy.DefaultIdleTimeout, proxy.DefaultWriteTimeout, 256 << 20, 0}},
		{"file", []string{"-config", file}, lim{5 * time.Second, 10 * time.Minute, -time.Second, 200 << 20, 50}},
		{"flags win", []string{"-config", file, "-client-read-timeout", "7s", "-client-idle-timeout", "2h",
			"-client-write-timeout", "30s", "-inflight-bytes", "0", "-max-clients-per-address", "-1"},
			lim{7 * time.Second, 2 * time.Hour, 30 * time.Second, -1, -1}}, // inflight 0: the old spelling of off
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadDemo(t, tc.args...)
			got := lim{c.Limits.ClientReadTimeout, c.Limits.ClientIdleTimeout, c.Limits.ClientWriteTimeout, c.Limits.InflightBytes,
				c.Limits.MaxClientsPerAddress}
			if got != tc.want {
				t.Errorf("got %+v; want %+v", got, tc.want)
			}
		})
	}
	// A budget below the largest legal request could never hold it.
	if _, err := load([]string{"-demo", "-inflight-bytes", "1000", "-max-message-bytes", "2000"}); err == nil {
		t.Error("an in-flight budget smaller than max_message_bytes was accepted")
	}
}
