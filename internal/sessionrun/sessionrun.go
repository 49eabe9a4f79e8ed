// Package sessionrun is where the agent and the session store meet, so
// that the gateway and `pibot chat` run a conversation the same way: the
// Runner records every finished message at a Head (pi's message_end →
// entry rules and the durability each entry needs, with the caller's tag
// of a queued chat message handed back), Resolve and Settle pick and record
// the model and thinking level, and Compact, Maintenance, BranchEntries
// and CompactionEntry glue the compaction package to session entries.
// session and agent stay unaware of each other.
package sessionrun

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// BranchEntries converts a root→leaf branch for compaction.
func BranchEntries(branch []session.Entry) []compaction.BranchEntry {
	out := make([]compaction.BranchEntry, 0, len(branch))
	for _, e := range branch {
		be := compaction.BranchEntry{ID: e.ID, Type: e.Type}
		if ts, err := time.Parse(time.RFC3339Nano, e.Timestamp); err == nil {
			be.Timestamp = ts
		}
		switch e.Type {
		case session.TypeMessage:
			be.Message = e.Message
		case session.TypeCustomMessage:
			m := llm.Message{Role: llm.RoleCustom, CustomType: e.CustomType, Display: e.Display, Details: e.Details, Timestamp: be.Timestamp.UnixMilli()}
			var s string
			if json.Unmarshal(e.Content, &s) == nil {
				m.Content, m.StringContent = []llm.Content{llm.TextBlock(s)}, true
			} else {
				_ = json.Unmarshal(e.Content, &m.Content)
			}
			be.Message = &m
		case session.TypeBranchSummary:
			if e.Summary != "" {
				be.Message = &llm.Message{Role: llm.RoleBranchSummary, Summary: e.Summary, FromID: e.FromID, Timestamp: be.Timestamp.UnixMilli()}
			}
			if (e.FromHook == nil || !*e.FromHook) && e.Details != nil {
				var d compaction.FileDetails
				if json.Unmarshal(e.Details, &d) == nil {
					be.FileOps = &d
				}
			}
		case session.TypeCompaction:
			cd := &compaction.CompactionData{Summary: e.Summary, FirstKeptEntryID: e.FirstKeptEntryID, TokensBefore: e.TokensBefore, FromHook: e.FromHook != nil && *e.FromHook}
			if e.Details != nil {
				var d compaction.FileDetails
				if json.Unmarshal(e.Details, &d) == nil {
					cd.Details = &d
				}
			}
			be.Compaction = cd
		}
		out = append(out, be)
	}
	return out
}

// CompactionEntry is the session entry that records r (pi's shape:
// details {readFiles, modifiedFiles} and fromHook false).
func CompactionEntry(r compaction.Result) session.Entry {
	details, _ := json.Marshal(r.Details)
	f := false
	return session.Entry{Type: session.TypeCompaction, Summary: r.Summary, FirstKeptEntryID: r.FirstKeptEntryID, TokensBefore: r.TokensBefore, Details: details, FromHook: &f}
}

// Summarize prepares and runs a compaction of the branch ending at leaf.
// The caller appends CompactionEntry(result) under leaf.
func Summarize(ctx context.Context, s *session.Tree, leaf string, model llm.Model, settings compaction.Settings, instructions string, thinking llm.ThinkingLevel) (compaction.Result, error) {
	branch, err := s.Branch(leaf)
	if err != nil {
		return compaction.Result{}, fmt.Errorf("compact: %w", err)
	}
	// Prepare refuses an empty or already compacted branch
	// (compaction.ErrNothingToCompact, compaction.ErrAlreadyCompacted).
	prep, err := compaction.Prepare(BranchEntries(branch), settings)
	if err != nil {
		return compaction.Result{}, fmt.Errorf("compact: %w", err)
	}
	if len(prep.MessagesToSummarize) == 0 && len(prep.TurnPrefixMessages) == 0 {
		// Everything is within what compaction keeps: the model would
		// summarise nothing.
		return compaction.Result{}, fmt.Errorf("compact: %w", compaction.ErrNothingToCompact)
	}
	res, err := compaction.Compact(ctx, model, prep, instructions, thinking)
	if err != nil {
		return compaction.Result{}, fmt.Errorf("compact: %w", err)
	}
	return res, nil
}
