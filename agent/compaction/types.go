package compaction

import (
	"time"

	"github.com/pibot/pibot/llm"
)

// Entry types of a session branch, as pi names them. Entries of any other
// type (model_change, label, custom, ...) take part in the cut-point rules
// as non-message entries.
const (
	EntryMessage       = "message"
	EntryCustomMessage = "custom_message"
	EntryBranchSummary = "branch_summary"
	EntryCompaction    = "compaction"
)

// Defaults of pi's compaction settings.
const (
	DefaultReserveTokens    int64 = 16384
	DefaultKeepRecentTokens int64 = 20000
)

// BranchEntry is the view of one session entry that compaction needs. The
// caller converts its session entries into this shape, root first.
type BranchEntry struct {
	// ID is the entry id; Type its entry type (EntryMessage, ...).
	ID   string
	Type string
	// Message is the message of a message entry; for custom_message and
	// branch_summary entries it is the converted custom / branchSummary
	// message (nil for a branch summary with an empty summary).
	Message *llm.Message
	// Timestamp is the entry's timestamp.
	Timestamp time.Time
	// Compaction holds the fields of a compaction entry.
	Compaction *CompactionData
	// FileOps holds the details of a branch_summary entry written by pi
	// (nil when the entry has none or was supplied by an extension).
	FileOps *FileDetails
}

// CompactionData is the content of a compaction entry.
type CompactionData struct {
	Summary          string
	FirstKeptEntryID string
	TokensBefore     int64
	// Details is nil when the entry has no pi-style details.
	Details  *FileDetails
	FromHook bool
}

// FileDetails lists the files read and modified by the summarized part of
// a conversation, stored in an entry's details.
type FileDetails struct {
	ReadFiles     []string `json:"readFiles"`
	ModifiedFiles []string `json:"modifiedFiles"`
}

// Settings are pi's compaction settings.
type Settings struct {
	Enabled          bool
	ReserveTokens    int64
	KeepRecentTokens int64
}

// DefaultSettings returns pi's defaults: enabled, 16384 reserve tokens,
// 20000 recent tokens kept.
func DefaultSettings() Settings {
	return Settings{Enabled: true, ReserveTokens: DefaultReserveTokens, KeepRecentTokens: DefaultKeepRecentTokens}
}

// Result is a finished compaction, in the shape of pi's CompactionResult
// (RPC `compact` response and compaction_end event).
type Result struct {
	Summary          string      `json:"summary"`
	FirstKeptEntryID string      `json:"firstKeptEntryId"`
	TokensBefore     int64       `json:"tokensBefore"`
	Details          FileDetails `json:"details"`
}
