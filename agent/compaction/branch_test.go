package compaction_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/llm"
)

func TestCollectBranchEntries(t *testing.T) {
	all := synth("u10 a10 u10 a10 u10 a10")
	oldPath := all[:6]
	target := append(append([]compaction.BranchEntry{}, all[:2]...), compaction.BranchEntry{ID: "other"})
	got := compaction.CollectBranchEntries(oldPath, target)
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	if strings.Join(ids, ",") != "e2,e3,e4,e5" {
		t.Errorf("entries = %v", ids)
	}
	if got := compaction.CollectBranchEntries(oldPath, oldPath); len(got) != 0 {
		t.Errorf("same path: %d entries", len(got))
	}
}

func TestSummarizeBranch(t *testing.T) {
	entries := synth("u10 c10 r10 a10 x:e0")
	entries = append(entries, compaction.BranchEntry{ID: "bs", Type: compaction.EntryBranchSummary,
		Message: &llm.Message{Role: llm.RoleBranchSummary, Summary: "older"},
		FileOps: &compaction.FileDetails{ModifiedFiles: []string{"m.go"}}})
	model := &promptModel{answers: map[string]string{"": "## Goal\nX"}}
	summary, details, err := compaction.SummarizeBranch(t.Context(), model, entries, compaction.BranchOptions{CustomInstructions: "be brief"})
	if err != nil {
		t.Fatal(err)
	}
	want := compaction.BranchSummaryPreamble + "## Goal\nX\n\n<read-files>\nfe1\n</read-files>\n\n<modified-files>\nm.go\n</modified-files>"
	if summary != want {
		t.Errorf("summary =\n%q\nwant\n%q", summary, want)
	}
	if len(details.ReadFiles) != 1 || len(details.ModifiedFiles) != 1 {
		t.Errorf("details = %+v", details)
	}
	req := model.requests()[0]
	text := req.Messages[0].Text()
	if req.MaxTokens != 2048 || strings.Contains(text, "[Tool result]") || !strings.HasSuffix(text, "Additional focus: be brief") ||
		!strings.Contains(text, "[User]: The conversation history before this point was compacted") {
		t.Errorf("request: maxTokens %d, prompt:\n%s", req.MaxTokens, text)
	}
}

func TestSummarizeBranchOutcomes(t *testing.T) {
	entries := synth("u10 a10")
	if s, _, err := compaction.SummarizeBranch(t.Context(), agenttest.NewScript(llm.ModelInfo{}), nil, compaction.BranchOptions{}); err != nil || s != "No content to summarize" {
		t.Errorf("empty: %q %v", s, err)
	}
	failing := agenttest.NewScript(llm.ModelInfo{}, agenttest.Fail("boom"))
	if _, _, err := compaction.SummarizeBranch(t.Context(), failing, entries, compaction.BranchOptions{}); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("error: %v", err)
	}
	aborted := agenttest.NewScript(llm.ModelInfo{}, agenttest.Turn{StopReason: llm.StopAborted, ErrorMessage: "Request was aborted"})
	if _, _, err := compaction.SummarizeBranch(t.Context(), aborted, entries, compaction.BranchOptions{}); !errors.Is(err, compaction.ErrBranchSummaryAborted) {
		t.Errorf("aborted: %v", err)
	}
}

func TestBranchMessagesBudget(t *testing.T) {
	entries := synth("u100 a100 u100 a100")
	msgs, _ := compaction.BranchMessages(entries, 250)
	if len(msgs) != 2 {
		t.Errorf("kept %d messages, want the newest 2", len(msgs))
	}
}
