package agent_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/llm"
)

func asst(stop llm.StopReason, calls ...string) llm.Message {
	m := llm.Message{Role: llm.RoleAssistant, StopReason: stop}
	for _, c := range calls {
		m.Content = append(m.Content, agenttest.Call(c, "t", `{}`))
	}
	return m
}

func res(id string) llm.Message {
	return llm.Message{Role: llm.RoleToolResult, ToolCallID: id, Content: []llm.Content{llm.TextBlock("r" + id)}}
}

func shape(msgs []llm.Message) string {
	var parts []string
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleToolResult:
			s := "R" + m.ToolCallID
			if m.Text() == agent.NoResultText {
				s += "!"
			}
			parts = append(parts, s)
		case llm.RoleAssistant:
			parts = append(parts, "A")
		default:
			parts = append(parts, "U")
		}
	}
	return strings.Join(parts, " ")
}

func TestRepairTranscript(t *testing.T) {
	tests := []struct {
		name string
		in   []llm.Message
		want string
	}{
		{"intact", []llm.Message{user("q"), asst(llm.StopToolUse, "1", "2"), res("1"), res("2"), asst(llm.StopStop)}, "U A R1 R2 A"},
		{"orphan call before user", []llm.Message{user("q"), asst(llm.StopToolUse, "1", "2"), res("2"), user("next")}, "U A R2 R1! U"},
		{"orphan call at end", []llm.Message{user("q"), asst(llm.StopToolUse, "1")}, "U A R1!"},
		{"duplicate result dropped", []llm.Message{asst(llm.StopToolUse, "1"), res("1"), res("1")}, "A R1"},
		{"stray result dropped", []llm.Message{user("q"), res("9"), asst(llm.StopStop)}, "U A"},
		{"aborted assistant dropped", []llm.Message{user("q"), asst(llm.StopAborted, "1"), user("again")}, "U U"},
		{"error assistant dropped", []llm.Message{user("q"), asst(llm.StopError), asst(llm.StopStop)}, "U A"},
		{"late result after user", []llm.Message{asst(llm.StopToolUse, "1"), user("x"), res("1")}, "A R1! U"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shape(agent.RepairTranscript(tt.in)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRequestsNeverBroken checks the guard is applied to real requests:
// after an abort mid tool call stream the next request has no orphan.
func TestRequestsNeverBroken(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Reply(agenttest.Text("ok")))
	a := agent.New(agent.Config{Model: m}, []llm.Message{user("q"), asst(llm.StopToolUse, "1", "2"), res("1")})
	a.FollowUpTagged(agent.Tagged{Message: user("x")})
	if err := a.Prompt(t.Context(), nil, user("again")); err != nil {
		t.Fatal(err)
	}
	if got := shape(m.Requests()[0].Messages); got != "U A R1 R2! U" {
		t.Errorf("request = %q", got)
	}
}

// TestRepairTranscriptCopiesOnlyWhenItRepairs: a clean transcript comes
// back as is (no copy per model call); a repaired one is a new slice and
// the input is untouched.
func TestRepairTranscriptCopiesOnlyWhenItRepairs(t *testing.T) {
	call := llm.Message{Role: llm.RoleAssistant, StopReason: llm.StopToolUse, Content: []llm.Content{{Type: llm.ContentToolCall, ID: "c1", Name: "bash"}}}
	result := llm.Message{Role: llm.RoleToolResult, ToolCallID: "c1", ToolName: "bash", Content: []llm.Content{llm.TextBlock("ok")}}
	clean := []llm.Message{llm.UserText("hi", 1), call, result, llm.UserText("more", 2)}
	if got := agent.RepairTranscript(clean); len(got) != len(clean) || &got[0] != &clean[0] {
		t.Fatalf("clean transcript copied or changed: %+v", got)
	}
	broken := []llm.Message{llm.UserText("hi", 1), call, llm.UserText("more", 2)}
	before := slices.Clone(broken)
	got := agent.RepairTranscript(broken)
	if len(got) != 4 || got[2].Role != llm.RoleToolResult || got[2].ToolCallID != "c1" || got[3].Text() != "more" {
		t.Fatalf("repaired = %+v", got)
	}
	if !reflect.DeepEqual(broken, before) {
		t.Fatal("RepairTranscript changed its input")
	}
}
