package gateway_test

import (
	"context"
	"errors"
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

// TestClusterReplayedEventSeenAnswerLost: the other record of a dedupe key
// apart from an enqueue is no hole. A replica that takes over a stopped
// replica's message records its dedupe key (the replay's markSeen: a
// Commit, the event is in the inbox) and that call's answer is lost
// after Redis ran it: the message is replayed all the
// same, and the platform's redelivery, a duplicate now, is dropped, so
// the message runs once. (Were the key not recorded, the redelivery would
// be taken and its session would recognise it.)
func TestClusterReplayedEventSeenAnswerLost(t *testing.T) {
	t.Parallel()
	_, prefix := redistest.LocalPrefix(t, "gateway")
	model := newStampModel(faux.Text("ok"))
	dir := t.TempDir()
	adA := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
	// A's run of "stall" streams until the stop's drain timeout ends it.
	a := startRedisReplica(t, adA, stallModel{model, "stall"}, dir,
		redisReplica{prefix: prefix, id: "replica-a", poll: 50 * time.Millisecond, drain: 100 * time.Millisecond})
	clusterSay(t, adA, model, 0, "first")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w := sayStall(ctx, t, adA, model)
	select {
	case <-w.started:
	case <-ctx.Done():
		t.Fatal("the stalled message's run never started")
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	h := &redistest.LostAnswers{}
	h.LoseNextSeen()
	w = model.expect("stall")
	adB := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
	startRedisReplica(t, adB, model, dir, redisReplica{prefix: prefix, id: "replica-b", poll: 50 * time.Millisecond, hook: h})
	select {
	case <-w.started:
	case <-ctx.Done():
		t.Fatal("replica B never ran the message A left")
	}
	<-w.ended
	want := []string{"first", "stall"}
	if got := waitSessionTexts(t, dir, len(want), 20*time.Second); !slices.Equal(got, want) {
		t.Fatalf("the session has %q, want %q", got, want)
	}
	if lost, _, _ := h.DedupeCounts(); lost != 1 {
		t.Fatalf("%d dedupe answers lost, want 1 (the replay's)", lost)
	}
	// The platform delivers the message again, to B.
	in := benchMessage(adB.Platform(), 1, 1, "stall")
	in.User, in.DedupKey = chat.User{ID: "u1", Name: "User"}, "say:1"
	if err := adB.Inject(ctx, in); err != nil {
		t.Fatalf("redelivery: %v", err)
	}
	clusterSay(t, adB, model, 2, "last")
	want = append(want, "last")
	if got := waitSessionTexts(t, dir, len(want), 10*time.Second); !slices.Equal(got, want) {
		t.Fatalf("the session has %q, want %q: the replayed message ran twice", got, want)
	}
}

// TestClusterDedupeReplicaDiesWithForgetPending: a replica refuses an
// event after its Seen recorded the dedupe key (here its admission
// fails), the Forget of its refusal fails too, and the replica stops
// before any retry of the Forget reaches Redis (forgetRetries lives in
// its memory only). Before, the key stayed for the dedupe's whole TTL:
// the platform's redelivery, to the replica that took over, was dropped
// as a duplicate and the message lost. Now a key Seen recorded is
// pending until its event is enqueued: a redelivery meanwhile is refused
// as in flight (the platform delivers it again), and once the key
// expires the redelivery is taken, once.
func TestClusterDedupeReplicaDiesWithForgetPending(t *testing.T) {
	t.Parallel()
	_, prefix := redistest.LocalPrefix(t, "gateway")
	const pending = 2 * time.Second
	model, dir := newStampModel(faux.Text("ok")), t.TempDir()
	h := &redistest.LostAnswers{}
	adA := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
	a := startRedisReplica(t, adA, model, dir, redisReplica{prefix: prefix, id: "replica-a", leaseTTL: time.Minute, hook: h, pending: pending})
	clusterSay(t, adA, model, 0, "first") // the scripts are loaded, the session held
	in := benchMessage(adA.Platform(), 1, 1, "/followup to A")
	in.User, in.DedupKey = chat.User{ID: "u1", Name: "User"}, "dies:1"
	in.Command = chat.ParseCommand(in.Text, "")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	h.FailAdmits(true)
	h.FailForgets(true)
	if err := adA.Inject(ctx, in); err == nil {
		t.Fatal("the event whose admission failed was not refused")
	}
	if err := a.stop(); err != nil { // dies with the Forget pending
		t.Fatal(err)
	}
	if _, failed, forgot := h.DedupeCounts(); failed == 0 || forgot != 0 {
		t.Fatalf("%d Forgets failed and %d reached Redis: the test missed its aim", failed, forgot)
	}

	adB := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
	startRedisReplica(t, adB, model, dir, redisReplica{prefix: prefix, id: "replica-b", leaseTTL: time.Minute, pending: pending})
	in.Conv.Platform, in.Msg.Conv.Platform = adB.Platform(), adB.Platform()
	start := time.Now()
	// At once: the key is A's, pending. Refused, not dropped.
	// (Taken at once if B started after the key expired.) Before, it was
	// dropped: nil, and the session never had it.
	err := adB.Inject(ctx, in)
	if err != nil && !errors.Is(err, chat.ErrUnavailable) {
		t.Fatalf("the redelivery within the pending time: %v, want a refusal the platform delivers again", err)
	}
	refused := 0
	// The platform delivers it again until it is taken.
	for ; err != nil; refused++ {
		if ctx.Err() != nil {
			t.Fatalf("the redelivery was never taken: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
		err = adB.Inject(ctx, in)
	}
	if waited := time.Since(start); waited > 10*pending {
		t.Errorf("the redelivery was taken after %v, the pending time is %v", waited, pending)
	}
	want := []string{"first", "to A"}
	if got := waitSessionTexts(t, dir, len(want), 10*time.Second); !slices.Equal(got, want) {
		t.Fatalf("the session has %q, want %q: the redelivery was dropped, the message lost", got, want)
	}
	t.Logf("the redelivery was refused %d times as in flight, then taken after %v", refused, time.Since(start).Round(time.Millisecond))
	// Committed now: a further delivery is a duplicate.
	if err := adB.Inject(ctx, in); err != nil {
		t.Fatalf("a delivery after the event was taken: %v", err)
	}
	clusterSay(t, adB, model, 2, "last")
	want = append(want, "last")
	if got := waitSessionTexts(t, dir, len(want), 10*time.Second); !slices.Equal(got, want) {
		t.Fatalf("the session has %q, want %q: a message ran twice", got, want)
	}
}
