package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/llm"
)

// script writes an executable shell hook and returns its path. The hook
// also appends every request it gets to requests.log next to it.
func script(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "hook.sh")
	src := "#!/bin/sh\nread -r req\nprintf '%s\\n' \"$req\" >> \"$(dirname \"$0\")/requests.log\"\n" + body + "\n"
	if err := os.WriteFile(p, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// requests returns what the hook at path was sent.
func requests(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(filepath.Dir(path), "requests.log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("request %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func hook(name, path string, events ...string) Hook {
	return Hook{Name: name, Command: path, Events: events, Timeout: 5 * time.Second}
}

func logger(buf *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(buf, nil)) }

func TestToolCallBlock(t *testing.T) {
	h := script(t, `echo '{"action":"block","reason":"rm is not allowed here"}'`)
	r := New([]Hook{hook("guard", h, EventToolCall)}, nil)
	d, err := r.ToolCall(t.Context(), agent.ToolCall{ID: "c1", Name: "bash", Args: json.RawMessage(`{"command":"rm -rf /"}`)})
	if err != nil || !d.Block || d.Reason != "rm is not allowed here" {
		t.Fatalf("decision %+v, %v", d, err)
	}
	req := requests(t, h)
	if len(req) != 1 || req[0]["event"] != "tool_call" || req[0]["tool_name"] != "bash" || req[0]["tool_call_id"] != "c1" ||
		req[0]["input"].(map[string]any)["command"] != "rm -rf /" {
		t.Errorf("request %v", req)
	}
}

func TestToolCallModifyChains(t *testing.T) {
	first := script(t, `echo '{"action":"modify","input":{"command":"ls -la"}}'`)
	second := script(t, `echo '{"action":"allow"}'`)
	r := New([]Hook{hook("a", first, EventToolCall), hook("b", second, EventToolCall)}, nil)
	d, err := r.ToolCall(t.Context(), agent.ToolCall{ID: "c1", Name: "bash", Args: json.RawMessage(`{"command":"ls"}`)})
	if err != nil || d.Block || string(d.Args) != `{"command":"ls -la"}` {
		t.Fatalf("decision %+v args %s, %v", d, d.Args, err)
	}
	if got := requests(t, second)[0]["input"].(map[string]any)["command"]; got != "ls -la" {
		t.Errorf("second hook saw %v, want the modified arguments", got)
	}
}

func TestInputTransformAndHandled(t *testing.T) {
	up := script(t, `echo '{"action":"transform","text":"[checked] hello"}'`)
	handled := script(t, `echo '{"action":"handled","reply":"Not today."}'`)
	never := script(t, `echo '{}'`)
	r := New([]Hook{hook("up", up, EventInput)}, nil)
	res, err := r.Input(t.Context(), Input{Text: "hello", Source: map[string]string{"platform": "telegram"}})
	if err != nil || res.Handled || res.Text != "[checked] hello" {
		t.Fatalf("transform: %+v, %v", res, err)
	}
	if req := requests(t, up)[0]; req["text"] != "hello" || req["source"].(map[string]any)["platform"] != "telegram" {
		t.Errorf("request %v", req)
	}
	r = New([]Hook{hook("up", up, EventInput), hook("stop", handled, EventInput), hook("never", never, EventInput)}, nil)
	res, err = r.Input(t.Context(), Input{Text: "hello"})
	if err != nil || !res.Handled || res.Reply != "Not today." {
		t.Fatalf("handled: %+v, %v", res, err)
	}
	if got := requests(t, handled)[0]["text"]; got != "[checked] hello" {
		t.Errorf("second hook got %v, want the transformed text", got)
	}
	if requests(t, never) != nil {
		t.Error("a hook after the one that handled the message was asked")
	}
}

func TestTimeout(t *testing.T) {
	// The hook starts a child that would outlive it: both are killed.
	slow := script(t, `sleep 30 & sleep 30`)
	var logs bytes.Buffer
	open := hook("slow", slow, EventToolCall)
	open.Timeout = 200 * time.Millisecond
	r := New([]Hook{open}, logger(&logs))
	d, err := r.ToolCall(t.Context(), agent.ToolCall{Name: "bash", Args: json.RawMessage(`{}`)})
	if err != nil || d.Block {
		t.Fatalf("fail-open timeout: %+v, %v; want the call allowed", d, err)
	}
	if !strings.Contains(logs.String(), "hook=slow") || !strings.Contains(logs.String(), "no answer within 200ms") {
		t.Errorf("log %q does not report the timeout", logs.String())
	}
	closed := open
	closed.FailClosed = true
	d, err = New([]Hook{closed}, nil).ToolCall(t.Context(), agent.ToolCall{Name: "bash", Args: json.RawMessage(`{}`)})
	if err != nil || !d.Block || !strings.Contains(d.Reason, "hook slow failed") {
		t.Fatalf("fail-closed timeout: %+v, %v; want the call blocked", d, err)
	}
	_, err = New([]Hook{{Name: "slow", Command: slow, Events: []string{EventInput}, Timeout: 200 * time.Millisecond, FailClosed: true}}, nil).
		Input(t.Context(), Input{Text: "x"})
	var failed *FailedError
	if !errors.As(err, &failed) || failed.Hook != "slow" {
		t.Errorf("fail-closed input: %v, want a *FailedError", err)
	}
}

func TestBrokenHooks(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"exit", `echo oops >&2; exit 3`, "exit status 3: oops"},
		{"garbage", `echo 'not json'`, "not a JSON object"},
		{"unknown action", `echo '{"action":"explode"}'`, "explode"},
		{"bad modify", `echo '{"action":"modify","input":"x"}'`, "with the arguments as a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			r := New([]Hook{hook("h", script(t, tt.body), EventToolCall)}, logger(&logs))
			d, err := r.ToolCall(t.Context(), agent.ToolCall{Name: "read", Args: json.RawMessage(`{"path":"a"}`)})
			if err != nil || d.Block || d.Args != nil {
				t.Errorf("fail-open: %+v, %v", d, err)
			}
			if !strings.Contains(logs.String(), tt.want) {
				t.Errorf("log %q, want %q", logs.String(), tt.want)
			}
		})
	}
}

func TestToolResultModify(t *testing.T) {
	h := script(t, `echo '{"action":"modify","content":[{"type":"text","text":"[redacted]"}],"is_error":true}'`)
	r := New([]Hook{hook("redact", h, EventToolResult)}, nil)
	out := agent.ToolResult{Content: []llm.Content{llm.TextBlock("password=hunter2")}}
	if err := r.ToolResult(t.Context(), agent.ToolCall{ID: "c", Name: "read", Args: json.RawMessage(`{}`)}, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Content) != 1 || out.Content[0].Text != "[redacted]" || !out.IsError {
		t.Errorf("result %+v", out)
	}
	req := requests(t, h)[0]
	if req["content"].([]any)[0].(map[string]any)["text"] != "password=hunter2" || req["is_error"] != false {
		t.Errorf("request %v", req)
	}
}

func TestBeforeAgentStartAndAgentEnd(t *testing.T) {
	ctxHook := script(t, `echo '{"context":"The deploy is frozen today."}'`)
	end := script(t, `exit 0`)
	r := New([]Hook{hook("ctx", ctxHook, EventBeforeAgentStart), hook("end", end, EventAgentEnd)}, nil)
	added, err := r.BeforeAgentStart(t.Context(), "deploy now")
	if err != nil || added != "The deploy is frozen today." {
		t.Fatalf("added %q, %v", added, err)
	}
	if got := requests(t, ctxHook)[0]["prompt"]; got != "deploy now" {
		t.Errorf("prompt %v", got)
	}
	r.AgentEnd(t.Context(), []llm.Message{llm.UserText("hi", 1)})
	req := requests(t, end)
	if len(req) != 1 || req[0]["event"] != "agent_end" || len(req[0]["messages"].([]any)) != 1 {
		t.Errorf("agent_end request %v", req)
	}
}

// In the agent loop: a blocked call never reaches the tool or the next
// hook (the approval), a modified one runs with the new arguments, and a
// result hook rewrites what the model sees.
func TestWrapInAgentLoop(t *testing.T) {
	guard := script(t, `case "$req" in
*'"rm '*) echo '{"action":"block","reason":"no rm"}' ;;
*'"tool_call"'*) echo '{"action":"modify","input":{"command":"echo safe"}}' ;;
*) echo '{"action":"modify","content":[{"type":"text","text":"seen by hook"}]}' ;;
esac`)
	r := New([]Hook{hook("guard", guard, EventToolCall, EventToolResult)}, nil)
	var ran []string
	tool := &agenttest.Tool{Name: "bash", Fn: func(_ context.Context, _ string, args json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
		ran = append(ran, string(args))
		return agenttest.TextOutput("raw output"), nil
	}}
	var approvals []string
	hooks := r.Wrap(agent.Hooks{BeforeToolCall: func(_ context.Context, c agent.ToolCall) (agent.Decision, error) {
		approvals = append(approvals, string(c.Args))
		return agent.Decision{}, nil
	}})
	model := agenttest.NewScript(llm.ModelInfo{},
		agenttest.Reply(agenttest.Call("c1", "bash", `{"command":"rm -rf /"}`)),
		agenttest.Reply(agenttest.Call("c2", "bash", `{"command":"ls"}`)),
		agenttest.Reply(agenttest.Text("done")))
	a := agent.New(agent.Config{Model: model, Tools: []agent.Tool{tool}, Hooks: hooks}, nil)
	if err := a.Prompt(t.Context(), func(agent.Event) {}, llm.UserText("go", 1)); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 1 || ran[0] != `{"command":"echo safe"}` {
		t.Errorf("tool ran with %q, want only the modified call", ran)
	}
	if len(approvals) != 1 || approvals[0] != `{"command":"echo safe"}` {
		t.Errorf("approval asked for %q, want only the modified call", approvals)
	}
	var results []string
	for _, m := range a.Messages() {
		if m.Role == llm.RoleToolResult {
			results = append(results, m.Content[0].Text)
		}
	}
	if len(results) != 2 || results[0] != "no rm" || results[1] != "seen by hook" {
		t.Errorf("tool results %q", results)
	}
}

func TestNilRunner(t *testing.T) {
	var r *Runner
	if r.Has(EventInput) {
		t.Error("nil runner has hooks")
	}
	res, err := r.Input(t.Context(), Input{Text: "x"})
	if err != nil || res.Text != "x" {
		t.Errorf("%+v %v", res, err)
	}
}

// A hook that reads nothing and answers nothing (true) continues, even
// when the event is too big for the pipe.
func TestHookThatIgnoresStdin(t *testing.T) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true")
	}
	var logs bytes.Buffer
	r := New([]Hook{{Name: "noop", Command: truePath, Events: []string{EventToolResult}, FailClosed: true}}, logger(&logs))
	out := agent.ToolResult{Content: []llm.Content{llm.TextBlock(strings.Repeat("x", 1<<20))}}
	if err := r.ToolResult(t.Context(), agent.ToolCall{Name: "read", Args: json.RawMessage(`{}`)}, &out); err != nil {
		t.Fatalf("%v (log %s)", err, logs.String())
	}
	if out.IsError || len(out.Content[0].Text) != 1<<20 {
		t.Error("the result changed")
	}
}
