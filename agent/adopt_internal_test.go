package agent

import (
	"context"
	"testing"

	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/llm"
)

// TestAdoptedHistoryIsNeverOverwritten: an adopted history's elements stay
// as they were even when the agent drops its last message (as a retry or
// an overflow compaction does) and then goes on: the caller may keep
// reading them (session.BranchCache hands one history to every run).
func TestAdoptedHistoryIsNeverOverwritten(t *testing.T) {
	answer := llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock("old answer")}, StopReason: llm.StopStop}
	history := append(make([]llm.Message, 0, 2+Headroom), llm.UserText("old question", 1), answer)
	a := Adopt(Config{Model: agenttest.NewScript(agenttest.ModelInfo(), agenttest.Reply(agenttest.Text("new answer")))}, history)
	a.msgs.removeLastAssistant()
	if err := a.Prompt(context.Background(), nil, llm.UserText("new question", 2)); err != nil {
		t.Fatal(err)
	}
	if got := history[1].Text(); got != "old answer" {
		t.Fatalf("adopted history's answer is now %q", got)
	}
	if msgs := a.Messages(); len(msgs) != 3 || msgs[1].Text() != "new question" || msgs[2].Text() != "new answer" {
		t.Fatalf("conversation = %+v", msgs)
	}
}
