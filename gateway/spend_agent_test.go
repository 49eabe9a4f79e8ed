package gateway_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway/spend"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// TestAgentSpendCap: a member's run in a conversation of agent ops, once
// ops's own daily cap (agents.ops.spend) is reached, is refused with a
// message naming that key, without reaching the model; a conversation of
// the default agent (no cap of its own, no gateway-wide cap) still runs
// for the same member.
func TestAgentSpendCap(t *testing.T) {
	store, err := spend.OpenFile(filepath.Join(t.TempDir(), "spend.json"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 6, 22, 15, 0, 0, time.UTC)
	lim := spend.NewLimiter(store, spend.Caps{}, func() time.Time { return now })
	lim.SetAgentCaps(map[string]spend.AgentCaps{"ops": {Key: "agents.ops.spend", Caps: spend.Caps{Global: spend.Cap{Tokens: 1500}}}})
	big := llm.Usage{Input: 1400, Output: 200}
	a := newAgentsHarness(t, []faux.Turn{faux.Text("ops answer").WithUsage(big), faux.Text("default answer")}, withSpend(lim),
		func(h *harness) { h.policy.Groups = append(h.policy.Groups, "test:group2") })
	other := chat.ConvRef{Platform: "test", Channel: "group2"}

	a.send("hello ops", inConv(groupConv), from("bob"), mentioned())
	a.waitText(groupConv, "ops answer")
	a.waitFor("the first run's end", func() bool { return len(pendingOf(a.harness)) == 0 })

	a.send("again", inConv(groupConv), from("bob"), mentioned())
	a.waitText(groupConv, "of agent `ops`", "(agents.ops.spend.global.daily_tokens)", "1600 of 1500 tokens", "00:00 UTC")
	if n := a.model.Calls(); n != 1 {
		t.Fatalf("model calls = %d after the refusal, want 1", n)
	}
	if got := a.answer(groupConv, "bob", "/limits"); !strings.Contains(got, "agent `ops` (everyone's use of this agent): $0.0000, 1600 tokens; cap 1500 tokens") {
		t.Fatalf("/limits in ops's conversation: %q", got)
	}

	// New conversations now go to the default agent, which has no cap.
	a.opsGroup.Store(false)
	a.send("hello default", inConv(other), from("bob"), mentioned())
	a.waitText(other, "default answer")
	if req := a.lastRequest(); req.SystemPrompt != "DEFAULT PROMPT" {
		t.Fatalf("the other conversation ran with prompt %q", req.SystemPrompt)
	}
}
