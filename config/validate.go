package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
)

// Validate checks every value and returns all problems, each naming its key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	oneOf := func(key, v string, allowed ...string) {
		if !slices.Contains(allowed, v) {
			bad(key, "%q is not one of %s", v, strings.Join(allowed, ", "))
		}
	}
	if c.DataDir == "" {
		bad("data_dir", "must not be empty")
	}
	oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	oneOf("log.format", c.Log.Format, "text", "json")
	if _, _, err := net.SplitHostPort(c.HTTP.Listen); c.HTTP.Listen != "" && err != nil {
		bad("http.listen", "%q is not host:port", c.HTTP.Listen)
	}
	c.Cluster.validate(bad)
	c.Agent.validate("agent", c.MCP, bad)
	c.validateAgents(bad)
	oneOf("access.dm_policy", c.Access.DMPolicy, "pairing", "allowlist", "open", "disabled")
	for _, l := range []struct {
		key     string
		entries []string
	}{{"access.owners", c.Access.Owners}, {"access.users", c.Access.Users}} {
		for i, o := range l.entries {
			if p, id, ok := strings.Cut(o, ":"); !ok || p == "" || id == "" {
				bad(fmt.Sprintf("%s[%d]", l.key, i), "%q must be platform:user id (e.g. telegram:12345)", o)
			}
		}
	}
	for i, g := range c.Access.Groups {
		if g != "*" && !strings.Contains(g, ":") {
			bad(fmt.Sprintf("access.groups[%d]", i), "%q must be platform:chat id or *", g)
		}
	}
	if b := c.Access.Budget; b.PerMinute < 0 {
		bad("access.budget.per_minute", "must not be negative (0: no budget)")
	} else if b.PerMinute > 0 && b.Burst < 1 {
		bad("access.budget.burst", "%d: must be at least 1 while access.budget.per_minute is set (every message would be refused)", b.Burst)
	}
	if c.Access.SchedulesPerUser < 0 {
		bad("access.schedules_per_user", "must not be negative (0: no cap)")
	}
	tg := c.Adapter.Telegram
	if tg.Mode != "" {
		oneOf("adapters.telegram.mode", tg.Mode, "polling", "webhook")
	}
	if tg.Enabled() && tg.Mode == "webhook" && tg.WebhookURL == "" {
		bad("adapters.telegram.webhook_url", "required when adapters.telegram.mode is webhook")
	}
	c.Adapter.Slack.validate(c.HTTP.Listen, bad)
	c.Adapter.Discord.validate(bad)
	c.validateExtend(bad)
	c.MCP.validate(bad)
	validateSchedules(c.Schedules, bad)
	c.Limits.validate("limits", bad)
	c.OTel.validate(bad)
	c.validateQuiet(bad)
	for name, p := range c.Providers {
		key := "providers." + name
		if strings.Contains(name, "/") || name == "" {
			bad(key, "provider names must not contain /")
		}
		oneOf(key+".api", p.API, "openai-completions", "openai-responses", "anthropic-messages", "faux")
		p.Timeouts.validate(key+".timeouts", bad)
		if len(p.Script) > 0 && p.API != "faux" {
			bad(key+".script", "only a faux provider can be scripted")
		}
		for i, turn := range p.Script {
			for j, c := range turn.ToolCalls {
				if c.Name == "" {
					bad(fmt.Sprintf("%s.script[%d].tool_calls[%d].name", key, i, j), "must not be empty")
				}
			}
		}
		for i, m := range p.Models {
			mk := fmt.Sprintf("%s.models[%d]", key, i)
			if m.ID == "" {
				bad(mk+".id", "must not be empty")
			}
			if m.ContextWindow < 0 || m.MaxTokens < 0 {
				bad(mk, "context_window and max_tokens must not be negative")
			}
			for j, in := range m.Input {
				oneOf(fmt.Sprintf("%s.input[%d]", mk, j), in, "text", "image")
			}
		}
	}
	return errors.Join(errs...)
}

// ToolNames returns the names of pibot's tools, the names agent.tools
// and agent.approvals accept (a test in cmd/pibot keeps the list equal to
// the tools package's set).
func ToolNames() []string {
	return []string{"read", "write", "edit", "bash", "grep", "find", "ls", "attach"}
}

// WebEnabled reports whether the web chat is on (default true).
func (c Config) WebEnabled() bool { return c.Adapter.Web.Enabled == nil || *c.Adapter.Web.Enabled }

// MentionRequired reports whether group messages need a mention (default true).
func (c Config) MentionRequired() bool {
	return c.Access.MentionRequired == nil || *c.Access.MentionRequired
}

// Enabled reports whether a Telegram token is configured.
func (t Telegram) Enabled() bool { return t.Token != "" || t.TokenFile != "" }

// validate checks one agent's settings, the agent: block (key "agent") or
// agents.NAME, against the MCP servers configured (approvals may name
// their tools); every problem names its key.
func (a Agent) validate(key string, mcp MCP, bad func(key, format string, args ...any)) {
	oneOf := func(k, v string, allowed ...string) {
		if !slices.Contains(allowed, v) {
			bad(k, "%q is not one of %s", v, strings.Join(allowed, ", "))
		}
	}
	if a.Model != "" && !strings.Contains(a.Model, "/") {
		bad(key+".model", "%q must be provider/model", a.Model)
	}
	oneOf(key+".thinking", a.Thinking, thinkingLevels...)
	oneOf(key+".sandbox", a.Sandbox, "auto", "bwrap", "off")
	oneOf(key+".workspace_only", string(a.WorkspaceOnly), "true", "false", "non_owners")
	oneOf(key+".verbosity", a.Verbosity, "quiet", "tools", "verbose")
	oneOf(key+".worktree", a.Worktree, "", "off", WorktreePerThread)
	if a.WorktreePruneAfter < 0 {
		bad(key+".worktree_prune_after", "%s must not be negative (0: never)", a.WorktreePruneAfter.D())
	}
	oneOf(key+".queue.mode", a.Queue.Mode, "steer", "followup", "collect", "interrupt")
	oneOf(key+".queue.collect.drop", a.Queue.Collect.Drop, "old", "new")
	if a.Queue.Collect.Cap < 1 {
		bad(key+".queue.collect.cap", "must be at least 1")
	}
	known := ToolNames()
	for i, t := range a.Tools {
		if !slices.Contains(known, t) {
			bad(fmt.Sprintf("%s.tools[%d]", key, i), "unknown tool %q (known: %s)", t, strings.Join(known, ", "))
		}
	}
	for scope, m := range map[string]map[string]string{"dm": a.Approvals.DM, "group": a.Approvals.Group} {
		for tool, p := range m {
			if tool != "*" && !slices.Contains(known, tool) && !mcp.approvalTool(tool) {
				bad(key+".approvals."+scope+"."+tool, "unknown tool %q (known: %s, * for every tool, or NAME__tool and NAME__* for a server in mcp.servers)", tool, strings.Join(known, ", "))
				continue
			}
			oneOf(key+".approvals."+scope+"."+tool, p, "allow", "ask", "deny")
		}
	}
	if a.Compaction.ReserveTokens < 0 || a.Compaction.KeepRecentTokens < 0 {
		bad(key+".compaction", "token counts must not be negative")
	}
	a.Limits.validate(bad)
	a.Spend.validate(key+".spend", bad)
	if a.MaxRun < 0 {
		bad(key+".max_run", "must not be negative (0: no limit)")
	}
	if a.MaxIdle < 0 {
		bad(key+".max_idle", "must not be negative (0: no limit)")
	}
	if a.MaxIdle > 0 && a.MaxIdle <= a.Approvals.Timeout {
		bad(key+".max_idle", "%s must be longer than "+key+".approvals.timeout (%s): a run waiting for an approval produces no events",
			a.MaxIdle.D(), a.Approvals.Timeout.D())
	}
	if a.Retry.MaxRetries < 0 {
		bad(key+".retry.max_retries", "must not be negative")
	}
	for i, f := range a.Fallbacks {
		if !strings.Contains(f, "/") {
			bad(fmt.Sprintf("%s.fallbacks[%d]", key, i), "%q must be provider/model", f)
		}
	}
}
