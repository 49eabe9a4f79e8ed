// Package worktree gives a branch of a conversation a git worktree of its
// own: a checkout of the agent's workspace (a git repository) on a branch
// named after the conversation, under the workspace's .pibot-worktrees
// directory, where the branch's runs work. It makes worktrees (from the
// repository's HEAD or a given commit), makes a removed one again from its
// branch, says what a worktree changed against the commit it started
// from (commits, uncommitted and untracked files), and removes worktrees
// that were idle and clean for long enough. It never removes a worktree
// with any change, never deletes a branch and never commits. A worktree
// made for a place and never claimed (a crash before its record) is
// adopted by the place's next Create; Mounts says what a sandbox must show of the
// repository for git to work in a worktree, and what it must show
// read-only.
//
// Git runs with explicit arguments, never through a shell, without the
// repository's hooks (core.hooksPath=/dev/null) and fsmonitor, with no
// GIT_* variable of pibot's environment, and inside a worktree with an
// explicit --git-dir and --work-tree: the .git file of a worktree is in
// the agent's reach, so it is never what tells git where the repository
// is. Its status never looks inside submodules, whose configuration is
// the agent's too.
package worktree

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Dir is the directory of the workspace the worktrees live in. The
// repository's info/exclude lists it, so git ignores it in the main
// checkout without a change to any tracked file.
const Dir = ".pibot-worktrees"

// Tree is one worktree: where it is, its branch, and the commit it
// started from.
type Tree struct {
	Path   string `json:"path"`
	Branch string `json:"branch"`
	Base   string `json:"base"`
}

// Manager makes and keeps the worktrees of one repository. It is safe for
// concurrent use; the worktrees' lock files serialise what processes do
// to one worktree.
type Manager struct {
	places
	git gitCmd
	log *slog.Logger
}

// ErrNotRepo is returned by New and Check for a workspace that is not the
// top level of a git repository.
var ErrNotRepo = errors.New("not the top level of a git repository")

// ErrNoCommit is returned by Create when the commit to start from is not
// in the repository (or the repository has none).
var ErrNoCommit = errors.New("no such commit")

// Check says whether worktrees can be made of repo: git is installed and
// repo is the top level of a git repository.
func Check(ctx context.Context, repo string) error {
	_, err := New(ctx, repo, nil)
	return err
}

// New returns the manager of the repository at repo, which must be its
// top level. log may be nil.
func New(ctx context.Context, repo string, log *slog.Logger) (*Manager, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bin, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("worktree: git is not installed: %w", err)
	}
	real, err := filepath.EvalSymlinks(repo)
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	m := &Manager{places: places{repo: real, root: filepath.Join(real, Dir)}, git: gitCmd{bin: bin}, log: log}
	top, err := m.git.run(ctx, nil, "-C", real, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("worktree: %s: %w", repo, ErrNotRepo)
	}
	if t, err := filepath.EvalSymlinks(top); err != nil || t != real {
		return nil, fmt.Errorf("worktree: %s: %w (its top level is %s)", repo, ErrNotRepo, top)
	}
	common, err := m.git.run(ctx, nil, "-C", real, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return nil, fmt.Errorf("worktree: %s: %w", repo, err)
	}
	if r, err := filepath.EvalSymlinks(common); err == nil {
		common = r
	}
	m.common = common
	return m, nil
}

// Root is the directory the worktrees are made in.
func (m *Manager) Root() string { return m.root }

// Create makes a worktree for a branch named like name (made unique with
// a number) starting at from, a commit; "" starts at the repository's
// HEAD. The new worktree is its own base.
//
// key, when not "", names what the worktree is for (a conversation's
// place): the worktree stays marked as unclaimed under key until Claim
// is called. A Create for the same name and key adopts such a
// worktree, one made at the same commit and never used since (its branch
// still at its base, nothing changed in it), instead of making another
// branch: what a crash between the worktree's making and its record
// leaves behind.
func (m *Manager) Create(ctx context.Context, name, from, key string) (Tree, error) {
	if err := m.prepare(); err != nil {
		return Tree{}, err
	}
	if from == "" {
		from = "HEAD"
	}
	base, err := m.git.run(ctx, nil, "-C", m.repo, "rev-parse", "--verify", "--end-of-options", from+"^{commit}")
	if err != nil {
		return Tree{}, fmt.Errorf("worktree: create: %w to start from (%s): %w", ErrNoCommit, from, err)
	}
	// One change to the repository's worktrees at a time, across
	// processes: the name is free until the branch is made.
	unlock, err := m.lock()
	if err != nil {
		return Tree{}, err
	}
	defer unlock()
	if t, ok := m.adopt(ctx, name, base, key); ok {
		return t, nil
	}
	for i := 1; i <= 100; i++ {
		branch := numbered(name, i)
		if _, err := m.git.run(ctx, nil, "check-ref-format", "--branch", branch); err != nil {
			return Tree{}, fmt.Errorf("worktree: create: branch name %q: %w", branch, err)
		}
		if _, err := m.git.run(ctx, nil, "-C", m.repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err == nil {
			continue // taken: branches are never reused
		}
		t := Tree{Path: filepath.Join(m.root, leaf(branch)), Branch: branch, Base: base}
		if _, err := os.Lstat(t.Path); err == nil {
			continue // a directory of something else: next name
		}
		if err := m.markUnclaimed(t, key); err != nil {
			return Tree{}, err
		}
		if _, err := m.git.run(ctx, nil, "-C", m.repo, "worktree", "add", "-b", t.Branch, t.Path, base); err != nil {
			_ = os.Remove(m.unclaimedFile(t.Path))
			return Tree{}, fmt.Errorf("worktree: create: %w", err)
		}
		_ = touch(m.usedFile(t.Path))
		m.log.Info("worktree made", "path", t.Path, "branch", t.Branch, "base", base)
		return t, nil
	}
	return Tree{}, fmt.Errorf("worktree: create: no free branch name for %s", name)
}

// Open makes sure t's worktree exists: a worktree pruned since is made
// again from its branch (recreated true). It marks the worktree used.
func (m *Manager) Open(ctx context.Context, t Tree) (recreated bool, err error) {
	if err := m.owns(t); err != nil {
		return false, err
	}
	if err := m.prepare(); err != nil {
		return false, err
	}
	return m.locked(t, func() (bool, error) {
		if _, err := m.adminDir(t.Path); err == nil {
			if st, err := os.Stat(t.Path); err == nil && st.IsDir() {
				return false, nil
			}
		}
		if _, err := os.Lstat(t.Path); err == nil {
			return false, fmt.Errorf("worktree: open %s: the directory is there but is not the branch's worktree; it is left alone", t.Path)
		}
		// Forget the registration of a worktree whose directory is gone,
		// then check the branch out again.
		if _, err := m.git.run(ctx, nil, "-C", m.repo, "worktree", "prune"); err != nil {
			return false, fmt.Errorf("worktree: open: %w", err)
		}
		if _, err := m.git.run(ctx, nil, "-C", m.repo, "worktree", "add", t.Path, t.Branch); err != nil {
			return false, fmt.Errorf("worktree: open: %w", err)
		}
		m.log.Info("worktree made again from its branch", "path", t.Path, "branch", t.Branch)
		return true, nil
	})
}

// State returns the commit t's worktree is at and whether it has changes
// of any kind (modified, staged, untracked or ignored files).
func (m *Manager) State(ctx context.Context, t Tree) (head string, dirty bool, err error) {
	gd, err := m.adminDir(t.Path)
	if err != nil {
		return "", false, err
	}
	head, err = m.git.in(ctx, gd, t.Path, nil, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", false, fmt.Errorf("worktree: state: %w", err)
	}
	out, err := m.git.in(ctx, gd, t.Path, nil, statusArgs()...)
	if err != nil {
		return "", false, fmt.Errorf("worktree: state: %w", err)
	}
	_ = touch(m.usedFile(t.Path))
	return head, out != "", nil
}

// locked runs fn under lock, then marks t's worktree used.
func (m *Manager) locked(t Tree, fn func() (bool, error)) (bool, error) {
	unlock, err := m.lock()
	if err != nil {
		return false, err
	}
	defer unlock()
	ok, err := fn()
	if err == nil {
		_ = touch(m.usedFile(t.Path))
	}
	return ok, err
}

func touch(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return errors.Join(f.Close(), os.Chtimes(path, time.Now(), time.Now()))
}
