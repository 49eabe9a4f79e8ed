package gateway_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/providers/faux"
)

// TestMissingIndexIsRebuiltFromSessions: the location index is a cache of
// the session files. Without index.jsonl the next start rebuilds it from
// their heads, so each conversation continues in its own session.
func TestMissingIndexIsRebuiltFromSessions(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("dm answer"), faux.Text("group answer"), faux.Text("dm again")})
	h.send("remember the dm")
	h.waitText(dmConv, "dm answer")
	h.send("remember the group", inConv(groupConv), from("owner"), mentioned())
	h.waitText(groupConv, "group answer")
	h.waitFor("an empty inbox", func() bool { return h.inbox.Len() == 0 })
	h.stop()
	if err := os.Remove(filepath.Join(h.dir, "index.jsonl")); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.send("and now?")
	h.waitText(dmConv, "dm again")
	if n := len(h.sessions()); n != 2 {
		t.Fatalf("%d session files, want 2 (one per conversation)", n)
	}
	if texts := h.lastRequestTexts(); !slices.Contains(texts, "remember the dm") || slices.Contains(texts, "remember the group") {
		t.Fatalf("the dm continued with the wrong context: %q", texts)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "index.jsonl")); err != nil {
		t.Fatalf("the rebuilt index was not written: %v", err)
	}
}

// flakyIndex is a location index whose store is unreachable while down is
// set (a network index in an outage).
type flakyIndex struct {
	*cluster.LocalIndex
	down atomic.Bool
}

var errIndexDown = errors.New("index store unreachable")

func (f *flakyIndex) Get(ctx context.Context, loc string) (string, bool, error) {
	if f.down.Load() {
		return "", false, errIndexDown
	}
	return f.LocalIndex.Get(ctx, loc)
}

// TestIndexOutageLosesNoMessage: while the index cannot be read, a
// message is not taken into a new session (its conversation may already
// have one); the sender is told, and the message stays in the inbox until
// a start with a working index answers it in its conversation's session.
func TestIndexOutageLosesNoMessage(t *testing.T) {
	dir := t.TempDir()
	cix, err := cluster.OpenIndex(filepath.Join(dir, "index.jsonl"), cluster.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cix.Close() })
	ix := &flakyIndex{LocalIndex: cix}
	h := newHarness(t, []faux.Turn{faux.Text("first answer"), faux.Text("second answer")}, withDir(dir), withIndex(ix))
	h.send("first")
	h.waitText(dmConv, "first answer")
	h.waitFor("an empty inbox", func() bool { return h.inbox.Len() == 0 })
	ix.down.Store(true)
	h.send("second")
	h.waitFor("the sender told", func() bool { return h.countIn("could not open this conversation") == 1 })
	if n := h.inbox.Len(); n != 1 {
		t.Fatalf("%d messages in the inbox during the outage, want 1", n)
	}
	ix.down.Store(false)
	h.restart()
	h.waitText(dmConv, "second answer")
	if n := len(h.sessions()); n != 1 {
		t.Fatalf("%d session files, want 1", n)
	}
	if texts := h.lastRequestTexts(); !slices.Contains(texts, "first") || !strings.Contains(strings.Join(texts, "|"), "second") {
		t.Fatalf("the second message was not answered in the conversation's session: %q", texts)
	}
}
