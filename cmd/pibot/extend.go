package main

import (
	"log/slog"

	"github.com/pibot/pibot/agent/hooks"
	"github.com/pibot/pibot/agent/skills"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/internal/extensions"
)

// newExtensions loads the skills and prompt templates of the workspace ws,
// ~/.pi/agent and agent.skills_dirs, and sets up hooks.* (run in ws with
// pibot's environment, from which the secrets were scrubbed at start).
func newExtensions(cfg config.Config, ws string, log *slog.Logger) *extensions.Set {
	src := skills.Sources{Workspace: ws, AgentDir: extensions.AgentDir(), SkillDirs: cfg.Agent.SkillsDirs}
	var hs []hooks.Hook
	for _, name := range cfg.HookNames() {
		h := cfg.Hooks[name]
		hs = append(hs, hooks.Hook{Name: name, Command: h.Command, Args: h.Args, Events: h.Events,
			Timeout: h.Timeout.D(), FailClosed: h.Fail == "closed", Dir: ws})
	}
	return extensions.New(src, hs, log)
}
