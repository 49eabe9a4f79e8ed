package agent_test

import (
	"strings"
	"testing"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/llm"
)

// TestTagsComeBackOnTheirMessages: a prompt and queued messages with equal
// texts and timestamps each come back with their own tag on their
// message_start and message_end, and the tag is never written out.
func TestTagsComeBackOnTheirMessages(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Reply(agenttest.Text("1")), agenttest.Reply(agenttest.Text("2")), agenttest.Reply(agenttest.Text("3")))
	a := newAgent(m, nil, nil)
	a.SteerTagged(agent.Tagged{Message: user("same"), Tag: 2})
	a.FollowUpTagged(agent.Tagged{Message: user("same"), Tag: 3})
	var got []any
	emit := func(e agent.Event) {
		if (e.Type == agent.EventMessageStart || e.Type == agent.EventMessageEnd) && e.Message.Role == llm.RoleUser {
			got = append(got, e.Tag)
			b, err := e.MarshalJSON()
			if err != nil || strings.Contains(string(b), "tag") {
				t.Errorf("event JSON %s, %v", b, err)
			}
		}
	}
	if err := a.PromptTagged(t.Context(), emit, agent.Tagged{Message: user("same"), Tag: 1}); err != nil {
		t.Fatal(err)
	}
	want := []any{1, 1, 2, 2, 3, 3}
	if len(got) != len(want) {
		t.Fatalf("tags %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("tags %v, want %v", got, want)
		}
	}
	// Untagged queueing still works, and ClearTagged returns the tags.
	a.SteerTagged(agent.Tagged{Message: user("plain")})
	a.FollowUpTagged(agent.Tagged{Message: user("f"), Tag: "f"})
	st, fu := a.ClearTagged()
	if len(st) != 1 || st[0].Tag != nil || st[0].Message.Text() != "plain" || len(fu) != 1 || fu[0].Tag != "f" {
		t.Fatalf("ClearTagged = %+v, %+v", st, fu)
	}
	if st, fu := a.Queued(); len(st)+len(fu) != 0 {
		t.Fatalf("queues not empty: %v %v", st, fu)
	}
}
