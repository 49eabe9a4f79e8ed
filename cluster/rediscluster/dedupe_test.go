package rediscluster_test

import (
	"errors"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

// TestDedupePendingKeyExpires: a key Seen recorded and nothing committed
// (its replica died before it enqueued the event or forgot the key)
// lives for the pending time only, so the platform's redelivery is taken
// after it; a committed key (Commit, or the admission that enqueues the
// event after Seen) lives for the TTL. Before, every key Seen recorded
// lived for the TTL (48 hours in pibot): the redelivery of an event
// whose replica died with its Forget pending was dropped.
func TestDedupePendingKeyExpires(t *testing.T) {
	const pending = 300 * time.Millisecond
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			rdb, prefix, mr := b.Open(t, t.Name())
			opts := rediscluster.Options{Prefix: prefix}
			d := rediscluster.NewDedupePending(rdb, opts, time.Hour, pending)
			wait := func(d time.Duration) { time.Sleep(d) }
			if mr != nil {
				wait = mr.FastForward
			}
			for _, k := range []string{"orphan", "committed", "admitted"} {
				if dup, err := d.Seen(ctx, k); err != nil || dup {
					t.Fatalf("Seen(%s) = %v, %v; want new", k, dup, err)
				}
			}
			if err := d.Commit(ctx, "committed"); err != nil {
				t.Fatal(err)
			}
			ib, err := rediscluster.OpenInbox(ctx, rdb, opts, "replica-a")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ib.Close() })
			a := rediscluster.NewAdmission(d, rediscluster.NewBudget(rdb, opts, 0, 0), ib, nil)
			if _, err := a.Admit(ctx, cluster.Admission{Seen: "admitted", Key: "loc", Data: []byte(`"x"`)}); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Seen(ctx, "orphan"); !errors.Is(err, cluster.ErrInFlight) {
				t.Fatalf("a redelivery within the pending time: %v, want ErrInFlight", err)
			}
			wait(3 * pending)
			if dup, err := d.Seen(ctx, "orphan"); err != nil || dup {
				t.Fatalf("a redelivery after the pending time: %v, %v; want new (taken)", dup, err)
			}
			for _, k := range []string{"committed", "admitted"} {
				if dup, err := d.Seen(ctx, k); err != nil || !dup {
					t.Fatalf("Seen(%s) after the pending time = %v, %v; want a duplicate", k, dup, err)
				}
			}
		})
	}
}
