package gateway

import (
	"slices"
	"testing"
	"time"
)

// TestResyncsBackOff: a key whose takes keep failing is taken again after
// a wait that doubles up to resyncMax; a take that does not fail again
// forgets it; a failed claim is retried as a claim, even when a consume
// of the key was already due.
func TestResyncsBackOff(t *testing.T) {
	r := newResyncs()
	defer r.stop()
	t0 := time.Unix(1000, 0)
	type step struct {
		schedule []resync // failures at now
		at       time.Duration
		want     []resync // fired at t0+at
		settle   bool     // the retakes did not fail again
	}
	steps := []step{
		{schedule: []resync{{key: "a"}}, at: resyncFirst - time.Millisecond},
		{at: resyncFirst, want: []resync{{key: "a"}}},
		// It failed again: twice the wait.
		{schedule: []resync{{key: "a"}}, at: 3*resyncFirst - time.Millisecond},
		{at: 3 * resyncFirst, want: []resync{{key: "a"}}, settle: true},
		// Forgotten: the first wait again; a claim joins a due consume.
		{schedule: []resync{{key: "a"}, {key: "a", claim: true}, {key: "b"}}, at: 4 * resyncFirst,
			want: []resync{{key: "a", claim: true}, {key: "b"}}},
	}
	now := t0
	for i, s := range steps {
		for _, f := range s.schedule {
			r.schedule(f.key, now, f.claim)
		}
		now = t0.Add(s.at)
		got := r.fired(now)
		slices.SortFunc(got, func(a, b resync) int {
			if a.key < b.key {
				return -1
			}
			return 1
		})
		if !slices.Equal(got, s.want) {
			t.Fatalf("step %d: fired %v, want %v", i, got, s.want)
		}
		if s.settle {
			for _, f := range got {
				r.settle(f.key)
			}
		}
	}
	for range 20 {
		r.schedule("c", now, false)
		now = now.Add(time.Hour)
		r.fired(now)
	}
	if w := r.wait["c"]; w != resyncMax {
		t.Fatalf("after many failures the wait is %v, want %v", w, resyncMax)
	}
}
