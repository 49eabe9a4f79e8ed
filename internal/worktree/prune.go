package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Prune removes the worktrees not used for longer than idle (before now)
// that have no change of any kind, ignored files included; their branches
// stay, so the next run of their conversation makes them again. A
// worktree with changes is never removed (git's own check refuses it
// too: no --force). It returns the paths removed.
func (m *Manager) Prune(ctx context.Context, idle time.Duration, now time.Time) ([]string, error) {
	dirs, err := os.ReadDir(m.root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("worktree: prune: %w", err)
	}
	var removed []string
	var errs []error
	for _, d := range dirs {
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			continue
		}
		path := filepath.Join(m.root, d.Name())
		gone, err := m.pruneOne(ctx, path, idle, now)
		if err != nil {
			errs = append(errs, err)
		}
		if gone {
			removed = append(removed, path)
		}
	}
	return removed, errors.Join(errs...)
}

// pruneOne removes the worktree at path if it is idle and clean, under
// the repository's lock.
func (m *Manager) pruneOne(ctx context.Context, path string, idle time.Duration, now time.Time) (bool, error) {
	unlock, err := m.lock()
	if err != nil {
		return false, err
	}
	defer unlock()
	st, err := os.Stat(m.usedFile(path))
	if err != nil || now.Sub(st.ModTime()) < idle {
		return false, nil // in use, or not known to be idle: kept
	}
	gd, err := m.adminDir(path)
	if err != nil {
		return false, nil // not a worktree (any more): not pibot's to remove
	}
	out, err := m.git.in(ctx, gd, path, nil, statusArgs()...)
	if err != nil {
		return false, fmt.Errorf("worktree: prune %s: %w", path, err)
	}
	if out != "" {
		return false, nil
	}
	if _, err := m.git.run(ctx, nil, "-C", m.repo, "worktree", "remove", path); err != nil {
		return false, fmt.Errorf("worktree: prune %s: %w", path, err)
	}
	m.log.Info("idle worktree removed; its branch stays", "path", path)
	return true, nil
}
