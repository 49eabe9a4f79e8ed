// Package extensions joins pi's skills and prompt templates (agent/skills),
// the workspace's context file and the hook programs (agent/hooks) into
// what the gateway and pibot chat plug into a run: the template commands,
// the expansion of a message, the system prompt's skills block and project
// context, the agent hooks, and the owners' review of the workspace's
// files.
//
// Skills and templates come from the operator's folders (agent.skills,
// agent.prompts), used as they are, and from the workspace: its AGENTS.md
// (or CLAUDE.md) always, its .pi/skills and .pi/prompts only when the
// operator opted in (agent.workspace_pi). Whoever can get a tool call made
// can write the workspace, so a workspace file is used only while its
// content is what an owner approved (Review, Approve; workspace.go); the
// approved files are recorded in a file of the data directory.
//
// Files are read again for every message and every system prompt, so an
// edited operator file applies without a restart; the command list
// (platform menus) is the one found at start.
package extensions

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/hooks"
	"github.com/pibot/pibot/agent/skills"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
)

// Options say where a Set finds its files.
type Options struct {
	// Skills and Prompts are the operator's skill and prompt template
	// folders, used as they are.
	Skills, Prompts []string
	// Workspace is the agent's workspace (absolute; "" for none): its
	// AGENTS.md or CLAUDE.md, and with WorkspacePi its .pi/skills and
	// .pi/prompts, are used as far as an owner approved them.
	Workspace   string
	WorkspacePi bool
	// Approvals is the file recording the approved workspace files (in
	// the data directory; "" approves nothing).
	Approvals string
	Hooks     []hooks.Hook
	Log       *slog.Logger
}

// Set is the extensions of one pibot process.
type Set struct {
	opts  Options
	hooks *hooks.Runner
	log   *slog.Logger
	// commands are the templates and skills in use at start.
	commands []chat.CommandSpec
	// warned is the hash of the last set of unapproved workspace files
	// logged, so that each set is logged once.
	mu     sync.Mutex
	warned string
}

// New loads the skills and templates of o (logging, once, every file that
// was skipped or has a problem, and the workspace files that wait for an
// owner's approval) and takes the hooks.
func New(o Options) *Set {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Set{opts: o, hooks: hooks.New(o.Hooks, log), log: log}
	_, diags := skills.Load(skills.Sources{Skills: o.Skills})
	_, tdiags := skills.LoadTemplates(skills.Sources{Prompts: o.Prompts})
	v := s.view()
	for _, d := range append(append(diags, tdiags...), v.diags...) {
		if d.Skipped {
			log.Warn("skill or prompt template skipped", "file", d.Path, "problem", d.Message)
		} else {
			log.Warn("skill loaded with a problem", "file", d.Path, "problem", d.Message)
		}
	}
	sk, _ := s.skillsIn(v)
	ts, _ := s.templatesIn(v)
	for _, t := range ts {
		s.commands = append(s.commands, chat.CommandSpec{Name: t.Name, Description: t.Description})
	}
	for _, k := range sk {
		s.commands = append(s.commands, chat.CommandSpec{Name: "skill:" + k.Name, Description: k.Description})
	}
	log.Info("extensions", "skills", len(sk), "templates", len(ts), "hooks", len(o.Hooks))
	return s
}

// skillsIn returns the skills in use: the operator's, then the approved
// ones of the workspace in v; held are the names of the workspace's skills
// that wait for approval.
func (s *Set) skillsIn(v wsView) (in []skills.Skill, held map[string]bool) {
	in, _ = skills.Load(skills.Sources{Skills: s.opts.Skills})
	held = map[string]bool{}
	taken := map[string]bool{}
	for _, k := range in {
		taken[k.Name] = true
	}
	for _, k := range v.skills {
		switch {
		case taken[k.Name]:
		case v.approved(kindSkill, k.FilePath, k.SHA256):
			in = append(in, k)
			taken[k.Name] = true
		default:
			held[k.Name] = true
		}
	}
	for n := range taken {
		delete(held, n)
	}
	return in, held
}

// templatesIn is skillsIn for prompt templates.
func (s *Set) templatesIn(v wsView) (in []skills.Template, held map[string]bool) {
	in, _ = skills.LoadTemplates(skills.Sources{Prompts: s.opts.Prompts})
	held = map[string]bool{}
	taken := map[string]bool{}
	for _, t := range in {
		taken[t.Name] = true
	}
	for _, t := range v.templates {
		switch {
		case taken[t.Name]:
		case v.approved(kindTemplate, t.FilePath, t.SHA256):
			in = append(in, t)
			taken[t.Name] = true
		default:
			held[t.Name] = true
		}
	}
	for n := range taken {
		delete(held, n)
	}
	return in, held
}

// Commands returns the prompt templates and (as "skill:NAME") the skills
// in use at start.
func (s *Set) Commands() []chat.CommandSpec { return s.commands }

// SkillsBlock returns the system prompt's skills section (pi's text; ""
// without skills). The caller adds it only when the read tool is on.
func (s *Set) SkillsBlock() string {
	sk, _ := s.skillsIn(s.view())
	return skills.Block(sk)
}

// Context returns the workspace's context file (AGENTS.md, else
// CLAUDE.md) under a heading naming its path, as the system prompt's
// project context has it, or "" when there is none or its content is not
// approved.
func (s *Set) Context() string {
	v := s.view()
	c := v.context
	if c == nil || !v.approved(kindContext, c.abs, c.SHA256) {
		return ""
	}
	return "## " + c.abs + "\n\n" + strings.TrimSpace(c.body) + "\n"
}

// Expand expands "/skill:NAME args" and "/template args" as pi does;
// "!skill:NAME" is taken for "/skill:NAME" (Slack, whose clients do not
// send text starting with "/"). A skill file that cannot be read leaves
// the text as it is (logged).
func (s *Set) Expand(text string) string {
	out, _ := s.expand(text)
	return out
}

// expand is Expand; held names the workspace skill or template the text
// asks for that waits for an owner's approval (the text is then
// unchanged).
func (s *Set) expand(text string) (out, held string) {
	if !strings.HasPrefix(text, "/") && !strings.HasPrefix(text, "!skill:") {
		// Only a command expands: most messages need no skill or template
		// read from disk.
		return text, ""
	}
	v := s.view()
	sk, heldSkills := s.skillsIn(v)
	if name, ok := strings.CutPrefix(text, "!skill:"); ok {
		text = "/skill:" + name
	}
	if name, ok := strings.CutPrefix(text, "/skill:"); ok {
		name, _, _ = strings.Cut(name, " ")
		if heldSkills[name] {
			return text, "skill:" + name
		}
	}
	ts, heldTemplates := s.templatesIn(v)
	if name, ok := strings.CutPrefix(text, "/"); ok {
		name, _, _ = strings.Cut(name, " ")
		if heldTemplates[name] {
			return text, name
		}
	}
	out, err := skills.Expand(text, sk, ts)
	if err != nil {
		s.log.Warn("skill expansion", "err", err)
	}
	return out, ""
}

// Input runs the input hooks on a chat message, then expands its text
// (pi's order). A skill or template of the workspace that waits for an
// owner's approval is not expanded: the message is answered instead.
func (s *Set) Input(ctx context.Context, in chat.Inbound) (text, reply string, handled bool, err error) {
	res, err := s.hooks.Input(ctx, hooks.Input{Text: in.Text, Source: source(in)})
	if err != nil {
		return "", "", false, err
	}
	if res.Handled {
		return "", res.Reply, true, nil
	}
	out, held := s.expand(res.Text)
	if held != "" {
		return "", fmt.Sprintf("⏳ `/%s` comes from the workspace and waits for an owner's approval (`/extensions`): nothing was sent.", held), true, nil
	}
	return out, "", false, nil
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
