package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pibot/pibot/llm"
)

// defaultIntro opens the default system prompt.
const defaultIntro = "You are pibot, an expert coding assistant. You help users by reading files, executing commands, " +
	"editing code, and writing new files, and you talk to them through a chat."

// guidelines close the default system prompt's body.
var guidelines = []string{
	"Read a file before you edit it; use edit for precise changes and write only for new files or complete rewrites.",
	"Prefer grep, find and ls over bash for exploring files.",
	"Do not run destructive commands (deleting files, force-pushing) unless the user asked for them.",
	"Be concise in your responses; the user reads them in a chat.",
	"Show file paths clearly when working with files.",
}

// promptBuilder builds the system prompt of a run. It rereads the custom
// prompt, the project context and the skills every time, so edits apply
// to the next run without a restart.
type promptBuilder struct {
	// workspace is the absolute working directory of the tools.
	workspace string
	// tools are the specs of the active tools, in order.
	tools []llm.ToolSpec
	// customFile replaces the default body when set (agent.system_prompt_file).
	customFile string
	// context returns the project context (the workspace's AGENTS.md, as
	// far as an owner approved it: extensions.Set.Context); nil: none.
	context func() string
	// skills returns pi's skills block ("" without skills); nil: none.
	skills func() string
	// extra is the agent's own text (agent.system_prompt,
	// agents.NAME.system_prompt), after the skills.
	extra string
	now   func() time.Time
}

// build returns the system prompt: the default body (or the custom file),
// the project context, the date and the working directory.
func (p promptBuilder) build() (string, error) {
	var b strings.Builder
	if p.customFile != "" {
		data, err := os.ReadFile(p.customFile)
		if err != nil {
			return "", fmt.Errorf("agent.system_prompt_file: %w", err)
		}
		b.WriteString(strings.TrimSpace(string(data)))
	} else {
		p.writeDefault(&b)
	}
	if ctx := p.projectContext(); ctx != "" {
		b.WriteString("\n\n# Project Context\n\nProject-specific instructions and guidelines:\n\n")
		b.WriteString(ctx)
	}
	if p.skills != nil && slices.ContainsFunc(p.tools, func(t llm.ToolSpec) bool { return t.Name == "read" }) {
		// As pi: skills are listed only when the model can read them.
		b.WriteString(p.skills())
	}
	if extra := strings.TrimSpace(p.extra); extra != "" {
		b.WriteString("\n\n")
		b.WriteString(extra)
	}
	now := time.Now
	if p.now != nil {
		now = p.now
	}
	fmt.Fprintf(&b, "\n\nCurrent date: %s\nCurrent working directory: %s", now().Format(time.DateOnly), p.workspace)
	return b.String(), nil
}

func (p promptBuilder) writeDefault(b *strings.Builder) {
	b.WriteString(defaultIntro)
	if len(p.tools) > 0 {
		b.WriteString("\n\nAvailable tools:")
		for _, t := range p.tools {
			fmt.Fprintf(b, "\n- %s: %s", t.Name, firstSentence(t.Description))
		}
	}
	b.WriteString("\n\nGuidelines:")
	for _, g := range guidelines {
		b.WriteString("\n- ")
		b.WriteString(g)
	}
}

// projectContext returns the project context, or "".
func (p promptBuilder) projectContext() string {
	if p.context == nil {
		return ""
	}
	return p.context()
}

// firstSentence returns the first sentence of a tool description.
func firstSentence(s string) string {
	s = strings.TrimSpace(s)
	for i := 0; i < len(s); i++ {
		if s[i] == '.' && (i+1 == len(s) || s[i+1] == ' ' || s[i+1] == '\n') {
			return s[:i+1]
		}
		if s[i] == '\n' {
			return strings.TrimSpace(s[:i])
		}
	}
	return s
}
