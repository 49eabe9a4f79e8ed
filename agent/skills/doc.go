// Package skills loads pi's skills and prompt templates and expands them
// the way pi 0.73.1 does.
//
// A skill is a folder with a SKILL.md whose front matter has a name and a
// description (the Agent Skills convention). Skills are listed in the
// system prompt (Block) so the model reads a skill's file when a task
// matches, and "/skill:NAME args" in a message expands to the skill's body
// (ExpandSkill). A prompt template is a markdown file whose name becomes a
// command: "/review src/x.go" expands to its body with $1, $@, $ARGUMENTS
// and ${@:N:L} substituted (ExpandTemplate).
//
// Loading follows pi's discovery rules (see Load and LoadTemplates); a file
// that cannot be used is skipped and reported in the returned diagnostics,
// one per file. The package reads files only; it knows no chat and no
// agent.
package skills
