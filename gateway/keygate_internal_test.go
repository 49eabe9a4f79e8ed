package gateway

import (
	"sync"
	"testing"
)

// TestKeyGate: holders of one key's gate take turns (the race detector
// sees the unguarded counter otherwise), other keys do not wait for them,
// and a gate nobody holds or waits for is forgotten.
func TestKeyGate(t *testing.T) {
	var g keyGate
	counts := map[string]*int{"a": new(int), "b": new(int)}
	var wg sync.WaitGroup
	for range 50 {
		for key, n := range counts {
			wg.Go(func() {
				defer g.lock(key)()
				*n++ // guarded by key's gate alone
			})
		}
	}
	wg.Wait()
	for key, n := range counts {
		if *n != 50 {
			t.Errorf("%s counted %d, want 50", key, *n)
		}
	}
	// A holder of a does not hold up b.
	unlockA := g.lock("a")
	g.lock("b")()
	unlockA()
	if len(g.keys) != 0 {
		t.Errorf("%d gates left after every release, want 0", len(g.keys))
	}
}
