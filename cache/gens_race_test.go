package cache

import (
	"sync"
	"testing"
)

func TestGenerationsConcurrent(t *testing.T) {
	g := NewGenerations(8) // small: many entities share counters
	var wg, readers sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				g.Bump(g.Of([]byte{byte(i), byte(w)}))
			}
		}()
	}
	for r := 0; r < 4; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := 0; i < 2000; i++ {
				d := g.Of([]byte{byte(i), byte(r)})
				s, _ := g.Take([]Dep{d, g.Of([]byte("other"))})
				g.Current(&s)
				// A bump after the snapshot is always seen.
				g.Bump(d)
				if g.Current(&s) {
					t.Errorf("Current after Bump of a dependency: got true; want false")
					return
				}
			}
		}()
	}
	readers.Wait()
	close(stop)
	wg.Wait()
}

func TestSnapshotKey(t *testing.T) {
	g := NewGenerations(10)
	d := g.Of([]byte("x"))
	s1, _ := g.Take([]Dep{d})
	g.Bump(d)
	s2, _ := g.Take([]Dep{d})
	if string(s1.AppendKey(nil)) == string(s2.AppendKey(nil)) {
		t.Errorf("snapshot keys across a bump: got equal; want different")
	}
	if !g.Current(&s2) || g.Current(&s1) {
		t.Errorf("Current: got %v, %v; want false, true", g.Current(&s1), g.Current(&s2))
	}
}
