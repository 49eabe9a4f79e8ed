package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// numbered is the i-th branch name Create tries for name: name itself,
// then name-2, name-3, …
func numbered(name string, i int) string {
	if i == 1 {
		return name
	}
	return fmt.Sprintf("%s-%d", name, i)
}

// Claim says that t, made by Create, is taken by what it was made for: no
// later Create adopts it. Call it just before recording t where its key's
// user keeps it (a session entry), so that a recorded worktree is never
// adopted by another branch; a crash between the two leaves t unused.
func (m *Manager) Claim(t Tree) error {
	if err := m.owns(t); err != nil {
		return err
	}
	if err := os.Remove(m.unclaimedFile(t.Path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("worktree: claim: %w", err)
	}
	return nil
}

// adopt returns a worktree of a branch named like name that Create made
// for key at base and that was never claimed, when it was never used
// since: its branch at base and, where its directory is, no change of
// any kind in it. A removed directory (pruned since) is made again from
// the branch. Called under the repository's lock; the names are looked
// at in Create's order, up to the first one nothing has.
func (m *Manager) adopt(ctx context.Context, name, base, key string) (Tree, bool) {
	if key == "" {
		return Tree{}, false
	}
	for i := 1; i <= 100; i++ {
		t := Tree{Branch: numbered(name, i), Base: base}
		t.Path = filepath.Join(m.root, leaf(t.Branch))
		b, err := os.ReadFile(m.unclaimedFile(t.Path))
		if err != nil {
			_, dirErr := os.Lstat(t.Path)
			_, refErr := m.git.run(ctx, nil, "-C", m.repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+t.Branch)
			if dirErr != nil && refErr != nil {
				return Tree{}, false // the first free name: none made after it
			}
			continue
		}
		if string(b) != key+"\n"+base+"\n" || m.owns(t) != nil || !m.unused(ctx, t) {
			continue
		}
		m.log.Info("worktree made before a crash adopted", "path", t.Path, "branch", t.Branch, "base", base)
		_ = touch(m.usedFile(t.Path))
		return t, true
	}
	return Tree{}, false
}

// unused reports whether t's branch is at its base and its worktree has
// no change of any kind; a worktree whose directory is gone is made again
// from the branch first.
func (m *Manager) unused(ctx context.Context, t Tree) bool {
	at, err := m.git.run(ctx, nil, "-C", m.repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+t.Branch+"^{commit}")
	if err != nil || at != t.Base {
		return false
	}
	st, statErr := os.Lstat(t.Path)
	gd, err := m.adminDir(t.Path)
	switch {
	case errors.Is(statErr, os.ErrNotExist):
		// Pruned since, or made no further than its branch: check the
		// branch out again.
		if _, err := m.git.run(ctx, nil, "-C", m.repo, "worktree", "prune"); err != nil {
			return false
		}
		_, err := m.git.run(ctx, nil, "-C", m.repo, "worktree", "add", t.Path, t.Branch)
		return err == nil
	case statErr != nil || err != nil || !st.IsDir():
		return false // something that is not the branch's worktree
	}
	head, err := m.git.in(ctx, gd, t.Path, nil, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil || head != t.Base {
		return false
	}
	out, err := m.git.in(ctx, gd, t.Path, nil, statusArgs()...)
	return err == nil && strings.TrimSpace(out) == ""
}
