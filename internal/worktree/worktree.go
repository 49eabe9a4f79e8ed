// Package worktree gives a branch of a conversation a git worktree of its
// own: a checkout of the agent's workspace (a git repository) on a branch
// named after the conversation, under the workspace's .pibot-worktrees
// directory, where the branch's runs work. It makes worktrees (from the
// repository's HEAD or a given commit), makes a removed one again from its
// branch, says what a worktree changed against the commit it started
// from (commits, uncommitted and untracked files), and removes worktrees
// that were idle and clean for long enough. It never removes a worktree
// with any change, never deletes a branch and never commits. A worktree
// made for a place and never recorded (a crash in between) is adopted by
// the place's next Create; Mounts says what a sandbox must show of the
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
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/pibot/pibot/internal/atomicfile"
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
	repo   string // the repository's top level, symlinks evaluated
	common string // its common git directory
	root   string // repo/Dir
	git    string
	log    *slog.Logger
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
	m := &Manager{repo: real, git: bin, log: log, root: filepath.Join(real, Dir)}
	top, err := m.run(ctx, nil, "-C", real, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("worktree: %s: %w", repo, ErrNotRepo)
	}
	if t, err := filepath.EvalSymlinks(top); err != nil || t != real {
		return nil, fmt.Errorf("worktree: %s: %w (its top level is %s)", repo, ErrNotRepo, top)
	}
	common, err := m.run(ctx, nil, "-C", real, "rev-parse", "--path-format=absolute", "--git-common-dir")
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
// place): the worktree stays marked as not recorded under key until
// Recorded is called. A Create for the same name and key adopts such a
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
	base, err := m.run(ctx, nil, "-C", m.repo, "rev-parse", "--verify", "--end-of-options", from+"^{commit}")
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
		if _, err := m.run(ctx, nil, "check-ref-format", "--branch", branch); err != nil {
			return Tree{}, fmt.Errorf("worktree: create: branch name %q: %w", branch, err)
		}
		if _, err := m.run(ctx, nil, "-C", m.repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err == nil {
			continue // taken: branches are never reused
		}
		t := Tree{Path: filepath.Join(m.root, leaf(branch)), Branch: branch, Base: base}
		if _, err := os.Lstat(t.Path); err == nil {
			continue // a directory of something else: next name
		}
		if err := m.markUnrecorded(t, key); err != nil {
			return Tree{}, err
		}
		if _, err := m.run(ctx, nil, "-C", m.repo, "worktree", "add", "-b", t.Branch, t.Path, base); err != nil {
			_ = os.Remove(m.unrecordedFile(t.Path))
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
		if _, err := m.run(ctx, nil, "-C", m.repo, "worktree", "prune"); err != nil {
			return false, fmt.Errorf("worktree: open: %w", err)
		}
		if _, err := m.run(ctx, nil, "-C", m.repo, "worktree", "add", t.Path, t.Branch); err != nil {
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
	head, err = m.in(ctx, gd, t.Path, nil, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", false, fmt.Errorf("worktree: state: %w", err)
	}
	out, err := m.in(ctx, gd, t.Path, nil, statusArgs()...)
	if err != nil {
		return "", false, fmt.Errorf("worktree: state: %w", err)
	}
	_ = touch(m.usedFile(t.Path))
	return head, out != "", nil
}

// owns refuses a Tree that is not one of this manager's worktrees (a
// session entry names it; it is checked before git touches it).
func (m *Manager) owns(t Tree) error {
	if filepath.Dir(t.Path) != m.root || leaf(t.Branch) != filepath.Base(t.Path) || Sanitize(t.Branch) != t.Branch {
		return fmt.Errorf("worktree: %s (%s) is not a worktree of %s", t.Path, t.Branch, m.repo)
	}
	return nil
}

// prepare makes the worktrees' directory and has git ignore it.
func (m *Manager) prepare() error {
	if err := os.MkdirAll(m.root, 0o755); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	exclude := filepath.Join(m.common, "info", "exclude")
	line := "/" + Dir + "/"
	b, err := os.ReadFile(exclude)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("worktree: %w", err)
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.TrimSpace(l) == line {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(exclude), 0o755); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	if len(b) > 0 && !bytes.HasSuffix(b, []byte("\n")) {
		b = append(b, '\n')
	}
	b = append(b, []byte("# pibot's worktrees of conversations (agents.NAME.worktree)\n"+line+"\n")...)
	if err := atomicfile.Write(exclude, b); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	return nil
}

// lock takes the lock of the repository's worktrees (a file in Root),
// which every change to them holds, in every process.
func (m *Manager) lock() (func(), error) {
	unlock, err := atomicfile.Lock(filepath.Join(m.root, ".repo"))
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	return unlock, nil
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

// side is a file beside the worktree at path: ".LEAF" + suffix (a leaf
// never starts with a dot, so it is no worktree's).
func (m *Manager) side(path, suffix string) string {
	return filepath.Join(m.root, "."+filepath.Base(path)+suffix)
}

// usedFile's modification time is when the worktree was last used.
func (m *Manager) usedFile(path string) string { return m.side(path, ".used") }

func touch(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return errors.Join(f.Close(), os.Chtimes(path, time.Now(), time.Now()))
}

// adminDir finds the repository's administrative directory of the
// worktree at path, from the repository's side (.git/worktrees/*/gitdir),
// never from the worktree's own .git file.
func (m *Manager) adminDir(path string) (string, error) {
	dirs, err := os.ReadDir(filepath.Join(m.common, "worktrees"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("worktree: %w", err)
	}
	want := filepath.Join(path, ".git")
	for _, d := range dirs {
		dir := filepath.Join(m.common, "worktrees", d.Name())
		b, err := os.ReadFile(filepath.Join(dir, "gitdir"))
		if err == nil && filepath.Clean(strings.TrimSpace(string(b))) == want {
			return dir, nil
		}
	}
	return "", fmt.Errorf("worktree: %s is not a worktree of %s", path, m.repo)
}

// in runs git on the worktree at work whose administrative directory is
// gitDir.
func (m *Manager) in(ctx context.Context, gitDir, work string, env []string, args ...string) (string, error) {
	return m.run(ctx, env, append([]string{"--git-dir=" + gitDir, "--work-tree=" + work, "-C", work}, args...)...)
}

// run runs git with args (no shell), without hooks, fsmonitor, pagers or
// prompts and without pibot's GIT_* environment, and returns its output
// trimmed.
func (m *Manager) run(ctx context.Context, env []string, args ...string) (string, error) {
	full := append([]string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.pager=cat",
		"-c", "diff.external=", "--no-pager"}, args...)
	cmd := exec.CommandContext(ctx, m.git, full...)
	cmd.Env = append(gitEnv(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		what := args[0]
		for _, a := range args {
			if !strings.HasPrefix(a, "-") && !strings.Contains(a, "/") {
				what = a
				break
			}
		}
		return "", fmt.Errorf("git %s: %w: %s", what, err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// statusArgs is git status listing every change of a worktree: modified,
// staged, untracked and ignored files, and a submodule checked out at
// another commit. What changed inside a submodule is not looked at: git
// would run git in it, with the submodule's own configuration (a filter
// driver, say) that the agent may have written.
func statusArgs() []string {
	return []string{"status", "--porcelain", "--untracked-files=all", "--ignored=matching", "--ignore-submodules=dirty"}
}

// gitEnv is pibot's environment without GIT_* variables, with git's
// prompts off and its messages in English.
func gitEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "LC_ALL=") {
			out = append(out, kv)
		}
	}
	return append(out, "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C")
}
