package cache

import (
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

func TestOverridesResolve(t *testing.T) {
	d := func(v time.Duration) *time.Duration { return &v }
	no, yes := new(bool), new(bool)
	*yes = true
	def := DefaultKinds()
	tests := []struct {
		name    string
		o       Overrides
		kind    hms.Kind
		want    KindConfig
		wantErr bool
	}{
		{name: "none: the defaults", kind: hms.KindTable, want: def[hms.KindTable]},
		{name: "whole-cache TTL and refresh", o: Overrides{TTL: time.Hour, RefreshAfter: time.Minute},
			kind: hms.KindPartition, want: KindConfig{TTL: time.Hour, RefreshAfter: time.Minute, Negative: def[hms.KindPartition].Negative}},
		{name: "whole-cache off leaves the defaults", o: Overrides{TTL: -1, RefreshAfter: -1},
			kind: hms.KindTable, want: def[hms.KindTable]},
		{name: "no negative caching", o: Overrides{NoNegative: true},
			kind: hms.KindTable, want: KindConfig{TTL: def[hms.KindTable].TTL, RefreshAfter: def[hms.KindTable].RefreshAfter}},
		{name: "a kind's own settings win", o: Overrides{TTL: time.Hour, NoNegative: true,
			Kinds: map[string]KindOverride{"table": {TTL: d(time.Second), RefreshAfter: d(-1), Negative: yes}}},
			kind: hms.KindTable, want: KindConfig{TTL: time.Second, Negative: true}},
		{name: "a kind off", o: Overrides{Kinds: map[string]KindOverride{"partition": {TTL: d(-1), Negative: no}}},
			kind: hms.KindPartition, want: KindConfig{RefreshAfter: def[hms.KindPartition].RefreshAfter}},
		{name: "unknown kind", o: Overrides{Kinds: map[string]KindOverride{"tabel": {}}}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := tc.o.Resolve()
			if tc.wantErr {
				if err == nil {
					t.Fatal("got no error; want one for the unknown kind")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if k[tc.kind] != tc.want {
				t.Fatalf("got %+v; want %+v", k[tc.kind], tc.want)
			}
		})
	}
}
