package compaction

import (
	"context"
	"errors"

	"github.com/pibot/pibot/llm"
)

// branchMaxTokens is the output budget of a branch summary.
const branchMaxTokens = 2048

// defaultContextWindow is used when a model does not state its window.
const defaultContextWindow = 128000

// ErrBranchSummaryAborted reports that a branch summary was cancelled (pi
// then cancels the navigation).
var ErrBranchSummaryAborted = errors.New("compaction: branch summary aborted")

// CollectBranchEntries returns the entries of the abandoned branch: those
// of oldPath after the deepest entry it shares with targetPath, oldest
// first. Both paths are root first.
func CollectBranchEntries(oldPath, targetPath []BranchEntry) []BranchEntry {
	onTarget := make(map[string]bool, len(targetPath))
	for _, e := range targetPath {
		onTarget[e.ID] = true
	}
	common := -1
	for i := len(oldPath) - 1; i >= 0; i-- {
		if onTarget[oldPath[i].ID] {
			common = i
			break
		}
	}
	return append([]BranchEntry(nil), oldPath[common+1:]...)
}

// BranchOptions tune SummarizeBranch.
type BranchOptions struct {
	// ReserveTokens is subtracted from the model's context window to get
	// the budget of summarized messages; 0 means 16384.
	ReserveTokens int64
	// CustomInstructions adds a focus to the prompt, or replaces the
	// instructions when ReplaceInstructions is set.
	CustomInstructions  string
	ReplaceInstructions bool
}

// BranchMessages is pi's prepareBranchEntries: the newest messages of
// entries that fit in budget tokens (tool results left out; a summary is
// still squeezed in below 90% of the budget) and the files they touched.
func BranchMessages(entries []BranchEntry, budget int64) ([]llm.Message, FileOps) {
	files := newFileOps()
	for _, e := range entries {
		if e.Type == EntryBranchSummary && e.FileOps != nil {
			files.addDetails(*e.FileOps)
		}
	}
	var msgs []llm.Message
	var total int64
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		m := entryMessage(e, true)
		if m == nil || m.Role == llm.RoleToolResult {
			continue
		}
		files.addMessage(*m)
		t := EstimateTokens(*m)
		if budget > 0 && total+t > budget {
			if (e.Type == EntryCompaction || e.Type == EntryBranchSummary) && float64(total) < 0.9*float64(budget) {
				msgs = append([]llm.Message{*m}, msgs...)
			}
			break
		}
		msgs = append([]llm.Message{*m}, msgs...)
		total += t
	}
	return msgs, files
}

// SummarizeBranch is pi's generateBranchSummary: it summarizes the
// abandoned entries (see CollectBranchEntries) and returns the summary text
// with pi's preamble and file tags, and the file details to store in the
// branch_summary entry. A cancelled call returns ErrBranchSummaryAborted.
func SummarizeBranch(ctx context.Context, model llm.Model, entries []BranchEntry, opts BranchOptions) (string, FileDetails, error) {
	reserve := opts.ReserveTokens
	if reserve <= 0 {
		reserve = DefaultReserveTokens
	}
	window := model.Info().ContextWindow
	if window <= 0 {
		window = defaultContextWindow
	}
	msgs, files := BranchMessages(entries, window-reserve)
	if len(msgs) == 0 {
		return "No content to summarize", FileDetails{ReadFiles: []string{}, ModifiedFiles: []string{}}, nil
	}
	instructions := branchPrompt
	switch {
	case opts.ReplaceInstructions && opts.CustomInstructions != "":
		instructions = opts.CustomInstructions
	case opts.CustomInstructions != "":
		instructions += "\n\nAdditional focus: " + opts.CustomInstructions
	}
	prompt := "<conversation>\n" + SerializeConversation(llm.ConvertToLLM(msgs)) + "\n</conversation>\n\n" + instructions
	text, stop, err := complete(ctx, model, prompt, branchMaxTokens, "")
	if stop == llm.StopAborted {
		return "", FileDetails{}, ErrBranchSummaryAborted
	}
	if err != nil {
		return "", FileDetails{}, err
	}
	d := files.Lists()
	return BranchSummaryPreamble + text + fileTags(d), d, nil
}
