package config

import (
	"strings"
	"testing"
	"time"
)

// pinnedAgents is the agents and bindings example of the issue that
// introduced them.
const pinnedAgents = `
agent:
  model: openai/gpt-default
  approvals: {group: {write: deny}}
agents:
  ops: {workspace: /srv/infra, model: claude/sonnet, approvals: {group: {bash: ask}}}
  web: {workspace: /srv/web}
bindings:
  - {agent: ops, platform: slack, channel: C0OPS}
  - {agent: web, platform: slack, workspace: T0TEAM, channel: C0WEB}
  - {agent: ops, platform: telegram, user: "123456"}
  - {agent: web, platform: discord, workspace: "987", role: "555"}
`

func TestAgentsInheritTheAgentBlock(t *testing.T) {
	cfg, err := Parse(strings.NewReader(pinnedAgents), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate = %v", err)
	}
	ops, web := cfg.Agents["ops"], cfg.Agents["web"]
	if ops.Model != "claude/sonnet" || web.Model != "openai/gpt-default" {
		t.Fatalf("models: ops %q web %q", ops.Model, web.Model)
	}
	if ops.Workspace != "/srv/infra" || web.Workspace != "/srv/web" {
		t.Fatalf("workspaces: %q %q", ops.Workspace, web.Workspace)
	}
	// Maps merge key by key; the agent: block's map is not changed.
	if ops.Approvals.Group["bash"] != "ask" || ops.Approvals.Group["write"] != "deny" {
		t.Fatalf("ops approvals: %v", ops.Approvals.Group)
	}
	if _, ok := cfg.Agent.Approvals.Group["bash"]; ok && cfg.Agent.Approvals.Group["bash"] != Default().Agent.Approvals.Group["bash"] {
		t.Fatalf("agent: block changed: %v", cfg.Agent.Approvals.Group)
	}
	if web.Approvals.Group["write"] != "deny" || len(web.Tools) == 0 || web.Queue.Mode != "steer" {
		t.Fatalf("web did not inherit: %+v", web)
	}
	if got := cfg.AgentNames(); strings.Join(got, ",") != "default,ops,web" {
		t.Fatalf("AgentNames = %v", got)
	}
	if len(cfg.Bindings) != 4 || cfg.Bindings[3].Role != "555" || cfg.Bindings[1].Workspace != "T0TEAM" {
		t.Fatalf("bindings: %+v", cfg.Bindings)
	}
}

func TestAgentsOwnKeysAreNotInherited(t *testing.T) {
	cfg, err := Parse(strings.NewReader(`
agent: {workspace: /srv/main, skills: [/opt/skills], mcp: [gh], hooks: [audit], system_prompt: "be brief", spend: {global: {daily_usd: 3}}, worktree: per_thread, worktree_prune_after: 48h}
mcp: {servers: {gh: {command: gh-mcp}}}
hooks: {audit: {command: /bin/true, events: [input]}}
agents:
  ops: {workspace: /srv/infra}
  web: {workspace: /srv/web, spend: {per_user: {daily_tokens: 1000}}}
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate = %v", err)
	}
	ops := cfg.Agents["ops"]
	if ops.Skills != nil || ops.MCP != nil || ops.Hooks != nil || ops.SystemPrompt != "" || ops.Spend.Enabled() || ops.Worktree != "" {
		t.Fatalf("ops inherited what is the default agent's own: %+v", ops)
	}
	if web := cfg.Agents["web"].Spend; web.PerUser.DailyTokens != 1000 || web.Global != (SpendCap{}) || cfg.Agent.Spend.Global.DailyUSD != 3 {
		t.Fatalf("spend caps: web %+v, agent: %+v", web, cfg.Agent.Spend)
	}
	// The prune time is a setting like any other: inherited.
	if cfg.Agent.Worktree != WorktreePerThread || ops.WorktreePruneAfter.D() != 48*time.Hour {
		t.Fatalf("worktree settings: agent %q, ops prune after %s", cfg.Agent.Worktree, ops.WorktreePruneAfter.D())
	}
	if d := Default().Agent.WorktreePruneAfter.D(); d != 7*24*time.Hour {
		t.Fatalf("default worktree_prune_after %s", d)
	}
	if got := cfg.AgentMCP("ops"); len(got) != 0 {
		t.Fatalf("AgentMCP(ops) = %v", got)
	}
	if got := cfg.AgentMCP(DefaultAgent); len(got) != 1 || got[0] != "gh" {
		t.Fatalf("AgentMCP(default) = %v", got)
	}
}

func TestDefaultAgentWithoutListsUsesEveryServerAndHook(t *testing.T) {
	cfg, err := Parse(strings.NewReader(`
mcp: {servers: {gh: {command: gh-mcp}, fs: {command: fs-mcp}}}
hooks: {audit: {command: /bin/true, events: [input]}}
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.AgentMCP(DefaultAgent), ","); got != "fs,gh" {
		t.Fatalf("AgentMCP = %q", got)
	}
	if got := strings.Join(cfg.AgentHooks(DefaultAgent), ","); got != "audit" {
		t.Fatalf("AgentHooks = %q", got)
	}
	// With agents, the default agent too gets only what it lists.
	cfg.Agents = map[string]Agent{"ops": {Workspace: "/srv/ops", MCP: []string{"gh"}}}
	if got := cfg.AgentMCP(DefaultAgent); len(got) != 0 {
		t.Fatalf("with agents, AgentMCP(default) = %v", got)
	}
	if got := cfg.AgentHooks(DefaultAgent); len(got) != 0 {
		t.Fatalf("with agents, AgentHooks(default) = %v", got)
	}
	if got := strings.Join(cfg.AgentMCP("ops"), ","); got != "gh" {
		t.Fatalf("AgentMCP(ops) = %q", got)
	}
}

func TestAgentsValidate(t *testing.T) {
	tests := []struct {
		name, yaml, key, msg string
	}{
		{"binding names no agent", `
agents: {ops: {workspace: /srv/infra}}
bindings: [{agent: ops, channel: C1}, {agent: opz, platform: slack, channel: C0OPS}]`, "bindings[1].agent", `"opz" names no agent`},
		{"binding without agent", `bindings: [{platform: slack}]`, "bindings[0].agent", "required"},
		{"workspace required", `agents: {ops: {model: a/b}}`, "agents.ops.workspace", "required"},
		{"same workspace", `
agent: {workspace: /srv/x}
agents: {ops: {workspace: /srv/x}}`, "agents.ops.workspace", "every agent needs its own"},
		{"nested workspace", `
agents: {ops: {workspace: /srv/x}, web: {workspace: /srv/x/web}}`, "agents.web.workspace", "inside one another"},
		{"agents.default", `agents: {default: {workspace: /srv/d}}`, "agents.default", "agent: block"},
		{"bad name", `agents: {"Ops!": {workspace: /srv/o}}`, "agents.Ops!", "agent names"},
		{"agent's own keys validated", `agents: {ops: {workspace: /srv/o, queue: {mode: shout}}}`, "agents.ops.queue.mode", "shout"},
		{"negative agent spend cap", `agents: {ops: {workspace: /srv/o, spend: {global: {daily_usd: -1}}}}`, "agents.ops.spend.global.daily_usd", "non-negative"},
		{"negative default agent spend cap", `
agent: {spend: {per_user: {daily_tokens: -5}}}
agents: {ops: {workspace: /srv/o}}`, "agent.spend.per_user.daily_tokens", "negative"},
		{"agent spend without agents", `agent: {spend: {global: {daily_usd: 5}}}`, "agent.spend", "set the top-level limits key instead"},
		{"unknown mcp server", `agents: {ops: {workspace: /srv/o, mcp: [gh]}}`, "agents.ops.mcp[0]", "not a server"},
		{"unknown hook", `agents: {ops: {workspace: /srv/o, hooks: [audit]}}`, "agents.ops.hooks[0]", "not a hook"},
		{"role off discord", `bindings: [{agent: default, platform: slack, role: "5"}]`, "bindings[0].role", "Discord"},
		{"unknown platform", `bindings: [{agent: default, platform: irc}]`, "bindings[0].platform", "irc"},
		{"unknown binding key", `bindings: [{agent: default, team: T1}]`, "bindings[0].team", "unknown key"},
		{"worktree value", `agents: {web: {workspace: /srv/w, worktree: per_branch}}`, "agents.web.worktree", "per_branch"},
		{"worktree prune negative", `agents: {web: {workspace: /srv/w, worktree: per_thread, worktree_prune_after: -1h}}`, "agents.web.worktree_prune_after", "negative"},
		{"a gateway-wide key", `agents: {ops: {workspace: /srv/o, max_run: 1h}}`, "agents.ops.max_run", "set agent.max_run instead"},
		{"a gateway-wide nested key", `agents: {ops: {workspace: /srv/o, queue: {mode: collect, collect: {cap: 3}}}}`, "agents.ops.queue.collect", "same for every agent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(strings.NewReader(tt.yaml), env(nil))
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.key+":") && !strings.Contains(err.Error(), tt.key+" (line") {
				t.Fatalf("error does not name %s: %v", tt.key, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error does not say %q: %v", tt.msg, err)
			}
		})
	}
}
