package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/pibot/pibot/agent/hooks"
	"github.com/pibot/pibot/agent/skills"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/internal/extensions"
)

// newExtensions loads the skills and prompt templates of the workspace ws,
// ~/.pi/agent and agent.skills_dirs, and sets up hooks.* (run in ws with
// pibot's environment, from which the secrets were scrubbed at start). A
// hook program inside the workspace is refused: the model can write there.
func newExtensions(cfg config.Config, ws string, log *slog.Logger) (*extensions.Set, error) {
	src := skills.Sources{Workspace: ws, AgentDir: extensions.AgentDir(), SkillDirs: cfg.Agent.SkillsDirs}
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
	return extensions.New(src, hs, log), nil
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
