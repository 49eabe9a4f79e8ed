package compaction_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/llm"
)

// synth builds a branch from a compact spec: "u40" is a user message of 40
// tokens (160 chars), "a40" an assistant text, "c40" an assistant tool call
// (read), "r40" a tool result, "m" a model_change, "cm40" a custom_message,
// "bs40" a branch_summary, "x:ID" a compaction keeping entry ID.
func synth(spec string) []compaction.BranchEntry {
	var out []compaction.BranchEntry
	for i, tok := range strings.Fields(spec) {
		id := fmt.Sprintf("e%d", i)
		e := compaction.BranchEntry{ID: id, Type: compaction.EntryMessage}
		var kind string
		var n int
		if strings.HasPrefix(tok, "x:") {
			e.Type = compaction.EntryCompaction
			e.Compaction = &compaction.CompactionData{Summary: "prev", FirstKeptEntryID: tok[2:]}
			out = append(out, e)
			continue
		}
		for j, r := range tok {
			if r >= '0' && r <= '9' {
				kind = tok[:j]
				fmt.Sscan(tok[j:], &n)
				break
			}
			kind = tok
		}
		text := strings.Repeat("x", n*4)
		switch kind {
		case "u":
			e.Message = &llm.Message{Role: llm.RoleUser, Content: []llm.Content{llm.TextBlock(text)}}
		case "a":
			e.Message = &llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock(text)}, StopReason: llm.StopStop}
		case "c":
			args, _ := json.Marshal(map[string]string{"path": "f" + id})
			e.Message = &llm.Message{Role: llm.RoleAssistant, StopReason: llm.StopToolUse, Content: []llm.Content{
				llm.TextBlock(text), {Type: llm.ContentToolCall, ID: "t" + id, Name: "read", Arguments: args}}}
		case "r":
			e.Message = &llm.Message{Role: llm.RoleToolResult, ToolCallID: "t", Content: []llm.Content{llm.TextBlock(text)}}
		case "m":
			e.Type = "model_change"
		case "cm":
			e.Type = compaction.EntryCustomMessage
			e.Message = &llm.Message{Role: llm.RoleCustom, Content: []llm.Content{llm.TextBlock(text)}}
		case "bs":
			e.Type = compaction.EntryBranchSummary
			e.Message = &llm.Message{Role: llm.RoleBranchSummary, Summary: text}
		}
		out = append(out, e)
	}
	return out
}

func TestFindCutPoint(t *testing.T) {
	tests := []struct {
		name      string
		spec      string
		keep      int64
		wantKept  string
		wantSplit bool
		wantTurn  string
	}{
		{"cut at user message", "u100 a100 u100 a100", 200, "e2", false, ""},
		{"never at a tool result: next valid point", "u100 c100 r100 a10", 105, "e3", true, "e0"},
		{"tool result then assistant split turn", "u100 c10 r100 c10 r10 a100", 150, "e3", true, "e0"},
		{"under budget: first valid cut point", "m u10 a10", 1000, "e0", false, ""},
		// pi quirk: a cut on a non-message entry is a split of the previous turn.
		{"non-message entries pulled into kept part", "u100 a100 m m u100 a100", 200, "e2", true, "e0"},
		{"pulling stops at a message", "u100 a100 m u100 a100", 200, "e2", true, "e0"},
		{"custom_message pulled in and starts the turn", "u100 a100 cm10 a100", 100, "e2", true, "e2"},
		{"branch summaries are not counted", "u100 a100 bs50 u100", 150, "e1", true, "e0"},
		{"branch summary pulled in", "u100 a100 bs50 u100", 100, "e2", true, "e2"},
		{"compaction stops the pull", "u100 x:e0 m u100", 100, "e2", true, "e0"},
		{"boundary after previous compaction", "u100 a100 u100 x:e2 a100 u100 a100", 150, "e5", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			branch := synth(tt.spec)
			start := 0
			for i, e := range branch {
				if e.Type == compaction.EntryCompaction {
					for j, k := range branch {
						if k.ID == e.Compaction.FirstKeptEntryID {
							start = j
						}
					}
					_ = i
				}
			}
			cut := compaction.FindCutPoint(branch, start, len(branch), tt.keep)
			if got := branch[cut.FirstKept].ID; got != tt.wantKept {
				t.Errorf("first kept = %s, want %s", got, tt.wantKept)
			}
			if cut.SplitTurn != tt.wantSplit {
				t.Errorf("split = %v, want %v", cut.SplitTurn, tt.wantSplit)
			}
			if tt.wantSplit && branch[cut.TurnStart].ID != tt.wantTurn {
				t.Errorf("turn start = %s, want %s", branch[cut.TurnStart].ID, tt.wantTurn)
			}
			if k := branch[cut.FirstKept]; k.Message != nil && k.Message.Role == llm.RoleToolResult {
				t.Errorf("cut at a tool result")
			}
		})
	}
}

func TestPrepareSplitsMessages(t *testing.T) {
	branch := synth("u100 c10 r100 a10 u100 c10 r100 c10 r10 a100")
	p, err := compaction.Prepare(branch, compaction.Settings{Enabled: true, ReserveTokens: 1000, KeepRecentTokens: 150})
	if err != nil {
		t.Fatal(err)
	}
	if p.FirstKeptEntryID != "e7" || !p.IsSplitTurn {
		t.Fatalf("prep = %+v", p)
	}
	if len(p.MessagesToSummarize) != 4 || len(p.TurnPrefixMessages) != 3 {
		t.Errorf("summarize %d, prefix %d; want 4 and 3", len(p.MessagesToSummarize), len(p.TurnPrefixMessages))
	}
	d := p.Files.Lists()
	if strings.Join(d.ReadFiles, ",") != "fe1,fe5" {
		t.Errorf("read files = %v", d.ReadFiles)
	}
}

func TestPrepareErrors(t *testing.T) {
	if _, err := compaction.Prepare(nil, compaction.DefaultSettings()); err != compaction.ErrNothingToCompact {
		t.Errorf("empty: %v", err)
	}
	if _, err := compaction.Prepare(synth("u10 a10 x:e0"), compaction.DefaultSettings()); err != compaction.ErrAlreadyCompacted {
		t.Errorf("compacted: %v", err)
	}
}

func TestEstimateTokens(t *testing.T) {
	exit := 0
	tests := []struct {
		m    llm.Message
		want int64
	}{
		{llm.UserText("abcde", 0), 2},
		{llm.Message{Role: llm.RoleUser, Content: []llm.Content{llm.TextBlock("ab"), llm.ImageBlock("zzzz", "image/png")}}, 1},
		{llm.Message{Role: llm.RoleToolResult, Content: []llm.Content{llm.ImageBlock("zz", "image/png")}}, 4800},
		{llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{{Type: llm.ContentToolCall, Name: "read", Arguments: json.RawMessage(`{"path": "a"}`)}}}, 4},
		{llm.Message{Role: llm.RoleBashExecution, Command: "ls", Output: "abcdef", ExitCode: &exit}, 2},
		{llm.Message{Role: llm.RoleCompactionSummary, Summary: "😀"}, 1},
	}
	for i, tt := range tests {
		if got := compaction.EstimateTokens(tt.m); got != tt.want {
			t.Errorf("%d: EstimateTokens = %d, want %d", i, got, tt.want)
		}
	}
}

func TestShouldCompact(t *testing.T) {
	s := compaction.DefaultSettings()
	tests := []struct {
		tokens, window int64
		enabled, want  bool
	}{
		{100000, 128000, true, false},
		{111617, 128000, true, true},
		{111616, 128000, true, false},
		{200000, 128000, false, false},
	}
	for _, tt := range tests {
		s.Enabled = tt.enabled
		if got := compaction.ShouldCompact(tt.tokens, tt.window, s); got != tt.want {
			t.Errorf("ShouldCompact(%d, %d, enabled=%v) = %v", tt.tokens, tt.window, tt.enabled, got)
		}
	}
}

func TestSerializeConversation(t *testing.T) {
	long := strings.Repeat("y", 2005)
	msgs := []llm.Message{
		llm.UserText("hi", 0),
		{Role: llm.RoleAssistant, Content: []llm.Content{{Type: llm.ContentThinking, Thinking: "hmm"}, llm.TextBlock("ok"),
			{Type: llm.ContentToolCall, Name: "read", Arguments: json.RawMessage(`{"path":"a.go","limit":5}`)},
			{Type: llm.ContentToolCall, Name: "ls", Arguments: json.RawMessage(`{}`)}}},
		{Role: llm.RoleToolResult, Content: []llm.Content{llm.TextBlock(long)}},
	}
	want := "[User]: hi\n\n[Assistant thinking]: hmm\n\n[Assistant]: ok\n\n[Assistant tool calls]: read(path=\"a.go\", limit=5); ls()\n\n[Tool result]: " +
		strings.Repeat("y", 2000) + "\n\n[... 5 more characters truncated]"
	if got := compaction.SerializeConversation(msgs); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}
