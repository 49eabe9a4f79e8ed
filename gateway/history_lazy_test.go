package gateway_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/providers/faux"
)

// TestHistoryReadsOnlyWhatItShows: the transcript of a long conversation
// (4,000 entries, a compaction every 500) whose session is loaded reads
// the entries it shows, the context since the last compaction, not the
// whole branch and then every entry of the file for the places of its
// messages (issue #34); so does the list of conversations.
func TestHistoryReadsOnlyWhatItShows(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sessions", "long.jsonl")
	writeLongSession(t, path, 4000, 500, dmConv.Key())
	files := &readCounting{closed: make(chan struct{}, 16)}
	ha := &historyAdapter{}
	h := newHarness(t, []faux.Turn{faux.Text("noted")}, withDir(dir), withSessionFiles(files),
		withAdapter(func(a *chattest.Adapter) chat.Adapter { ha.Adapter = a; return ha }))
	h.send("one more")
	h.waitText(dmConv, "noted")
	h.waitFor("an empty inbox", func() bool { return h.inbox.Len() == 0 })
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	files.read.Store(0)
	lines, tr := transcriptLines(t, ha.history(), dmConv)
	if got := files.read.Load(); got > fi.Size()/4 {
		t.Fatalf("the transcript read %d bytes of the %d-byte file", got, fi.Size())
	}
	if len(lines) < 3 || !strings.Contains(lines[0], "Earlier messages were compacted") ||
		lines[len(lines)-2] != "|user:one more" || lines[len(lines)-1] != "|bot:noted" {
		t.Fatalf("transcript: %d lines, first %.80q, last %q", len(lines), lines[0], lines[max(0, len(lines)-2):])
	}

	files.read.Store(0)
	list, err := ha.history().Conversations(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := files.read.Load(); got > fi.Size()/4 {
		t.Fatalf("the list read %d bytes of the %d-byte file", got, fi.Size())
	}
	if len(list) != 1 || list[0].Messages != len(tr.Messages) {
		t.Fatalf("listed %+v, want the conversation with its %d messages", list, len(tr.Messages))
	}
}
