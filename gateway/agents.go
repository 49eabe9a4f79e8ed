package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// DefaultAgent is the name of the agent Config's own fields configure.
const DefaultAgent = "default"

// Agent is one agent: what a conversation's runs work with. The default
// agent is Config's fields of the same names; Config.Agents adds others.
type Agent struct {
	Model        string
	Thinking     llm.ThinkingLevel
	SystemPrompt func() string
	// Workspace is where its tools work and uploads land (absolute).
	Workspace string
	Tools     ToolFactory
	// Approvals, paths and confinement: see the Config fields of the
	// same names.
	DMApprovals, GroupApprovals map[string]string
	ToolPaths                   func(dir, tool string, args json.RawMessage) ([]ToolPath, error)
	WorkspaceOnly               bool
	NonOwnersWorkspaceOnly      bool
	// QueueMode is the default queue mode of its locations.
	QueueMode  string
	Extensions Extensions
	// Worktrees, when set, gives each branch of a conversation a git
	// worktree of the workspace to work in (worktree.go); its idle clean
	// ones are removed after WorktreePruneAfter (0: never).
	Worktrees          Worktrees
	WorktreePruneAfter time.Duration
}

// customAgent is the custom entry that records the agent of a session
// file; the header's cwd is that agent's workspace.
const customAgent = "pibot.agent"

// agentRecord is a customAgent entry's data: the agent's name and why it
// was chosen (the binding, or /agent).
type agentRecord struct {
	Name string `json:"name"`
	Why  string `json:"why,omitempty"`
}

// agents are the gateway's agents by name, the default among them.
type agents map[string]*Agent

// newAgents builds the agent set of cfg: the default agent from cfg's own
// fields, then cfg.Agents (with the defaults of the gateway filled in).
func newAgents(cfg *Config) agents {
	out := agents{DefaultAgent: {Model: cfg.Model, Thinking: cfg.Thinking, SystemPrompt: cfg.SystemPrompt, Workspace: absWorkspace(cfg.Workspace),
		Tools: cfg.Tools, DMApprovals: cfg.DMApprovals, GroupApprovals: cfg.GroupApprovals, ToolPaths: cfg.ToolPaths,
		WorkspaceOnly: cfg.WorkspaceOnly, NonOwnersWorkspaceOnly: cfg.NonOwnersWorkspaceOnly, QueueMode: cfg.QueueMode, Extensions: cfg.Extensions,
		Worktrees: cfg.Worktrees, WorktreePruneAfter: cfg.WorktreePruneAfter}}
	for name, a := range cfg.Agents {
		if name == DefaultAgent {
			continue
		}
		a.Workspace = absWorkspace(a.Workspace)
		if a.Thinking == "" {
			a.Thinking = llm.ThinkingOff
		}
		if a.QueueMode == "" {
			a.QueueMode = cfg.QueueMode
		}
		if a.SystemPrompt == nil {
			a.SystemPrompt = cfg.SystemPrompt
		}
		if a.Tools == nil {
			a.Tools = func(ToolRun) []agent.Tool { return nil }
		}
		out[name] = &a
	}
	return out
}

// get returns the agent called name, or the default agent when there is
// none by that name (a session recorded by an agent removed since).
func (as agents) get(name string) (string, *Agent) {
	if a, ok := as[name]; ok {
		return name, a
	}
	return DefaultAgent, as[DefaultAgent]
}

// names lists the agents: default first, then the others sorted.
func (as agents) names() []string {
	others := slices.Collect(maps.Keys(as))
	others = slices.DeleteFunc(others, func(n string) bool { return n == DefaultAgent })
	sort.Strings(others)
	return append([]string{DefaultAgent}, others...)
}

// agentPolicies are the approval policies of the agents besides the
// default, by name.
func agentPolicies(as agents, timeout time.Duration) map[string]approvalPolicy {
	out := map[string]approvalPolicy{}
	for name, a := range as {
		if name == DefaultAgent {
			continue
		}
		out[name] = approvalPolicy{dm: a.DMApprovals, group: a.GroupApprovals, toolPaths: a.ToolPaths, workspaceOnly: a.WorkspaceOnly,
			nonOwnersOnly: a.NonOwnersWorkspaceOnly, workspace: a.Workspace, timeout: timeout}
	}
	return out
}

// choose is the agent a new session of in's conversation gets.
func (g *Gateway) choose(in chat.Inbound) agentRecord {
	return chooseAgent(&g.cfg, in)
}

func chooseAgent(cfg *Config, in chat.Inbound) agentRecord {
	if cfg.Route == nil {
		return agentRecord{Name: DefaultAgent}
	}
	name, why := cfg.Route(in)
	if name == "" {
		name = DefaultAgent
	}
	return agentRecord{Name: name, Why: why}
}

// recordedAgent reads the agent a session file recorded among its first
// entries; a file written before agents existed belongs to the default
// agent.
func recordedAgent(t *session.Tree) agentRecord {
	for _, e := range t.First(8) {
		if e.Type == session.TypeCustom && e.CustomType == customAgent {
			var r agentRecord
			if json.Unmarshal(e.Data, &r) == nil && r.Name != "" {
				return r
			}
		}
	}
	return agentRecord{Name: DefaultAgent}
}

// agentWhy is why rec's agent was chosen, in words.
func agentWhy(rec agentRecord) string {
	if rec.Why == "" {
		return "the default agent"
	}
	return rec.Why
}

// cmdAgent is /agent: the conversation's agent and why; with a name, an
// owner's switch to that agent in a new session (the old one is kept, as
// with /new).
func cmdAgent(ctx context.Context, c *invocation) {
	if c.arg == "" {
		if c.o == nil {
			rec := c.cmds.sessions.chosen(c.in)
			c.tell(ctx, "%s\nNo session here yet; the next message starts one (%s).", rec.Name, agentWhy(rec))
			return
		}
		rec := c.o.agentRec()
		c.tell(ctx, "%s\nThis conversation's agent is `%s`: %s. It keeps it until /new. Agents: %s.", rec.Name, rec.Name, agentWhy(rec),
			strings.Join(c.cmds.sessions.agentNames(), ", "))
		return
	}
	if !c.cmds.rights.IsOwner(c.in.Conv.Platform, c.in.User.ID) {
		c.tell(ctx, "Only an owner of this bot can switch this conversation to another agent.")
		return
	}
	if !slices.Contains(c.cmds.sessions.agentNames(), c.arg) {
		c.tell(ctx, "There is no agent `%s`. Agents: %s.", c.arg, strings.Join(c.cmds.sessions.agentNames(), ", "))
		return
	}
	if c.run != nil {
		c.run.interrupt("stopped by /agent")
	}
	rec := agentRecord{Name: c.arg, Why: "switched with /agent by " + string(c.in.Conv.Platform) + ":" + c.in.User.ID}
	if err := c.cmds.sessions.startAgent(ctx, c.conv, rec); err != nil {
		c.failed(ctx, "starting a new session", err)
		return
	}
	c.say(ctx, "🆕 New session with agent `%s`. The previous one is kept.", c.arg)
}

// extensionsFor returns the extensions of the agent in's conversation
// works with: its session's agent, or for a conversation without one the
// agent a new session would get.
func (g *Gateway) extensionsFor(ctx context.Context, in chat.Inbound) Extensions {
	if len(g.agents) == 1 {
		return g.cfg.Extensions
	}
	if path, ok, err := g.index.Get(ctx, in.Conv.Key()); err == nil && ok {
		if o, err := g.sessions.owner(ctx, path, nil); err == nil {
			return o.agentConfig().Extensions
		}
	}
	_, a := g.agents.get(g.choose(in).Name)
	return a.Extensions
}

// agentsCommandTable is the built-in commands and every agent's prompt
// templates and skills as commands (the default agent's first; a name two
// agents share is offered once, and expands by the conversation's agent).
func agentsCommandTable(as agents, log *slog.Logger) []command {
	table := commandTable()
	for _, name := range as.names() {
		if ext := as[name].Extensions; ext != nil {
			for _, c := range templateCommands(ext, table, log) {
				if !slices.ContainsFunc(table, func(t command) bool { return t.name == c.name }) {
					table = append(table, c)
				}
			}
		}
	}
	return table
}

// spendAgent is the agent r's usage is counted for: its session's, when
// the gateway routes sessions to agents ("" otherwise: no per-agent
// count).
func (r *run) spendAgent() string {
	if r.o.cfg.Route == nil {
		return ""
	}
	return r.o.agentRec().Name
}

// agentRecordOf is the agent e records, if it is an agent record (the first
// on a branch, root first, is the branch's agent).
func agentRecordOf(e session.Entry) (string, bool) {
	if e.Type != session.TypeCustom || e.CustomType != customAgent {
		return "", false
	}
	var r agentRecord
	if json.Unmarshal(e.Data, &r) != nil {
		return "", false
	}
	return r.Name, true
}
