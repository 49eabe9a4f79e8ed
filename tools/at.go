package tools

import (
	"fmt"
	"path/filepath"

	"github.com/pibot/pibot/tools/sandbox"
)

// At returns the tools of s working in dir, a directory inside the
// workspace (a git worktree of it), which they treat as their workspace:
// the file tools resolve relative paths against it and a confined call
// stays inside it; bash starts there and the sandbox mounts it as the
// workspace (HOME too, unless Options.Env set the environment). The
// sandbox, jail, denied paths, disk quota and file locks are those of s.
// The set is unbound (see Bind); it keeps a directory handle open, so
// callers keep one per directory.
//
// mounts, when not nil, gives for each call what the sandbox shows
// besides the directory (the repository a git worktree needs: see
// sandbox.Layout.Mounts); bash runs with them and the unconfined file
// tools see the same. When it fails, a call goes without them.
func (s *Set) At(dir string, mounts func() ([]sandbox.Mount, error)) (*Set, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("tools: at: %w", err)
	}
	real, err := RealPath(abs)
	if err != nil {
		return nil, fmt.Errorf("tools: at: %w", err)
	}
	if !Within(s.ws.realRoot, real) || real == s.ws.realRoot {
		return nil, fmt.Errorf("tools: at: %s is not a directory inside the workspace %s", dir, s.ws.root)
	}
	ws, err := NewWorkspace(abs, "", s.ws.only)
	if err != nil {
		return nil, err
	}
	ws.deny, ws.mounts = s.ws.deny, mounts
	ws.others, ws.allowNet, ws.sb = s.ws.others, s.ws.allowNet, s.ws.sb
	ws.locks, ws.quota = s.ws.locks, s.ws.quota
	bash := *s.bash
	bash.ws = ws
	if s.defaultEnv {
		bash.env = DefaultEnv(ws.Root())
	}
	b := &Set{ws: ws, sb: s.sb, jail: s.jail, bash: &bash, defaultEnv: s.defaultEnv}
	b.build(nil)
	return b, nil
}
