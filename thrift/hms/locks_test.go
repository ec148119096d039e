package hms

import (
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

func TestReadLockResponse(t *testing.T) {
	tests := []struct {
		name      string
		body      func(e *wire.Encoder)
		id        int64
		state     int32
		wantError bool
	}{
		{name: "acquired", body: func(e *wire.Encoder) { e.I64Field(1, 42); e.I32Field(2, 1) }, id: 42, state: 1},
		{name: "a field of a later version is skipped", body: func(e *wire.Encoder) {
			e.I32Field(2, 2)
			e.StringField(3, "errorMessage")
			e.I64Field(1, 7)
		}, id: 7, state: 2},
		{name: "a field of the wrong type is skipped", body: func(e *wire.Encoder) { e.StringField(1, "x"); e.I32Field(2, 4) }, state: 4},
		{name: "truncated", body: func(e *wire.Encoder) { e.FieldBegin(wire.TI64, 1) }, wantError: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e wire.Encoder
			tc.body(&e)
			if !tc.wantError {
				e.Stop()
			}
			d := wire.NewDecoder(e.B)
			id, state := ReadLockResponse(d)
			if tc.wantError {
				if d.Err() == nil {
					t.Fatal("got no error; want one")
				}
				return
			}
			if d.Err() != nil || id != tc.id || state != tc.state {
				t.Fatalf("got %d, %d, %v; want %d, %d", id, state, d.Err(), tc.id, tc.state)
			}
		})
	}
}
