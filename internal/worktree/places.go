package worktree

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pibot/pibot/internal/atomicfile"
)

// places are where a repository's worktrees and pibot's files about them
// are: the repository's top level, its common git directory, the
// directory of the worktrees, the side files beside each worktree there
// (when it was used, whether it is claimed) and the lock of them all.
type places struct {
	repo   string // the repository's top level, symlinks evaluated
	common string // its common git directory, symlinks evaluated
	root   string // repo/Dir
}

// owns refuses a Tree that is not one of this manager's worktrees (a
// session entry names it; it is checked before git touches it).
func (p places) owns(t Tree) error {
	if filepath.Dir(t.Path) != p.root || leaf(t.Branch) != filepath.Base(t.Path) || Sanitize(t.Branch) != t.Branch {
		return fmt.Errorf("worktree: %s (%s) is not a worktree of %s", t.Path, t.Branch, p.repo)
	}
	return nil
}

// prepare makes the worktrees' directory and has git ignore it.
func (p places) prepare() error {
	if err := os.MkdirAll(p.root, 0o755); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	exclude := filepath.Join(p.common, "info", "exclude")
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
func (p places) lock() (func(), error) {
	unlock, err := atomicfile.Lock(filepath.Join(p.root, ".repo"))
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	return unlock, nil
}

// side is a file beside the worktree at path: ".LEAF" + suffix (a leaf
// never starts with a dot, so it is no worktree's).
func (p places) side(path, suffix string) string {
	return filepath.Join(p.root, "."+filepath.Base(path)+suffix)
}

// usedFile's modification time is when the worktree was last used.
func (p places) usedFile(path string) string { return p.side(path, ".used") }

// adminDir finds the repository's administrative directory of the
// worktree at path, from the repository's side (.git/worktrees/*/gitdir),
// never from the worktree's own .git file.
func (p places) adminDir(path string) (string, error) {
	dirs, err := os.ReadDir(filepath.Join(p.common, "worktrees"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("worktree: %w", err)
	}
	want := filepath.Join(path, ".git")
	for _, d := range dirs {
		dir := filepath.Join(p.common, "worktrees", d.Name())
		b, err := os.ReadFile(filepath.Join(dir, "gitdir"))
		if err == nil && filepath.Clean(strings.TrimSpace(string(b))) == want {
			return dir, nil
		}
	}
	return "", fmt.Errorf("worktree: %s is not a worktree of %s", path, p.repo)
}

// unclaimedFile marks the worktree at path as made and not claimed yet
// (Claim); it holds the key it was made for and its base.
func (p places) unclaimedFile(path string) string { return p.side(path, ".unclaimed") }

// markUnclaimed marks t, about to be made for key, as not claimed
// (nothing for an empty key).
func (p places) markUnclaimed(t Tree, key string) error {
	if key == "" {
		return nil
	}
	if err := os.WriteFile(p.unclaimedFile(t.Path), []byte(key+"\n"+t.Base+"\n"), 0o644); err != nil {
		return fmt.Errorf("worktree: create: %w", err)
	}
	return nil
}
