package compaction

import (
	"github.com/pibot/pibot/llm"
)

// Errors of Prepare, with pi's texts (shown to users as they are).
const (
	ErrAlreadyCompacted piError = "Already compacted"
	ErrNothingToCompact piError = "Nothing to compact (session too small)"
)

// piError is an error whose text is pi's user-facing message.
type piError string

func (e piError) Error() string { return string(e) }

// Preparation is pi's CompactionPreparation: what to summarize and what to
// keep.
type Preparation struct {
	// FirstKeptEntryID is the first entry kept verbatim after compaction.
	FirstKeptEntryID string
	// MessagesToSummarize are the messages before the kept part (or before
	// the start of the split turn).
	MessagesToSummarize []llm.Message
	// TurnPrefixMessages is the beginning of a turn cut in the middle
	// (IsSplitTurn), summarized separately.
	TurnPrefixMessages []llm.Message
	IsSplitTurn        bool
	// TokensBefore is the estimated context size before compaction.
	TokensBefore int64
	// PreviousSummary is the summary of the previous compaction, if any.
	PreviousSummary string
	// Files collects the files read and modified by summarized messages.
	Files    FileOps
	Settings Settings
}

// Prepare is pi's prepareCompaction for a branch (root first): it finds
// the cut point and splits the messages. It returns ErrAlreadyCompacted if
// the last entry is a compaction and ErrNothingToCompact for an empty
// branch.
func Prepare(branch []BranchEntry, s Settings) (*Preparation, error) {
	n := len(branch)
	if n == 0 {
		return nil, ErrNothingToCompact
	}
	if branch[n-1].Type == EntryCompaction {
		return nil, ErrAlreadyCompacted
	}
	prev := -1
	for i := n - 1; i >= 0; i-- {
		if branch[i].Type == EntryCompaction && branch[i].Compaction != nil {
			prev = i
			break
		}
	}
	p := &Preparation{Settings: s, Files: newFileOps()}
	start := 0
	if prev >= 0 {
		c := branch[prev].Compaction
		p.PreviousSummary = c.Summary
		start = prev + 1
		if i := indexOf(branch, c.FirstKeptEntryID); i >= 0 {
			start = i
		}
		if c.Details != nil && !c.FromHook {
			p.Files.addDetails(*c.Details)
		}
	}
	p.TokensBefore = EstimateContextTokens(ContextMessages(branch))
	cut := FindCutPoint(branch, start, n, s.KeepRecentTokens)
	if cut.FirstKept >= n || branch[cut.FirstKept].ID == "" {
		return nil, ErrNothingToCompact
	}
	p.FirstKeptEntryID = branch[cut.FirstKept].ID
	p.IsSplitTurn = cut.SplitTurn
	historyEnd := cut.FirstKept
	if cut.SplitTurn {
		historyEnd = cut.TurnStart
		p.TurnPrefixMessages = entryMessages(branch[cut.TurnStart:cut.FirstKept])
	}
	p.MessagesToSummarize = entryMessages(branch[start:historyEnd])
	for _, m := range p.MessagesToSummarize {
		p.Files.addMessage(m)
	}
	for _, m := range p.TurnPrefixMessages {
		p.Files.addMessage(m)
	}
	return p, nil
}

func indexOf(branch []BranchEntry, id string) int {
	if id == "" {
		return -1
	}
	for i, e := range branch {
		if e.ID == id {
			return i
		}
	}
	return -1
}

// entryMessages returns the messages of entries for summarization:
// message, custom_message and branch_summary entries; compactions are left
// out.
func entryMessages(entries []BranchEntry) []llm.Message {
	var out []llm.Message
	for _, e := range entries {
		if m := entryMessage(e, false); m != nil {
			out = append(out, *m)
		}
	}
	return out
}

func entryMessage(e BranchEntry, withCompaction bool) *llm.Message {
	switch e.Type {
	case EntryMessage, EntryCustomMessage, EntryBranchSummary:
		return e.Message
	case EntryCompaction:
		if withCompaction && e.Compaction != nil {
			return compactionMessage(e)
		}
	}
	return nil
}

func compactionMessage(e BranchEntry) *llm.Message {
	return &llm.Message{Role: llm.RoleCompactionSummary, Summary: e.Compaction.Summary,
		TokensBefore: e.Compaction.TokensBefore, Timestamp: e.Timestamp.UnixMilli()}
}

// CutPoint is the result of FindCutPoint.
type CutPoint struct {
	// FirstKept is the index of the first kept entry.
	FirstKept int
	// TurnStart is the index of the turn's start when SplitTurn, else -1.
	TurnStart int
	SplitTurn bool
}

// isCutPoint reports whether a kept part may start at e: never at a tool
// result, so a tool call is never separated from its result.
func isCutPoint(e BranchEntry) bool {
	switch e.Type {
	case EntryBranchSummary, EntryCustomMessage:
		return true
	case EntryMessage:
		if e.Message == nil {
			return false
		}
		switch e.Message.Role {
		case llm.RoleUser, llm.RoleAssistant, llm.RoleBashExecution, llm.RoleCustom, llm.RoleBranchSummary, llm.RoleCompactionSummary:
			return true
		}
	}
	return false
}

func isTurnStart(e BranchEntry) bool {
	switch e.Type {
	case EntryBranchSummary, EntryCustomMessage:
		return true
	case EntryMessage:
		return e.Message != nil && (e.Message.Role == llm.RoleUser || e.Message.Role == llm.RoleBashExecution)
	}
	return false
}

// FindCutPoint is pi's findCutPoint over entries[start:end]: walking back
// from the newest message, it keeps at least keepRecent estimated tokens,
// cuts at the next valid cut point, pulls preceding non-message entries
// into the kept part, and detects a turn split in the middle.
func FindCutPoint(entries []BranchEntry, start, end int, keepRecent int64) CutPoint {
	var cuts []int
	for i := start; i < end; i++ {
		if isCutPoint(entries[i]) {
			cuts = append(cuts, i)
		}
	}
	if len(cuts) == 0 {
		return CutPoint{FirstKept: start, TurnStart: -1}
	}
	cut := cuts[0]
	var acc int64
	for i := end - 1; i >= start; i-- {
		e := entries[i]
		if e.Type != EntryMessage || e.Message == nil {
			continue
		}
		acc += EstimateTokens(*e.Message)
		if acc >= keepRecent {
			for _, c := range cuts {
				if c >= i {
					cut = c
					break
				}
			}
			break
		}
	}
	for cut > start {
		prev := entries[cut-1]
		if prev.Type == EntryCompaction || prev.Type == EntryMessage {
			break
		}
		cut--
	}
	ce := entries[cut]
	if ce.Type == EntryMessage && ce.Message != nil && ce.Message.Role == llm.RoleUser {
		return CutPoint{FirstKept: cut, TurnStart: -1}
	}
	for i := cut; i >= start; i-- {
		if isTurnStart(entries[i]) {
			return CutPoint{FirstKept: cut, TurnStart: i, SplitTurn: true}
		}
	}
	return CutPoint{FirstKept: cut, TurnStart: -1}
}

// ContextMessages builds the messages pi's buildSessionContext yields for
// a branch: the last compaction's summary first, then the entries from its
// first kept entry, then everything after it.
func ContextMessages(branch []BranchEntry) []llm.Message {
	last := -1
	for i := len(branch) - 1; i >= 0; i-- {
		if branch[i].Type == EntryCompaction && branch[i].Compaction != nil {
			last = i
			break
		}
	}
	if last < 0 {
		return append([]llm.Message{}, entryMessages(branch)...)
	}
	out := []llm.Message{*compactionMessage(branch[last])}
	if k := indexOf(branch[:last], branch[last].Compaction.FirstKeptEntryID); k >= 0 {
		out = append(out, entryMessages(branch[k:last])...)
	}
	return append(out, entryMessages(branch[last+1:])...)
}
