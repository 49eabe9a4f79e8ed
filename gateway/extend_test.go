package gateway_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/agent/hooks"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/internal/extensions"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// extWorkspace is a workspace with a prompt template, a skill and a hook
// program (a shell script) that handles messages mentioning "secret",
// refuses those mentioning "forbidden" by failing (fail-closed), adds
// context to every run and blocks bash.
func extWorkspace(t *testing.T) (*extensions.Set, string) {
	t.Helper()
	ws := t.TempDir()
	files := map[string]string{
		".pi/prompts/review.md":      "---\ndescription: Review a file\n---\nReview $1 with focus on ${@:2}.",
		".pi/prompts/bad-name.md":    "not a command on every platform",
		".pi/skills/deploy/SKILL.md": "---\nname: deploy\ndescription: How we deploy.\n---\nRun make deploy.\n",
		"hook.sh": `#!/bin/sh
read -r req
case "$req" in
*'"event":"input"'*'forbidden'*) exit 1 ;;
*'"event":"input"'*'secret'*) echo '{"action":"handled","reply":"No secrets here."}' ;;
*'"event":"before_agent_start"'*) echo '{"context":"Hook context: the deploy is frozen."}' ;;
*'"event":"tool_call"'*) echo '{"action":"block","reason":"bash is off today"}' ;;
*'"event":"agent_end"'*) printf '%s\n' "$req" >> "$(dirname "$0")/end.log" ;;
*) echo '{}' ;;
esac`,
	}
	for name, content := range files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hk := hooks.Hook{Name: "guard", Command: filepath.Join(ws, "hook.sh"), Timeout: 5 * time.Second, FailClosed: true,
		Events: []string{hooks.EventInput, hooks.EventBeforeAgentStart, hooks.EventToolCall, hooks.EventAgentEnd}}
	return extensions.New(extensions.Options{Skills: []string{filepath.Join(ws, ".pi", "skills")}, Prompts: []string{filepath.Join(ws, ".pi", "prompts")},
		Hooks: []hooks.Hook{hk}}), ws
}

// Prompt templates are commands (in /help and the platform's list) whose
// text reaches the model expanded; /skill:NAME expands the skill; the
// hooks answer, refuse, add context and block tools.
func TestExtensions(t *testing.T) {
	set, ws := extWorkspace(t)
	var bashRan atomic.Int32
	bash := &agenttest.Tool{Name: "bash", Fn: func(context.Context, string, json.RawMessage, func(llm.ToolOutput)) (llm.ToolOutput, error) {
		bashRan.Add(1)
		return agenttest.TextOutput("ran"), nil
	}}
	h := newHarness(t, []faux.Turn{
		faux.Text("reviewed"),
		faux.Text("skilled"),
		faux.Text("slash skilled"),
		faux.Text("bang skilled"),
		{Calls: []faux.ToolCall{{ID: "c1", Name: "bash", Args: `{"command":"make deploy"}`}}},
		faux.Text("after the block"),
	}, withTools(bash), withConfig(func(c *gateway.Config) { c.Extensions = set }))
	<-h.g.Ready()
	// The platform's list is registered in the background.
	h.waitFor("the command list", func() bool { return len(h.ad.Commands()) > 0 })

	var listed []string
	for _, c := range h.ad.Commands() {
		listed = append(listed, c.Name+": "+c.Description)
	}
	if !slices.Contains(listed, "review: Review a file") || slices.ContainsFunc(listed, func(s string) bool { return strings.HasPrefix(s, "bad-name") }) {
		t.Errorf("platform commands %q: want review, not bad-name", listed)
	}
	if help := h.answer(dmConv, "owner", "/help"); !strings.Contains(help, "- `/review` — Review a file") ||
		!strings.Contains(help, "- `/skill:deploy [text]` — How we deploy.") {
		t.Errorf("/help does not list the template and the skill:\n%s", help)
	}
	if slices.ContainsFunc(listed, func(s string) bool { return strings.HasPrefix(s, "skill:") }) {
		t.Errorf("a skill in the platform's menu: %q", listed)
	}

	h.send("/review src/x.go error handling")
	h.waitText(dmConv, "reviewed")
	if got := h.lastRequestTexts(); got[len(got)-1] != "Review src/x.go with focus on error handling." {
		t.Errorf("model got %q", got)
	}
	reqs := h.model.Requests()
	if sp := reqs[len(reqs)-1].SystemPrompt; !strings.HasSuffix(sp, "\n\nHook context: the deploy is frozen.") {
		t.Errorf("system prompt %q lacks the hook's context", sp)
	}

	// agent_end sees the run's messages: the expanded prompt and the answer.
	h.waitFor("agent_end", func() bool {
		b, _ := os.ReadFile(filepath.Join(ws, "end.log"))
		return strings.Contains(string(b), `"text":"Review src/x.go with focus on error handling."`) && strings.Contains(string(b), `"text":"reviewed"`)
	})

	h.send("/skill:deploy now")
	h.waitText(dmConv, "skilled")
	skill := filepath.Join(ws, ".pi", "skills", "deploy")
	want := "<skill name=\"deploy\" location=\"" + filepath.Join(skill, "SKILL.md") + "\">\nReferences are relative to " + skill + ".\n\nRun make deploy.\n</skill>\n\nnow"
	if got := h.lastRequestTexts(); got[len(got)-1] != want {
		t.Errorf("model got %q\nwant %q", got[len(got)-1], want)
	}

	// Slack's slash command (/pi skill:deploy …) arrives as a command named
	// "skill:deploy"; a Slack thread message says !skill:deploy.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	in := chat.Inbound{Kind: chat.KindMessage, Conv: dmConv, Msg: chat.MsgRef{Conv: dmConv, ID: "slash"}, User: chat.User{ID: "owner"},
		Text: "/skill:deploy later", Command: &chat.Command{Name: "skill:deploy", Args: "later"}}
	if err := h.ad.Inject(ctx, in); err != nil {
		t.Fatal(err)
	}
	h.waitText(dmConv, "slash skilled")
	if got := h.lastRequestTexts(); !strings.HasSuffix(got[len(got)-1], "</skill>\n\nlater") {
		t.Errorf("model got %q", got[len(got)-1])
	}
	h.send("!skill:deploy too")
	h.waitText(dmConv, "bang skilled")
	if got := h.lastRequestTexts(); !strings.HasSuffix(got[len(got)-1], "</skill>\n\ntoo") {
		t.Errorf("model got %q", got[len(got)-1])
	}

	calls := h.model.Calls()
	h.send("what is the secret?")
	h.waitText(dmConv, "No secrets here.")
	h.send("something forbidden")
	h.waitText(dmConv, "This message was not processed: a hook refused it")
	if h.model.Calls() != calls {
		t.Errorf("the model was called for messages the hook answered")
	}

	h.send("deploy it")
	h.waitText(dmConv, "after the block")
	if bashRan.Load() != 0 {
		t.Error("bash ran although the hook blocked it")
	}
	var results []string
	for _, m := range h.model.Requests()[h.model.Calls()-1].Messages {
		if m.Role == llm.RoleToolResult {
			results = append(results, m.Text())
		}
	}
	if !slices.Contains(results, "bash is off today") {
		t.Errorf("tool results %q", results)
	}
	waitAcked(t, h)
}

// waitAcked waits until every inbox item is acknowledged: a message a hook
// answered is not replayed after a restart.
func waitAcked(t *testing.T, h *harness) {
	t.Helper()
	h.waitFor("the inbox to empty", func() bool { return len(pendingOf(h)) == 0 })
}

// A message whose input hook is still working when pibot stops is not
// lost: it stays in the inbox and is taken up at the next start.
func TestInputHookAtShutdown(t *testing.T) {
	dir := t.TempDir()
	hookPath := filepath.Join(dir, "hook.sh")
	script := `#!/bin/sh
read -r req
d="$(dirname "$0")"
if [ ! -e "$d/seen" ]; then touch "$d/seen"; exec sleep 30; fi
echo '{}'`
	if err := os.WriteFile(hookPath, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	set := extensions.New(extensions.Options{
		Hooks: []hooks.Hook{{Name: "slow", Command: hookPath, Events: []string{hooks.EventInput}, Timeout: time.Minute}}})
	h := newHarness(t, []faux.Turn{faux.Text("answered after the restart")}, withConfig(func(c *gateway.Config) {
		c.Extensions = set
		c.DrainTimeout = 200 * time.Millisecond
	}))
	<-h.g.Ready()
	h.send("hello")
	h.waitFor("the hook to start", func() bool {
		_, err := os.Stat(filepath.Join(dir, "seen"))
		return err == nil
	})
	h.restart()
	h.waitText(dmConv, "answered after the restart")
	if msgs := h.ad.Messages(dmConv); slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, "not processed") }) {
		t.Errorf("the message was refused at shutdown: %q", msgs)
	}
}
