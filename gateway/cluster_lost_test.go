package gateway_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

// TestClusterLostAnswerTakesAgain: replica A holds the session; replica
// B accepts a message (A's pump cannot take it: its takes fail), then
// A's own admission of a message takes both and its answer is lost after
// Redis ran it. A answers B's message and its own, promptly (the lease
// TTL is a minute: waiting for it to end fails the test), in the order
// accepted, and nothing twice. Before, the items sat in A's consumer's
// pending list until the lease ended: only its own message came back,
// with the client's run again.
func TestClusterLostAnswerTakesAgain(t *testing.T) {
	tests := []struct {
		name string
		// rerun: the client runs the admission again; else A refuses the
		// message, which the platform may deliver again (redeliver)
		// before A takes the key again: the refusal kept the dedupe key,
		// which names the item the lost answer enqueued, so the copy is
		// a duplicate.
		rerun, redeliver bool
	}{
		{"run again", true, false},
		{"refused", false, false},
		{"refused and delivered again", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rerun := tc.rerun
			h := &redistest.LostAnswers{Rerun: rerun}
			model, adA, adB, dir := twoReplicas(t, redisReplica{leaseTTL: time.Minute, hook: h}, redisReplica{leaseTTL: time.Minute})
			clusterSay(t, adA, model, 0, "first") // A holds the session
			inject := func(ad *chattest.Adapter, n int, text string) error {
				in := benchMessage(adA.Platform(), 1, n, text)
				in.User, in.DedupKey = chat.User{ID: "u1", Name: "User"}, "lost:"+text
				return ad.Inject(t.Context(), in)
			}
			h.FailTakes(true)
			if err := inject(adB, 1, "to B"); err != nil {
				t.Fatal(err)
			}
			// A's pump, told of B's item, tried to take it.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			for {
				n, _ := h.Counts()
				if n > 0 {
					break
				}
				if ctx.Err() != nil {
					t.Fatal("replica A never tried to take B's message")
				}
				time.Sleep(5 * time.Millisecond)
			}
			h.LoseNextAdmit()
			err := inject(adA, 2, "to A")
			if tc.redeliver {
				if err == nil {
					t.Fatal("the admission whose answer was lost was not refused")
				}
				if err := inject(adA, 2, "to A"); err != nil {
					t.Fatalf("redelivery: %v", err)
				}
			}
			h.FailTakes(false)
			_, lost := h.Counts()
			if lost != 1 {
				t.Fatalf("%d admissions lost their answers, want 1", lost)
			}
			if rerun && err != nil {
				t.Fatalf("inject through a run again: %v", err)
			}
			// Well under the lease TTL: the items do not wait for it.
			// (The two may share a run: the second joins the first's.)
			if got := waitSessionTexts(t, dir, 3, 10*time.Second); !slices.Equal(got, []string{"first", "to B", "to A"}) {
				t.Fatalf("the session has %q, want first, to B, to A", got)
			}
			clusterSay(t, adA, model, 3, "last")
			want := []string{"first", "to B", "to A", "last"}
			if got := waitSessionTexts(t, dir, len(want), 10*time.Second); !slices.Equal(got, want) {
				t.Fatalf("the session has %q, want %q: a message ran twice or out of order", got, want)
			}
			if n := model.calls.Load(); n > int64(len(want)) {
				t.Fatalf("%d provider requests for %q: something ran twice", n, want)
			}
		})
	}
}
