package gateway_test

import (
	"bytes"
	"context"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// stallOnce is a model whose first request ending in the user text stall
// yields nothing until its context ends; later ones are answered.
type stallOnce struct {
	*stampModel
	stall   string
	stalled atomic.Bool
}

func (m *stallOnce) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	seq := m.stampModel.Stream(ctx, req)
	if lastUserText(req.Messages) != m.stall || m.stalled.Swap(true) {
		return seq
	}
	return func(yield func(llm.Event) bool) {
		for range seq {
			<-ctx.Done()
			return
		}
	}
}

// TestClusterTakeoverDeliversAnAnswerFollowedByAMessage: in cluster mode a
// run answered "first" (the answer complete in the session file) and took
// "second" steered in after it, and the session's lease was lost while
// the model worked on "second" (the run stops unrecorded, as when its
// replica dies). The pump takes the session over again and finishes the
// run: the first answer, which never reached the chat whole, comes first
// in the resumed reply. (The old code resumed the run for "second" only.)
func TestClusterTakeoverDeliversAnAnswerFollowedByAMessage(t *testing.T) {
	t.Parallel()
	probe, prefix := redistest.LocalPrefix(t, "gateway")
	slow := strings.Repeat("word ", 40) + "first answer"
	model := &stallOnce{stampModel: newStampModel(faux.Turn{Reply: func(req llm.Request) faux.Turn {
		if lastUserText(req.Messages) == "second" {
			return faux.Text("second answer")
		}
		return faux.Text(slow).WithDelay(10 * time.Millisecond)
	}}), stall: "second"}
	ad := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
	dir := t.TempDir()
	startRedisReplica(t, ad, model, dir, redisReplica{prefix: prefix, id: "replica-a", poll: 50 * time.Millisecond, leaseTTL: 2 * time.Second})
	conv := benchMessage(ad.Platform(), 1, 0, "").Conv
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	say := func(n int, text string) {
		in := benchMessage(ad.Platform(), 1, n, text)
		in.User = chat.User{ID: "u1", Name: "User"}
		if err := ad.Inject(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	stalled := model.expect("second")
	say(0, "first")
	if err := ad.WaitFor(ctx, func([]chattest.Call) bool { return strings.Contains(strings.Join(ad.Messages(conv), ""), "word word") }); err != nil {
		t.Fatal("the first answer did not stream")
	}
	say(1, "second")
	select {
	case <-stalled.started:
	case <-ctx.Done():
		t.Fatal("no provider request for the steered message")
	}
	var path string
	for !sessionHolds(dir, &path, "first answer", `"second"`) {
		if ctx.Err() != nil {
			t.Fatal("the first answer and the second message never reached the session file")
		}
		time.Sleep(20 * time.Millisecond)
	}
	lock := prefix + "{lease:" + path + "}:lock"
	if n, err := probe.Del(ctx, lock).Result(); err != nil || n != 1 {
		t.Fatalf("delete the session's lease %s: %d, %v", lock, n, err)
	}
	if err := ad.WaitFor(ctx, func([]chattest.Call) bool {
		for _, m := range ad.Messages(conv) {
			if strings.Contains(m, "first answer") && strings.Contains(m, "second answer") {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("the retaken session did not deliver both answers; chat: %q", ad.Messages(conv))
	}
	n := 0
	for _, m := range ad.Messages(conv) {
		n += strings.Count(m, "first answer")
	}
	if n != 1 {
		t.Errorf("the first answer is in the chat %d times, want 1; chat: %q", n, ad.Messages(conv))
	}
	if _, _, err := rediscluster.NewIndex(probe, rediscluster.Options{Prefix: prefix}, rediscluster.IndexOptions{}).Get(ctx, conv.Key()); err != nil {
		t.Fatal(err)
	}
}

// sessionHolds reports whether the one session file under dir holds every
// one of subs, and sets *path to it.
func sessionHolds(dir string, path *string, subs ...string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "sessions", "*", "*.jsonl"))
	if len(files) != 1 {
		return false
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		return false
	}
	for _, s := range subs {
		if !bytes.Contains(b, []byte(s)) {
			return false
		}
	}
	*path = files[0]
	return true
}
