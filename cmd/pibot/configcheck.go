package main

import (
	"fmt"
	"log/slog"

	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/llm"
)

// modelProblems checks what only the providers can tell: agent.model and
// agent.fallbacks name a configured provider and model that can be called
// (errors), and agent.thinking is a level the model can do (warnings).
// `pibot config check` fails on the errors; serve logs them at start.
func modelProblems(cfg config.Config, getenv func(string) string) (errs, warns []string) {
	reg, err := newRegistry(cfg, getenv, slog.New(slog.DiscardHandler), -1)
	if err != nil {
		return []string{err.Error()}, nil
	}
	refs := []struct{ key, ref string }{{"agent.model", cfg.Agent.Model}}
	for i, f := range cfg.Agent.Fallbacks {
		refs = append(refs, struct{ key, ref string }{fmt.Sprintf("agent.fallbacks[%d]", i), f})
	}
	// Each further agent's model (its own or the agent: block's).
	for _, name := range cfg.AgentNames()[1:] {
		if a, _ := cfg.AgentConfig(name); a.Model != cfg.Agent.Model {
			refs = append(refs, struct{ key, ref string }{config.AgentKey(name) + ".model", a.Model})
		}
	}
	for _, r := range refs {
		if r.ref == "" {
			continue
		}
		m, err := reg.Model(r.ref)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %s: %v", r.key, r.ref, err))
			continue
		}
		level := llm.ThinkingLevel(cfg.Agent.Thinking)
		if level == "" || r.key != "agent.model" {
			continue
		}
		if got := m.Info().ClampThinking(level); got != level {
			warns = append(warns, fmt.Sprintf("agent.thinking: %s cannot think at level %q; it runs at %q", r.ref, level, got))
		}
	}
	return errs, warns
}
