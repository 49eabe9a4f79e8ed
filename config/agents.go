package config

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DefaultAgent is the name of the agent the agent: block configures.
const DefaultAgent = "default"

// Binding routes conversations to an agent (bindings[i]): it names the
// agent and the keys a conversation must have; a key left out matches
// anything. The most specific matching binding wins, a tie goes to the
// earlier one, no match to the default agent. Bindings never grant
// access.
type Binding struct {
	Agent    string `yaml:"agent"`
	Platform string `yaml:"platform"`
	// Workspace is the Slack team or Discord guild id.
	Workspace string `yaml:"workspace"`
	Channel   string `yaml:"channel"`
	// DM matches one-to-one conversations (true) or groups (false).
	DM   *bool  `yaml:"dm"`
	User string `yaml:"user"`
	// Role is a Discord role id the sender has.
	Role string `yaml:"role"`
}

// agentName is what agents.NAME accepts.
var agentName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// AgentNames returns the agents' names: default first, then the others
// sorted.
func (c Config) AgentNames() []string {
	names := []string{DefaultAgent}
	others := slices.Collect(maps.Keys(c.Agents))
	sort.Strings(others)
	return append(names, others...)
}

// AgentConfig returns the settings of the agent called name (the agent:
// block for "default").
func (c Config) AgentConfig(name string) (Agent, bool) {
	if name == DefaultAgent {
		return c.Agent, true
	}
	a, ok := c.Agents[name]
	return a, ok
}

// AgentKey is the key prefix of an agent's settings: "agent" or
// "agents.NAME".
func AgentKey(name string) string {
	if name == DefaultAgent {
		return "agent"
	}
	return "agents." + name
}

// AgentMCP returns the MCP servers the agent may use: those it lists, or
// without agents (a bare agent: block) and without a list, every
// configured server.
func (c Config) AgentMCP(name string) []string {
	a, _ := c.AgentConfig(name)
	if name == DefaultAgent && a.MCP == nil && len(c.Agents) == 0 {
		return slices.Sorted(maps.Keys(c.MCP.Servers))
	}
	return a.MCP
}

// AgentHooks returns the hooks the agent runs, in their order: those it
// lists, or without agents (a bare agent: block) and without a list,
// every configured hook.
func (c Config) AgentHooks(name string) []string {
	a, _ := c.AgentConfig(name)
	if name == DefaultAgent && a.Hooks == nil && len(c.Agents) == 0 {
		return c.HookNames()
	}
	out := slices.Clone(a.Hooks)
	sort.Strings(out)
	return out
}

// inheritAgents decodes each agents.NAME over the agent: block, so that a
// named agent has the block's settings for every key it leaves out, but
// for what belongs to an agent alone: workspace, skills and prompt
// folders, mcp, hooks, system_prompt, spend and worktree. Maps (approvals.dm,
// approvals.group) merge key by key.
func inheritAgents(doc *yaml.Node, cfg *Config) error {
	node := mappingValue(doc, "agents")
	if node == nil || node.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(node.Content); i += 2 {
		name, v := node.Content[i].Value, node.Content[i+1]
		a := cfg.Agent
		a.Workspace, a.Skills, a.Prompts, a.MCP, a.Hooks, a.SystemPrompt, a.Spend, a.Worktree = "", nil, nil, nil, nil, "", SpendLimits{}, ""
		a.Tools, a.Fallbacks = slices.Clone(a.Tools), slices.Clone(a.Fallbacks)
		a.Approvals.DM, a.Approvals.Group = maps.Clone(a.Approvals.DM), maps.Clone(a.Approvals.Group)
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			cfg.Agents[name] = a
			continue
		}
		if err := gatewayWide(v, "agents."+name); err != nil {
			return err
		}
		if err := v.Decode(&a); err != nil {
			return fmt.Errorf("config: agents.%s: %w", name, err)
		}
		cfg.Agents[name] = a
	}
	return nil
}

// sharedKeys are the agent: keys that apply to the whole gateway, every
// agent alike: an agents.NAME entry may not set them.
var sharedKeys = [][]string{{"fallbacks"}, {"verbosity"}, {"compaction"}, {"retry"}, {"idle_evict"}, {"max_run"}, {"max_idle"},
	{"approvals", "timeout"}, {"queue", "collect"}}

// gatewayWide refuses an agent entry (node v, at key) that sets a key of
// sharedKeys, naming it.
func gatewayWide(v *yaml.Node, key string) error {
	for _, path := range sharedKeys {
		n := v
		for _, k := range path {
			if n = mappingValue(n, k); n == nil {
				break
			}
		}
		if n != nil {
			k := key + "." + strings.Join(path, ".")
			return &Error{Key: k, Line: n.Line, Msg: "is the same for every agent: set agent." + strings.Join(path, ".") + " instead"}
		}
	}
	return nil
}

// mappingValue returns the value of key in mapping n, nil if absent.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// validateAgents checks agents.*, the agents' mcp and hooks lists and
// bindings[*]; every problem names its key.
func (c Config) validateAgents(bad func(key, format string, args ...any)) {
	if len(c.Agents) == 0 && c.Agent.Spend.Enabled() {
		// Without agents every conversation is the default agent's, and
		// its use is the whole bot's: limits says it.
		bad("agent.spend", "caps the default agent's use beside other agents; without agents: set the top-level limits key instead")
	}
	for _, name := range c.AgentNames() {
		a, _ := c.AgentConfig(name)
		key := AgentKey(name)
		if name != DefaultAgent {
			if !agentName.MatchString(name) {
				bad(key, "agent names are 1-32 characters of a-z, 0-9, _ and -, starting with a letter or digit")
			}
			a.validate(key, c.MCP, bad)
			if strings.TrimSpace(a.Workspace) == "" {
				bad(key+".workspace", "required: the directory this agent's tools work in (each agent has its own)")
			}
			for i, d := range a.Skills {
				if strings.TrimSpace(d) == "" {
					bad(fmt.Sprintf("%s.skills[%d]", key, i), "must not be empty")
				}
			}
			for i, d := range a.Prompts {
				if strings.TrimSpace(d) == "" {
					bad(fmt.Sprintf("%s.prompts[%d]", key, i), "must not be empty")
				}
			}
		}
		for i, s := range a.MCP {
			if _, ok := c.MCP.Servers[s]; !ok {
				bad(fmt.Sprintf("%s.mcp[%d]", key, i), "%q is not a server of mcp.servers", s)
			}
		}
		for i, h := range a.Hooks {
			if _, ok := c.Hooks[h]; !ok {
				bad(fmt.Sprintf("%s.hooks[%d]", key, i), "%q is not a hook of hooks", h)
			}
		}
	}
	if _, ok := c.Agents[DefaultAgent]; ok {
		bad("agents."+DefaultAgent, "the default agent is the agent: block; configure it there")
	}
	c.validateWorkspaces(bad)
	agents := c.AgentNames()
	for i, b := range c.Bindings {
		key := fmt.Sprintf("bindings[%d]", i)
		switch {
		case b.Agent == "":
			bad(key+".agent", "required: the agent this binding picks (one of %s)", strings.Join(agents, ", "))
		case !slices.Contains(agents, b.Agent):
			bad(key+".agent", "%q names no agent (agents: %s)", b.Agent, strings.Join(agents, ", "))
		}
		if b.Platform != "" && !slices.Contains([]string{"telegram", "slack", "discord", "web"}, strings.ToLower(b.Platform)) {
			bad(key+".platform", "%q is not one of telegram, slack, discord, web", b.Platform)
		}
		if b.Role != "" && !strings.EqualFold(b.Platform, "discord") {
			bad(key+".role", "roles are Discord's: set platform: discord")
		}
		if b.Workspace != "" && b.Platform != "" && !strings.EqualFold(b.Platform, "slack") && !strings.EqualFold(b.Platform, "discord") {
			bad(key+".workspace", "only Slack (the team) and Discord (the guild) have workspaces")
		}
	}
}

// validateWorkspaces refuses two agents sharing a workspace, or one's
// inside another's: the file tools keep each agent out of the others'.
func (c Config) validateWorkspaces(bad func(key, format string, args ...any)) {
	if len(c.Agents) == 0 {
		return
	}
	names := c.AgentNames()
	abs := map[string]string{}
	for _, n := range names {
		a, _ := c.AgentConfig(n)
		if a.Workspace == "" {
			continue
		}
		if p, err := filepath.Abs(a.Workspace); err == nil {
			abs[n] = filepath.Clean(p)
		}
	}
	for i, a := range names {
		for _, b := range names[i+1:] {
			pa, pb := abs[a], abs[b]
			if pa == "" || pb == "" {
				continue
			}
			switch {
			case pa == pb:
				bad(AgentKey(b)+".workspace", "%s is also %s's workspace: every agent needs its own", pb, a)
			case within(pa, pb) || within(pb, pa):
				bad(AgentKey(b)+".workspace", "%s and %s's workspace %s lie inside one another: every agent needs its own", pb, a, pa)
			}
		}
	}
}

// within reports whether p lies under dir.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
