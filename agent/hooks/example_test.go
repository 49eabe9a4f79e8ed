package hooks

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/llm"
)

// The example hook of docs/hooks.md does what the document says.
func TestDocExample(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "hooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```python\n")
	src, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/hooks.md has no python example")
	}
	if n := strings.Count(src, "\n"); n > 25 {
		t.Errorf("the example has %d lines; keep it short", n)
	}
	p := filepath.Join(t.TempDir(), "guard.py")
	if err := os.WriteFile(p, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	r := New([]Hook{{Name: "guard", Command: python, Args: []string{p}, Events: []string{EventInput, EventToolCall, EventToolResult}, FailClosed: true}}, nil)
	res, err := r.Input(t.Context(), Input{Text: " ping "})
	if err != nil || !res.Handled || res.Reply != "pong" {
		t.Errorf("ping: %+v, %v", res, err)
	}
	res, err = r.Input(t.Context(), Input{Text: "hello"})
	if err != nil || res.Handled || res.Text != "hello" {
		t.Errorf("hello: %+v, %v", res, err)
	}
	d, err := r.ToolCall(t.Context(), agent.ToolCall{Name: "bash", Args: json.RawMessage(`{"command":"rm -rf /"}`)})
	if err != nil || !d.Block || d.Reason != "rm -rf is not allowed here" {
		t.Errorf("rm -rf: %+v, %v", d, err)
	}
	d, err = r.ToolCall(t.Context(), agent.ToolCall{Name: "bash", Args: json.RawMessage(`{"command":"ls"}`)})
	if err != nil || d.Block || d.Args != nil {
		t.Errorf("ls: %+v, %v", d, err)
	}
	out := agent.ToolResult{Content: []llm.Content{llm.TextBlock("KEY=1")}}
	if err := r.ToolResult(t.Context(), agent.ToolCall{Name: "read", Args: json.RawMessage(`{"path":"app/.env"}`)}, &out); err != nil {
		t.Fatal(err)
	}
	if !out.IsError || out.Content[0].Text != "[.env files are hidden]" {
		t.Errorf(".env result %+v", out)
	}
}
