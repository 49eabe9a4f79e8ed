package rediscluster_test

import (
	"testing"

	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

// TestLeaveForgetsWhatAnotherReplicaEnded: replica A takes two items and
// begins their work, loses the session's lease, and replica B claims them
// and acknowledges one. A's in-hand set kept both until the process
// exited; the gateway's Leave (the lease lost) forgets them, and counts
// one crash against the item still pending only.
func TestLeaveForgetsWhatAnotherReplicaEnded(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			open := func(replica string) *rediscluster.Inbox {
				rdb, prefix, _ := b.Open(t, "s")
				ib, err := rediscluster.OpenInbox(ctx, rdb, rediscluster.Options{Prefix: prefix}, replica)
				if err != nil {
					t.Fatal(err)
				}
				return ib
			}
			a, bb := open("replica-a"), open("replica-b")
			for _, d := range []string{`"one"`, `"two"`} {
				if _, _, err := bb.Enqueue(ctx, "k", []byte(d)); err != nil {
					t.Fatal(err)
				}
			}
			taken, err := a.Consume(ctx, "k")
			if err != nil || len(taken) != 2 {
				t.Fatalf("A's consume: %v, %v", taken, err)
			}
			if err := a.Begin(ctx, "k", taken[0].ID, taken[1].ID); err != nil {
				t.Fatal(err)
			}
			claimed, err := bb.Claim(ctx, "k") // A lost the lease; B holds it
			if err != nil || len(claimed) != 2 {
				t.Fatalf("B's claim: %v, %v", claimed, err)
			}
			if err := bb.Ack(ctx, "k", claimed[0].ID); err != nil {
				t.Fatal(err)
			}
			if n := a.InHand("k"); n != 2 {
				t.Fatalf("A has %d items of k in hand before it leaves, want 2", n)
			}
			if err := a.Leave(ctx, "k", true); err != nil {
				t.Fatal(err)
			}
			if n := a.InHand("k"); n != 0 {
				t.Fatalf("A has %d items of k in hand after it left, want none", n)
			}
			items := pendingItems(t, bb, "k")
			if len(items) != 1 || string(items[0].Data) != `"two"` || items[0].Crashes != 1 {
				t.Fatalf("pending %+v, want two with one crash (its run cut)", items)
			}
		})
	}
}
