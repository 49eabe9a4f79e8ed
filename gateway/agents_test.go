package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// agentsHarness runs a gateway with an agent "ops" besides the default,
// routed by a binding that sends groupConv to ops; route swaps the
// binding (a reload).
type agentsHarness struct {
	*harness
	opsWS string
	// opsGroup: groupConv is bound to ops.
	opsGroup atomic.Bool
}

func newAgentsHarness(t *testing.T, script []faux.Turn, opts ...option) *agentsHarness {
	a := &agentsHarness{opsWS: t.TempDir()}
	a.opsGroup.Store(true)
	a.harness = newHarness(t, script, append(opts, withTools(&agenttest.Tool{Name: "defaulttool"}), withConfig(func(c *gateway.Config) {
		c.SystemPrompt = func() string { return "DEFAULT PROMPT" }
		c.Agents = map[string]gateway.Agent{"ops": {
			Model:          "faux/m",
			SystemPrompt:   func() string { return "OPS PROMPT" },
			Workspace:      a.opsWS,
			Tools:          func(gateway.ToolRun) []agent.Tool { return []agent.Tool{&agenttest.Tool{Name: "opstool"}} },
			GroupApprovals: map[string]string{"opstool": "deny"},
		}}
		c.Route = func(in chat.Inbound) (string, string) {
			if !in.Conv.DM && a.opsGroup.Load() {
				return "ops", "bindings[0]: platform=test channel=group"
			}
			return "", "no binding matches: the default agent"
		}
	}))...)
	return a
}

// lastRequest is the model's latest request.
func (a *agentsHarness) lastRequest() llm.Request {
	a.t.Helper()
	reqs := a.model.Requests()
	if len(reqs) == 0 {
		a.t.Fatal("the model got no request")
	}
	return reqs[len(reqs)-1]
}

func toolNames(r llm.Request) string {
	var names []string
	for _, t := range r.Tools {
		names = append(names, t.Name)
	}
	return strings.Join(names, ",")
}

// recorded returns the agent the session file of conv records and its
// header's cwd.
func (a *agentsHarness) recorded(conv chat.ConvRef) (name, cwd string) {
	a.t.Helper()
	for _, p := range a.sessions() {
		s, err := session.OpenFile(p, session.Options{ReadOnly: true})
		if err != nil {
			a.t.Fatal(err)
		}
		es, h := s.Tree().Entries(), s.Tree().Header()
		s.Close()
		mine := false
		for _, e := range es {
			if e.Pibot != nil && e.Pibot.Loc == conv.Key() {
				mine = true
			}
		}
		if !mine {
			continue
		}
		for _, e := range es {
			if e.Type == session.TypeCustom && e.CustomType == "pibot.agent" {
				var d struct{ Name string }
				if err := json.Unmarshal(e.Data, &d); err != nil {
					a.t.Fatal(err)
				}
				name = d.Name
			}
		}
		cwd = h.Cwd
	}
	return name, cwd
}

// A group bound to ops runs ops (its prompt, tools and approvals), its
// session records ops with ops's workspace as cwd; the DM runs the
// default agent.
func TestAgentsRouteNewSessions(t *testing.T) {
	a := newAgentsHarness(t, []faux.Turn{faux.Text("ops answer"), faux.Text("default answer")})
	a.send("hi ops", inConv(groupConv), mentioned())
	a.waitText(groupConv, "ops answer")
	req := a.lastRequest()
	if req.SystemPrompt != "OPS PROMPT" || toolNames(req) != "opstool" {
		t.Fatalf("ops run: prompt %q tools %q", req.SystemPrompt, toolNames(req))
	}
	a.send("hi default")
	a.waitText(dmConv, "default answer")
	req = a.lastRequest()
	if req.SystemPrompt != "DEFAULT PROMPT" || toolNames(req) != "defaulttool" {
		t.Fatalf("default run: prompt %q tools %q", req.SystemPrompt, toolNames(req))
	}
	a.waitFor("both session files", func() bool { return len(a.sessions()) == 2 })
	if name, cwd := a.recorded(groupConv); name != "ops" || cwd != a.opsWS {
		t.Fatalf("group session records agent %q cwd %q, want ops %q", name, cwd, a.opsWS)
	}
	if name, cwd := a.recorded(dmConv); name != "default" || cwd != a.dir {
		t.Fatalf("DM session records agent %q cwd %q, want default %q", name, cwd, a.dir)
	}
	if got := a.answer(groupConv, "bob", "/agent"); !strings.HasPrefix(got, "ops\n") || !strings.Contains(got, "bindings[0]") {
		t.Fatalf("/agent in the group: %q", got)
	}
	if got := a.answer(groupConv, "owner", "/status"); !strings.Contains(got, "agent: `ops` (bindings[0]") {
		t.Fatalf("/status in the group: %q", got)
	}
}

// A conversation keeps its agent when the bindings change (and across a
// restart); /new then picks the new binding. Owners switch with /agent
// NAME; others may only look.
func TestAgentsKeptUntilNew(t *testing.T) {
	a := newAgentsHarness(t, []faux.Turn{faux.Text("a1"), faux.Text("a2"), faux.Text("a3"), faux.Text("a4")})
	a.send("q1", inConv(groupConv), mentioned())
	a.waitText(groupConv, "a1")
	a.opsGroup.Store(false) // the binding is gone (a reload)
	a.restart()
	a.send("q2", inConv(groupConv), mentioned())
	a.waitText(groupConv, "a2")
	if p := a.lastRequest().SystemPrompt; p != "OPS PROMPT" {
		t.Fatalf("after the bindings changed the conversation runs %q, want ops's", p)
	}
	if got := a.answer(groupConv, "owner", "/new"); !strings.Contains(got, "New session") {
		t.Fatalf("/new: %q", got)
	}
	a.send("q3", inConv(groupConv), mentioned())
	a.waitText(groupConv, "a3")
	if p := a.lastRequest().SystemPrompt; p != "DEFAULT PROMPT" {
		t.Fatalf("after /new the conversation runs %q, want the default's", p)
	}
	if got := a.answer(groupConv, "bob", "/agent ops"); !strings.Contains(got, "Only an owner") {
		t.Fatalf("a member switched agents: %q", got)
	}
	if got := a.answer(groupConv, "owner", "/agent nope"); !strings.Contains(got, "There is no agent `nope`") {
		t.Fatalf("/agent nope: %q", got)
	}
	if got := a.answer(groupConv, "owner", "/agent ops"); !strings.Contains(got, "New session with agent `ops`") {
		t.Fatalf("/agent ops: %q", got)
	}
	a.send("q4", inConv(groupConv), mentioned())
	a.waitText(groupConv, "a4")
	if p := a.lastRequest().SystemPrompt; p != "OPS PROMPT" {
		t.Fatalf("after /agent ops the conversation runs %q", p)
	}
	if got := a.answer(groupConv, "bob", "/agent"); !strings.HasPrefix(got, "ops\n") || !strings.Contains(got, "switched with /agent by test:owner") {
		t.Fatalf("/agent after the switch: %q", got)
	}
}

// Each agent's approval policy applies to its runs: ops denies opstool in
// groups, so its call is refused without a card.
func TestAgentsApprovalsPerAgent(t *testing.T) {
	a := newAgentsHarness(t, []faux.Turn{faux.ToolCalls(faux.ToolCall{ID: "c1", Name: "opstool", Args: `{}`}), faux.Text("after")})
	a.send("use it", inConv(groupConv), mentioned())
	a.waitText(groupConv, "after")
	reqs := a.model.Requests()
	last := reqs[len(reqs)-1].Messages
	res := last[len(last)-1]
	if res.Role != llm.RoleToolResult || !res.IsError || !strings.Contains(res.Text(), "disabled in this chat") {
		t.Fatalf("ops's denied tool ran: %+v", res)
	}
}

// The history offered to the web chat names each conversation's agent.
func TestAgentsInHistory(t *testing.T) {
	ha := &historyAdapter{}
	a := newAgentsHarness(t, []faux.Turn{faux.Text("ops answer"), faux.Text("default answer")},
		withAdapter(func(ad *chattest.Adapter) chat.Adapter { ha.Adapter = ad; return ha }))
	a.send("hi ops", inConv(groupConv), mentioned())
	a.waitText(groupConv, "ops answer")
	a.send("hi default")
	a.waitText(dmConv, "default answer")
	var convs []chat.ConvSummary
	a.waitFor("both conversations listed", func() bool {
		var err error
		convs, err = ha.history().Conversations(context.Background(), 10)
		return err == nil && len(convs) == 2
	})
	got := map[string]string{}
	for _, c := range convs {
		got[c.Conv.Channel] = c.Agent
	}
	if got[groupConv.Channel] != "ops" || got[dmConv.Channel] != "default" {
		t.Fatalf("agents in the history: %v", got)
	}
}
