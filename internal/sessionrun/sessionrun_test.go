package sessionrun

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/session"
)

func vector(t *testing.T, name string) string {
	t.Helper()
	dir, _ := os.Getwd()
	for range 6 {
		p := filepath.Join(dir, "shared", "testdata", "pi", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		dir = filepath.Dir(dir)
	}
	t.Skip("shared/testdata/pi not found beside the repository")
	return ""
}

// TestBranchEntriesMatchPiCompactions converts pi's own compaction session
// and checks that compaction's view reproduces pi's context for it.
func TestBranchEntriesMatchPiCompactions(t *testing.T) {
	s, err := session.OpenFile(vector(t, "agent-compaction.jsonl"), session.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	branch, err := s.Tree().Branch(s.Tree().Leaf())
	if err != nil {
		t.Fatal(err)
	}
	view := BranchEntries(branch)
	if len(view) != len(branch) {
		t.Fatalf("view has %d entries, branch %d", len(view), len(branch))
	}
	compactions := 0
	for i, e := range view {
		if e.ID != branch[i].ID || e.Type != branch[i].Type || e.Timestamp.IsZero() {
			t.Fatalf("entry %d: %+v", i, e)
		}
		if e.Type == session.TypeCompaction {
			compactions++
			if e.Compaction == nil || e.Compaction.Summary == "" || e.Compaction.FirstKeptEntryID == "" {
				t.Fatalf("compaction %s lost its data", e.ID)
			}
		}
		if e.Type == session.TypeMessage && e.Message == nil {
			t.Fatalf("message %s lost its message", e.ID)
		}
	}
	if compactions != 3 {
		t.Fatalf("%d compactions, want 3", compactions)
	}
	ctx, err := s.Tree().Context(s.Tree().Leaf())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(compaction.ContextMessages(view)), len(ctx.Messages); got != want {
		t.Fatalf("compaction view builds %d context messages, session %d", got, want)
	}
	// The branch ends right after answers, not on a compaction: preparing works.
	if _, err := compaction.Prepare(view, compaction.Settings{Enabled: true, ReserveTokens: 16384, KeepRecentTokens: 1000}); err != nil && !errors.Is(err, compaction.ErrNothingToCompact) {
		t.Fatalf("Prepare: %v", err)
	}
}

func TestCompactionEntryShape(t *testing.T) {
	e := CompactionEntry(compaction.Result{Summary: "S", FirstKeptEntryID: "abcd1234", TokensBefore: 42, Details: compaction.FileDetails{ReadFiles: []string{"a"}, ModifiedFiles: []string{}}})
	if e.Type != session.TypeCompaction || e.Summary != "S" || e.FirstKeptEntryID != "abcd1234" || e.TokensBefore != 42 {
		t.Fatalf("entry %+v", e)
	}
	if e.FromHook == nil || *e.FromHook {
		t.Fatal("fromHook must be written as false")
	}
	if string(e.Details) != `{"readFiles":["a"],"modifiedFiles":[]}` {
		t.Fatalf("details %s", e.Details)
	}
}

func TestSummarizeRefusesACompactedBranch(t *testing.T) {
	dir := t.TempDir()
	s, err := session.CreateFile(dir, session.Header{Cwd: dir}, session.Entry{Type: session.TypeThinkingLevelChange, ThinkingLevel: "off"}, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := CompactionEntry(compaction.Result{Summary: "x", FirstKeptEntryID: s.Tree().Leaf()})
	first.ParentID = s.Tree().Leaf()
	c, err := s.Append(first, session.SyncAlways)
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := s.Append(session.Entry{Type: session.TypeCompaction, ParentID: c.ID, Summary: "y", FirstKeptEntryID: c.ID}, session.SyncAlways)
	if _, err := Summarize(t.Context(), s.Tree(), c2.ID, nil, compaction.DefaultSettings(), "", "off"); !errors.Is(err, compaction.ErrAlreadyCompacted) {
		t.Fatalf("Summarize on a compacted branch = %v", err)
	}
}
