package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/gateway/binding"
)

// bindingRules are cfg's bindings as the router's rules.
func bindingRules(cfg config.Config) []binding.Rule {
	out := make([]binding.Rule, len(cfg.Bindings))
	for i, b := range cfg.Bindings {
		out[i] = binding.Rule{Agent: b.Agent, Platform: strings.ToLower(b.Platform), Workspace: b.Workspace, Channel: b.Channel,
			DM: b.DM, User: b.User, Role: b.Role}
	}
	return out
}

// placeOf is where in was sent, as the bindings see it.
func placeOf(in chat.Inbound) binding.Place {
	return binding.Place{Platform: string(in.Conv.Platform), Workspace: in.Conv.Workspace, Channel: in.Conv.Channel,
		DM: in.Conv.DM, User: in.User.ID, Roles: in.User.Roles}
}

// shadowedBindings refuses a binding that can never be chosen because an
// earlier one with the same keys always wins: almost surely a mistake
// (two agents for one place), so serve and `pibot config check` name it.
func shadowedBindings(cfg config.Config) error {
	var errs []error
	for _, s := range binding.Shadowed(bindingRules(cfg)) {
		r := cfg.Bindings[s.Rule]
		errs = append(errs, &config.Error{Key: fmt.Sprintf("bindings[%d]", s.Rule),
			Msg: fmt.Sprintf("never matches (agent %s, %s): bindings[%d] (agent %s) has the same keys and comes first, so it always wins",
				r.Agent, bindingRules(cfg)[s.Rule].Keys(), s.By, cfg.Bindings[s.By].Agent)})
	}
	return errors.Join(errs...)
}

// agentView is cfg as the agent called name sees it: its settings as the
// agent: block, and only the MCP servers and hooks it uses.
func agentView(cfg config.Config, name string) config.Config {
	v := cfg
	v.Agent, _ = cfg.AgentConfig(name)
	servers := map[string]config.MCPServer{}
	for _, s := range cfg.AgentMCP(name) {
		servers[s] = cfg.MCP.Servers[s]
	}
	v.MCP.Servers = servers
	hks := map[string]config.Hook{}
	for _, h := range cfg.AgentHooks(name) {
		hks[h] = cfg.Hooks[h]
	}
	v.Hooks = hks
	return v
}

// otherWorkspaces are the workspaces of every agent but name (absolute):
// its tools treat them like pibot's data directory.
func otherWorkspaces(cfg config.Config, name string) []string {
	var out []string
	for _, n := range cfg.AgentNames() {
		a, _ := cfg.AgentConfig(n)
		if n == name || a.Workspace == "" {
			continue
		}
		if p, err := filepath.Abs(a.Workspace); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// router routes new sessions by the bindings, which a reload swaps.
type router struct {
	rules atomic.Pointer[[]binding.Rule]
}

func newRouter(cfg config.Config) *router {
	r := &router{}
	rules := bindingRules(cfg)
	r.rules.Store(&rules)
	return r
}

// route is gateway.Config.Route.
func (r *router) route(in chat.Inbound) (string, string) {
	c := binding.Resolve(*r.rules.Load(), placeOf(in))
	return c.Agent, c.Why
}

// set swaps the bindings; it refuses bindings naming an agent that is not
// running (agents change with a restart).
func (r *router) set(cfg, running config.Config) error {
	names := running.AgentNames()
	for i, b := range cfg.Bindings {
		if !slices.Contains(names, b.Agent) {
			return fmt.Errorf("bindings[%d]: agent %q is not running (a new agent needs a restart)", i, b.Agent)
		}
	}
	rules := bindingRules(cfg)
	r.rules.Store(&rules)
	return nil
}

// agentKeys renames the agent.* keys of err's configuration errors to
// those of agents.NAME: the checks of an agent run on its view
// (agentView), where its settings are the agent: block.
func agentKeys(name string, err error) error {
	if err == nil || name == config.DefaultAgent {
		return err
	}
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		var out []error
		for _, e := range joined.Unwrap() {
			out = append(out, agentKeys(name, e))
		}
		return errors.Join(out...)
	}
	var ce *config.Error
	if errors.As(err, &ce) && strings.HasPrefix(ce.Key, "agent.") {
		re := *ce
		re.Key = config.AgentKey(name) + strings.TrimPrefix(ce.Key, "agent")
		re.Msg = strings.ReplaceAll(re.Msg, "agent.workspace", config.AgentKey(name)+".workspace")
		return &re
	}
	return err
}
