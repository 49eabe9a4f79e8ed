package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/pibot/pibot/agent/hooks"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/internal/extensions"
)

// approvalsFile is the data directory's record of the workspace files an
// owner approved (internal/extensions).
const approvalsFile = "workspace-approvals.json"

// newExtensions sets up the operator's skill and prompt folders
// (agent.skills, agent.prompts), the workspace ws's AGENTS.md and, with
// agent.workspace_pi, its .pi/skills and .pi/prompts (used as far as an
// owner approved them), and hooks.* (run in ws with pibot's environment,
// from which the secrets were scrubbed at start). Whatever the operator
// chose must not be inside the workspace, where the model can change it:
// such a folder, hook program or agent.system_prompt_file is refused.
func newExtensions(cfg config.Config, ws string, log *slog.Logger) (*extensions.Set, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if p := cfg.Agent.SystemPromptFile; p != "" {
		if abs, err := filepath.Abs(p); err == nil && inside(ws, abs) {
			return nil, &config.Error{Key: "agent.system_prompt_file",
				Msg: fmt.Sprintf("%s is inside the workspace %s, where the model can change it; keep it elsewhere", p, ws)}
		}
	}
	skillDirs, err := operatorPaths("agent.skills", cfg.Agent.Skills, ws, log)
	if err != nil {
		return nil, err
	}
	promptDirs, err := operatorPaths("agent.prompts", cfg.Agent.Prompts, ws, log)
	if err != nil {
		return nil, err
	}
	var hs []hooks.Hook
	for _, name := range cfg.HookNames() {
		h := cfg.Hooks[name]
		for i, p := range append([]string{h.Command}, h.Args...) {
			if inside(ws, p) {
				key := "hooks." + name + ".command"
				if i > 0 {
					key = fmt.Sprintf("hooks.%s.args[%d]", name, i-1)
				}
				return nil, &config.Error{Key: key,
					Msg: fmt.Sprintf("%s is inside the workspace %s, where the model can change it; keep hooks elsewhere", p, ws)}
			}
		}
		if _, err := exec.LookPath(h.Command); err != nil {
			return nil, &config.Error{Key: "hooks." + name + ".command", Msg: fmt.Sprintf("%s: not found or not executable", h.Command)}
		}
		hs = append(hs, hooks.Hook{Name: name, Command: h.Command, Args: h.Args, Events: h.Events,
			Timeout: h.Timeout.D(), FailClosed: h.Fail == "closed", Dir: ws})
	}
	return extensions.New(extensions.Options{Skills: skillDirs, Prompts: promptDirs, Workspace: ws,
		WorkspacePi: cfg.Agent.WorkspacePi, Approvals: dataPath(cfg, approvalsFile), Hooks: hs, Log: log}), nil
}

// runExtensions is `pibot extensions [approve HASH]`: what /extensions
// shows an owner in chat (the workspace's AGENTS.md, skills and templates,
// and those waiting for approval), and the operator's approval of exactly
// the files listed with HASH. A running pibot reads the approvals at every
// run.
func runExtensions(c *cli, args []string) error {
	fs := c.newFlags("extensions")
	file := configFlag(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 && (len(pos) != 2 || pos[0] != "approve") {
		return usageErr("extensions: want no arguments, or approve HASH; got %s", strings.Join(pos, " "))
	}
	cfg, err := c.loadOfflineConfig(*file)
	if err != nil {
		return err
	}
	if err := haveDataDir(cfg); err != nil {
		return fmt.Errorf("extensions: %w", err)
	}
	ws, _, err := prepareWorkspace(cfg)
	if err != nil {
		return err
	}
	ext, err := newExtensions(cfg, ws, nil)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		md, _ := ext.Review()
		fmt.Fprintln(c.stdout, md)
		return nil
	}
	answer, err := ext.Approve(pos[1], "the operator (pibot extensions approve)")
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, answer)
	if _, hash := ext.Review(); hash != "" {
		return &exitError{code: 1}
	}
	return nil
}

// operatorPaths makes the folders of key absolute ("~" is the home
// directory) and refuses one that does not exist or is inside the
// workspace ws. One that pibot's user can write is logged: a tool that
// writes outside the workspace could change it.
func operatorPaths(key string, paths []string, ws string, log *slog.Logger) ([]string, error) {
	var out []string
	for i, raw := range paths {
		k := fmt.Sprintf("%s[%d]", key, i)
		p := strings.TrimSpace(raw)
		if p == "~" || strings.HasPrefix(p, "~/") {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, &config.Error{Key: k, Msg: fmt.Sprintf("%s: %v", raw, err)}
			}
			p = filepath.Join(home, p[1:])
		}
		p, err := filepath.Abs(p)
		if err != nil {
			return nil, &config.Error{Key: k, Msg: fmt.Sprintf("%s: %v", raw, err)}
		}
		if _, err := os.Stat(p); err != nil {
			return nil, &config.Error{Key: k, Msg: fmt.Sprintf("%s does not exist", p)}
		}
		if inside(ws, p) || inside(p, ws) {
			return nil, &config.Error{Key: k, Msg: fmt.Sprintf("%s is inside the workspace %s (or holds it), where the model can change it; "+
				"keep operator folders elsewhere, or set agent.workspace_pi for the workspace's .pi/ (used once an owner approved it)", p, ws)}
		}
		if unix.Access(p, unix.W_OK) == nil {
			log.Warn("an operator folder is writable by pibot's user: a tool call that writes outside the workspace "+
				"(bash without the sandbox, file tools without agent.workspace_only) could change what goes into the system prompt",
				"key", k, "path", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// inside reports whether path (absolute; symlinks followed, even one
// whose target does not exist yet) is ws or below it.
func inside(ws, path string) bool {
	if !filepath.IsAbs(path) {
		return false // a program found in PATH
	}
	path = resolve(path)
	if real, err := filepath.EvalSymlinks(ws); err == nil {
		ws = real
	}
	rel, err := filepath.Rel(ws, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// resolve follows the symlinks of p, also to a target that does not
// exist (yet), and of its folder.
func resolve(p string) string {
	for range 40 {
		target, err := os.Readlink(p)
		if err != nil {
			break // not a link
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = target
	}
	dir := filepath.Dir(p)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return filepath.Join(dir, filepath.Base(p))
}
