package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/llm"
)

var (
	promptHead = []string{"agent_start", "turn_start", "message_start user", "message_end user"}
)

func seq(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestGoldenTextOnly(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Reply(agenttest.Text("hello")))
	a := newAgent(m, nil, nil)
	r := &recorder{}
	prompt(t, a, r, "hi")
	checkLines(t, r.lines(), seq(promptHead, expand(
		"message_start assistant", "text 0", "message_end assistant", "turn_end", "agent_end")))
	end := r.events[len(r.events)-1]
	if len(end.Messages) != 2 || end.Messages[0].Role != llm.RoleUser || end.Messages[1].Text() != "hello" {
		t.Errorf("agent_end messages = %+v", end.Messages)
	}
	if got := len(a.Messages()); got != 2 {
		t.Errorf("len(Messages) = %d, want 2", got)
	}
	req := m.Requests()[0]
	if req.SystemPrompt != "sys" || len(req.Messages) != 1 {
		t.Errorf("request = %+v", req)
	}
}

// TestGoldenParallelTools is pi's observed order for thinking + text + two
// parallel tools where the second finishes first (pi-reference §3.3).
func TestGoldenParallelTools(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{},
		agenttest.Reply(agenttest.Thinking("plan"), agenttest.Text("running"),
			agenttest.Call("call_1", "slow", `{"n":1}`), agenttest.Call("call_2", "fast", `{"n":2}`)),
		agenttest.Reply(agenttest.Text("done")))
	fastDone := make(chan struct{})
	slow := &agenttest.Tool{Name: "slow", Fn: func(ctx context.Context, _ string, _ json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
		<-fastDone
		return agenttest.TextOutput("slow result"), nil
	}}
	fast := &agenttest.Tool{Name: "fast", Fn: func(_ context.Context, _ string, _ json.RawMessage, up func(llm.ToolOutput)) (llm.ToolOutput, error) {
		up(agenttest.TextOutput("partial"))
		return llm.ToolOutput{Content: []llm.Content{llm.TextBlock("fast result")}, Details: map[string]int{"n": 2}}, nil
	}}
	r := &recorder{hook: func(e agent.Event) {
		if e.Type == agent.EventToolExecutionEnd && e.ToolCallID == "call_2" {
			close(fastDone)
		}
	}}
	a := newAgent(m, []agent.Tool{slow, fast}, nil)
	prompt(t, a, r, "go")
	checkLines(t, r.lines(), seq(promptHead, expand(
		"message_start assistant", "thinking 0", "text 1", "toolcall 2", "toolcall 3", "message_end assistant",
		"tool_execution_start call_1", "tool_execution_start call_2",
		"tool_execution_update call_2", "tool_execution_end call_2", "tool_execution_end call_1",
		"message_start toolResult call_1", "message_end toolResult call_1",
		"message_start toolResult call_2", "message_end toolResult call_2",
		"turn_end", "turn_start",
		"message_start assistant", "text 0", "message_end assistant", "turn_end", "agent_end")))
	end := r.find(agent.EventToolExecutionEnd, "call_2")
	if resultText(end) != "fast result" || end.IsError {
		t.Errorf("call_2 end = %+v", end)
	}
	msgs := a.Messages()
	if len(msgs) != 5 || msgs[3].ToolCallID != "call_2" || string(msgs[3].Details) != `{"n":2}` {
		t.Errorf("messages = %+v", msgs)
	}
	if reqs := m.Requests(); len(reqs) != 2 || len(reqs[1].Messages) != 4 || len(reqs[0].Tools) != 2 {
		t.Errorf("requests = %+v", reqs)
	}
}

func TestGoldenSequential(t *testing.T) {
	turns := func() []agenttest.Turn {
		return []agenttest.Turn{
			agenttest.Reply(agenttest.Call("c1", "a", `{}`), agenttest.Call("c2", "b", `{}`)),
			agenttest.Reply(agenttest.Text("ok")),
		}
	}
	want := seq(promptHead, expand(
		"message_start assistant", "toolcall 0", "toolcall 1", "message_end assistant",
		"tool_execution_start c1", "tool_execution_end c1", "message_start toolResult c1", "message_end toolResult c1",
		"tool_execution_start c2", "tool_execution_end c2", "message_start toolResult c2", "message_end toolResult c2",
		"turn_end", "turn_start", "message_start assistant", "text 0", "message_end assistant", "turn_end", "agent_end"))
	tests := []struct {
		name  string
		cfg   bool
		toolB agent.Tool
	}{
		{"config", true, echoTool("b")},
		{"tool demands it", false, &agenttest.Tool{Name: "b", Seq: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := agenttest.NewScript(llm.ModelInfo{}, turns()...)
			a := newAgent(m, []agent.Tool{echoTool("a"), tt.toolB}, func(c *agent.Config) { c.Sequential = tt.cfg })
			r := &recorder{}
			prompt(t, a, r, "go")
			checkLines(t, r.lines(), want)
		})
	}
}

// immediateErrorCase runs one tool call that fails before execution and
// checks pi's event order and error text.
func immediateErrorCase(t *testing.T, call llm.Content, tools []agent.Tool, hooks agent.Hooks, wantText string) {
	t.Helper()
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Reply(call), agenttest.Reply(agenttest.Text("sorry")))
	a := newAgent(m, tools, func(c *agent.Config) { c.Hooks = hooks })
	r := &recorder{}
	prompt(t, a, r, "go")
	checkLines(t, r.lines(), seq(promptHead, expand(
		"message_start assistant", "toolcall 0", "message_end assistant",
		"tool_execution_start "+call.ID, "tool_execution_end "+call.ID,
		"message_start toolResult "+call.ID, "message_end toolResult "+call.ID,
		"turn_end", "turn_start", "message_start assistant", "text 0", "message_end assistant", "turn_end", "agent_end")))
	end := r.find(agent.EventToolExecutionEnd, call.ID)
	if !end.IsError || resultText(end) != wantText {
		t.Errorf("end = isError %v text %q, want error %q", end.IsError, resultText(end), wantText)
	}
	res := a.Messages()[2]
	if !res.IsError || res.Text() != wantText || string(res.Details) != "{}" {
		t.Errorf("toolResult = %+v", res)
	}
}

func TestGoldenUnknownTool(t *testing.T) {
	immediateErrorCase(t, agenttest.Call("c1", "nope", `{}`), nil, agent.Hooks{}, "Tool nope not found")
}

func TestGoldenInvalidArguments(t *testing.T) {
	read := &agenttest.Tool{Name: "read", Params: json.RawMessage(
		`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"number"}},"required":["path"]}`)}
	want := "Validation failed for tool \"read\":\n  - path: must have required property 'path'\n  - limit: must be number\n\nReceived arguments:\n{\n  \"limit\": \"many\"\n}"
	immediateErrorCase(t, agenttest.Call("c1", "read", `{"limit":"many"}`), []agent.Tool{read}, agent.Hooks{}, want)
}

func TestGoldenBlockedByHook(t *testing.T) {
	tool := &agenttest.Tool{Name: "bash", Fn: func(context.Context, string, json.RawMessage, func(llm.ToolOutput)) (llm.ToolOutput, error) {
		t.Error("blocked tool executed")
		return llm.ToolOutput{}, nil
	}}
	tests := []struct {
		name  string
		hook  func(context.Context, agent.ToolCall) (agent.Decision, error)
		wantT string
	}{
		{"reason", func(context.Context, agent.ToolCall) (agent.Decision, error) {
			return agent.Decision{Block: true, Reason: "not allowed"}, nil
		}, "not allowed"},
		{"default text", func(context.Context, agent.ToolCall) (agent.Decision, error) {
			return agent.Decision{Block: true}, nil
		}, "Tool execution was blocked"},
		{"hook error", func(context.Context, agent.ToolCall) (agent.Decision, error) {
			return agent.Decision{}, errors.New("approval timed out")
		}, "approval timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			immediateErrorCase(t, agenttest.Call("c1", "bash", `{"command":"rm"}`), []agent.Tool{tool},
				agent.Hooks{BeforeToolCall: tt.hook}, tt.wantT)
		})
	}
}

func TestGoldenProviderError(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Fail("400 invalid request"))
	a := newAgent(m, nil, func(c *agent.Config) { c.Retry = agent.DefaultRetry() })
	r := &recorder{}
	a.FollowUpTagged(agent.Tagged{Message: user("later")})
	prompt(t, a, r, "hi")
	checkLines(t, r.lines(), seq(promptHead,
		[]string{"message_start assistant", "message_end assistant", "turn_end", "agent_end"}))
	msgs := a.Messages()
	if last := msgs[len(msgs)-1]; last.StopReason != llm.StopError || last.ErrorMessage != "400 invalid request" {
		t.Errorf("last message = %+v", last)
	}
	if _, f := a.Queued(); len(f) != 1 {
		t.Errorf("follow-up queue = %d, want untouched 1", len(f))
	}
}

func TestGoldenAbortDuringTool(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{},
		agenttest.Reply(agenttest.Call("c1", "bash", `{"command":"sleep 100"}`)),
		agenttest.Reply(agenttest.Text("never")))
	var a *agent.Agent
	r := &recorder{hook: func(e agent.Event) {
		if e.Type == agent.EventToolExecutionStart {
			a.Abort()
		}
	}}
	a = newAgent(m, []agent.Tool{agenttest.Blocking("bash", "Command aborted", nil)}, nil)
	prompt(t, a, r, "run")
	checkLines(t, r.lines(), seq(promptHead, expand(
		"message_start assistant", "toolcall 0", "message_end assistant",
		"tool_execution_start c1", "tool_execution_end c1",
		"message_start toolResult c1", "message_end toolResult c1", "turn_end",
		"turn_start", "message_start assistant", "message_end assistant", "turn_end", "agent_end")))
	msgs := a.Messages()
	last := msgs[len(msgs)-1]
	if last.StopReason != llm.StopAborted || last.ErrorMessage != "Request was aborted" {
		t.Errorf("last = %+v", last)
	}
	if res := msgs[2]; !res.IsError || res.Text() != "Command aborted" {
		t.Errorf("tool result = %+v", res)
	}
	if a.Running() {
		t.Error("still running after Prompt returned")
	}
}

func TestAbortDuringStream(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Turn{Content: []llm.Content{agenttest.Text("partial")}, Hang: true})
	var a *agent.Agent
	r := &recorder{hook: func(e agent.Event) {
		if e.Type == agent.EventMessageUpdate && e.AssistantEvent.Type == llm.EventTextEnd {
			a.Abort()
		}
	}}
	a = newAgent(m, nil, nil)
	prompt(t, a, r, "hi")
	checkLines(t, r.lines(), seq(promptHead, expand("message_start assistant", "text 0", "message_end assistant", "turn_end", "agent_end")))
	last := a.Messages()[1]
	if last.StopReason != llm.StopAborted || last.Text() != "partial" {
		t.Errorf("last = %+v", last)
	}
}

func TestGoldenSteeringDuringToolBatch(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{},
		agenttest.Reply(agenttest.Call("c1", "a", `{}`), agenttest.Call("c2", "a", `{}`)),
		agenttest.Reply(agenttest.Text("steered")))
	var a *agent.Agent
	r := &recorder{hook: func(e agent.Event) {
		if e.Type == agent.EventToolExecutionStart && e.ToolCallID == "c1" {
			a.SteerTagged(agent.Tagged{Message: user("change course")})
		}
	}}
	a = newAgent(m, []agent.Tool{echoTool("a")}, func(c *agent.Config) { c.Sequential = true })
	prompt(t, a, r, "go")
	checkLines(t, r.lines(), seq(promptHead, expand(
		"message_start assistant", "toolcall 0", "toolcall 1", "message_end assistant",
		"tool_execution_start c1", "tool_execution_end c1", "message_start toolResult c1", "message_end toolResult c1",
		"tool_execution_start c2", "tool_execution_end c2", "message_start toolResult c2", "message_end toolResult c2",
		"turn_end", "turn_start",
		`queue_update [] []`, "message_start user", "message_end user",
		"message_start assistant", "text 0", "message_end assistant", "turn_end", "agent_end")))
	roles := []llm.Role{}
	for _, m := range a.Messages() {
		roles = append(roles, m.Role)
	}
	want := []llm.Role{"user", "assistant", "toolResult", "toolResult", "user", "assistant"}
	if strings.Join(toStrings(roles), ",") != strings.Join(toStrings(want), ",") {
		t.Errorf("roles = %v, want %v", roles, want)
	}
}

func toStrings(rs []llm.Role) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

func TestGoldenFollowUp(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Reply(agenttest.Text("one")), agenttest.Reply(agenttest.Text("two")))
	var a *agent.Agent
	r := &recorder{hook: func(e agent.Event) {
		if e.Type == agent.EventMessageStart && e.Message.Role == llm.RoleAssistant && e.Message.Text() == "" && len(a.Messages()) == 2 {
			a.FollowUpTagged(agent.Tagged{Message: user("and then?")})
		}
	}}
	a = newAgent(m, nil, nil)
	prompt(t, a, r, "go")
	checkLines(t, r.lines(), seq(promptHead, expand(
		"message_start assistant", "text 0", "message_end assistant", "turn_end",
		"turn_start", `queue_update [] []`, "message_start user", "message_end user",
		"message_start assistant", "text 0", "message_end assistant", "turn_end", "agent_end")))
	if n := len(r.events[len(r.events)-1].Messages); n != 4 {
		t.Errorf("agent_end has %d messages, want 4", n)
	}
}

func TestGoldenTerminate(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{},
		agenttest.Reply(agenttest.Call("c1", "finish", `{}`)), agenttest.Reply(agenttest.Text("unused")))
	finish := &agenttest.Tool{Name: "finish", Fn: func(context.Context, string, json.RawMessage, func(llm.ToolOutput)) (llm.ToolOutput, error) {
		out := agenttest.TextOutput("bye")
		out.Terminate = true
		return out, nil
	}}
	a := newAgent(m, []agent.Tool{finish}, nil)
	r := &recorder{}
	prompt(t, a, r, "go")
	checkLines(t, r.lines(), seq(promptHead, expand(
		"message_start assistant", "toolcall 0", "message_end assistant",
		"tool_execution_start c1", "tool_execution_end c1", "message_start toolResult c1", "message_end toolResult c1",
		"turn_end", "agent_end")))
	if m.Remaining() != 1 {
		t.Errorf("model called after terminate")
	}
}

func TestTerminateNeedsWholeBatch(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{},
		agenttest.Reply(agenttest.Call("c1", "finish", `{}`), agenttest.Call("c2", "a", `{}`)), agenttest.Reply(agenttest.Text("more")))
	finish := &agenttest.Tool{Name: "finish", Fn: func(context.Context, string, json.RawMessage, func(llm.ToolOutput)) (llm.ToolOutput, error) {
		return llm.ToolOutput{Terminate: true}, nil
	}}
	a := newAgent(m, []agent.Tool{finish, echoTool("a")}, nil)
	prompt(t, a, &recorder{}, "go")
	if m.Remaining() != 0 {
		t.Errorf("model not called again although only one result terminates")
	}
}

func TestAfterToolCallOverrides(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Reply(agenttest.Call("c1", "a", `{"x":1}`), agenttest.Call("c2", "a", `{}`)), agenttest.Reply(agenttest.Text("k")))
	hooks := agent.Hooks{
		BeforeToolCall: func(_ context.Context, c agent.ToolCall) (agent.Decision, error) {
			if c.ID == "c1" {
				return agent.Decision{Args: json.RawMessage(`{"x":2}`)}, nil
			}
			return agent.Decision{}, nil
		},
		AfterToolCall: func(_ context.Context, c agent.ToolCall, out *agent.ToolResult) error {
			if c.ID == "c2" {
				return errors.New("post-check failed")
			}
			out.Details = map[string]string{"seen": string(c.Args)}
			return nil
		},
	}
	a := newAgent(m, []agent.Tool{echoTool("a")}, func(c *agent.Config) { c.Hooks = hooks })
	prompt(t, a, &recorder{}, "go")
	msgs := a.Messages()
	if got := msgs[2]; got.Text() != `a:{"x":2}` || string(got.Details) != `{"seen":"{\"x\":2}"}` || got.IsError {
		t.Errorf("c1 result = %+v details %s", got, got.Details)
	}
	if got := msgs[3]; !got.IsError || got.Text() != "post-check failed" {
		t.Errorf("c2 result = %+v", got)
	}
}

func TestToolPanicBecomesError(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Reply(agenttest.Call("c1", "p", `{}`)), agenttest.Reply(agenttest.Text("k")))
	p := &agenttest.Tool{Name: "p", Fn: func(context.Context, string, json.RawMessage, func(llm.ToolOutput)) (llm.ToolOutput, error) {
		panic("boom")
	}}
	a := newAgent(m, []agent.Tool{p}, nil)
	prompt(t, a, &recorder{}, "go")
	if res := a.Messages()[2]; !res.IsError || !strings.Contains(res.Text(), "boom") {
		t.Errorf("result = %+v", res)
	}
}

func TestLoopFailurePath(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Reply(agenttest.Text("never")))
	a := newAgent(m, nil, func(c *agent.Config) {
		c.Hooks.TransformContext = func(context.Context, []llm.Message) ([]llm.Message, error) {
			return nil, errors.New("no budget")
		}
	})
	r := &recorder{}
	prompt(t, a, r, "hi")
	checkLines(t, r.lines(), seq(promptHead, []string{"agent_end"}))
	end := r.events[len(r.events)-1]
	if len(end.Messages) != 1 || end.Messages[0].StopReason != llm.StopError || !strings.Contains(end.Messages[0].ErrorMessage, "no budget") {
		t.Errorf("agent_end = %+v", end.Messages)
	}
	if n := len(a.Messages()); n != 2 {
		t.Errorf("messages = %d, want prompt + synthetic", n)
	}
}

func TestTransformContextSeesMessages(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Reply(agenttest.Text("ok")))
	a := newAgent(m, nil, func(c *agent.Config) {
		c.Hooks.TransformContext = func(_ context.Context, msgs []llm.Message) ([]llm.Message, error) {
			return append([]llm.Message{{Role: llm.RoleCompactionSummary, Summary: "S"}}, msgs...), nil
		}
	})
	prompt(t, a, &recorder{}, "hi")
	req := m.Requests()[0]
	if len(req.Messages) != 2 || !strings.Contains(req.Messages[0].Text(), "<summary>\nS\n</summary>") {
		t.Errorf("request messages = %+v", req.Messages)
	}
	if n := len(a.Messages()); n != 2 {
		t.Errorf("transform changed state: %d messages", n)
	}
}

// TestAbortLeavesQueuesForTheNextRun is the regression test of a message
// lost in chat: someone steered while another person pressed stop during a
// tool call; the aborted run took the steering message into a turn whose
// model call was already aborted, so it was recorded and never answered.
// Now an aborted run leaves its queues untouched (unlike pi, on purpose).
func TestAbortLeavesQueuesForTheNextRun(t *testing.T) {
	m := agenttest.NewScript(llm.ModelInfo{},
		agenttest.Reply(agenttest.Call("c1", "bash", `{"command":"sleep 100"}`)),
		agenttest.Reply(agenttest.Text("never")))
	var a *agent.Agent
	r := &recorder{hook: func(e agent.Event) {
		if e.Type == agent.EventToolExecutionStart {
			// Stop first, then a message arrives while the tool dies.
			a.Abort()
			a.SteerTagged(agent.Tagged{Message: user("and also this")})
			a.FollowUpTagged(agent.Tagged{Message: user("and later that")})
		}
	}}
	a = newAgent(m, []agent.Tool{agenttest.Blocking("bash", "Command aborted", nil)}, nil)
	prompt(t, a, r, "run")
	for _, msg := range a.Messages() {
		if msg.Role == llm.RoleUser && msg.Text() != "run" {
			t.Errorf("the aborted run took %q from its queues", msg.Text())
		}
	}
	st, fu := a.Queued()
	if len(st) != 1 || st[0].Text() != "and also this" || len(fu) != 1 || fu[0].Text() != "and later that" {
		t.Errorf("queues after the aborted run: steer %v, follow-up %v; want both messages left for the next run", st, fu)
	}
}
