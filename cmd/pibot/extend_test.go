package main

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/llm"
)

// The operator's skills (agent.skills) are listed in the system prompt,
// before the date, when read is among the tools, and not otherwise (as
// pi); the workspace's (agent.workspace_pi) once an owner approved them;
// pi's ~/.pi/agent/skills, in pibot's home, only when listed.
func TestPromptListsSkillsWhenReadIsOn(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws, extra := t.TempDir(), t.TempDir()
	for path, body := range map[string]string{
		filepath.Join(ws, ".pi", "skills", "deploy", "SKILL.md"):          "---\ndescription: How we deploy.\n---\nRun make deploy.\n",
		filepath.Join(extra, "lint", "SKILL.md"):                          "---\ndescription: How we lint.\n---\nRun make lint.\n",
		filepath.Join(ws, ".pi", "skills", "bad", "SKILL.md"):             "---\nname: bad\n---\nno description\n",
		filepath.Join(home, ".pi", "agent", "skills", "home", "SKILL.md"): "---\ndescription: HOME-SKILL.\n---\nx\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Agent.Skills = []string{extra}
	cfg.Agent.WorkspacePi = true
	var logs strings.Builder
	ext, err := newExtensions(cfg, ws, newTestLogger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), filepath.Join(ws, ".pi", "skills", "bad", "SKILL.md")); n != 1 {
		t.Errorf("the malformed skill is named in %d log lines, want 1:\n%s", n, logs.String())
	}
	now := func() time.Time { return time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC) }
	read := []llm.ToolSpec{{Name: "read", Description: "Read."}, {Name: "bash", Description: "Run."}}
	lint := "<skill>\n    <name>lint</name>\n    <description>How we lint.</description>"
	deploy := "<skill>\n    <name>deploy</name>\n    <description>How we deploy.</description>\n    <location>" +
		filepath.Join(ws, ".pi", "skills", "deploy", "SKILL.md") + "</location>\n  </skill>"
	got, err := promptBuilder{workspace: ws, tools: read, skills: ext.SkillsBlock, now: now}.build()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, lint) || strings.Contains(got, "deploy") || strings.Contains(got, "HOME-SKILL") {
		t.Errorf("before approval, only the operator's skill is listed:\n%s", got)
	}
	_, hash := ext.Review()
	if _, err := ext.Approve(hash, "owner"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dataPath(cfg, approvalsFile)); err != nil {
		t.Errorf("the approval is not in the data dir: %v", err)
	}
	tests := []struct {
		name  string
		tools []llm.ToolSpec
		want  bool
	}{
		{"read on", read, true},
		{"read off", []llm.ToolSpec{{Name: "bash", Description: "Run."}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := promptBuilder{workspace: ws, tools: tt.tools, skills: ext.SkillsBlock, now: now}.build()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(got, lint) != tt.want || strings.Contains(got, deploy) != tt.want {
				t.Errorf("skills listed: %v, want %v:\n%s", !tt.want, tt.want, got)
			}
			if tt.want && !strings.Contains(got, "</available_skills>\n\nCurrent date: 2026-03-04") {
				t.Errorf("the skills block must come right before the date:\n%s", got)
			}
		})
	}
}

// What the operator chooses for the system prompt must not be where the
// model can change it: a skill or prompt folder inside the workspace (or
// holding it), or agent.system_prompt_file there, is refused naming its
// key; so is a folder that does not exist. One that pibot's user can
// write is logged.
func TestOperatorFilesOutsideTheWorkspace(t *testing.T) {
	root := t.TempDir()
	ws, ops := filepath.Join(root, "ws"), filepath.Join(root, "ops")
	for _, d := range []string{filepath.Join(ws, "skills"), ops} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		set  func(*config.Agent)
		key  string // "" means accepted
	}{
		{"outside", func(a *config.Agent) { a.Skills, a.Prompts = []string{ops}, []string{ops} }, ""},
		{"skills in the workspace", func(a *config.Agent) { a.Skills = []string{ops, filepath.Join(ws, "skills")} }, "agent.skills[1]"},
		{"prompts holding the workspace", func(a *config.Agent) { a.Prompts = []string{root} }, "agent.prompts[0]"},
		{"missing", func(a *config.Agent) { a.Skills = []string{filepath.Join(root, "gone")} }, "agent.skills[0]"},
		{"system prompt in the workspace", func(a *config.Agent) { a.SystemPromptFile = filepath.Join(ws, "system.md") }, "agent.system_prompt_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.DataDir = t.TempDir()
			tt.set(&cfg.Agent)
			var logs strings.Builder
			_, err := newExtensions(cfg, ws, newTestLogger(&logs))
			var cerr *config.Error
			switch {
			case tt.key == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.key != "" && (!errors.As(err, &cerr) || cerr.Key != tt.key):
				t.Errorf("error %v, want one naming %s", err, tt.key)
			case tt.key == "" && (!strings.Contains(logs.String(), "writable by pibot's user") || !strings.Contains(logs.String(), "key=agent.prompts[0]")):
				// The test's folders are the test user's, who runs pibot here.
				t.Errorf("a folder pibot's user can write is not logged:\n%s", logs.String())
			}
		})
	}
}

func newTestLogger(w *strings.Builder) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// A hook program (or a script it is given) inside the workspace is
// refused: the model writes there and would choose what the hook does.
func TestHookInsideWorkspaceRefused(t *testing.T) {
	ws := t.TempDir()
	outside := filepath.Join(t.TempDir(), "guard.sh")
	if err := os.WriteFile(outside, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link.sh")
	if err := os.Symlink(filepath.Join(ws, "guard.sh"), link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		hook config.Hook
		key  string // "" means accepted
	}{
		{"outside", config.Hook{Command: outside}, ""},
		{"in PATH", config.Hook{Command: "sh", Args: []string{"-u"}}, ""},
		{"missing", config.Hook{Command: filepath.Join(t.TempDir(), "gone")}, "hooks.h.command"},
		{"in the workspace", config.Hook{Command: filepath.Join(ws, "hooks", "guard.sh")}, "hooks.h.command"},
		{"the workspace's script", config.Hook{Command: "sh", Args: []string{filepath.Join(ws, "guard.sh")}}, "hooks.h.args[0]"},
		{"a link into the workspace", config.Hook{Command: link}, "hooks.h.command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			tt.hook.Events = []string{"input"}
			cfg.Hooks = map[string]config.Hook{"h": tt.hook}
			_, err := newExtensions(cfg, ws, nil)
			var cerr *config.Error
			switch {
			case tt.key == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.key != "" && (!errors.As(err, &cerr) || cerr.Key != tt.key):
				t.Errorf("error %v, want one naming %s", err, tt.key)
			}
		})
	}
}

// `pibot extensions` shows the operator what /extensions shows an owner,
// and `pibot extensions approve HASH` approves exactly that list; a hash
// of another list approves nothing (exit 1).
func TestExtensionsCommand(t *testing.T) {
	dir := t.TempDir()
	mkdirs(t, filepath.Join(dir, "data"), filepath.Join(dir, "ws"))
	writeFile(t, filepath.Join(dir, "ws"), "AGENTS.md", "Use tabs.\n")
	writeFile(t, dir, "pibot.yaml", "data_dir: ./data\nagent:\n  workspace: ./ws\n")
	out := ok(t, dir, "extensions", "-c", "pibot.yaml")
	m := approveRE.FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "new context file `AGENTS.md`") || !strings.Contains(out, "Use tabs.") {
		t.Fatalf("review:\n%s", out)
	}
	if r := pibot(t, dir, "", nil, "extensions", "-c", "pibot.yaml", "approve", "0123456789ab"); r.code != 1 || !strings.Contains(r.stdout, "not the list") {
		t.Errorf("a wrong hash: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if out := ok(t, dir, "extensions", "-c", "pibot.yaml", "approve", m[1]); !strings.Contains(out, "Approved 1") {
		t.Errorf("approve:\n%s", out)
	}
	if out := ok(t, dir, "extensions", "-c", "pibot.yaml"); !strings.Contains(out, "Nothing waits") {
		t.Errorf("after the approval:\n%s", out)
	}
}
