package compaction_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/llm"
)

const vectorDir = "../../../shared/testdata/pi"

// rawEntry is the subset of a pi session entry these tests read.
type rawEntry struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	ParentID         *string         `json:"parentId"`
	Timestamp        string          `json:"timestamp"`
	Message          *llm.Message    `json:"message"`
	Summary          string          `json:"summary"`
	FirstKeptEntryID string          `json:"firstKeptEntryId"`
	TokensBefore     int64           `json:"tokensBefore"`
	Details          json.RawMessage `json:"details"`
	FromHook         bool            `json:"fromHook"`
	FromID           string          `json:"fromId"`
	CustomType       string          `json:"customType"`
	Content          json.RawMessage `json:"content"`
	Display          bool            `json:"display"`
}

// loadVector reads a session file into entries in file order.
func loadVector(t *testing.T, name string) []rawEntry {
	t.Helper()
	f, err := os.Open(filepath.Join(vectorDir, name))
	if err != nil {
		t.Skipf("test vector not available: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	var out []rawEntry
	for sc.Scan() {
		var e rawEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Type == "session" || e.ID == "" {
			continue
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// branchTo returns the path from the root to the entry with id leaf.
func branchTo(entries []rawEntry, leaf string) []compaction.BranchEntry {
	byID := map[string]rawEntry{}
	for _, e := range entries {
		byID[e.ID] = e
	}
	var path []compaction.BranchEntry
	for id := leaf; id != ""; {
		e, ok := byID[id]
		if !ok {
			break
		}
		path = append(path, toBranchEntry(e))
		if e.ParentID == nil {
			break
		}
		id = *e.ParentID
	}
	slices.Reverse(path)
	return path
}

func toBranchEntry(e rawEntry) compaction.BranchEntry {
	ts, _ := time.Parse(time.RFC3339Nano, e.Timestamp)
	b := compaction.BranchEntry{ID: e.ID, Type: e.Type, Timestamp: ts}
	switch e.Type {
	case compaction.EntryMessage:
		b.Message = e.Message
	case compaction.EntryCompaction:
		b.Compaction = &compaction.CompactionData{Summary: e.Summary, FirstKeptEntryID: e.FirstKeptEntryID,
			TokensBefore: e.TokensBefore, Details: fileDetails(e.Details), FromHook: e.FromHook}
	case compaction.EntryBranchSummary:
		if e.Summary != "" {
			b.Message = &llm.Message{Role: llm.RoleBranchSummary, Summary: e.Summary, FromID: e.FromID, Timestamp: ts.UnixMilli()}
		}
		if !e.FromHook {
			b.FileOps = fileDetails(e.Details)
		}
	case compaction.EntryCustomMessage:
		m := llm.Message{Role: llm.RoleCustom, CustomType: e.CustomType, Display: e.Display, Timestamp: ts.UnixMilli()}
		if len(e.Content) > 0 && e.Content[0] == '"' {
			var s string
			_ = json.Unmarshal(e.Content, &s)
			m.Content, m.StringContent = []llm.Content{llm.TextBlock(s)}, true
		} else {
			_ = json.Unmarshal(e.Content, &m.Content)
		}
		if e.Details != nil {
			m.Details = e.Details
		}
		b.Message = &m
	}
	return b
}

func fileDetails(raw json.RawMessage) *compaction.FileDetails {
	var d compaction.FileDetails
	if len(raw) == 0 || json.Unmarshal(raw, &d) != nil || (d.ReadFiles == nil && d.ModifiedFiles == nil) {
		return nil
	}
	return &d
}
