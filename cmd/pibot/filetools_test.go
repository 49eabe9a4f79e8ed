package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/internal/tinyfs"
	"github.com/pibot/pibot/tools/sandbox"
)

// modelCall is one tool call a plannedModel answers with.
type modelCall struct{ name, args string }

// plannedModel is an OpenAI-compatible chat completions server (the
// streamed wire format) whose answers the test computes from each
// request: the tool calls plan returns for a user's message and the
// round (how many answers the model gave since that message; the calls of
// one round run concurrently), then "done" once plan returns none. It
// keeps every request body. Call ids are call_ROUND_I.
type plannedModel struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []string
}

func newPlannedModel(t *testing.T, plan func(user string, round int) []modelCall) *plannedModel {
	m := &plannedModel{}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.reqs = append(m.reqs, string(body))
		m.mu.Unlock()
		var req struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m1",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		round, user := 0, ""
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if msg := req.Messages[i]; msg.Role == "assistant" {
				round++
			} else if msg.Role == "user" {
				if json.Unmarshal(msg.Content, &user) != nil {
					user = string(msg.Content)
				}
				break
			}
		}
		calls := plan(user, round)
		if len(calls) == 0 {
			chunk(map[string]any{"role": "assistant", "content": "done"}, nil)
			chunk(map[string]any{}, "stop")
		} else {
			var tc []any
			for i, c := range calls {
				tc = append(tc, map[string]any{"index": i, "id": "call_" + strconv.Itoa(round) + "_" + strconv.Itoa(i), "type": "function",
					"function": map[string]any{"name": c.name, "arguments": c.args}})
			}
			chunk(map[string]any{"role": "assistant", "tool_calls": tc}, nil)
			chunk(map[string]any{}, "tool_calls")
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(m.srv.Close)
	return m
}

// results returns the tool results the model was sent for the calls it
// made for user, by call id (from the request that carries the most).
func (m *plannedModel) results(t *testing.T, user string) map[string]string {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	var best map[string]string
	for _, body := range m.reqs {
		var req struct {
			Messages []struct {
				Role       string          `json:"role"`
				Content    json.RawMessage `json:"content"`
				ToolCallID string          `json:"tool_call_id"`
			} `json:"messages"`
		}
		if json.Unmarshal([]byte(body), &req) != nil {
			continue
		}
		out := map[string]string{}
		mine := false
		for _, msg := range req.Messages {
			var text string
			if json.Unmarshal(msg.Content, &text) != nil {
				text = string(msg.Content)
			}
			switch msg.Role {
			case "user":
				mine = strings.Contains(text, user)
			case "tool":
				if mine {
					out[msg.ToolCallID] = text
				}
			}
		}
		if len(out) > len(best) {
			best = out
		}
	}
	if best != nil {
		return best
	}
	t.Fatalf("no request carried the tool results for %q", user)
	return nil
}

// processWith returns the pid of a process whose environment holds
// marker (the test runs as root, or as pibot's user).
func processWith(marker string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ")); err == nil && strings.Contains(string(b), marker) {
			return pid
		}
	}
	return 0
}

// TestFileToolsAttackThroughServe replays issue 30.4 through the real
// binary, a Slack DM and the real sandbox (when bubblewrap works, and
// unsandboxed): a paired user who is not an owner asks the model to read
// pibot's environment (/proc/self/environ, with the metrics token), an MCP
// server's (/proc/PID/environ, with its secret), /etc/shadow, workspace
// symlinks to those and to the data directory, and ".." paths. Every
// call is refused with a message that says why, and what the model got
// back holds no secret. The owner's calls reach what the README says
// they do. pibot's own environment, the MCP server's and a hook's hold
// none of the secrets pibot was configured with but their own.
func TestFileToolsAttackThroughServe(t *testing.T) {
	t.Parallel()
	modes := []string{"off"}
	if _, err := sandbox.New(t.Context(), sandbox.ModeBwrap, nil); err == nil {
		modes = append(modes, "bwrap")
	} else {
		t.Logf("the sandboxed replay is skipped: no working bubblewrap: %v", err)
	}
	for _, mode := range modes {
		t.Run("sandbox="+mode, func(t *testing.T) { fileToolsAttack(t, mode) })
	}
}

func fileToolsAttack(t *testing.T, mode string) {
	srv := slacktest.New()
	defer srv.Close()
	dir := t.TempDir()
	ws, data := filepath.Join(dir, "pibot-workspace"), filepath.Join(dir, "pibot-data")
	outside := filepath.Join(dir, "elsewhere")
	for _, d := range []string{ws, data, outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, data, "secret.json", `{"token":"XYZZY-PAIRING"}`)
	writeFile(t, outside, "notes.txt", "owner notes")
	writeFile(t, ws, "hello.txt", "hello")
	for link, target := range map[string]string{"env-link": "/proc/self/environ", "data-link": data, "shadow-link": "/etc/shadow", "root-link": "/proc/self/root/etc/shadow"} {
		symlink(t, target, filepath.Join(ws, link))
	}
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	metricsToken, mcpToken, modelKey := "metrics-XYZZY-"+stamp, "mcp-XYZZY-"+stamp, "sk-XYZZY-"+stamp
	hookEnv := filepath.Join(dir, "hook.env")

	var mcpPID int
	model := newPlannedModel(t, func(user string, round int) []modelCall {
		if round > 0 {
			return nil
		}
		if mcpPID == 0 {
			mcpPID = processWith("PROBE_TOKEN=" + mcpToken)
		}
		read := func(p string) modelCall {
			b, _ := json.Marshal(map[string]string{"path": p})
			return modelCall{"read", string(b)}
		}
		switch {
		case strings.Contains(user, "attack"):
			return []modelCall{read("/proc/self/environ"), read("/proc/" + strconv.Itoa(mcpPID) + "/environ"), read("/etc/shadow"),
				read("env-link"), read("data-link/secret.json"), read("shadow-link"), read("root-link"), read("../pibot-data/secret.json"),
				read("../c.yaml"), read(filepath.Join(outside, "notes.txt")), read("../elsewhere/notes.txt"),
				{"ls", `{"path":"/proc"}`}, {"grep", `{"pattern":"XYZZY","path":".."}`}, {"find", `{"pattern":"environ","path":"/proc/self"}`},
				{"write", `{"path":"../elsewhere/planted.txt","content":"x"}`}, read("hello.txt")}
		case strings.Contains(user, "owner"):
			return []modelCall{read("/proc/self/environ"), read("/etc/shadow"), read("data-link/secret.json"), read("/etc/hostname"),
				read(filepath.Join(outside, "notes.txt")), {"probe__environ", `{}`}}
		}
		return nil
	})
	yaml := `data_dir: ./pibot-data
http:
  metrics_token: ${PIBOT_METRICS}
agent:
  model: m/m1
  sandbox: ` + mode + `
providers:
  m:
    api: openai-completions
    base_url: ` + model.srv.URL + `/v1
    api_key: ${PIBOT_MODEL_KEY}
    models: [{id: m1}]
mcp:
  servers:
    probe:
      command: ` + os.Args[0] + `
      args: ["-test.run=^$"]
      env: {` + mcpServerEnv + `: "1", PROBE_TOKEN: "${PROBE_TOKEN}"}
hooks:
  dump:
    command: /bin/sh
    args: ["-c", "env > ` + hookEnv + `; cat > /dev/null"]
    events: [input]
access:
  owners: ["slack:UOWNER"]
  users: ["slack:UNEW"]
  dm_policy: allowlist
adapters:
  web: {enabled: false}
  slack:
    bot_token: ` + srv.BotToken + `
    app_token: ` + srv.AppToken + `
    signing_secret: ` + srv.SigningSecret + `
    mode: socket
    api_url: ` + srv.APIURL + `
`
	cfg := writeFile(t, dir, "c.yaml", yaml)
	s := startServeEnv(t, dir, []string{"PIBOT_METRICS=" + metricsToken, "PROBE_TOKEN=" + mcpToken, "PIBOT_MODEL_KEY=" + modelKey}, "-c", cfg, "--listen", "127.0.0.1:0")
	if err := srv.WaitConnected(1, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	say := func(channel, user, text string) {
		t.Helper()
		_, bodies := srv.Post(slacktest.Say{Channel: channel, User: user, Text: text})
		if err := srv.WaitAck(srv.Deliver("events_api", bodies[0]), 15*time.Second); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(90 * time.Second)
		for {
			for _, m := range srv.Messages(channel) {
				if m.User == srv.BotUserID && strings.HasSuffix(strings.TrimSpace(m.Text), "done") {
					return
				}
			}
			if time.Now().After(deadline) {
				s.stop(t) // the log is complete once pibot is gone
				t.Fatalf("no answer in %s; stderr:\n%s", channel, s.stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	say("D200", "UNEW", "attack please")
	say("D100", "UOWNER", "owner here")
	if mcpPID == 0 {
		t.Fatal("the MCP server was not found running")
	}

	secrets := []string{metricsToken, mcpToken, modelKey, "XYZZY-PAIRING", "root:"}
	kernel, own, credentials := "is in /proc, /sys or /dev (process and kernel state)", "is pibot's own data", "holds the host's credentials"
	outsideWS := "is outside the workspace. Only files inside the workspace can be accessed (agent.workspace_only: non_owners"
	attack := model.results(t, "attack")
	for i, want := range []string{kernel, kernel, outsideWS, kernel, own, outsideWS, kernel, own, own, outsideWS, outsideWS, kernel, outsideWS, kernel, outsideWS, "hello"} {
		got := attack["call_0_"+strconv.Itoa(i)]
		if !strings.Contains(got, want) {
			t.Errorf("non-owner call %d: %q, want %q", i, got, want)
		}
		for _, sec := range secrets {
			if strings.Contains(got, sec) {
				t.Errorf("non-owner call %d returned a secret: %q", i, got)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "planted.txt")); err == nil {
		t.Error("the non-owner wrote outside the workspace")
	}

	owner := model.results(t, "owner")
	wantOutside := "owner notes" // unsandboxed, the owner reaches the host
	if mode == "bwrap" {
		wantOutside = "which the bash sandbox replaces with an empty one for each command" // as bash does not see it (in /tmp)
	}
	host, _ := os.ReadFile("/etc/hostname")
	for i, want := range []string{kernel, credentials, own, strings.TrimSpace(string(host)), wantOutside, "ENV:"} {
		if got := owner["call_0_"+strconv.Itoa(i)]; !strings.Contains(got, want) {
			t.Errorf("owner call %d: %q, want %q", i, got, want)
		}
	}
	probe := owner["call_0_5"]
	if !strings.Contains(probe, "PROBE_TOKEN="+mcpToken) {
		t.Errorf("the MCP server lacks its own secret: %.500q", probe)
	}

	// The environments: pibot's (as the kernel shows it), the MCP
	// server's and the hook's hold no configured secret but their own.
	pibotEnv, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(s.cmd.Process.Pid), "environ"))
	if err != nil {
		t.Fatalf("read pibot's environment (the test needs pibot's user or root): %v", err)
	}
	hook, err := os.ReadFile(hookEnv)
	if err != nil {
		t.Fatalf("the hook did not run: %v", err)
	}
	for what, env := range map[string]string{"pibot": string(pibotEnv), "the MCP server": probe, "the hook": string(hook)} {
		for _, sec := range []string{metricsToken, modelKey} {
			if strings.Contains(env, sec) {
				t.Errorf("%s's environment holds %q", what, sec)
			}
		}
	}
	if strings.Contains(string(hook), mcpToken) || strings.Contains(string(pibotEnv), mcpToken) {
		t.Error("the MCP server's secret is in pibot's or the hook's environment")
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, s.stderr)
	}
}

// TestDiskQuotaThroughServe replays issue 30.10 through the real binary:
// the workspace and the data directory share a small file system (pibot
// warns at start); a paired user who is not an owner writes past the
// workspace quota (refused), fills the disk from bash (stopped at the
// reserve), and is then held to file writes blocked; every user's
// messages are still taken and answered, and /readyz stays ok.
func TestDiskQuotaThroughServe(t *testing.T) {
	t.Parallel()
	fs := tinyfs.Mount(t, 48<<20)
	srv := slacktest.New()
	defer srv.Close()
	dir := t.TempDir()
	ws, data := filepath.Join(fs, "ws"), filepath.Join(fs, "data")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	model := newPlannedModel(t, func(user string, round int) []modelCall {
		write := func(p string, n int) modelCall {
			b, _ := json.Marshal(map[string]string{"path": p, "content": strings.Repeat("x", n)})
			return modelCall{"write", string(b)}
		}
		// One call per round: the calls of a round run concurrently.
		plan := []modelCall{write("a", 1<<20), write("b", 1<<20+1<<19),
			{"bash", `{"command":"for i in $(seq 100); do fallocate -l 1M f$i || break; done; echo filled"}`},
			{"bash", `{"command":"echo more > more.txt; head -c 5000000 /dev/zero > last; echo tried"}`}}
		if !strings.Contains(user, "fill") || round >= len(plan) {
			return nil
		}
		return plan[round : round+1]
	})
	yaml := `data_dir: ` + data + `
agent:
  model: m/m1
  workspace: ` + ws + `
  sandbox: "off"
  limits: {workspace_size: 2MiB, disk_reserve: 16MiB}
providers:
  m: {api: openai-completions, base_url: "` + model.srv.URL + `/v1", api_key: sk-test-123456, models: [{id: m1}]}
access:
  owners: ["slack:UOWNER"]
  users: ["slack:UNEW"]
  dm_policy: allowlist
adapters:
  web: {enabled: false}
  slack:
    bot_token: ` + srv.BotToken + `
    app_token: ` + srv.AppToken + `
    signing_secret: ` + srv.SigningSecret + `
    mode: socket
    api_url: ` + srv.APIURL + `
`
	cfg := writeFile(t, dir, "c.yaml", yaml)
	s := startServe(t, dir, "-c", cfg, "--listen", "127.0.0.1:0")
	if err := srv.WaitConnected(1, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	answered := func(channel string) int {
		n := 0
		for _, m := range srv.Messages(channel) {
			if m.User == srv.BotUserID && strings.HasSuffix(strings.TrimSpace(m.Text), "done") {
				n++
			}
		}
		return n
	}
	say := func(channel, user, text string) {
		t.Helper()
		before := answered(channel)
		_, bodies := srv.Post(slacktest.Say{Channel: channel, User: user, Text: text})
		if err := srv.WaitAck(srv.Deliver("events_api", bodies[0]), 15*time.Second); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(90 * time.Second)
		for answered(channel) == before {
			if time.Now().After(deadline) {
				s.stop(t) // the log is complete once pibot is gone
				t.Fatalf("%q was not answered; stderr:\n%s", text, s.stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	say("D200", "UNEW", "fill the disk")
	res := model.results(t, "fill the disk")
	for i, want := range []string{"Successfully wrote", "over its quota of 2 MiB (agent.limits.workspace_size)",
		"kept free for pibot's data (agent.limits.disk_reserve)", "ran with file writes blocked"} {
		if got := res["call_"+strconv.Itoa(i)+"_0"]; !strings.Contains(got, want) {
			t.Errorf("call %d: %.400q, want %q", i, got, want)
		}
	}
	for _, f := range []string{"more.txt", "last"} {
		if st, err := os.Stat(filepath.Join(ws, f)); err == nil && st.Size() > 0 {
			t.Errorf("a call over the limits wrote %s", f)
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(fs, &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("free after the attack: %d bytes (reserve 16 MiB); data_dir holds %d bytes", int64(st.Bavail)*int64(st.Bsize), dirSize(data)) //nolint:unconvert // types differ by platform
	// pibot's data is still written: both users are answered, /readyz ok.
	say("D200", "UNEW", "still there?")
	say("D100", "UOWNER", "hello")
	if code, body := s.get(t, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz %d %s", code, body)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, s.stderr)
	}
	if !strings.Contains(s.stderr.String(), "are on the same file system") {
		t.Errorf("no warning at start that the workspace and data_dir share a file system:\n%s", s.stderr)
	}
}

func dirSize(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error { //nolint:errcheck // a test's estimate
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n
}
