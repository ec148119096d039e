package clocktest

import (
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	t0 := time.Unix(1000, 5)
	c := At(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("At(%v).Now() = %v", t0, got)
	}
	c.Advance(time.Second)
	c.Advance(-time.Millisecond)
	if got, want := c.Now(), t0.Add(999*time.Millisecond); !got.Equal(want) {
		t.Fatalf("after +1s -1ms: %v; want %v", got, want)
	}
}
