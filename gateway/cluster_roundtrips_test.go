package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
	"github.com/pibot/pibot/providers/faux"
)

// maxMessageRoundTrips bounds the Redis round trips of a message on its
// way to the model in cluster mode, when the replica that receives it
// holds its session (issue #14: each round trip adds to the overhead).
const maxMessageRoundTrips = 7

// TestClusterMessageRoundTrips counts the Redis round trips of a message
// to a session the receiving replica holds, from the adapter's hand-over
// to the provider request, and then to its acknowledgement. The first
// message creates the session; the second is counted. Renewals and polls
// are kept out of the window (a long lease TTL and poll).
func TestClusterMessageRoundTrips(t *testing.T) {
	if redistest.RealAddr(t) != "127.0.0.1:6379" {
		t.Skip("needs the redis-server at 127.0.0.1:6379")
	}
	probe, prefix, _ := redistest.OpenReal("127.0.0.1:6379")(t, "rt")
	if err := probe.Ping(t.Context()).Err(); err != nil {
		t.Skipf("no redis-server: %v", err)
	}
	rts := &redistest.RoundTrips{}
	model := newStampModel(faux.Text("ok"))
	ad := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
	startRedisReplica(t, ad, model, t.TempDir(), redisReplica{prefix: prefix, id: "rt-replica", hook: rts,
		leaseTTL: time.Minute, poll: time.Hour})

	say := func(n int, text string) (toModel, toAck []string) {
		t.Helper()
		w := model.expect(text)
		in := benchMessage(ad.Platform(), 1, n, text)
		in.User = chat.User{ID: "u1", Name: "User"}
		in.DedupKey = "rt:" + text
		n0 := rts.Count()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := ad.Inject(ctx, in); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.started:
		case <-ctx.Done():
			t.Fatalf("no provider request for %q", text)
		}
		toModel = rts.Since(n0)
		<-w.ended
		// Asked on a client of the test's own, not counted.
		for probe.Exists(ctx, prefix+"{inbox}:s:"+in.Conv.Key()).Val() > 0 {
			if ctx.Err() != nil {
				t.Fatalf("%q is still in the inbox", text)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return toModel, rts.Since(n0)
	}
	say(0, "first")
	toModel, toAck := say(1, "second")
	t.Logf("to the model: %d round trips: %s", len(toModel), strings.Join(toModel, "; "))
	t.Logf("to its acknowledgement: %d round trips: %s", len(toAck), strings.Join(toAck, "; "))
	if len(toModel) > maxMessageRoundTrips {
		t.Errorf("a message to a held session made %d Redis round trips before its provider request, want at most %d",
			len(toModel), maxMessageRoundTrips)
	}
}
