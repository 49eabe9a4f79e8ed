package gateway_test

import (
	"context"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// TestClusterLeaseLostTwiceQuarantines: a message whose run keeps losing
// its session's lease (the lease is gone from Redis while the run
// streams, as when its handling stalls the replica past the TTL) is
// replayed once, then quarantined, as a message that crashed pibot twice
// is: its sender is told, and the model is not asked a third time.
// Before, a replay after a lost lease counted nothing, and the message
// looped.
func TestClusterLeaseLostTwiceQuarantines(t *testing.T) {
	t.Parallel()
	probe, prefix := redistest.LocalPrefix(t, "gateway")
	model := newStampModel(faux.Text("ok"))
	ad := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
	// A run of "stall" streams until its context ends, so only the lost
	// lease ends it, however slow the machine.
	startRedisReplica(t, ad, stallModel{model, "stall"}, t.TempDir(), redisReplica{prefix: prefix, id: "replica-a", poll: 50 * time.Millisecond, leaseTTL: 2 * time.Second})
	clusterSay(t, ad, model, 0, "first")
	conv := benchMessage(ad.Platform(), 1, 0, "").Conv
	path, _, err := rediscluster.NewIndex(probe, rediscluster.Options{Prefix: prefix, Keys: testKeys(t)}, rediscluster.IndexOptions{}).Get(t.Context(), conv.Key())
	if err != nil || path == "" {
		t.Fatalf("index: %q, %v", path, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cutLease := func(try int) {
		t.Helper()
		n, err := probe.Del(ctx, prefix+"{lease:"+path+"}:lock").Result()
		if err != nil || n != 1 {
			t.Fatalf("run %d: delete the session's lease: %d, %v", try, n, err)
		}
	}

	w := sayStall(ctx, t, ad, model)
	for try := 1; try <= 2; try++ {
		select {
		case <-w.started:
		case <-ctx.Done():
			t.Fatalf("run %d of the message never started; chat: %q", try, ad.Messages(conv))
		}
		w = model.expect("stall")
		cutLease(try)
	}
	quarantined := func([]chattest.Call) bool { return setAside(ad, conv) }
	if err := ad.WaitFor(ctx, quarantined); err != nil {
		t.Fatalf("the message two lost leases cut was not quarantined; chat: %q", ad.Messages(conv))
	}
	select {
	case <-w.started:
		t.Fatal("the quarantined message was run a third time")
	default:
	}
	// The conversation goes on.
	clusterSay(t, ad, model, 2, "after")
}

// TestClusterFailedAckIsRetried: the acknowledgement of a message whose
// run ended, or of a command the session's holder executed, fails (Redis
// does not answer it); once Redis answers again, the item leaves the
// inbox, well before the session's lease (a minute) would end. Before, it
// stayed pending until the lease ended.
func TestClusterFailedAckIsRetried(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"second", "/status"} {
		t.Run(text, func(t *testing.T) {
			probe, prefix := redistest.LocalPrefix(t, "gateway")
			h := &redistest.LostAnswers{}
			model := newStampModel(faux.Text("ok"))
			ad := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
			startRedisReplica(t, ad, model, t.TempDir(), redisReplica{prefix: prefix, id: "replica-a", poll: time.Hour, leaseTTL: time.Minute, hook: h})
			clusterSay(t, ad, model, 0, "first") // the replica holds the session
			conv := benchMessage(ad.Platform(), 1, 0, "").Conv
			inbox, err := rediscluster.OpenInbox(t.Context(), probe, rediscluster.Options{Prefix: prefix}, "observer")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			waitPending := func(what string, want int) {
				t.Helper()
				for {
					items, err := inbox.Pending(ctx, conv.Key())
					if err == nil && len(items) == want {
						return
					}
					if ctx.Err() != nil {
						t.Fatalf("%s: %d items pending (%v), want %d", what, len(items), err, want)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			waitPending("after the first message", 0)

			h.FailAcks(true)
			clusterSay(t, ad, model, 1, text)
			for h.AcksFailed() < 2 { // the ack, and a retry
				if ctx.Err() != nil {
					t.Fatalf("%d acknowledgements failed, want the ack and a retry", h.AcksFailed())
				}
				time.Sleep(10 * time.Millisecond)
			}
			waitPending("while acks fail", 1)
			h.FailAcks(false)
			waitPending("once Redis answers acks again", 0)
		})
	}
}

// sayStall sends the message "stall" in conversation 1 and returns the
// wait of its provider request.
func sayStall(ctx context.Context, t *testing.T, ad *chattest.Adapter, model *stampModel) *streamWait {
	t.Helper()
	w := model.expect("stall")
	in := benchMessage(ad.Platform(), 1, 1, "stall")
	in.User = chat.User{ID: "u1", Name: "User"}
	in.DedupKey = "say:1"
	if err := ad.Inject(ctx, in); err != nil {
		t.Fatal(err)
	}
	return w
}

// setAside reports whether the chat of conv was told a message of it was
// set aside (quarantined).
func setAside(ad *chattest.Adapter, conv chat.ConvRef) bool {
	for _, m := range ad.Messages(conv) {
		if strings.Contains(m, "set aside") {
			return true
		}
	}
	return false
}

// stallModel is a stampModel whose requests ending in the user text stall
// yield nothing after the request arrived until their context ends.
type stallModel struct {
	*stampModel
	stall string
}

func (m stallModel) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	seq := m.stampModel.Stream(ctx, req)
	if lastUserText(req.Messages) != m.stall {
		return seq
	}
	return func(yield func(llm.Event) bool) {
		for range seq {
			<-ctx.Done()
			return
		}
	}
}

// TestClusterStoppedReplicaReleasesItsMessages: a replica stopped while a
// message's run streams (a rolling restart) freezes the run and releases
// the session without counting the stop against the message: the next
// replica resumes it. Two such stops in a row do not set it aside, as two
// crashes or two lost leases would (TestClusterLeaseLostTwiceQuarantines);
// the third replica runs it. (With the owner's close leaving its items as
// cut, the third replica sets the message aside.)
func TestClusterStoppedReplicaReleasesItsMessages(t *testing.T) {
	t.Parallel()
	_, prefix := redistest.LocalPrefix(t, "gateway")
	model := newStampModel(faux.Text("ok"))
	dir := t.TempDir()
	start := func(id string) (*chattest.Adapter, *benchGateway) {
		ad := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
		// A run of "stall" streams until its context ends: only the
		// stop's drain timeout ends it.
		bg := startRedisReplica(t, ad, stallModel{model, "stall"}, dir,
			redisReplica{prefix: prefix, id: id, poll: 50 * time.Millisecond, drain: 100 * time.Millisecond})
		return ad, bg
	}
	ad, replica := start("replica-a")
	clusterSay(t, ad, model, 0, "first")
	conv := benchMessage(ad.Platform(), 1, 0, "").Conv

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	w := sayStall(ctx, t, ad, model)
	for _, next := range []string{"replica-b", "replica-c"} {
		select {
		case <-w.started:
		case <-ctx.Done():
			t.Fatalf("the message's run never started before %s; chat: %q", next, ad.Messages(conv))
		}
		w = model.expect("stall")
		if err := replica.stop(); err != nil {
			t.Fatalf("stop before %s: %v", next, err)
		}
		ad, replica = start(next)
	}
	for resumed := false; !resumed; {
		select {
		case <-w.started:
			resumed = true
		case <-ctx.Done():
			t.Fatalf("replica-c never ran the message two stops left; chat: %q", ad.Messages(conv))
		case <-time.After(20 * time.Millisecond):
		}
		if setAside(ad, conv) {
			t.Fatalf("a message two stops left was set aside; chat: %q", ad.Messages(conv))
		}
	}
}
