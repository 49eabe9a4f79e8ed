package main

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pibot/pibot/config"
)

// TestConfigCheckBindings: `pibot config check` (and serve, in the same
// words) refuses a binding that names no agent and one an earlier binding
// always beats, naming the key of each.
func TestConfigCheckBindings(t *testing.T) {
	const base = "data_dir: ./d\nhttp: {listen: '127.0.0.1:0'}\nagent: {workspace: ./ws}\nagents: {ops: {workspace: ./ops}, web: {workspace: ./web}}\n"
	tests := []struct {
		name, bindings, key, msg string
	}{
		{"unknown agent", "bindings: [{agent: ops, platform: slack, channel: C0OPS}, {agent: opz, platform: slack, channel: C0X}]\n",
			"bindings[1].agent", `"opz" names no agent`},
		{"shadowed binding", "bindings: [{agent: ops, platform: slack, channel: C0OPS}, {agent: web, platform: slack, user: U1}, {agent: web, platform: Slack, channel: C0OPS}]\n",
			"bindings[2]", "bindings[0] (agent ops) has the same keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{"ws", "ops", "web"} {
				if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			cfg := writeFile(t, dir, "c.yaml", base+tt.bindings)
			check := refusal(t, dir, "config", "check", "-c", cfg)
			serve := refusal(t, dir, "serve", "-c", cfg)
			if !slices.Equal(check, serve) {
				t.Fatalf("config check and serve disagree:\ncheck: %q\nserve: %q", check, serve)
			}
			if len(check) != 1 || !strings.Contains(check[0], tt.key+":") || !strings.Contains(check[0], tt.msg) {
				t.Fatalf("want one line naming %s and saying %q: %q", tt.key, tt.msg, check)
			}
		})
	}
}

// A named agent's workspace is checked as the default one's is, and the
// error names its own key.
func TestConfigCheckAgentWorkspace(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, dir, "c.yaml", "data_dir: ./d\nhttp: {listen: '127.0.0.1:0'}\nagent: {workspace: ./ws}\nagents: {ops: {workspace: ./nope}}\n")
	check := refusal(t, dir, "config", "check", "-c", cfg)
	if len(check) != 1 || !strings.Contains(check[0], "agents.ops.workspace:") {
		t.Fatalf("want one line naming agents.ops.workspace: %q", check)
	}
}

// agents.NAME.worktree: per_thread needs the workspace to be a git
// repository's top level; config check and serve say so under the key,
// and refuse a value they do not know.
func TestConfigCheckAgentWorktree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	for _, d := range []string{"ws", "web"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct{ yaml, key, msg string }{
		{"agents: {web: {workspace: ./web, worktree: per_thread}}\n", "agents.web.worktree:", "git repository"},
		{"agents: {web: {workspace: ./web, worktree: sometimes}}\n", "agents.web.worktree", "sometimes"},
	} {
		cfg := writeFile(t, dir, "c.yaml", "data_dir: ./d\nhttp: {listen: '127.0.0.1:0'}\nagent: {workspace: ./ws}\n"+tt.yaml)
		check := refusal(t, dir, "config", "check", "-c", cfg)
		serve := refusal(t, dir, "serve", "-c", cfg)
		if !slices.Equal(check, serve) {
			t.Fatalf("config check and serve disagree:\ncheck: %q\nserve: %q", check, serve)
		}
		if len(check) != 1 || !strings.Contains(check[0], tt.key) || !strings.Contains(check[0], tt.msg) {
			t.Fatalf("want one line naming %s and saying %q: %q", tt.key, tt.msg, check)
		}
	}
	// A repository's top level passes.
	if out, err := exec.Command("git", "init", "-q", filepath.Join(dir, "web")).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	cfg := writeFile(t, dir, "c.yaml", "data_dir: ./d\nhttp: {listen: '127.0.0.1:0'}\nagent: {workspace: ./ws}\nagents: {web: {workspace: ./web, worktree: per_thread}}\n")
	cmd := exec.Command(binary, "config", "check", "-c", cfg)
	cmd.Dir, cmd.Env = dir, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("config check over a repository: %v\n%s", err, out)
	}
}

// pibot agents lists the agents and bindings and marks a shadowed one;
// pibot agents which names the agent first, then why.
func TestAgentsCommand(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", `agent: {model: p/default}
agents: {ops: {workspace: /srv/infra, model: p/ops}, web: {workspace: /srv/web, worktree: per_thread}}
bindings:
  - {agent: ops, platform: slack, channel: C0OPS}
  - {agent: web, platform: slack, workspace: T0TEAM, channel: C0WEB}
  - {agent: ops, platform: telegram, user: "123456"}
  - {agent: web, platform: discord, workspace: "987", role: "555"}
`)
	out := ok(t, dir, "agents", "-c", "c.yaml")
	for _, want := range []string{"default", "ops", "model p/ops, workspace /srv/infra (agents.ops)", "bindings[1] → web: platform=slack workspace=T0TEAM channel=C0WEB", "workspace /srv/web, a git worktree per thread (agents.web)"} {
		if !strings.Contains(out, want) {
			t.Errorf("pibot agents lacks %q:\n%s", want, out)
		}
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"slack:T0TEAM:C0OPS"}, "ops bindings[0]: platform=slack channel=C0OPS"},
		{[]string{"slack:T0TEAM:C0WEB:1700000000.000100"}, "web bindings[1]"},
		{[]string{"slack:T0OTHER:C0WEB"}, "default no binding matches"},
		{[]string{"telegram::123456", "--user", "123456"}, "ops bindings[2]"},
		{[]string{"telegram::42", "--user", "42"}, "default"},
		{[]string{"discord:987:C1", "--user", "u", "--role", "555"}, "web bindings[3]"},
		{[]string{"discord:987:C1", "--user", "u"}, "default"},
	}
	for _, tt := range tests {
		got := ok(t, dir, append([]string{"agents", "which", "-c", "c.yaml"}, tt.args...)...)
		if !strings.HasPrefix(got, tt.want) {
			t.Errorf("agents which %v = %q, want it to start with %q", tt.args, got, tt.want)
		}
	}
	if r := pibot(t, dir, "", nil, "agents", "which", "-c", "c.yaml", "nocolons"); r.code != 2 {
		t.Errorf("a bad location: exit %d, want 2", r.code)
	}
}

// Each agent sees its own settings as the agent: block and only the MCP
// servers and hooks it lists (MCP servers start per agent, from this
// view); every other agent's workspace is among its denied paths.
func TestAgentView(t *testing.T) {
	cfg, err := config.Parse(strings.NewReader(`
agent: {workspace: /srv/main, model: p/main, mcp: [fs]}
mcp: {servers: {gh: {command: gh-mcp}, fs: {command: fs-mcp}}}
hooks: {audit: {command: /bin/true, events: [input]}}
agents:
  ops: {workspace: /srv/infra, model: p/ops, mcp: [gh], hooks: [audit]}
  web: {workspace: /srv/web}
`), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		agent, model, ws, mcp, hooks, others string
	}{
		{"default", "p/main", "/srv/main", "fs", "", "/srv/infra,/srv/web"},
		{"ops", "p/ops", "/srv/infra", "gh", "audit", "/srv/main,/srv/web"},
		{"web", "p/main", "/srv/web", "", "", "/srv/main,/srv/infra"},
	}
	for _, tt := range tests {
		v := agentView(cfg, tt.agent)
		mcp := slices.Sorted(maps.Keys(v.MCP.Servers))
		if v.Agent.Model != tt.model || v.Agent.Workspace != tt.ws || strings.Join(mcp, ",") != tt.mcp || strings.Join(v.HookNames(), ",") != tt.hooks {
			t.Errorf("%s: model %q workspace %q mcp %v hooks %v", tt.agent, v.Agent.Model, v.Agent.Workspace, mcp, v.HookNames())
		}
		if got := strings.Join(otherWorkspaces(cfg, tt.agent), ","); got != tt.others {
			t.Errorf("%s: other workspaces %q, want %q", tt.agent, got, tt.others)
		}
	}
}

// config check resolves each agent's model, naming its key.
func TestConfigCheckAgentModel(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"ws", "ops"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg := writeFile(t, dir, "c.yaml", "data_dir: ./d\nhttp: {listen: '127.0.0.1:0'}\nproviders: {f: {api: openai-completions, base_url: 'http://127.0.0.1:1/v1', models: [{id: m}]}}\n"+
		"agent: {workspace: ./ws, model: f/m}\nagents: {ops: {workspace: ./ops, model: f/nope}}\n")
	check := refusal(t, dir, "config", "check", "-c", cfg)
	if len(check) != 1 || !strings.Contains(check[0], "agents.ops.model: f/nope") {
		t.Fatalf("want one line naming agents.ops.model: %q", check)
	}
}

// doctor checks each agent's workspace, naming its key.
func TestDoctorAgentWorkspaces(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"ws", "ops"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, dir, "c.yaml", "data_dir: ./data\nagent: {workspace: ./ws, sandbox: \"off\"}\nagents: {ops: {workspace: ./ops}, web: {workspace: ./nope}}\nadapters: {web: {enabled: false}}\n")
	r := pibot(t, dir, "", nil, "doctor", "-c", "c.yaml")
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	for _, want := range []string{"workspace ops", "FAIL  workspace web", "fix agents.web.workspace"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor lacks %q:\n%s", want, r.stdout)
		}
	}
}
