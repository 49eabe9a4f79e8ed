package agent_test

import (
	"fmt"
	"testing"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/llm"
)

// TestRequestsOfACompactedConversation runs two prompts, one with a tool
// call, on a conversation that starts with a compaction summary (so it
// is converted for the model, not shared): every model call's messages
// are llm.ConvertToLLM of the conversation as it stood, though only what
// was added since the last call is converted; a request already made
// keeps its messages while the conversation grows; and a conversation
// replaced by SetMessages is converted anew.
func TestRequestsOfACompactedConversation(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{},
		agenttest.Reply(agenttest.Call("c1", "echo", `{"x":1}`)),
		agenttest.Reply(agenttest.Text("first answer")),
		agenttest.Reply(agenttest.Text("second answer")),
		agenttest.Reply(agenttest.Text("third answer")))
	history := []llm.Message{{Role: llm.RoleCompactionSummary, Summary: "earlier", Timestamp: 1}, user("before"),
		{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock("noted")}, StopReason: llm.StopStop}}
	a := agent.Adopt(agent.Config{Model: m, Tools: []agent.Tool{echoTool("echo")}, Now: fixedNow, SystemPrompt: "sys"}, history)
	var seen [][]llm.Message // each request's messages, copied when made
	var reqs []llm.Request
	check := func(when string) {
		t.Helper()
		all := m.Requests()
		for _, r := range all[len(reqs):] {
			seen = append(seen, append([]llm.Message(nil), r.Messages...))
		}
		reqs = all
		want := llm.ConvertToLLM(a.Messages())
		last := reqs[len(reqs)-1].Messages
		// The last request lacks the answer it was asked for.
		if got, exp := fmt.Sprint(last), fmt.Sprint(want[:len(want)-1]); got != exp {
			t.Errorf("%s: last request's messages\n%s\nwant\n%s", when, got, exp)
		}
	}
	prompt(t, a, &recorder{}, "one")
	check("after the tool call's run")
	prompt(t, a, &recorder{}, "two")
	check("after the second prompt")
	for i, r := range reqs {
		if fmt.Sprint(r.Messages) != fmt.Sprint(seen[i]) {
			t.Errorf("request %d changed after it was made", i)
		}
	}
	// Longer than the conversation converted so far: only the
	// replacement tells the agent its conversions are stale.
	replaced := []llm.Message{{Role: llm.RoleCompactionSummary, Summary: "another", Timestamp: 2}}
	for i := range 20 {
		replaced = append(replaced, user(fmt.Sprintf("q%d", i)),
			llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock(fmt.Sprintf("a%d", i))}, StopReason: llm.StopStop})
	}
	a.SetMessages(replaced)
	prompt(t, a, &recorder{}, "three")
	check("after SetMessages")
	if n := len(reqs); n != 4 {
		t.Errorf("%d model calls, want 4", n)
	}
}
