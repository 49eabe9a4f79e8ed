package gateway_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// countingTool counts its executions.
func countingTool(name string, n *atomic.Int32) *agenttest.Tool {
	return &agenttest.Tool{Name: name, Fn: func(ctx context.Context, id string, args json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
		n.Add(1)
		return agenttest.TextOutput("ran " + id), nil
	}}
}

// approvalButtons waits for the approval message in conv and returns its
// button ids.
func (h *harness) approvalButtons(conv chat.ConvRef) []string {
	h.t.Helper()
	var ids []string
	h.waitFor("approval buttons", func() bool {
		for _, c := range chattest.Filter(h.ad.Calls(), chattest.MethodSend) {
			if c.Conv == conv && len(c.Buttons) > 0 && strings.HasPrefix(c.Buttons[0][0].ID, "ap:") {
				ids = nil
				for _, b := range c.Buttons[0] {
					ids = append(ids, b.ID)
				}
			}
		}
		return len(ids) == 3
	})
	return ids
}

func groupMsg(text, user string) []msgOpt {
	return []msgOpt{inConv(groupConv), from(user), mentioned()}
}

func TestApprovalByButton(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, []faux.Turn{faux.ToolCalls(faux.Call("c1", "bash", `{"command":"rm -rf build"}`)), faux.Text("cleaned")},
		withTools(countingTool("bash", &n)),
		withConfig(func(c *gateway.Config) { c.GroupApprovals = map[string]string{"bash": "ask"} }))
	h.send("clean up", groupMsg("clean up", "alice")...)
	ids := h.approvalButtons(groupConv)
	h.waitText(groupConv, "Approve `bash`", "rm -rf build")
	// A bystander cannot decide.
	h.press(groupConv, "mallory", ids[0])
	h.waitFor("refusal toast", func() bool {
		for _, c := range chattest.Filter(h.ad.Calls(), chattest.MethodRespond) {
			if strings.Contains(c.Text, "Only the person who asked") {
				return true
			}
		}
		return false
	})
	if n.Load() != 0 {
		t.Fatal("tool ran before approval")
	}
	h.press(groupConv, "alice", ids[0])
	h.waitText(groupConv, "cleaned")
	h.waitText(groupConv, "allowed once by alice")
	if n.Load() != 1 {
		t.Fatalf("tool ran %d times", n.Load())
	}
	// A second click is answered "already decided".
	h.press(groupConv, "alice", ids[0])
	h.waitFor("already decided", func() bool {
		for _, c := range chattest.Filter(h.ad.Calls(), chattest.MethodRespond) {
			if strings.Contains(c.Text, "Already decided") || strings.Contains(c.Text, "no longer pending") {
				return true
			}
		}
		return false
	})
}

func TestApprovalDenyAndSessionScope(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, []faux.Turn{
		faux.ToolCalls(faux.Call("c1", "bash", `{"command":"ls"}`)), faux.Text("denied, fine"),
		faux.ToolCalls(faux.Call("c2", "bash", `{"command":"ls"}`)), faux.Text("listed"),
		faux.ToolCalls(faux.Call("c3", "bash", `{"command":"ls -l"}`)), faux.Text("listed again"),
	}, withTools(countingTool("bash", &n)), withConfig(func(c *gateway.Config) { c.DMApprovals = map[string]string{"bash": "ask"} }))
	h.send("list")
	ids := h.approvalButtons(dmConv)
	h.press(dmConv, "owner", ids[2]) // deny
	h.waitText(dmConv, "denied, fine")
	if n.Load() != 0 {
		t.Fatal("denied tool ran")
	}
	reqs := h.model.Requests()
	last := reqs[len(reqs)-1].Messages
	if tr := last[len(last)-1]; tr.Role != llm.RoleToolResult || !tr.IsError || !strings.Contains(tr.Text(), "denied") {
		t.Fatalf("model did not see the denial: %+v", tr)
	}
	h.send("list again")
	h.waitFor("second approval", func() bool {
		return len(slices.DeleteFunc(chattest.Filter(h.ad.Calls(), chattest.MethodSend), func(c chattest.Call) bool { return len(c.Buttons) == 0 })) == 2
	})
	var second []string
	for _, c := range chattest.Filter(h.ad.Calls(), chattest.MethodSend) {
		if len(c.Buttons) > 0 {
			second = []string{c.Buttons[0][0].ID, c.Buttons[0][1].ID}
		}
	}
	h.press(dmConv, "owner", second[1]) // allow for this session
	h.waitText(dmConv, "listed")
	h.send("and again")
	h.waitText(dmConv, "listed again")
	if n.Load() != 2 {
		t.Fatalf("tool ran %d times, want 2 (the third call needs no approval)", n.Load())
	}
}

func TestApprovalSurvivesRestart(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, []faux.Turn{faux.ToolCalls(faux.Call("c1", "bash", `{"command":"make deploy"}`)), faux.Text("deployed after restart")},
		withTools(countingTool("bash", &n)),
		withConfig(func(c *gateway.Config) {
			c.DMApprovals = map[string]string{"bash": "ask"}
			c.DrainTimeout = 200 * time.Millisecond
		}))
	h.send("deploy")
	ids := h.approvalButtons(dmConv)
	h.restart()
	h.press(dmConv, "owner", ids[0])
	h.waitText(dmConv, "deployed after restart")
	if n.Load() != 1 {
		t.Fatalf("tool ran %d times after the restart, want 1", n.Load())
	}
	want := []string{"user:deploy", "toolResult:ran c1", "assistant:deployed after restart"}
	h.waitFor("branch", func() bool { return slices.Equal(headBranch(h), want) })
}

// A shutdown whose only run waits for an approval does not wait out the
// drain budget (an hour here; the harness fails a stop after 30 s): the
// call waits for a person, and its buttons work after the restart. It
// used to hold every restart of pibot for the whole budget (20 s).
func TestShutdownDoesNotWaitForAnApproval(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, []faux.Turn{faux.ToolCalls(faux.Call("c1", "bash", `{"command":"make deploy"}`)), faux.Text("deployed after restart")},
		withTools(countingTool("bash", &n)),
		withConfig(func(c *gateway.Config) {
			c.DMApprovals = map[string]string{"bash": "ask"}
			c.DrainTimeout = time.Hour
		}))
	h.send("deploy")
	ids := h.approvalButtons(dmConv)
	h.restart()
	h.press(dmConv, "owner", ids[0])
	h.waitText(dmConv, "deployed after restart")
	if n.Load() != 1 {
		t.Fatalf("tool ran %d times after the restart, want 1", n.Load())
	}
}

// A call waiting for approval whose tool a reload denies meanwhile does
// not run when it is allowed: the policy in force decides, as it would
// after a restart.
func TestApprovalOfAToolDeniedMeanwhile(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, []faux.Turn{faux.ToolCalls(faux.Call("c1", "bash", `{"command":"make deploy"}`)), faux.Text("after")},
		withTools(countingTool("bash", &n)),
		withConfig(func(c *gateway.Config) { c.DMApprovals = map[string]string{"bash": "ask"} }))
	h.send("deploy")
	ids := h.approvalButtons(dmConv)
	h.g.SetApprovals(map[string]string{"bash": "deny"}, nil)
	h.press(dmConv, "owner", ids[0])
	h.waitText(dmConv, "after")
	if n.Load() != 0 {
		t.Fatal("a tool denied while its call waited ran once allowed")
	}
	if got := h.lastRequestTexts(); !slices.Contains(got, "The bash tool is disabled in this chat.") {
		t.Errorf("the model's last request %q lacks the refusal", got)
	}
}

// /approve with an id that was never asked says so, in a conversation
// with a session and in one without; a decided id is "Already decided"
// (issue #30.12).
func TestApproveUnknownID(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, []faux.Turn{
		faux.ToolCalls(faux.Call("c1", "bash", `{"command":"ls"}`)), faux.Text("listed"),
	}, withTools(countingTool("bash", &n)), withConfig(func(c *gateway.Config) { c.DMApprovals = map[string]string{"bash": "ask"} }))
	fresh := chat.ConvRef{Platform: "test", Channel: "dm-fresh", DM: true}
	if got := h.answer(fresh, "owner", "/approve deadbeef"); !strings.Contains(got, "No approval with that id") {
		t.Errorf("/approve of an unknown id, no session: %q", got)
	}
	h.send("list")
	ids := h.approvalButtons(dmConv)
	h.press(dmConv, "owner", ids[0])
	h.waitText(dmConv, "listed")
	if got := h.answer(dmConv, "owner", "/approve deadbeef"); !strings.Contains(got, "No approval with that id") || strings.Contains(got, "Already decided") {
		t.Errorf("/approve of an unknown id: %q", got)
	}
	id := strings.Split(ids[0], ":")[1] // ap:<id>:<decision>
	if got := h.answer(dmConv, "owner", "/deny "+id); !strings.Contains(got, "Already decided") {
		t.Errorf("/deny of a decided id: %q", got)
	}
	if n.Load() != 1 {
		t.Fatalf("the tool ran %d times, want 1", n.Load())
	}
}

// The approval card, and the decision that replaces its buttons, stand
// between what the model said before the call and what it said after: the
// final answer never lands above the card (it used to: the reply message
// posted before the card kept growing).
func TestApprovalCardInOrder(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, []faux.Turn{
		{Text: "Let me clean the build directory.", Calls: []faux.ToolCall{faux.Call("c1", "bash", `{"command":"rm -rf build"}`)}},
		faux.Text("All clean now."),
	}, withTools(countingTool("bash", &n)),
		withConfig(func(c *gateway.Config) { c.GroupApprovals = map[string]string{"bash": "ask"} }))
	h.send("clean up", groupMsg("clean up", "alice")...)
	ids := h.approvalButtons(groupConv)
	h.press(groupConv, "alice", ids[0])
	h.waitText(groupConv, "All clean now.")
	h.waitText(groupConv, "allowed once by alice")
	msgs := h.ad.Messages(groupConv)
	at := func(sub string) int {
		return slices.IndexFunc(msgs, func(m string) bool { return strings.Contains(m, sub) })
	}
	before, card, answer := at("Let me clean"), at("allowed once by alice"), at("All clean now.")
	if before < 0 || !(before < card && card < answer) {
		t.Fatalf("messages out of order (before %d, decision %d, answer %d):\n%s", before, card, answer, strings.Join(msgs, "\n---\n"))
	}
	if strings.Contains(msgs[before], "All clean") || strings.Contains(msgs[before], "▌") {
		t.Errorf("the message before the card: %q", msgs[before])
	}
}
