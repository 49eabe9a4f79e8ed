package gateway

import (
	"maps"
	"sync/atomic"

	"github.com/pibot/pibot/chat"
)

// approvalRules are the approval policies a tool call is checked against:
// the default agent's and the other agents' (approvalPolicy), and their
// per-tool tables of DMs and groups, which a configuration reload swaps
// whole (setTables, setAgentTables); calls already waiting for a decision
// keep waiting.
type approvalRules struct {
	// def is the default agent's policy, agents those of the agents
	// besides the default, by name.
	def    approvalPolicy
	agents map[string]approvalPolicy
	// tables are the default agent's per-tool policies (setTables),
	// agentTables those of the other agents, by name (setAgentTables).
	tables      atomic.Pointer[approvalTables]
	agentTables atomic.Pointer[map[string]*approvalTables]
}

// reset sets the rules up from the policies of the default agent (def)
// and of the others (agents).
func (a *approvalRules) reset(def approvalPolicy, agents map[string]approvalPolicy) {
	a.def, a.agents = def, agents
	a.setTables(def.dm, def.group)
	tables := map[string]*approvalTables{}
	for name, p := range agents {
		tables[name] = &approvalTables{dm: maps.Clone(p.dm), group: maps.Clone(p.group)}
	}
	a.agentTables.Store(&tables)
}

// approvalTables are the per-tool policies (tool or "*" → allow|ask|deny).
type approvalTables struct{ dm, group map[string]string }

// setTables replaces the per-tool policies; calls already waiting for a
// decision keep waiting.
func (a *approvalRules) setTables(dm, group map[string]string) {
	a.tables.Store(&approvalTables{dm: maps.Clone(dm), group: maps.Clone(group)})
}

// setAgentTables replaces the per-tool policies of the named agents
// (those the map names; the default agent's: setTables).
func (a *approvalRules) setAgentTables(byAgent map[string][2]map[string]string) {
	next := maps.Clone(*a.agentTables.Load())
	for name, t := range byAgent {
		if _, ok := next[name]; ok {
			next[name] = &approvalTables{dm: maps.Clone(t[0]), group: maps.Clone(t[1])}
		}
	}
	a.agentTables.Store(&next)
}

// policyOf is the approval policy of the agent called name (the default
// agent's for an unknown name).
func (a *approvalRules) policyOf(name string) approvalPolicy {
	if p, ok := a.agents[name]; ok {
		p.timeout = a.def.timeout
		return p
	}
	return a.def
}

// policy returns allow|ask|deny for tool in conv, for the default agent.
func (a *approvalRules) policy(conv chat.ConvRef, tool string) string {
	return a.policyFor(DefaultAgent, conv, tool)
}

// policyFor returns allow|ask|deny for tool in conv, where agent works.
func (a *approvalRules) policyFor(agent string, conv chat.ConvRef, tool string) string {
	t := a.tables.Load()
	if at, ok := (*a.agentTables.Load())[agent]; ok {
		t = at
	}
	m := t.group
	if conv.DM {
		m = t.dm
	}
	if p, ok := mcpPolicy(m, conv.DM, tool); ok {
		return p
	}
	if p, ok := m[tool]; ok {
		return p
	}
	if p, ok := m["*"]; ok {
		return p
	}
	return "allow"
}
