package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/slack/slacktest"
)

// agentsModel is a model served over the OpenAI Chat Completions API
// that records every request. Its answers follow from the conversation:
// after a tool result it answers "done: " and the result; to "WRITE NAME
// TEXT" it calls write, to "READ PATH" read; else it says hello.
type agentsModel struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []agentsRequest
}

// agentsRequest is what a request carried.
type agentsRequest struct {
	Model  string
	System string
	Tools  []string
	Last   string // the text of the last message
}

func newAgentsModel(t *testing.T) *agentsModel {
	m := &agentsModel{}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

func (m *agentsModel) requests() []agentsRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]agentsRequest(nil), m.reqs...)
}

// contentText reads a message's content: a string or text parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct{ Text string }
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (m *agentsModel) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function struct{ Name string } `json:"function"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	rec := agentsRequest{Model: req.Model}
	for _, msg := range req.Messages {
		if msg.Role == "system" || msg.Role == "developer" {
			rec.System += contentText(msg.Content)
		}
	}
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Function.Name)
	}
	last := req.Messages[len(req.Messages)-1]
	rec.Last = contentText(last.Content)
	m.mu.Lock()
	m.reqs = append(m.reqs, rec)
	n := len(m.reqs)
	m.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	send := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-agents", "object": "chat.completion.chunk", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	call := func(name string, args map[string]string) {
		a, _ := json.Marshal(args)
		send(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": fmt.Sprintf("call_%d", n), "type": "function",
			"function": map[string]any{"name": name, "arguments": string(a)}}}}, nil)
		send(map[string]any{}, "tool_calls")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
	words := strings.Fields(rec.Last)
	switch {
	case last.Role == "tool":
		send(map[string]any{"role": "assistant", "content": "done: " + rec.Last}, nil)
	case len(words) >= 3 && words[0] == "WRITE":
		call("write", map[string]string{"path": words[1], "content": strings.Join(words[2:], " ")})
		return
	case len(words) >= 2 && words[0] == "READ":
		call("read", map[string]string{"path": words[1]})
		return
	default:
		send(map[string]any{"role": "assistant", "content": "hello from " + req.Model}, nil)
	}
	send(map[string]any{}, "stop")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestAgentsSlackTeam runs the real binary on a fake Slack with two
// agents: #ops and #web bound to agents of their own workspaces, models,
// prompts, skills and tools, DMs on the default agent. Each channel's
// model requests carry its agent's; files land in its workspace; #web's
// agent cannot read #ops's workspace.
func TestAgentsSlackTeam(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "pibot")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/pibot/pibot/cmd/pibot").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, d := range []string{"ws", "ops", "web", "skills-ops/deploy", "skills-web/frontend"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("skills-ops/deploy/SKILL.md", "---\nname: deploy\ndescription: How ops deploys the infrastructure.\n---\nRun make deploy.\n")
	write("skills-web/frontend/SKILL.md", "---\nname: frontend\ndescription: How web builds the frontend.\n---\nRun npm run build.\n")

	model := newAgentsModel(t)
	sl := slacktest.New()
	sl.TeamID = "T0TEAM"
	t.Cleanup(sl.Close)
	const dm, ops, web = "D100", "C0OPS", "C0WEB"
	cfg := fmt.Sprintf(`data_dir: ./data
http: {listen: '127.0.0.1:0'}
providers:
  fake: {api: openai-completions, base_url: %q, api_key: k, models: [{id: default-model}, {id: ops-model}, {id: web-model}]}
agent:
  workspace: ./ws
  model: fake/default-model
  sandbox: "off"
  approvals: {group: {write: allow}}
agents:
  ops:
    workspace: ./ops
    model: fake/ops-model
    system_prompt: "You are the OPS agent."
    skills: [./skills-ops]
  web:
    workspace: ./web
    model: fake/web-model
    workspace_only: true
    tools: [read, write, ls]
    system_prompt: "You are the WEB agent."
    skills: [./skills-web]
bindings:
  - {agent: ops, platform: slack, channel: C0OPS}
  - {agent: web, platform: slack, workspace: T0TEAM, channel: C0WEB}
access:
  owners: ["slack:UOWNER"]
  groups: ["slack:C0OPS", "slack:C0WEB"]
adapters:
  web: {enabled: false}
  slack: {bot_token: %q, app_token: %q, api_url: %q}
`, model.URL+"/v1", sl.BotToken, sl.AppToken, sl.APIURL)
	write("pibot.yaml", cfg)

	// pibot agents which names the agent of each place.
	for _, tc := range []struct{ loc, want string }{
		{"slack:T0TEAM:C0OPS", "ops"}, {"slack:T0TEAM:C0WEB", "web"}, {"slack:T0OTHER:C0WEB", "default"}, {"slack:T0TEAM:D100", "default"},
	} {
		out, err := runIn(dir, bin, "agents", "which", "-c", "pibot.yaml", tc.loc)
		if err != nil {
			t.Fatalf("pibot agents which %s: %v\n%s", tc.loc, err, out)
		}
		if first, _, _ := strings.Cut(out, " "); strings.TrimSpace(first) != tc.want {
			t.Fatalf("pibot agents which %s = %q, want %s first", tc.loc, out, tc.want)
		}
	}

	srv := serveReady(t, bin, dir)
	if err := sl.WaitConnected(1, 20*time.Second); err != nil {
		t.Fatal(err)
	}

	sayIn := func(channel, thread, text string) string {
		ts, bodies := sl.Post(slacktest.Say{Channel: channel, ThreadTS: thread, User: "UOWNER", Text: text})
		for _, b := range bodies {
			id := sl.Deliver("events_api", b)
			if err := sl.WaitAck(id, 10*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		return ts
	}
	say := func(channel, text string) string { return sayIn(channel, "", text) }
	waitBot := func(channel, sub string) string {
		var found string
		waitUntil(t, "a bot message with "+sub+" in "+channel, 30*time.Second, func() bool {
			for _, m := range sl.Messages(channel) {
				if m.User == sl.BotUserID && strings.Contains(m.Text, sub) && (m.Stream == nil || m.Stream.Stopped) {
					found = m.Text
					return true
				}
			}
			return false
		})
		return found
	}

	say(ops, "<@UBOT> WRITE ops.txt ops-secret-content")
	waitBot(ops, "done:")
	webThread := say(web, "<@UBOT> WRITE web.txt web-content")
	waitBot(web, "done:")
	say(dm, "hello there")
	waitBot(dm, "hello from default-model")

	// Files land in each agent's workspace, and nowhere else.
	for _, f := range []struct{ path, want string }{{"ops/ops.txt", "ops-secret-content"}, {"web/web.txt", "web-content"}} {
		b, err := os.ReadFile(filepath.Join(dir, f.path))
		if err != nil || string(b) != f.want {
			t.Fatalf("%s: %q, %v; want %q", f.path, b, err, f.want)
		}
	}
	for _, p := range []string{"ws/ops.txt", "ws/web.txt", "web/ops.txt", "ops/web.txt"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Fatalf("%s exists: a file landed in another agent's workspace", p)
		}
	}

	// #web's agent reads #ops's workspace: refused.
	opsFile := filepath.Join(dir, "ops", "ops.txt")
	say(web, "<@UBOT> READ "+opsFile)
	got := waitBot(web, "another agent's workspace")
	if strings.Contains(got, "ops-secret-content") {
		t.Fatalf("#web's agent read #ops's file: %q", got)
	}

	// Each channel's requests carry its agent's model, prompt, skills and
	// tools; the DM's the default agent's.
	seen := map[string]bool{}
	for _, r := range model.requests() {
		seen[r.Model] = true
		tools := strings.Join(r.Tools, ",")
		switch r.Model {
		case "ops-model":
			if !strings.Contains(r.System, "You are the OPS agent.") || !strings.Contains(r.System, "deploy") || strings.Contains(r.System, "WEB agent") || strings.Contains(r.System, "frontend") {
				t.Errorf("ops request's system prompt:\n%s", r.System)
			}
			if !strings.Contains(r.System, filepath.Join(dir, "ops")) {
				t.Errorf("ops request's working directory is not ops's workspace:\n%s", r.System)
			}
			if tools != "read,write,edit,bash,grep,find,ls,attach" {
				t.Errorf("ops request's tools: %s", tools)
			}
		case "web-model":
			if !strings.Contains(r.System, "You are the WEB agent.") || !strings.Contains(r.System, "frontend") || strings.Contains(r.System, "OPS agent") || strings.Contains(r.System, "deploy") {
				t.Errorf("web request's system prompt:\n%s", r.System)
			}
			if tools != "read,write,ls" {
				t.Errorf("web request's tools: %s", tools)
			}
			if strings.Contains(r.Last, "ops-secret-content") {
				t.Errorf("web's model was sent ops's file: %q", r.Last)
			}
		case "default-model":
			if strings.Contains(r.System, "OPS agent") || strings.Contains(r.System, "WEB agent") {
				t.Errorf("default request's system prompt:\n%s", r.System)
			}
		default:
			t.Errorf("a request for model %q", r.Model)
		}
	}
	for _, m := range []string{"ops-model", "web-model", "default-model"} {
		if !seen[m] {
			t.Errorf("no request for %s", m)
		}
	}

	// A reload binds #web to ops: the thread #web's agent works in keeps
	// its agent; a new conversation there (a new thread) gets ops.
	write("pibot.yaml", strings.Replace(cfg, "{agent: web, platform: slack, workspace: T0TEAM, channel: C0WEB}",
		"{agent: ops, platform: slack, workspace: T0TEAM, channel: C0WEB}", 1))
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the reload", 10*time.Second, func() bool { return strings.Contains(srv.out.String(), "configuration reloaded") })
	sayIn(web, webThread, "still here q7")
	waitBot(web, "hello from web-model")
	say(web, "<@UBOT> a new conversation q8")
	waitBot(web, "hello from ops-model")
}

// runIn runs bin with args in dir and returns its stdout.
func runIn(dir, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String() + errb.String(), err
	}
	return out.String(), nil
}

// waitUntil polls cond until it holds or d passed.
func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lockedBuffer is a buffer written by a process's output copier and read
// by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
