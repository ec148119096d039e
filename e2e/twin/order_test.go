package twin

import (
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
)

// queued waits until n claims wait in o's queue.
func queued(t *testing.T, o *order, n int) {
	t.Helper()
	wait.Eventually(t, 5*time.Second, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return len(o.queue) == n
	}, "claims queued: want", n)
}

func TestOrderGrants(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second []string
		fw, sw        bool
		waits         bool
	}{
		{"reads share", []string{"d/t"}, []string{"d/t"}, false, false, false},
		{"write waits for a read of it", []string{"d/t"}, []string{"d/t"}, false, true, true},
		{"read waits for a write of it", []string{"d/t"}, []string{"d/t"}, true, false, true},
		{"other tables run side by side", []string{"d/t"}, []string{"d/u"}, true, true, false},
		{"a database covers its tables", []string{"d/t"}, []string{"d"}, false, true, true},
		{"* covers everything", []string{"e/x"}, []string{"*"}, false, true, true},
		{"other databases run side by side", []string{"d"}, []string{"e"}, true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOrder()
			release := o.acquire(tc.first, tc.fw)
			got := make(chan func())
			go func() { got <- o.acquire(tc.second, tc.sw) }()
			if tc.waits {
				queued(t, o, 1)
				select {
				case <-got:
					t.Fatal("second claim granted while the first is held")
				default:
				}
				release()
				(<-got)()
				return
			}
			(<-got)()
			release()
		})
	}
}

// A waiting write holds back the reads that arrive after it, so that a
// stream of reads cannot starve it.
func TestOrderWriteNotStarved(t *testing.T) {
	o := newOrder()
	r1 := o.acquire([]string{"d/t"}, false)
	wrote := make(chan func())
	go func() { wrote <- o.acquire([]string{"*"}, true) }()
	queued(t, o, 1)
	read := make(chan func())
	go func() { read <- o.acquire([]string{"d/u"}, false) }()
	queued(t, o, 2)
	r1()
	w := <-wrote
	select {
	case <-read:
		t.Fatal("a later read was granted while the write held")
	default:
	}
	w()
	(<-read)()
}

func TestOrderRacyWatch(t *testing.T) {
	o := newOrder()
	done := o.watchRacy([]string{"d/t"})
	o.acquire([]string{"d/u"}, true)()
	if done() {
		t.Fatal("a write of another table marked the read raced")
	}
	done = o.watchRacy([]string{"d/t"})
	o.acquire([]string{"d"}, true)()
	if !done() {
		t.Fatal("a write of its database ran during the read; raced = false")
	}
}
