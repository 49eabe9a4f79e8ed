package sessiontest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

var words = strings.Fields(`the session tree branch message assistant user tool result bash read edit write
file line error retry compaction summary model thinking token cache context queue steer follow up lease fence
redis slack discord telegram thread reply fork label head location append sync durable crash repair torn tail
json parse entry parent child root leaf path go func return struct interface error nil value`)

func text(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()
}

// Generate writes a realistic pi v3 session with n entries to w: turns of
// user message, assistant with thinking and tool calls, tool results and a
// final answer (about 1.6 KB per entry on average), occasional model and
// thinking changes, labels, compactions, and a branch every few dozen
// entries. The output is deterministic for a seed.
func Generate(w io.Writer, n int, seed uint64) error {
	return GenerateWith(w, n, seed, GenOptions{})
}

// GenOptions vary what Generate writes.
type GenOptions struct {
	// CompactEvery is how often a compaction is written: 0 at random
	// (about one in 6,000 entries, as Generate does), n > 0 one every n
	// entries, n < 0 none.
	CompactEvery int
}

// GenerateWith is Generate varied by o. With o's zero value it writes
// what Generate writes; the same seed draws the same text either way.
func GenerateWith(w io.Writer, n int, seed uint64, o GenOptions) error {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	bw := bufio.NewWriterSize(w, 1<<20)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := session.Header{Type: session.TypeSession, Version: session.CurrentVersion, ID: fmt.Sprintf("0190a000-0000-7000-8000-%012x", seed), Timestamp: session.Timestamp(t0), Cwd: "/home/u/proj"}
	if err := writeLine(bw, h); err != nil {
		return err
	}
	var ids []string
	leaf := ""
	count := 0
	add := func(e session.Entry) error {
		count++
		e.ID = fmt.Sprintf("%08x", uint32(r.Uint64()))
		e.ParentID = leaf
		e.Timestamp = session.Timestamp(t0.Add(time.Duration(count) * 700 * time.Millisecond))
		ids = append(ids, e.ID)
		leaf = e.ID
		return writeLine(bw, e)
	}
	ms := func() int64 { return t0.Add(time.Duration(count) * 700 * time.Millisecond).UnixMilli() }
	usage := llm.Usage{Input: 1200, Output: 300, CacheRead: 4000, TotalTokens: 5500, Cost: llm.Cost{Input: 0.0036, Output: 0.0045, CacheRead: 0.0012, Total: 0.0093}}
	if err := add(session.Entry{Type: session.TypeModelChange, Provider: "anthropic", ModelID: "claude-sonnet-4-5"}); err != nil {
		return err
	}
	lastCompact := 0
	compact := func() bool {
		if o.CompactEvery == 0 {
			return count > 100 && r.IntN(2000) == 0
		}
		_ = count > 100 && r.IntN(2000) == 0 // keep the draws of Generate
		return o.CompactEvery > 0 && count > 100 && count-lastCompact >= o.CompactEvery
	}
	for count < n {
		switch {
		case count > 10 && r.IntN(40) == 0: // branch from an earlier entry
			leaf = ids[len(ids)-1-r.IntN(min(len(ids)-1, 30))]
		case r.IntN(60) == 0:
			_ = add(session.Entry{Type: session.TypeThinkingLevelChange, ThinkingLevel: []string{"off", "low", "medium", "high"}[r.IntN(4)]})
		case r.IntN(80) == 0:
			l := text(r, 2)
			_ = add(session.Entry{Type: session.TypeLabel, TargetID: ids[r.IntN(len(ids))], Label: &l})
		case compact():
			lastCompact = count
			_ = add(session.Entry{Type: session.TypeCompaction, Summary: "## Goal\n" + text(r, 300), FirstKeptEntryID: ids[len(ids)-20], TokensBefore: 150000, Details: json.RawMessage(`{"readFiles":[],"modifiedFiles":[]}`)})
		}
		u := llm.UserText(text(r, 20+r.IntN(60)), ms())
		if err := add(session.Entry{Type: session.TypeMessage, Message: &u}); err != nil {
			return err
		}
		calls := r.IntN(3)
		for c := 0; c < calls && count < n; c++ {
			args, _ := json.Marshal(map[string]string{"path": "/home/u/proj/pkg/" + text(r, 1) + ".go"})
			a := llm.Message{Role: llm.RoleAssistant, API: "anthropic-messages", Provider: "anthropic", Model: "claude-sonnet-4-5", Usage: usage, StopReason: llm.StopToolUse, Timestamp: ms(),
				Content: []llm.Content{{Type: llm.ContentThinking, Thinking: text(r, 40), ThinkingSignature: strings.Repeat("Eo0B", 60)}, llm.TextBlock(text(r, 15)),
					{Type: llm.ContentToolCall, ID: fmt.Sprintf("toolu_%016x", r.Uint64()), Name: "read", Arguments: args}}}
			_ = add(session.Entry{Type: session.TypeMessage, Message: &a})
			tr := llm.Message{Role: llm.RoleToolResult, ToolCallID: a.Content[2].ID, ToolName: "read", Content: []llm.Content{llm.TextBlock(text(r, 300+r.IntN(500)))}, Timestamp: ms()}
			_ = add(session.Entry{Type: session.TypeMessage, Message: &tr})
		}
		a := llm.Message{Role: llm.RoleAssistant, API: "anthropic-messages", Provider: "anthropic", Model: "claude-sonnet-4-5", Usage: usage, StopReason: llm.StopStop, Timestamp: ms(),
			Content: []llm.Content{llm.TextBlock(text(r, 80+r.IntN(200)))}}
		_ = add(session.Entry{Type: session.TypeMessage, Message: &a})
	}
	return bw.Flush()
}

func writeLine(w *bufio.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}
