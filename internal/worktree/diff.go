package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Diff is what a worktree changed against its base: the commits made in it
// and every change not committed, untracked files included (files git
// ignores are not).
type Diff struct {
	// Files is how many files changed; Stat is git's summary of them
	// (the first 20 files, then the totals).
	Files int
	Stat  string
	// Patch is the unified diff, cut at a line to at most the size asked
	// for; Truncated says it was cut, Lines how many lines it has whole.
	Patch     string
	Truncated bool
	Lines     int
}

// Diff returns what t changed against its base; the patch is cut to
// maxPatch bytes (0: no cut). The worktree's own index is left as it is:
// the uncommitted changes are staged in a copy of it.
func (m *Manager) Diff(ctx context.Context, t Tree, maxPatch int) (Diff, error) {
	if err := m.owns(t); err != nil {
		return Diff{}, err
	}
	gd, err := m.adminDir(t.Path)
	if err != nil {
		return Diff{}, err
	}
	tmp, err := os.CreateTemp("", "pibot-index-*")
	if err != nil {
		return Diff{}, fmt.Errorf("worktree: diff: %w", err)
	}
	defer os.Remove(tmp.Name())
	// A copy of the index keeps git from hashing every file again.
	if src, err := os.Open(filepath.Join(gd, "index")); err == nil {
		_, err = io.Copy(tmp, src)
		src.Close()
		if err != nil {
			tmp.Close()
			return Diff{}, fmt.Errorf("worktree: diff: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		tmp.Close()
		return Diff{}, fmt.Errorf("worktree: diff: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return Diff{}, fmt.Errorf("worktree: diff: %w", err)
	}
	env := []string{"GIT_INDEX_FILE=" + tmp.Name()}
	if err := m.git.dropGitlinks(ctx, gd, t.Path, env); err != nil {
		return Diff{}, fmt.Errorf("worktree: diff: %w", err)
	}
	if _, err := m.git.in(ctx, gd, t.Path, env, "add", "--all", "--", "."); err != nil {
		return Diff{}, fmt.Errorf("worktree: diff: %w", err)
	}
	tree, err := m.git.in(ctx, gd, t.Path, env, "write-tree")
	if err != nil {
		return Diff{}, fmt.Errorf("worktree: diff: %w", err)
	}
	args := []string{"diff", "--no-ext-diff", "--no-textconv", "--no-color", "--no-renames"}
	names, err := m.git.in(ctx, gd, t.Path, nil, append(args, "--name-only", t.Base, tree)...)
	if err != nil {
		return Diff{}, fmt.Errorf("worktree: diff: %w", err)
	}
	var d Diff
	if names != "" {
		d.Files = strings.Count(names, "\n") + 1
	}
	if d.Stat, err = m.git.in(ctx, gd, t.Path, nil, append(args, "--stat=72", "--stat-count=20", t.Base, tree)...); err != nil {
		return Diff{}, fmt.Errorf("worktree: diff: %w", err)
	}
	patch, err := m.git.in(ctx, gd, t.Path, nil, append(args, t.Base, tree)...)
	if err != nil {
		return Diff{}, fmt.Errorf("worktree: diff: %w", err)
	}
	d.Lines = strings.Count(patch, "\n") + 1
	if patch == "" {
		d.Lines = 0
	}
	d.Patch, d.Truncated = cut(patch, maxPatch)
	return d, nil
}

// cut shortens s to at most max bytes, at the end of a line.
func cut(s string, max int) (string, bool) {
	if max <= 0 || len(s) <= max {
		return s, false
	}
	s = s[:max]
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s, true
}
