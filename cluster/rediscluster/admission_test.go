package rediscluster_test

import (
	"testing"
	"time"

	"github.com/pibot/pibot/cluster/clustertest"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

// TestAdmissionSeenReserve: SeenReserve answers as Seen and Reserve do,
// in one round trip (after a script flush too); a duplicate gets its
// sender's token back.
func TestAdmissionSeenReserve(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			rdb, prefix, _ := b.Open(t, "s")
			opts := rediscluster.Options{Prefix: prefix}
			budget := rediscluster.NewBudget(rdb, opts, 0.001, 2) // a burst of 2, no refill to speak of
			budget.SetClock(clustertest.NewClock().Now)
			ib, err := rediscluster.OpenInbox(ctx, rdb, opts, "replica")
			if err != nil {
				t.Fatal(err)
			}
			a := rediscluster.NewAdmission(rediscluster.NewDedupe(rdb, opts, time.Hour), budget, ib, nil)
			rts := &redistest.RoundTrips{}
			rdb.AddHook(rts)
			if b.Name == "miniredis" {
				// Redis without the scripts: the first call runs them
				// from their source. (Not on the shared server, whose
				// other clients would pay for it.)
				if err := rdb.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			steps := []struct {
				event   string
				dup     bool
				waiting bool
			}{
				{"e1", false, false},
				{"e1", true, false}, // a redelivery: its token comes back
				{"e2", false, false},
				{"e3", false, true}, // the burst of 2 is spent
			}
			for i, s := range steps {
				n0 := rts.Count()
				dup, wait, err := a.SeenReserve(ctx, s.event, "sender")
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if dup != s.dup || (wait > 0) != s.waiting {
					t.Fatalf("step %d (%s): dup %v, wait %v; want dup %v, waiting %v", i, s.event, dup, wait, s.dup, s.waiting)
				}
				if i > 0 && !s.dup {
					if got := rts.Since(n0); len(got) != 1 {
						t.Errorf("step %d: %d round trips %q, want 1", i, len(got), got)
					}
				}
				if !s.dup && !s.waiting {
					// Taken: the gateway's admission commits the key.
					if err := a.Commit(ctx, s.event); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}
