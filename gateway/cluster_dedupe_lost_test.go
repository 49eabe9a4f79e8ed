package gateway_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
	"github.com/pibot/pibot/providers/faux"
)

// TestClusterDedupeLostAnswerRedelivered: an event the gateway refuses
// after Redis may have recorded its dedupe key is handled when the
// platform delivers it again, once Redis answers, and only once. Each
// case fails one dedupe call of intake on a replica of its own:
//
//   - the Seen of the steps before classify (here /followup, an event the
//     one-trip admission does not take whole; budgeted, so SeenReserve's
//     pipeline) runs in Redis and its answer is lost. Before, the refusal
//     kept the key, so the redelivery was dropped as a duplicate and the
//     message was never handled;
//   - the same Seen with the client running it again: accepted at once;
//   - that event's admission fails and so does the Forget of its refusal
//     (Redis down for both). Before, nothing forgot the key later: the
//     redelivery was a duplicate. Now the Forget is retried until Redis
//     answers, and a redelivery that finds the key before the retry
//     forgets it first;
//   - a message admitted whole (one round trip) whose admission and
//     Forget fail: the script never ran, nothing was recorded, the
//     redelivery is taken (no hole there; TestClusterLostAnswerTakesAgain
//     has the lost answer of a script that ran).
func TestClusterDedupeLostAnswerRedelivered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		rerun bool
		text  string // what the event says; the session records its message
		lose  func(h *redistest.LostAnswers)
		// forgotten: the refusal's Forget fails, and the redelivery waits
		// until a Forget reached Redis (the retry).
		forgotten bool
	}{
		{"seen answer lost", false, "/followup to A", func(h *redistest.LostAnswers) { h.LoseNextSeen() }, false},
		{"seen answer lost, run again", true, "/followup to A", func(h *redistest.LostAnswers) { h.LoseNextSeen() }, false},
		{"admission and forget fail", false, "/followup to A", func(h *redistest.LostAnswers) {
			h.FailAdmits(true)
			h.FailForgets(true)
		}, true},
		{"admission and forget fail, redelivered at once", false, "/followup to A", func(h *redistest.LostAnswers) {
			h.FailAdmits(true)
			h.FailForgets(true)
		}, false},
		{"one-trip admission and forget fail", false, "to A", func(h *redistest.LostAnswers) {
			h.FailAdmits(true)
			h.FailForgets(true)
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, prefix := redistest.LocalPrefix(t, "gateway")
			h := &redistest.LostAnswers{Rerun: tc.rerun}
			model, dir := newStampModel(faux.Text("ok")), t.TempDir()
			ad := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
			startRedisReplica(t, ad, model, dir, redisReplica{prefix: prefix, id: "replica-a", leaseTTL: time.Minute, hook: h})
			clusterSay(t, ad, model, 0, "first") // the scripts are loaded, the session held
			in := benchMessage(ad.Platform(), 1, 1, tc.text)
			in.User, in.DedupKey = chat.User{ID: "u1", Name: "User"}, "lost:1"
			in.Command = chat.ParseCommand(tc.text, "")
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			tc.lose(h)
			err := ad.Inject(ctx, in)
			h.FailAdmits(false)
			h.FailForgets(false)
			if tc.rerun {
				if err != nil {
					t.Fatalf("inject through a run again: %v", err)
				}
			} else {
				if err == nil {
					t.Fatal("the event whose dedupe answer was lost was not refused")
				}
				if tc.forgotten {
					for _, _, n := h.DedupeCounts(); n == 0; _, _, n = h.DedupeCounts() {
						if ctx.Err() != nil {
							t.Fatal("the refused event's dedupe key was never forgotten once Redis answered")
						}
						time.Sleep(10 * time.Millisecond)
					}
				}
				if err := ad.Inject(ctx, in); err != nil {
					t.Fatalf("redelivery: %v", err)
				}
			}
			want := []string{"first", "to A"}
			if got := waitSessionTexts(t, dir, len(want), 10*time.Second); !slices.Equal(got, want) {
				t.Fatalf("the session has %q, want %q: the redelivery was dropped", got, want)
			}
			// A third delivery is a duplicate now.
			if err := ad.Inject(ctx, in); err != nil {
				t.Fatalf("third delivery: %v", err)
			}
			clusterSay(t, ad, model, 2, "last")
			want = append(want, "last")
			if got := waitSessionTexts(t, dir, len(want), 10*time.Second); !slices.Equal(got, want) {
				t.Fatalf("the session has %q, want %q: a message ran twice", got, want)
			}
			if n := model.calls.Load(); n > int64(len(want)) {
				t.Fatalf("%d provider requests for %q: something ran twice", n, want)
			}
		})
	}
}
