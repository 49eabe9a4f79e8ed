// Package extensions joins pi's skills and prompt templates (agent/skills)
// and the hook programs (agent/hooks) into what the gateway and pibot chat
// plug into a run: the template commands, the expansion of a message, the
// system prompt's skills block and the agent hooks.
//
// Skills and templates are read again for every message and every system
// prompt, so an edited or added file applies without a restart; the command
// list (platform menus) is the one found at start.
package extensions

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/hooks"
	"github.com/pibot/pibot/agent/skills"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
)

// Set is the extensions of one pibot process.
type Set struct {
	src   skills.Sources
	hooks *hooks.Runner
	log   *slog.Logger
	// commands are the templates found at start.
	commands []chat.CommandSpec
}

// AgentDir is pi's agent directory: $PI_CODING_AGENT_DIR, else
// ~/.pi/agent ("" when there is no home directory).
func AgentDir() string {
	if d := os.Getenv("PI_CODING_AGENT_DIR"); d != "" {
		if d == "~" || len(d) > 1 && d[:2] == "~/" {
			if home, err := os.UserHomeDir(); err == nil {
				return filepath.Join(home, d[1:])
			}
		}
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".pi", "agent")
}

// New loads the skills and templates of src (logging, once, every file
// that was skipped or has a problem) and takes the hooks.
func New(src skills.Sources, hs []hooks.Hook, log *slog.Logger) *Set {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Set{src: src, hooks: hooks.New(hs, log), log: log}
	sk, diags := skills.Load(src)
	ts, tdiags := skills.LoadTemplates(src)
	for _, d := range append(diags, tdiags...) {
		if d.Skipped {
			log.Warn("skill or prompt template skipped", "file", d.Path, "problem", d.Message)
		} else {
			log.Warn("skill loaded with a problem", "file", d.Path, "problem", d.Message)
		}
	}
	for _, t := range ts {
		s.commands = append(s.commands, chat.CommandSpec{Name: t.Name, Description: t.Description})
	}
	for _, k := range sk {
		s.commands = append(s.commands, chat.CommandSpec{Name: "skill:" + k.Name, Description: k.Description})
	}
	log.Info("extensions", "skills", len(sk), "templates", len(ts), "hooks", len(hs))
	return s
}

// Commands returns the prompt templates and (as "skill:NAME") the skills
// found at start.
func (s *Set) Commands() []chat.CommandSpec { return s.commands }

// SkillsBlock returns the system prompt's skills section (pi's text; ""
// without skills). The caller adds it only when the read tool is on.
func (s *Set) SkillsBlock() string {
	sk, _ := skills.Load(s.src)
	return skills.Block(sk)
}

// Expand expands "/skill:NAME args" and "/template args" as pi does;
// "!skill:NAME" is taken for "/skill:NAME" (Slack, whose clients do not
// send text starting with "/"). A skill file that cannot be read leaves
// the text as it is (logged).
func (s *Set) Expand(text string) string {
	if !strings.HasPrefix(text, "/") && !strings.HasPrefix(text, "!skill:") {
		// Only a command expands: most messages need no skill or template
		// read from disk.
		return text
	}
	sk, _ := skills.Load(s.src)
	if strings.HasPrefix(text, "!skill:") {
		if out, ok, err := skills.ExpandSkill("/"+text[1:], sk); ok && err == nil {
			return out
		}
	}
	ts, _ := skills.LoadTemplates(s.src)
	out, err := skills.Expand(text, sk, ts)
	if err != nil {
		s.log.Warn("skill expansion", "err", err)
	}
	return out
}

// Input runs the input hooks on a chat message, then expands its text
// (pi's order).
func (s *Set) Input(ctx context.Context, in chat.Inbound) (text, reply string, handled bool, err error) {
	res, err := s.hooks.Input(ctx, hooks.Input{Text: in.Text, Source: source(in)})
	if err != nil {
		return "", "", false, err
	}
	if res.Handled {
		return "", res.Reply, true, nil
	}
	return s.Expand(res.Text), "", false, nil
}

// source describes where a message comes from, for the input hooks.
func source(in chat.Inbound) map[string]string {
	m := map[string]string{
		"platform":     string(in.Conv.Platform),
		"conversation": in.Conv.Key(),
		"user_id":      in.User.ID,
		"user_name":    in.User.Name,
	}
	if in.Conv.DM {
		m["dm"] = "true"
	}
	return m
}

// BeforeStart runs the before_agent_start hooks.
func (s *Set) BeforeStart(ctx context.Context, prompt string) (string, error) {
	return s.hooks.BeforeAgentStart(ctx, prompt)
}

// Hooks puts the tool hooks around h.
func (s *Set) Hooks(h agent.Hooks) agent.Hooks { return s.hooks.Wrap(h) }

// End runs the agent_end hooks.
func (s *Set) End(ctx context.Context, msgs []llm.Message) {
	if s.hooks.Has(hooks.EventAgentEnd) {
		s.hooks.AgentEnd(ctx, msgs)
	}
}
