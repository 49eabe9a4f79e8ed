package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
	"github.com/pibot/pibot/providers/faux"
)

// TestClusterPollPeeksAtHeldSessions: the poll of a replica with runs in
// progress (their items pending and in hand) asks Redis about all of them
// in one round trip and takes none. Before issue #34 every fifth poll took
// each one (a round trip per run in progress, in a burst every second,
// nothing to hand): with four runs, four take scripts per look instead of
// one peek.
func TestClusterPollPeeksAtHeldSessions(t *testing.T) {
	t.Parallel()
	_, prefix := redistest.LocalPrefix(t, "gateway")
	rts := &redistest.RoundTrips{}
	// Every run streams its one token after a minute: in progress
	// throughout, until the replica stops (drain).
	model := newStampModel(faux.Text("ok").WithDelay(time.Minute))
	ad := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
	const poll = 20 * time.Millisecond
	startRedisReplica(t, ad, model, t.TempDir(), redisReplica{prefix: prefix, id: "peek-replica", hook: rts,
		leaseTTL: time.Minute, poll: poll, drain: 100 * time.Millisecond})
	const runs = 4
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for c := range runs {
		text := fmt.Sprintf("run %d", c)
		w := model.expect(text)
		in := benchMessage(ad.Platform(), c, 0, text)
		in.User, in.DedupKey = chat.User{ID: "u1", Name: "User"}, "peek:"+text
		if err := ad.Inject(ctx, in); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.started:
		case <-ctx.Done():
			t.Fatalf("no provider request for %q", text)
		}
	}
	// Twenty polls: four looks at the held keys, two of them claims.
	polls := func(calls []string) int {
		n := 0
		for _, c := range calls {
			if strings.HasPrefix(c, "pipeline[get, zrange") {
				n++
			}
		}
		return n
	}
	n0 := rts.Count()
	for polls(rts.Since(n0)) < 20 {
		if ctx.Err() != nil {
			t.Fatalf("the replica did not poll 20 times: %q", rts.Since(n0))
		}
		time.Sleep(poll)
	}
	calls := rts.Since(n0)
	inbox := 0 // the scripts on a conversation's stream: takes, and peeks
	for _, c := range calls {
		if strings.HasPrefix(c, "evalsha ") && strings.Contains(c, "{inbox}:s:") {
			inbox++
		}
	}
	t.Logf("%d polls, %d round trips: %s", polls(calls), len(calls), strings.Join(calls, "; "))
	if looks := polls(calls)/5 + 1; inbox > looks {
		t.Errorf("%d scripts on the streams of %d runs in progress in %d polls, want at most %d (one peek per look at the held sessions)",
			inbox, runs, polls(calls), looks)
	}
}

// TestClusterPollClaimsWhatAnotherReplicaTook: an item of a session this
// replica holds, taken by another replica (one that lost the session's
// lease as it took it, say), is claimed by the holder's poll: its peek
// names the key (another consumer holds an item) although nothing new is
// in the stream and no notice came.
func TestClusterPollClaimsWhatAnotherReplicaTook(t *testing.T) {
	t.Parallel()
	probe, prefix := redistest.LocalPrefix(t, "gateway")
	model := newStampModel(faux.Text("ok"))
	ad := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
	startRedisReplica(t, ad, model, t.TempDir(), redisReplica{prefix: prefix, id: "replica-a",
		leaseTTL: time.Minute, poll: 20 * time.Millisecond})
	clusterSay(t, ad, model, 0, "first") // A holds the session

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := rediscluster.Options{Prefix: prefix, Keys: testKeys(t)}
	ib, err := rediscluster.OpenInbox(ctx, probe, opts, "replica-b")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ib.Close() })
	adm := rediscluster.NewAdmission(rediscluster.NewDedupe(probe, opts, time.Hour), rediscluster.NewBudget(probe, opts, 0, 0), ib, nil)
	in := benchMessage(ad.Platform(), 1, 1, "taken by B")
	in.User = chat.User{ID: "u1", Name: "User"}
	data, err := json.Marshal(struct {
		In chat.Inbound `json:"in"`
	}{in})
	if err != nil {
		t.Fatal(err)
	}
	w := model.expect(in.Text)
	res, err := adm.Admit(ctx, cluster.Admission{Key: in.Conv.Key(), Data: data, Take: true})
	if err != nil || len(res.Taken) != 1 {
		t.Fatalf("B's admission = %+v, %v; want the item taken by B", res, err)
	}
	select {
	case <-w.started:
	case <-ctx.Done():
		t.Fatal("the holder never claimed the item B took")
	}
}
