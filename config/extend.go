package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Hook configures one hook program (hooks.NAME).
type Hook struct {
	// Command is the executable (absolute, or found in PATH); Args its
	// arguments.
	Command string   `yaml:"command"`
	Args    []string `yaml:"args"`
	// Events are the events it receives: input, tool_call, tool_result,
	// before_agent_start, agent_end.
	Events []string `yaml:"events"`
	// Timeout bounds one answer (default 10s).
	Timeout Duration `yaml:"timeout"`
	// Fail is what a failure or timeout means: open (default: skip the
	// hook) or closed (refuse: block the tool call, drop the message).
	Fail string `yaml:"fail"`
}

// HookEvents are the events hooks.NAME.events accepts.
var hookEvents = []string{"input", "tool_call", "tool_result", "before_agent_start", "agent_end"}

// HookNames returns the configured hooks' names in the order they run
// (sorted).
func (c Config) HookNames() []string {
	names := make([]string, 0, len(c.Hooks))
	for n := range c.Hooks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// validateExtend checks agent.skills, agent.prompts and hooks.*; every
// problem names its key.
func (c Config) validateExtend(bad func(key, format string, args ...any)) {
	for _, f := range []struct {
		key  string
		dirs []string
	}{{"agent.skills", c.Agent.Skills}, {"agent.prompts", c.Agent.Prompts}} {
		for i, d := range f.dirs {
			if strings.TrimSpace(d) == "" {
				bad(fmt.Sprintf("%s[%d]", f.key, i), "must not be empty")
			}
		}
	}
	for _, name := range c.HookNames() {
		h := c.Hooks[name]
		key := "hooks." + name
		if !isHookName(name) {
			bad(key, "hook names are 1-64 characters of letters, digits, _ and -")
		}
		switch {
		case h.Command == "":
			bad(key+".command", "required: the hook's executable")
		case !filepath.IsAbs(h.Command) && strings.Contains(h.Command, "/"):
			bad(key+".command", "%q must be an absolute path or a program name found in PATH (a relative path would run from the workspace, which the model can write)", h.Command)
		}
		if len(h.Events) == 0 {
			bad(key+".events", "required: one or more of %v", hookEvents)
		}
		for i, e := range h.Events {
			if !slices.Contains(hookEvents, e) {
				bad(fmt.Sprintf("%s.events[%d]", key, i), "%q is not one of %v", e, hookEvents)
			}
		}
		if h.Timeout < 0 {
			bad(key+".timeout", "must not be negative (0: the default 10s)")
		}
		if h.Fail != "" && h.Fail != "open" && h.Fail != "closed" {
			bad(key+".fail", "%q must be open or closed", h.Fail)
		}
	}
}
