package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// unbornPath is a session file name under dataDir's platform directory,
// as a new session gets it, for a file that was never created.
func unbornPath(dataDir, platform string) string {
	now := time.Now().Add(-time.Minute)
	return filepath.Join(session.Dir(dataDir, platform), session.FileName(session.Timestamp(now), session.NewSessionID(now)))
}

// requireSessionAt waits (up to 10 s: the group commit writes later) for
// the session file at path to hold text in a user message: the
// conversation went on in the file its binding names.
func requireSessionAt(t *testing.T, path, text string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		found, err := fileHoldsUserText(path, text)
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session file %s does not hold %q (%v)", path, text, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fileHoldsUserText reports whether the session file at path has a user
// message with text on its current branch.
func fileHoldsUserText(path, text string) (bool, error) {
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		return false, err
	}
	defer s.Close()
	branch, err := s.Tree().Branch(s.Tree().Leaf())
	if err != nil {
		return false, err
	}
	for _, e := range branch {
		if e.Message != nil && e.Message.Role == "user" && strings.Contains(e.Message.Text(), text) {
			return true, nil
		}
	}
	return false, nil
}

// TestUnbornSessionFileIsCreatedWhereBound replays a crash between a new
// conversation's binding in the index and its session file's creation
// (crashpoint session.bound; the file is created by the session's first
// flush): the index names a file that does not exist. The next message
// of the conversation is answered, in a file created at the bound path.
// In cluster mode the replica taking the session over failed to open the
// file on every try and never answered: the message was lost.
func TestUnbornSessionFileIsCreatedWhereBound(t *testing.T) {
	t.Run("embedded", func(t *testing.T) {
		ix, err := cluster.OpenIndex(filepath.Join(t.TempDir(), "index.jsonl"), cluster.IndexOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, []faux.Turn{faux.Text("answered")}, withIndex(ix))
		path := unbornPath(h.dir, string(dmConv.Platform))
		if err := ix.Bind(t.Context(), dmConv.Key(), path); err != nil {
			t.Fatal(err)
		}
		h.send("hello after the crash")
		h.waitText(dmConv, "answered")
		requireSessionAt(t, path, "hello after the crash")
		if got := h.sessions(); len(got) != 1 {
			t.Fatalf("session files %q, want only the bound one", got)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		probe, prefix := redistest.LocalPrefix(t, "gateway")
		dir := t.TempDir()
		model := newStampModel(faux.Text("ok"))
		ad := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
		conv := benchMessage(ad.Platform(), 1, 0, "").Conv
		path := unbornPath(dir, string(conv.Platform))
		ix := rediscluster.NewIndex(probe, rediscluster.Options{Prefix: prefix, Keys: testKeys(t)}, rediscluster.IndexOptions{})
		if err := ix.Bind(t.Context(), conv.Key(), path); err != nil {
			t.Fatal(err)
		}
		startRedisReplica(t, ad, model, dir, redisReplica{prefix: prefix, id: "taker", poll: 50 * time.Millisecond, leaseTTL: time.Minute})
		clusterSay(t, ad, model, 0, "first")
		requireSessionAt(t, path, "first")
		if got, _, err := ix.Get(t.Context(), conv.Key()); err != nil || got != path {
			t.Fatalf("index: %q, %v; want the bound path %q", got, err, path)
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatal(err)
		}
	})
}
